"""Soft visual attention for image captioning in torch (Xu et al. 2015), chapter 9.

``GridAttention`` and ``CaptionDecoder`` have the same names, parameters, equations and initial
values as ``attention_course.numpy_track.captioning`` (read its docstring); autograd does the
backward pass. The torch track adds what the NumPy track leaves out, the image side:
``ConvEncoder``, a small CNN whose last feature map is the grid the decoder attends over, and
``CNNCaptioner``, the two trained end to end from pixels::

    images (N, S, S, 3) -> [coordinates] -> conv/2 -> norm -> ReLU -> ... -> (N, C, g, g) -> features (N, g*g, C)

Two channels holding each pixel's row and column (-1 to 1) are appended to the image before
the first convolution (a "CoordConv"), so that every feature knows where in the image it is:
the caption names objects by their places ("above", "left of").
"""

from __future__ import annotations


import torch
import torch.nn.functional as F
from torch import nn

from ..core import initializers
from ..core.configs import CaptionerConfig
from ..core.initializers import init_rng
from .base import check_tensor, register_params, resolve_dtype
from .layers import Affine, Embedding, SoftmaxCrossEntropy
from .recurrent import GRUCell

__all__ = ["GridAttention", "StaticImage", "CaptionDecoder", "coverage_penalty", "ConvEncoder", "CNNCaptioner"]


