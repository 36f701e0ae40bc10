"""Encoders, decoders and the two models in torch.

* ``Seq2seq`` (chapter 1): the encoder squeezes the whole source into its final state, the only
  thing the decoder sees: the bottleneck.
* ``AttentionSeq2seq`` (chapters 2-7): the ``AttentionEncoder`` keeps every hidden state; the
  ``AttentionDecoder`` attends over them at every step and combines context and state (Luong et
  al. 2015), ``h~_i = tanh(W_c [c_i ; s_i] + b_c)``; with a bidirectional encoder the decoder starts
  from ``s_0 = tanh(W_s h_1← + b_s)`` (Bahdanau et al. 2015), one bridge per layer.

Same classes, parameter names and initial values as the NumPy track for the same seed, built
from the same ``Seq2seqConfig``. What makes training fast here: the decoder's recurrent layer
runs over the whole teacher-forced target in one fused call (cuDNN on a GPU, for the LSTM and the
GRU with ``reset_after=True``), and attention covers every decoder step at once. ``fused=False``
runs the recurrent layers as Python loops over the steps instead (the version to read).
"""

from __future__ import annotations

import torch
from torch import nn

from ..core.configs import Seq2seqConfig
from ..core.initializers import init_rng
from ..core.layer_stack import stack_layers
from ..core.registries import bind
from .attention import TimeAttention
from .base import check_tensor, resolve_dtype
from .layers import Affine, Embedding, SoftmaxCrossEntropy
from .recurrent import GRU, LSTM, RNN
from .wrappers import Bidirectional, Residual, Stacked

__all__ = ["CELLS", "make_recurrent", "Encoder", "AttentionEncoder", "Decoder", "AttentionDecoder", "Bridge",
           "Seq2seqConfig", "Seq2seq", "AttentionSeq2seq", "build_model"]

CELLS = bind("cell", {"rnn": RNN, "lstm": LSTM, "gru": GRU})


def make_recurrent(cell: str, input_size: int, hidden_size: int, *, num_layers: int = 1, bidirectional: bool = False,
                   residual: bool = False, reset_after: bool = False, fused: bool = True, rng=None,
                   dtype=torch.float32) -> Stacked:
    """``num_layers`` recurrent layers, optionally bidirectional, with skip connections from layer 2 on."""
    return stack_layers(CELLS, (Bidirectional, Residual, Stacked), cell, input_size, hidden_size,
                        num_layers=num_layers, bidirectional=bidirectional, residual=residual,
                        reset_after=reset_after, fused=fused, rng=init_rng(rng), dtype=resolve_dtype(dtype))


def _recurrent(config: Seq2seqConfig, input_size: int, hidden_size: int, bidirectional: bool, rng,
               fused: bool) -> Stacked:
    """The recurrent layers of an encoder or decoder, as ``config`` describes them."""
    return make_recurrent(config.cell, input_size, hidden_size, num_layers=config.num_layers,
                          bidirectional=bidirectional, residual=config.residual, reset_after=config.reset_after,
                          fused=fused, rng=rng, dtype=config.dtype)


def _check_tokens(name: str, ids, mask) -> dict:
    sizes = check_tensor(name, ids, ("N", None), kind="int")
    if mask is not None:
        check_tensor(f"{name}_mask", mask, tuple(ids.shape), kind="bool")
    return sizes


