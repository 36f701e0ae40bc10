"""Hard attention in torch (Xu et al. 2015): one encoder state, sampled from the weights.

The same names, parameters, equations and conventions as ``attention_course.numpy_track.hard_attention``
(read its docstring). The sample is drawn with the Gumbel-max trick. In training mode the layer
samples; in eval mode it takes the most likely position. The two estimators:

* ``"reinforce"``: the context ``h_{z_i}`` passes the pathwise gradient to the chosen state;
  the score-function term enters through ``estimator_loss(step_losses, step_weights)``, a term
  whose *value* is zero and whose gradient is ``sum_i w_i (l_i - b_i) grad log alpha_{i z_i}``
  (plus the learned baseline's regression gradient): added to the loss, autograd does the rest.
* ``"gumbel"``: straight through, ``y = onehot(z) + y_soft - stop_gradient(y_soft)`` with
  ``y_soft = softmax((e + g) / tau)``; the forward value is the one-hot choice, the gradient the
  relaxed one's. ``estimator_loss`` is then zero.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..core import initializers
from ..core.initializers import init_rng
from ..core.registries import HARD_BASELINES, HARD_ESTIMATORS
from .attention import make_score
from .base import ShapeError, check_tensor, register_params, resolve_dtype
from .layers import masked_softmax

__all__ = ["HardAttention", "gumbel_noise", "step_losses"]


def gumbel_noise(uniform: torch.Tensor) -> torch.Tensor:
    """``g = -log(-log u)`` from uniform noise ``u`` in (0, 1) (clipped away from its ends)."""
    info = torch.finfo(uniform.dtype)
    u = uniform.clamp(info.tiny, 1 - info.eps / 2)
    return -torch.log(-torch.log(u))


def step_losses(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None):
    """The cross-entropy of every decoder step, and its weight in the mean loss (``mask / #real``).

    Shapes:
        logits: (N, T_dec, V).  targets, mask: (N, T_dec).  returns: losses, weights (N, T_dec).
    """
    N, T_dec, V = logits.shape
    losses = F.cross_entropy(logits.reshape(-1, V).float() if logits.dtype in (torch.float16, torch.bfloat16)
                             else logits.reshape(-1, V), targets.reshape(-1), reduction="none").reshape(N, T_dec)
    real = torch.ones_like(losses) if mask is None else mask.to(losses.dtype)
    return losses, real / real.sum().clamp_min(1.0)


class HardAttention(nn.Module):
    """Hard attention over every decoder step at once: ``c_i = h_{z_i}``, ``z_i ~ softmax_j(e_ij)``.

    ``forward(encoder_states, decoder_states, mask=None, *, sample=None, noise=None)``: ``sample``
    defaults to ``self.training``; ``noise`` (uniform, the weights' shape) replaces the layer's
    own draws (from a generator seeded with the model, one per device). Afterwards
    ``attention_weights`` is ``alpha`` (N, T_dec, T_enc) and ``sampled_positions`` the positions
    used (N, T_dec; -1 where a row has no real source token).

    Shapes:
        encoder_states: (N, T_enc, H_enc).  decoder_states: (N, T_dec, H_dec).
        mask: (N, T_enc) bool or None.  returns: (N, T_dec, H_enc).  v_b: (H_dec,).  b_b: (1,).
    """

    def __init__(self, score: str, encoder_size: int, decoder_size: int, attention_size: int | None = None, *,
                 estimator: str = "reinforce", baseline: str = "moving_average", baseline_decay: float = 0.9,
                 temperature: float = 1.0, rng=None, dtype=torch.float32) -> None:
        super().__init__()
        if estimator not in HARD_ESTIMATORS:
            raise ValueError(f"estimator must be one of {list(HARD_ESTIMATORS)}, got {estimator!r}")
        if baseline not in HARD_BASELINES:
            raise ValueError(f"baseline must be one of {list(HARD_BASELINES)}, got {baseline!r}")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        rng = init_rng(rng)
        self.estimator, self.baseline, self.temperature = estimator, baseline, float(temperature)
        self.baseline_decay = float(baseline_decay)
        self.score = make_score(score, encoder_size, decoder_size, attention_size, rng=rng, dtype=dtype)
        self.encoder_size, self.decoder_size = self.score.encoder_size, self.score.decoder_size
        self.noise_seed = int(rng.integers(2 ** 63))  # drawn where the NumPy track draws it
        self._generators: dict[str, torch.Generator] = {}
        if estimator == "reinforce" and baseline == "learned":
            register_params(self, initializers.learned_baseline(self.decoder_size), dtype)
        # The moving average stays on the device (no synchronisation at every step).
        self.register_buffer("baseline_value", torch.zeros((), dtype=resolve_dtype(dtype)), persistent=False)
        self.baseline_updates = 0
        self.attention_weights = None
        self.sampled_positions = None
        self._sampled = None  # (log alpha_{i z_i}, decoder states) of the last training call

    def _generator(self, device: torch.device) -> torch.Generator:
        key = str(device)
        if key not in self._generators:
            self._generators[key] = torch.Generator(device=device).manual_seed(self.noise_seed)
        return self._generators[key]

    def forward(self, encoder_states: torch.Tensor, decoder_states: torch.Tensor, mask: torch.Tensor | None = None,
                need_weights: bool = True, *, sample: bool | None = None,
                noise: torch.Tensor | None = None) -> torch.Tensor:
        if not isinstance(decoder_states, torch.Tensor) or decoder_states.dim() != 3:
            raise ShapeError(f"decoder_states: expected shape (N, T_dec, H_dec), "
                             f"got {tuple(getattr(decoder_states, 'shape', ()))}")
        sizes = check_tensor("encoder_states", encoder_states, ("N", "T_enc", self.encoder_size))
        sizes = check_tensor("decoder_states", decoder_states, ("N", "T_dec", self.decoder_size), sizes)
        if mask is not None:
            check_tensor("mask", mask, ("N", "T_enc"), sizes, kind="bool")
        sample = self.training if sample is None else sample
        N, T_enc, _ = encoder_states.shape
        T_dec = decoder_states.shape[1]
        scores = self.score(encoder_states, decoder_states)  # (N, T_dec, T_enc)
        real = (torch.ones(N, 1, T_enc, dtype=torch.bool, device=scores.device) if mask is None
                else mask.unsqueeze(1))
        weights = masked_softmax(scores, real)  # alpha
        perturbed = scores
        if sample:
            if noise is None:
                noise = torch.rand(scores.shape, generator=self._generator(scores.device), device=scores.device,
                                   dtype=scores.dtype)
            check_tensor("noise", noise, (N, T_dec, T_enc))
            perturbed = scores + gumbel_noise(noise.to(scores.dtype))
        anything = real.any(dim=-1)  # (N, 1)
        positions = perturbed.detach().masked_fill(~real, float("-inf")).argmax(dim=-1)  # (N, T_dec)
        choice = F.one_hot(positions, T_enc).to(scores.dtype) * anything.unsqueeze(-1).to(scores.dtype)
        self._sampled = None
        if self.estimator == "gumbel":
            relaxed = masked_softmax(perturbed / self.temperature, real)
            choice = choice + relaxed - relaxed.detach()  # the value of the one-hot, the gradient of the relaxed
        elif sample and torch.is_grad_enabled():
            filled = scores.masked_fill(~real, float("-inf")).masked_fill(~anything.unsqueeze(-1), 0.0)
            log_weights = torch.log_softmax(filled, dim=-1)
            chosen = log_weights.gather(-1, positions.unsqueeze(-1)).squeeze(-1)  # (N, T_dec): log alpha_{i z_i}
            self._sampled = (chosen.masked_fill(~anything, 0.0), decoder_states)
        self.attention_weights = weights
        self.sampled_positions = positions.masked_fill(~anything, -1)
        return choice @ encoder_states  # (N, T_dec, H_enc): h_{z_i}

    def _baseline_values(self, decoder_states: torch.Tensor) -> torch.Tensor:
        if self.baseline == "learned":
            return decoder_states.detach() @ self.v_b + self.b_b  # (N, T_dec)
        value = self.baseline_value if self.baseline == "moving_average" else torch.zeros_like(self.baseline_value)
        return value.to(decoder_states.dtype).expand(decoder_states.shape[:2])

    def estimator_loss(self, step_losses: torch.Tensor, step_weights: torch.Tensor) -> torch.Tensor:
        """REINFORCE's term for the last sampled call: zero in value, the score-function gradient.

        ``step_losses`` (N, T_dec): the loss each step's sample led to (detached here);
        ``step_weights`` (N, T_dec): how each enters the objective. Updates the moving average.
        Zero (and no update) for the Gumbel estimator, in eval mode, or without a sampled call.
        """
        if self._sampled is None:
            return step_losses.new_zeros(())
        chosen, decoder_states = self._sampled
        self._sampled = None
        losses, weights = step_losses.detach(), step_weights.detach()
        baseline = self._baseline_values(decoder_states)
        advantage = weights * (losses - baseline.detach())
        term = (advantage * chosen).sum()
        if self.baseline == "learned":
            term = term + 0.5 * (weights * (baseline - losses) ** 2).sum()
        elif self.baseline == "moving_average":
            with torch.no_grad():
                total = weights.sum()
                mean = (weights * losses).sum() / total.clamp_min(torch.finfo(losses.dtype).tiny)
                decay = self.baseline_decay if self.baseline_updates else 0.0  # the first batch sets it
                moved = decay * self.baseline_value + (1 - decay) * mean.to(self.baseline_value.dtype)
                self.baseline_value.copy_(torch.where(total > 0, moved, self.baseline_value))
            self.baseline_updates += 1
        return term - term.detach()
