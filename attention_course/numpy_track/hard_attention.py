"""Hard attention (Xu et al. 2015): the context is one encoder state, sampled.

Soft attention (chapters 4-5) passes on the expected encoder state,
``c_i = sum_j alpha_ij h_j``. Hard attention samples one position, passes on its state:

    z_i ~ Categorical(alpha_i1, ..., alpha_iT),      c_i = h_{z_i} .

The sample is drawn with the Gumbel-max trick, ``z_i = argmax_j (e_ij + g_ij)`` with
``g_ij = -log(-log u_ij)`` and ``u_ij ~ Uniform(0, 1)``: exactly a draw from
``softmax_j(e_ij)``.

No gradient flows through a sample, so the training objective, the expected loss
``E_z[L(z)]``, is differentiated with an estimator:

* ``"reinforce"``, the score-function estimator (Williams 1992): the gradient that
  reaches the chosen ``h_{z_i}`` (the pathwise part), plus
  ``(l_i - b_i) grad log alpha_{i z_i}``, where ``l_i`` is the loss the sample led to
  and ``b_i`` a baseline. In the Luong decoder ``c_i`` reaches only step ``i``'s
  output, so ``l_i`` is the cross-entropy of step ``i`` (the later steps do not depend
  on ``z_i``: using them would add variance, not information). Any ``b_i`` that does
  not depend on ``z_i`` keeps the estimator unbiased; a good one (close to the expected
  loss) makes it far less noisy. For a softmax, ``grad_e log alpha_{i z} = onehot(z) -
  alpha_i``. Baselines: ``"none"``; ``"moving_average"`` of the losses seen so far (each
  batch's weighted mean, decay 0.9; the first batch uses none); ``"learned"``,
  ``b_i = s_i . v_b + b_b``, regressed on ``l_i`` by a squared error of its own (it
  changes how noisily the model learns, not what).
* ``"gumbel"``, the straight-through Gumbel-softmax (Jang et al. 2017; Maddison et al.
  2017): the forward pass uses the hard sample, the backward pass pretends the one-hot
  vector was the relaxed ``softmax_j((e_ij + g_ij) / tau)``: biased, but with a low
  variance, and needing no loss per step. It has no baseline.

At evaluation (``sample=False``) the context is the state of the most likely position,
``argmax_j alpha_ij``. ``attention_weights`` is always the distribution ``alpha`` (what
the alignment plots show); ``sampled_positions`` holds the positions used (-1 where a
row has no real source token: its context is zero).
"""

from __future__ import annotations

import numpy as np

from ..core import initializers
from ..core.initializers import init_rng
from ..core.registries import HARD_BASELINES, HARD_ESTIMATORS
from ..core.shapes import check_array
from .attention import make_score
from .base import Layer, as_dtype
from .layers import masked_softmax, softmax_backward
from .local_attention import check_attention_inputs

__all__ = ["HardAttention", "gumbel_noise", "step_losses"]


def gumbel_noise(uniform: np.ndarray) -> np.ndarray:
    """``g = -log(-log u)`` from uniform noise ``u`` in (0, 1) (kept off its ends)."""
    info = np.finfo(uniform.dtype)
    u = np.clip(uniform, info.tiny, 1 - info.epsneg)
    return -np.log(-np.log(u))