class Encoder(nn.Module):
    """Embedding and recurrent layers; ``forward`` returns only the final state (the bottleneck).

    Built from ``config``: ``source_vocab_size``, ``embed_dim``, ``hidden_size`` (per direction),
    ``cell``, ``num_layers``, ``bidirectional``, ``residual``, ``reset_after``, ``dtype``.
    """

    def __init__(self, config: Seq2seqConfig, rng=None, *, fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        self.embed = Embedding(c.source_vocab_size, c.embed_dim, rng=rng, dtype=resolve_dtype(c.dtype))
        self.rnn = _recurrent(c, c.embed_dim, c.hidden_size, c.bidirectional, rng, fused)
        self.final_state = None

    @property
    def output_size(self) -> int:
        return self.rnn.output_size

    def _encode(self, source, mask):
        _check_tokens("source", source, mask)
        encoder_states = self.rnn(self.embed(source), mask)  # (N, T_enc, H_out)
        self.final_state = self.rnn.final_state
        return encoder_states

    def forward(self, source: torch.Tensor, mask: torch.Tensor | None = None):
        self._encode(source, mask)
        return self.final_state


class AttentionEncoder(Encoder):
    """Return every hidden state (N, T_enc, H_out), zero at padded positions; ``final_state`` as ``Encoder``."""

    def forward(self, source: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self._encode(source, mask)


class Decoder(nn.Module):
    """The plain seq2seq decoder: embedding, recurrent layers from the encoder's state, affine.

    Built from ``config``: ``target_vocab_size``, ``embed_dim``, ``decoder_hidden_size``, ``cell``,
    ``num_layers``, ``residual``, ``reset_after``, ``dtype``; always unidirectional.
    """

    def __init__(self, config: Seq2seqConfig, rng=None, *, fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype, H = resolve_dtype(c.dtype), c.decoder_hidden_size
        self.embed = Embedding(c.target_vocab_size, c.embed_dim, rng=rng, dtype=dtype)
        self.rnn = _recurrent(c, c.embed_dim, H, False, rng, fused)
        self.out = Affine(H, c.target_vocab_size, rng=rng, dtype=dtype)

    def forward(self, decoder_input: torch.Tensor, initial_state) -> torch.Tensor:
        _check_tokens("decoder_input", decoder_input, None)
        return self.out(self.rnn(self.embed(decoder_input), None, initial_state))

    @torch.no_grad()
    def generate(self, initial_state, start_id: int, max_length: int, stop_id: int | None = None) -> torch.Tensor:
        """Greedy decoding. Returns ids (N, T_out <= max_length)."""
        first = initial_state[0]
        first = first[0] if isinstance(first, tuple) else first
        ids = torch.full((first.shape[0], 1), start_id, dtype=torch.long, device=first.device)
        state, out = initial_state, []
        finished = torch.zeros(first.shape[0], dtype=torch.bool, device=first.device)
        for _ in range(max_length):
            logits = self.out(self.rnn(self.embed(ids), None, state))
            state = self.rnn.final_state
            ids = logits.argmax(dim=-1)  # (N, 1)
            out.append(ids)
            if stop_id is not None:
                finished |= ids[:, 0] == stop_id
                if bool(finished.all()):
                    break
        return torch.cat(out, dim=1)


class AttentionDecoder(nn.Module):
    """Attend over the encoder states at every step: ``h~_i = tanh(W_c [c_i ; s_i] + b_c)``, logits ``W_o h~_i + b_o``.

    Built from ``config``: as ``Decoder``, plus ``score``, ``attention_size`` and the encoder's
    output width ``encoder_output_size`` (H_enc).
    """

    def __init__(self, config: Seq2seqConfig, rng=None, *, fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = resolve_dtype(c.dtype)
        H, H_enc = self.hidden_size, self.encoder_size = c.decoder_hidden_size, c.encoder_output_size
        self.embed = Embedding(c.target_vocab_size, c.embed_dim, rng=rng, dtype=dtype)
        self.rnn = _recurrent(c, c.embed_dim, H, False, rng, fused)
        self.attention = TimeAttention(c.score, H_enc, H, c.attention_size, rng=rng, dtype=dtype)
        self.combine = Affine(H_enc + H, H, rng=rng, dtype=dtype)
        self.out = Affine(H, c.target_vocab_size, rng=rng, dtype=dtype)

    @property
    def attention_weights(self) -> torch.Tensor | None:
        return self.attention.attention_weights

    def _attend(self, decoder_states, encoder_states, source_mask, need_weights: bool):
        context = self.attention(encoder_states, decoder_states, source_mask, need_weights=need_weights)
        return torch.tanh(self.combine(torch.cat([context, decoder_states], dim=-1)))  # (N, T_dec, H)

    def forward(self, decoder_input: torch.Tensor, encoder_states: torch.Tensor, initial_state,
                source_mask: torch.Tensor | None = None) -> torch.Tensor:
        _check_tokens("decoder_input", decoder_input, None)
        decoder_states = self.rnn(self.embed(decoder_input), None, initial_state)  # (N, T_dec, H)
        return self.out(self._attend(decoder_states, encoder_states, source_mask, need_weights=not self.training))

    @torch.no_grad()
    def generate(self, encoder_states: torch.Tensor, initial_state, source_mask: torch.Tensor | None, start_id: int,
                 max_length: int, stop_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy decoding. Returns ids (N, T_out) and attention weights (N, T_out, T_enc)."""
        N = encoder_states.shape[0]
        ids = torch.full((N, 1), start_id, dtype=torch.long, device=encoder_states.device)
        state, out, weights = initial_state, [], []
        finished = torch.zeros(N, dtype=torch.bool, device=encoder_states.device)
        for _ in range(max_length):
            decoder_states = self.rnn(self.embed(ids), None, state)  # (N, 1, H)
            state = self.rnn.final_state
            ids = self.out(self._attend(decoder_states, encoder_states, source_mask, need_weights=True)).argmax(dim=-1)
            out.append(ids)
            weights.append(self.attention.attention_weights)
            if stop_id is not None:
                finished |= ids[:, 0] == stop_id
                if bool(finished.all()):
                    break
        return torch.cat(out, dim=1), torch.cat(weights, dim=1)


class Bridge(nn.Module):
    """``s_0 = tanh(W_s h_1← + b_s)`` per layer, from the backward direction's final state.

    One ``Affine`` (``hidden_size`` to ``decoder_hidden_size``) per layer of ``config``; for an LSTM
    decoder the initial cell state is zero.
    """

    def __init__(self, config: Seq2seqConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        self.lstm = c.cell == "lstm"
        for index in range(c.num_layers):
            self.add_module(str(index), Affine(c.hidden_size, c.decoder_hidden_size, rng=rng,
                                               dtype=resolve_dtype(c.dtype)))

    def forward(self, encoder_final_state: list) -> list:
        initial = []
        for affine, (_, backward_state) in zip(self.children(), encoder_final_state):
            h_first = backward_state[0] if isinstance(backward_state, tuple) else backward_state
            s0 = torch.tanh(affine(h_first))
            initial.append((s0, torch.zeros_like(s0)) if self.lstm else s0)
        return initial


class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.loss_layer = SoftmaxCrossEntropy()

    def _check_batch(self, source, source_mask, decoder_input, decoder_target, target_mask) -> None:
        sizes = _check_tokens("source", source, source_mask)
        check_tensor("decoder_input", decoder_input, ("N", None), sizes, kind="int")
        check_tensor("decoder_target", decoder_target, tuple(decoder_input.shape), kind="int")
        if target_mask is not None:
            check_tensor("target_mask", target_mask, tuple(decoder_input.shape), kind="bool")


class Seq2seq(_Model):
    """The bottleneck baseline: an ``Encoder`` whose final state starts a ``Decoder``."""

    def __init__(self, config: Seq2seqConfig, rng=None, *, fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.config = config
        if config.bidirectional:
            raise ValueError("Seq2seq: the bottleneck baseline has a unidirectional encoder (bidirectional=False)")
        self.encoder = Encoder(config, rng, fused=fused)
        self.decoder = Decoder(config, rng, fused=fused)

    def forward(self, source, source_mask, decoder_input, decoder_target, target_mask=None) -> torch.Tensor:
        """The mean cross-entropy of the target tokens, under teacher forcing."""
        self._check_batch(source, source_mask, decoder_input, decoder_target, target_mask)
        logits = self.decoder(decoder_input, self.encoder(source, source_mask))
        return self.loss_layer(logits, decoder_target, target_mask)

    @torch.no_grad()
    def generate(self, source, source_mask, start_id: int, max_length: int, stop_id: int | None = None):
        """Greedy decoding; returns ids (N, T_out) and ``None``."""
        return self.decoder.generate(self.encoder(source, source_mask), start_id, max_length, stop_id), None


class AttentionSeq2seq(_Model):
    """Seq2seq with attention: ``AttentionEncoder`` (bidirectional by default) and ``AttentionDecoder``."""

    def __init__(self, config: Seq2seqConfig, rng=None, *, fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.config = config
        self.encoder = AttentionEncoder(config, rng, fused=fused)
        self.bridge = Bridge(config, rng) if config.bidirectional else None
        self.decoder = AttentionDecoder(config, rng, fused=fused)

    def _initial_state(self):
        state = self.encoder.final_state
        return state if self.bridge is None else self.bridge(state)

    def forward(self, source, source_mask, decoder_input, decoder_target, target_mask=None) -> torch.Tensor:
        """The mean cross-entropy of the target tokens, under teacher forcing."""
        self._check_batch(source, source_mask, decoder_input, decoder_target, target_mask)
        encoder_states = self.encoder(source, source_mask)
        logits = self.decoder(decoder_input, encoder_states, self._initial_state(), source_mask)
        return self.loss_layer(logits, decoder_target, target_mask)

    @property
    def attention_weights(self) -> torch.Tensor | None:
        return self.decoder.attention_weights

    @torch.no_grad()
    def generate(self, source, source_mask, start_id: int, max_length: int, stop_id: int | None = None):
        """Greedy decoding; returns ids (N, T_out) and attention weights (N, T_out, T_enc)."""
        encoder_states = self.encoder(source, source_mask)
        return self.decoder.generate(encoder_states, self._initial_state(), source_mask, start_id, max_length, stop_id)


def build_model(kind: str, config: Seq2seqConfig, rng=None, *, fused: bool = True) -> _Model:
    """``"attention"`` for ``AttentionSeq2seq``, ``"seq2seq"`` for the bottleneck ``Seq2seq``."""
    models = {"attention": AttentionSeq2seq, "seq2seq": Seq2seq}
    if kind not in models:
        raise ValueError(f"model: unknown kind {kind!r}; choose one of {sorted(models)}")
    return models[kind](config, rng, fused=fused)
