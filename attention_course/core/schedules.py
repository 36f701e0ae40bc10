"""Learning-rate schedules: the factor by which a base learning rate is multiplied at a step.

The Transformer's schedule (Vaswani et al. 2017, section 5.3) raises the rate linearly for
``warmup_steps`` steps and then lets it fall as the inverse square root of the step:

    lr(step) = lr_peak * min(step / warmup_steps, sqrt(warmup_steps / step)),   step = 1, 2, ...

The paper writes the same curve as ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``; here
the peak rate, reached at ``step = warmup_steps``, is the training configuration's ``lr``, so the
schedule is a pure factor in (0, 1] that either track's trainer multiplies its rate by. Early
on, Adam's estimates of the gradients' second moments rest on a few steps only, and a full-size
step taken on them can throw a freshly initialised network far off; the warm-up keeps those
first steps small. The decay then shrinks the steps as training settles.
"""

from __future__ import annotations

import math

__all__ = ["warmup_inverse_sqrt"]


def warmup_inverse_sqrt(step: int, warmup_steps: int | None) -> float:
    """The factor of the peak learning rate at ``step`` (counted from 1): a linear warm-up over
    ``warmup_steps`` steps, then ``sqrt(warmup_steps / step)``. ``None`` or 0: a constant 1."""
    _check_steps(step, warmup_steps)
    if not warmup_steps:
        return 1.0
    return min(step / warmup_steps, math.sqrt(warmup_steps / step))


def _check_steps(step: int, warmup_steps: int | None) -> None:
    if step < 1:
        raise ValueError(f"step: counted from 1, got {step}")
    if warmup_steps is not None and warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