def step_losses(logits: np.ndarray, targets: np.ndarray,
                mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The cross-entropy of every decoder step, and its weight in the mean loss.

    ``losses[n, i] = -log softmax(logits[n, i])[targets[n, i]]`` and
    ``weights = mask / #real``, so that ``(weights * losses).sum()`` is
    ``SoftmaxCrossEntropy``'s loss: what REINFORCE needs to estimate the gradient of
    that same loss.

    Shapes:
        logits: (N, T_dec, V).  targets, mask: (N, T_dec).
        returns: losses, weights, each (N, T_dec).
    """
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_total = np.log(np.exp(shifted).sum(axis=-1))  # (N, T_dec)
    picked = np.take_along_axis(shifted, targets[..., None], axis=-1)[..., 0]
    losses = log_total - picked
    real = np.ones(targets.shape) if mask is None else mask
    real = real.astype(logits.dtype)
    return losses, real / max(real.sum(), 1.0)


def _checked_step_weights(step_losses: np.ndarray, step_weights: np.ndarray | None, shape: tuple,
                          dtype) -> np.ndarray:
    """Check the shapes of ``step_losses`` and ``step_weights`` (N, T_dec); the weights, by default 1."""
    check_array("step_losses", step_losses, shape)
    step_weights = np.ones(shape, dtype=dtype) if step_weights is None else step_weights
    check_array("step_weights", step_weights, shape)
    return step_weights


class HardAttention(Layer):
    """Hard attention for every decoder step at once: ``c_i = h_{z_i}``,
    ``z_i ~ softmax_j(e_ij)``.

    ``forward(encoder_states, decoder_states, mask=None, *, sample=True, noise=None)``
    returns the contexts; ``noise`` (uniform, the weights' shape) replaces the layer's
    own draws, for tests. ``backward(d_context, *, step_losses=None,
    step_weights=None)`` returns ``(d_encoder_states, d_decoder_states)``. With
    ``estimator="reinforce"`` it adds the score-function term for the losses ``l_i``
    each step's sample led to (``step_weights``, by default 1, say how each enters the
    objective); without losses only the pathwise part flows. With
    ``baseline="moving_average"``, a backward pass with losses also updates the average.

    Shapes:
        encoder_states: (N, T_enc, H_enc).  decoder_states: (N, T_dec, H_dec).
        mask: (N, T_enc) bool or None.  returns: (N, T_dec, H_enc).
        attention_weights: (N, T_dec, T_enc).  sampled_positions: (N, T_dec) int.
        step_losses, step_weights: (N, T_dec).  v_b: (H_dec,), b_b: (1,) (learned only).
    """

    def __init__(self, score: str, encoder_size: int, decoder_size: int,
                 attention_size: int | None = None, *, estimator: str = "reinforce",
                 baseline: str = "moving_average", baseline_decay: float = 0.9,
                 temperature: float = 1.0, rng=None, dtype=np.float64) -> None:
        super().__init__()
        if estimator not in HARD_ESTIMATORS:
            raise ValueError(f"estimator must be one of {list(HARD_ESTIMATORS)}, "
                             f"got {estimator!r}")
        if baseline not in HARD_BASELINES:
            raise ValueError(f"baseline must be one of {list(HARD_BASELINES)}, "
                             f"got {baseline!r}")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        rng = init_rng(rng)
        self.estimator, self.baseline = estimator, baseline
        self.temperature = float(temperature)
        self.baseline_decay = float(baseline_decay)
        score_layer = make_score(score, encoder_size, decoder_size, attention_size,
                                 rng=rng, dtype=dtype)
        self.score = self.add_child("score", score_layer)
        self.encoder_size = score_layer.encoder_size
        self.decoder_size = score_layer.decoder_size
        # The noise has a generator of its own, seeded from the model's: sampling during
        # training does not disturb anything else drawn from ``rng``.
        self.noise_seed = int(rng.integers(2 ** 63))
        self.noise_rng = np.random.default_rng(self.noise_seed)
        if estimator == "reinforce" and baseline == "learned":
            self.add_params(initializers.learned_baseline(self.decoder_size), dtype)
        self.baseline_value = 0.0  # the moving average ...
        self.baseline_updates = 0  # ... and how often it moved
        self.attention_weights = None
        self.sampled_positions = None
        self._step_losses = None
        self._cache = None

    def forward(self, encoder_states: np.ndarray, decoder_states: np.ndarray,
                mask: np.ndarray | None = None, *, sample: bool = True,
                noise: np.ndarray | None = None) -> np.ndarray:
        dtype = check_attention_inputs(self, encoder_states, decoder_states, mask)
        N, T_enc, _ = encoder_states.shape
        scores = self.score.forward(encoder_states, decoder_states)  # (N, T_dec, T_enc)
        real = np.ones((N, 1, T_enc), dtype=bool) if mask is None else mask[:, None, :]
        weights = masked_softmax(scores, real)  # alpha
        # Gumbel-max: the argmax of the perturbed scores is a draw from alpha
        perturbed = scores + self._gumbel(scores, noise) if sample else scores
        positions = np.where(real, perturbed, -np.inf).argmax(axis=-1)  # (N, T_dec): z_i
        anything = real.any(axis=-1)  # (N, 1): rows with a real source token
        choice = (np.arange(T_enc) == positions[:, :, None]) & anything[:, :, None]
        choice = choice.astype(dtype)  # (N, T_dec, T_enc): one-hot z_i
        relaxed = None
        if self.estimator == "gumbel":
            relaxed = masked_softmax(perturbed / dtype.type(self.temperature), real)
        self.attention_weights = weights
        self.sampled_positions = np.where(anything, positions, -1)
        self._cache = (encoder_states, decoder_states, weights, choice, relaxed)
        return choice @ encoder_states  # (N, T_dec, H_enc): h_{z_i}

    def _gumbel(self, scores: np.ndarray, noise: np.ndarray | None) -> np.ndarray:
        """Gumbel noise of the scores' shape: from ``noise`` (uniform) if given, else drawn."""
        dtype = scores.dtype
        if noise is None:
            noise = self.noise_rng.random(scores.shape).astype(dtype)
        check_array("noise", noise, scores.shape)
        return gumbel_noise(as_dtype(noise, dtype))

    def set_step_losses(self, step_losses: np.ndarray, step_weights: np.ndarray | None = None) -> None:
        """The losses ``l_i`` the last forward pass's samples led to, for the next ``backward``
        (REINFORCE): how a model hands them over, since its decoder does not see them."""
        self._step_losses = (step_losses, step_weights)

    def backward(self, d_context: np.ndarray, *, step_losses: np.ndarray | None = None,
                 step_weights: np.ndarray | None = None):
        encoder_states, decoder_states, weights, choice, relaxed = self._cache
        N, T_dec, T_enc = weights.shape
        check_array("d_context", d_context, (N, T_dec, self.encoder_size))
        d_encoder = choice.swapaxes(1, 2) @ d_context  # (N, T_enc, H_enc): pathwise
        if self.estimator == "gumbel":
            d_scores = self._straight_through_backward(d_context)
        else:
            if step_losses is None and self._step_losses is not None:
                step_losses, step_weights = self._step_losses
            d_scores = self._reinforce_backward(step_losses, step_weights, d_context.dtype)
        self._step_losses = None
        d_encoder_from_scores, d_decoder = self.score.backward(d_scores)
        d_encoder += d_encoder_from_scores
        return d_encoder, d_decoder

    def _straight_through_backward(self, d_context: np.ndarray) -> np.ndarray:
        """The scores' gradient, the one-hot's taken as the relaxed sample's: (N, T_dec, T_enc)."""
        encoder_states, _, _, _, relaxed = self._cache
        d_relaxed = d_context @ encoder_states.swapaxes(1, 2)  # (N, T_dec, T_enc)
        return softmax_backward(relaxed, d_relaxed) / d_context.dtype.type(self.temperature)

    def _reinforce_backward(self, step_losses, step_weights, dtype) -> np.ndarray:
        """The scores' gradient ``(l_i - b_i) grad log alpha_{i z_i}`` (zero without losses):
        (N, T_dec, T_enc). Moves the baseline."""
        _, decoder_states, weights, choice, _ = self._cache
        for grad in self.grads.values():  # the learned baseline's, if any
            grad[...] = 0
        if step_losses is None:
            return np.zeros_like(weights)
        step_weights = _checked_step_weights(step_losses, step_weights, weights.shape[:2], dtype)
        baseline = self._baseline_values(decoder_states)
        advantage = step_weights * (step_losses - baseline)  # (N, T_dec)
        self._update_baseline(baseline, step_losses, step_weights, decoder_states)
        return advantage[:, :, None] * (choice - weights)  # grad_e log alpha_z = onehot(z) - alpha

    def _baseline_values(self, decoder_states: np.ndarray) -> np.ndarray:
        """``b_i``: (N, T_dec)."""
        dtype = decoder_states.dtype
        if self.baseline == "learned":
            v_b, b_b = (as_dtype(self.params[k], dtype) for k in ("v_b", "b_b"))
            return decoder_states @ v_b + b_b
        value = self.baseline_value if self.baseline == "moving_average" else 0.0
        return np.full(decoder_states.shape[:2], value, dtype=dtype)

    def _update_baseline(self, baseline, losses, weights, decoder_states) -> None:
        if self.baseline == "learned":
            # The gradient of 1/2 sum w (b - l)^2; it does not train its inputs.
            error = weights * (baseline - losses)  # (N, T_dec)
            states = decoder_states.reshape(-1, self.decoder_size)
            self.grads["v_b"][...] = error.reshape(1, -1) @ states
            self.grads["b_b"][...] = error.sum()
        elif self.baseline == "moving_average":
            total = float(weights.sum())
            if total > 0:
                mean = float((weights * losses).sum()) / total
                decay = self.baseline_decay if self.baseline_updates else 0.0
                self.baseline_value = decay * self.baseline_value + (1 - decay) * mean
            self.baseline_updates += 1