class GridAttention(nn.Module):
    """Additive soft attention of a decoder state over a grid of features.

    ``forward(features, h_prev, keys=None)`` returns ``(context, alpha)``:
    ``alpha_l = softmax_l(v_a . tanh(h_prev W_a + f_l U_a))``, ``context = sum_l alpha_l f_l``.
    ``keys`` (``project(features)``, ``f_l U_a``) can be computed once per image and passed in.

    Shapes:
        features: (N, L, D_f).  h_prev: (N, H).  keys: (N, L, A).
        W_a: (H, A).  U_a: (D_f, A).  v_a: (A,).
        returns: context (N, D_f), alpha (N, L).
    """

    def __init__(self, feature_size: int, hidden_size: int, attention_size: int, *, rng=None,
                 dtype=torch.float32) -> None:
        super().__init__()
        self.feature_size, self.hidden_size = feature_size, hidden_size
        initial = initializers.score(init_rng(rng), "additive", feature_size, hidden_size, attention_size)
        register_params(self, initial, dtype)
        self.attention_size = initial["v_a"].shape[0]

    def project(self, features: torch.Tensor) -> torch.Tensor:
        """``f_l U_a`` for every cell: (N, L, A)."""
        check_tensor("features", features, ("N", "L", self.feature_size))
        return features @ self.U_a

    def forward(self, features: torch.Tensor, h_prev: torch.Tensor,
                keys: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        keys = self.project(features) if keys is None else keys
        hidden = torch.tanh(keys + (h_prev @ self.W_a).unsqueeze(1))  # (N, L, A)
        alpha = torch.softmax(hidden @ self.v_a, dim=-1)  # (N, L)
        context = torch.einsum("nl,nld->nd", alpha, features)  # (N, D_f)
        return context, alpha


class StaticImage(nn.Module):
    """The baseline without attention: every step reads the mean of the grid's features (see the
    NumPy track's). ``forward(features, h_prev, keys=None)`` returns ``(context, alpha)``, alpha all 1/L.

    Shapes:
        features: (N, L, D_f).  returns: context (N, D_f), alpha (N, L).
    """

    attention_size = 0

    def __init__(self, feature_size: int) -> None:
        super().__init__()
        self.feature_size = feature_size

    def project(self, features: torch.Tensor) -> torch.Tensor:
        check_tensor("features", features, ("N", "L", self.feature_size))
        return features[:, :, :0]  # no keys: (N, L, 0)

    def forward(self, features: torch.Tensor, h_prev: torch.Tensor,
                keys: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        N, L, _ = features.shape
        return features.mean(dim=1), torch.full((N, L), 1 / L, dtype=features.dtype, device=features.device)


def make_image_context(config: CaptionerConfig, rng=None) -> nn.Module:
    """What the decoder reads of the image at each word, as ``config.context`` says."""
    c = config
    if c.context == "static":
        return StaticImage(c.feature_size)
    return GridAttention(c.feature_size, c.hidden_size, c.attention_size, rng=rng, dtype=resolve_dtype(c.dtype))


def coverage_penalty(attention_weights: torch.Tensor, step_mask: torch.Tensor | None, weight: float) -> torch.Tensor:
    """``weight * (1 / N) sum_n sum_l (1 - sum_{t real} alpha_ntl)^2`` (Xu et al.'s regulariser).

    Shapes:
        attention_weights: (N, T, L).  step_mask: (N, T) bool or None.  returns: a 0-d tensor.
    """
    N = attention_weights.shape[0]
    if step_mask is not None:
        attention_weights = attention_weights * step_mask.unsqueeze(-1).to(attention_weights.dtype)
    totals = attention_weights.sum(dim=1)  # (N, L)
    return weight * ((1 - totals) ** 2).sum() / N


class CaptionDecoder(nn.Module):
    """A caption decoder with soft attention over a feature grid, and its training loss.

    ``forward(features, decoder_input, decoder_target, target_mask)`` returns the cross-entropy
    plus the doubly stochastic regulariser; ``generate`` decodes greedily; ``attention_weights``
    (detached) holds ``alpha`` after either.

    Shapes:
        features: (N, L, D_f).  decoder_input, decoder_target: (N, T) int.  target_mask: (N, T) bool.
        returns: a 0-d tensor; ``attention_weights``: (N, T, L).
    """

    def __init__(self, config: CaptionerConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = resolve_dtype(c.dtype)
        E, D, H = c.embed_dim, c.feature_size, c.hidden_size
        self.embed = Embedding(c.vocab_size, E, rng=rng, dtype=dtype)
        self.init = Affine(D, H, rng=rng, dtype=dtype)
        self.attention = make_image_context(c, rng)
        self.cell = GRUCell(E + D, H, reset_after=c.reset_after, rng=rng, dtype=dtype)
        self.combine = Affine(H + D, H, rng=rng, dtype=dtype)
        self.out = Affine(H, c.vocab_size, rng=rng, dtype=dtype)
        self.loss_layer = SoftmaxCrossEntropy()
        self.attention_weights = None

    def _step(self, features, keys, h, embedded):
        """Attend with ``h``, then one GRU step on ``[E y ; z]``; returns the new state and the context."""
        context, alpha = self.attention(features, h, keys)
        x = torch.cat([embedded, context], dim=-1)  # (N, E + D_f)
        (h_new,) = self.cell.step(self.cell.input_projection(x), (h,))
        return h_new, context, alpha

    def _logits(self, states: torch.Tensor, contexts: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.combine(torch.cat([states, contexts], dim=-1))))

    def _run(self, features: torch.Tensor, decoder_input: torch.Tensor):
        """Every step under teacher forcing: logits (N, T, V) and weights (N, T, L)."""
        sizes = check_tensor("features", features, ("N", "L", self.config.feature_size))
        check_tensor("decoder_input", decoder_input, ("N", "T"), sizes, kind="int")
        h = torch.tanh(self.init(features.mean(dim=1)))  # (N, H)
        keys = self.attention.project(features)
        embedded = self.embed(decoder_input)  # (N, T, E)
        states, contexts, alphas = [], [], []
        for t in range(decoder_input.shape[1]):
            h, context, alpha = self._step(features, keys, h, embedded[:, t])
            states.append(h)
            contexts.append(context)
            alphas.append(alpha)
        alphas = torch.stack(alphas, dim=1)  # (N, T, L)
        self.attention_weights = alphas.detach()
        return self._logits(torch.stack(states, dim=1), torch.stack(contexts, dim=1)), alphas

    @torch.no_grad()
    def attend(self, features: torch.Tensor, decoder_input: torch.Tensor) -> torch.Tensor:
        """The weights of every step under teacher forcing, (N, T, L)."""
        return self._run(features, decoder_input)[1]

    def forward(self, features: torch.Tensor, decoder_input: torch.Tensor, decoder_target: torch.Tensor,
                target_mask: torch.Tensor | None = None) -> torch.Tensor:
        logits, alphas = self._run(features, decoder_input)
        loss = self.loss_layer(logits, decoder_target, target_mask)
        return loss + coverage_penalty(alphas, target_mask, self.config.coverage_weight)

    @torch.no_grad()
    def generate(self, features: torch.Tensor, start_id: int, max_length: int,
                 stop_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy decoding. Returns ids (N, T_out) and alpha (N, T_out, L)."""
        check_tensor("features", features, ("N", "L", self.config.feature_size))
        N = features.shape[0]
        h = torch.tanh(self.init(features.mean(dim=1)))
        keys = self.attention.project(features)
        ids = torch.full((N,), start_id, dtype=torch.int64, device=features.device)
        out, alphas = [], []
        finished = torch.zeros(N, dtype=torch.bool, device=features.device)
        for _ in range(max_length):
            h, context, alpha = self._step(features, keys, h, self.embed(ids))
            ids = self._logits(h, context).argmax(dim=-1)
            out.append(ids)
            alphas.append(alpha)
            if stop_id is not None:
                finished |= ids == stop_id
                if bool(finished.all()):
                    break
        return torch.stack(out, dim=1), torch.stack(alphas, dim=1)


class ConvEncoder(nn.Module):
    """A small CNN whose last feature map is the grid of features a caption decoder attends over.

    ``len(cnn_channels) + 1`` convolutions, each 2x2 with stride 2 (each halves the image and
    looks at its own 2x2 block only) and batch normalisation, ReLU between them, the last one
    ``feature_size`` wide: an ``image_size`` image with two coordinate channels appended becomes
    a ``grid_size x grid_size`` grid, and each cell's feature vector sees exactly its own square
    of the image. Its weights are torch's default initial values (seeded by
    ``torch.manual_seed``): the NumPy track has no CNN to agree with.

    Shapes:
        images: (N, image_size, image_size, 3), channels last (as the data generator makes them).
        returns: features (N, grid_size * grid_size, feature_size).
    """

    def __init__(self, config: CaptionerConfig) -> None:
        super().__init__()
        c = self.config = config
        n_convolutions = len(c.cnn_channels) + 1
        if c.image_size != c.grid_size * 2 ** n_convolutions:
            raise ValueError(f"image_size {c.image_size} must be grid_size {c.grid_size} * 2 ** {n_convolutions}: "
                             f"each of the {n_convolutions} convolutions (len(cnn_channels) + 1) halves the image")
        widths = (3 + 2, *c.cnn_channels, c.feature_size)
        self.convolutions = nn.ModuleList(
            nn.Conv2d(w_in, w_out, kernel_size=2, stride=2, dtype=resolve_dtype(c.dtype))
            for w_in, w_out in zip(widths[:-1], widths[1:]))
        self.norms = nn.ModuleList(nn.BatchNorm2d(w, dtype=resolve_dtype(c.dtype)) for w in widths[1:])

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        S = self.config.image_size
        check_tensor("images", images, ("N", S, S, 3))
        N = images.shape[0]
        x = images.permute(0, 3, 1, 2)  # (N, 3, S, S)
        steps = torch.linspace(-1, 1, S, device=images.device, dtype=images.dtype)
        rows = steps.view(1, 1, S, 1).expand(N, 1, S, S)
        columns = steps.view(1, 1, 1, S).expand(N, 1, S, S)
        x = torch.cat([x, rows, columns], dim=1)  # (N, 5, S, S)
        for convolution, norm in zip(self.convolutions[:-1], self.norms):
            x = F.relu(norm(convolution(x)))
        x = self.norms[-1](self.convolutions[-1](x))  # (N, C, g, g): the features, not cut at zero
        return x.flatten(2).transpose(1, 2)  # (N, g*g, C)


class CNNCaptioner(nn.Module):
    """``ConvEncoder`` and ``CaptionDecoder``, trained end to end from pixels to words.

    Shapes:
        images: (N, S, S, 3).  decoder_input, decoder_target: (N, T) int.  target_mask: (N, T) bool.
        returns: a 0-d tensor (the decoder's loss).
    """

    def __init__(self, config: CaptionerConfig, rng=None) -> None:
        super().__init__()
        self.config = config
        self.encoder = ConvEncoder(config)
        self.decoder = CaptionDecoder(config, rng)

    @property
    def attention_weights(self) -> torch.Tensor | None:
        return self.decoder.attention_weights

    def forward(self, images: torch.Tensor, decoder_input: torch.Tensor, decoder_target: torch.Tensor,
                target_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.decoder(self.encoder(images), decoder_input, decoder_target, target_mask)

    @torch.no_grad()
    def attend(self, images: torch.Tensor, decoder_input: torch.Tensor) -> torch.Tensor:
        """The weights of every step under teacher forcing, (N, T, L)."""
        return self.decoder.attend(self.encoder(images), decoder_input)

    @torch.no_grad()
    def generate(self, images: torch.Tensor, start_id: int, max_length: int,
                 stop_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy decoding from pixels. Returns ids (N, T_out) and alpha (N, T_out, L)."""
        return self.decoder.generate(self.encoder(images), start_id, max_length, stop_id)
