"""Encoders, decoders and the two models in torch (see ``numpy_track.seq2seq`` for the story).

Same classes, parameter names and initial values as the NumPy track for the same seed; the
config is the same ``Seq2seqConfig``. What makes training fast here: the decoder's recurrent
layer runs over the whole teacher-forced target in one fused call (cuDNN on a GPU, for the LSTM
and the GRU with ``reset_after=True``), and attention covers every decoder step at once.
"""

from __future__ import annotations

import torch
from torch import nn

from ..numpy_track.base import init_rng
from ..numpy_track.seq2seq import CELLS as _CELL_NAMES
from ..numpy_track.seq2seq import Seq2seqConfig, stack_layers
from .attention import TimeAttention
from .base import check_tensor, resolve_dtype
from .layers import Affine, Embedding, SoftmaxCrossEntropy
from .recurrent import GRU, LSTM, RNN
from .wrappers import Bidirectional, Residual, Stacked

__all__ = ["CELLS", "make_recurrent", "Encoder", "AttentionEncoder", "Decoder", "AttentionDecoder", "Bridge",
           "Seq2seqConfig", "Seq2seq", "AttentionSeq2seq", "build_model"]

CELLS = {"rnn": RNN, "lstm": LSTM, "gru": GRU}
assert set(CELLS) == set(_CELL_NAMES)


def make_recurrent(cell: str, input_size: int, hidden_size: int, num_layers: int = 1, bidirectional: bool = False,
                   residual: bool = False, rng=None, dtype=torch.float32, reset_after: bool = False,
                   fused: bool = True) -> Stacked:
    """``num_layers`` recurrent layers, optionally bidirectional, with skip connections from layer 2 on."""
    return stack_layers(CELLS, (Bidirectional, Residual, Stacked), cell, input_size, hidden_size, num_layers,
                        bidirectional, residual, rng=init_rng(rng), dtype=dtype, reset_after=reset_after, fused=fused)


def _check_tokens(name: str, ids, mask) -> dict:
    sizes = check_tensor(name, ids, ("N", None), kind="int")
    if mask is not None:
        check_tensor(f"{name}_mask", mask, tuple(ids.shape), kind="bool")
    return sizes


class Encoder(nn.Module):
    """Embedding and recurrent layers; ``forward`` returns only the final state (the bottleneck)."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden_size: int, cell: str = "lstm", num_layers: int = 1,
                 bidirectional: bool = False, residual: bool = False, rng=None, dtype=torch.float32,
                 reset_after: bool = False, fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.embed = Embedding(vocab_size, embed_dim, rng=rng, dtype=dtype)
        self.rnn = make_recurrent(cell, embed_dim, hidden_size, num_layers, bidirectional, residual, rng=rng,
                                  dtype=dtype, reset_after=reset_after, fused=fused)
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
    """The plain seq2seq decoder: embedding, recurrent layers from the encoder's state, affine."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden_size: int, cell: str = "lstm", num_layers: int = 1,
                 residual: bool = False, rng=None, dtype=torch.float32, reset_after: bool = False,
                 fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.embed = Embedding(vocab_size, embed_dim, rng=rng, dtype=dtype)
        self.rnn = make_recurrent(cell, embed_dim, hidden_size, num_layers, False, residual, rng=rng, dtype=dtype,
                                  reset_after=reset_after, fused=fused)
        self.out = Affine(hidden_size, vocab_size, rng=rng, dtype=dtype)

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
    """Attend over the encoder states at every step: ``h~_i = tanh(W_c [c_i ; s_i] + b_c)``, logits ``W_o h~_i + b_o``."""

    def __init__(self, vocab_size: int, embed_dim: int, hidden_size: int, encoder_size: int, cell: str = "lstm",
                 num_layers: int = 1, residual: bool = False, score: str = "general", attention_size: int | None = None,
                 rng=None, dtype=torch.float32, reset_after: bool = False, fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.hidden_size, self.encoder_size = hidden_size, encoder_size
        self.embed = Embedding(vocab_size, embed_dim, rng=rng, dtype=dtype)
        self.rnn = make_recurrent(cell, embed_dim, hidden_size, num_layers, False, residual, rng=rng, dtype=dtype,
                                  reset_after=reset_after, fused=fused)
        self.attention = TimeAttention(score, encoder_size, hidden_size, attention_size, rng=rng, dtype=dtype)
        self.combine = Affine(encoder_size + hidden_size, hidden_size, rng=rng, dtype=dtype)
        self.out = Affine(hidden_size, vocab_size, rng=rng, dtype=dtype)

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
    """``s_0 = tanh(W_s h_1← + b_s)`` per layer, from the backward direction's final state."""

    def __init__(self, num_layers: int, encoder_hidden: int, decoder_hidden: int, lstm: bool, rng=None,
                 dtype=torch.float32) -> None:
        super().__init__()
        self.lstm = lstm
        for index in range(num_layers):
            self.add_module(str(index), Affine(encoder_hidden, decoder_hidden, rng=rng, dtype=dtype))

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

    def __init__(self, config: Seq2seqConfig, rng=None, fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = resolve_dtype(c.dtype)
        if c.bidirectional:
            raise ValueError("Seq2seq: the bottleneck baseline has a unidirectional encoder (bidirectional=False)")
        self.encoder = Encoder(c.source_vocab_size, c.embed_dim, c.hidden_size, c.cell, c.num_layers, False,
                               c.residual, rng, dtype, c.reset_after, fused)
        self.decoder = Decoder(c.target_vocab_size, c.embed_dim, c.hidden_size, c.cell, c.num_layers, c.residual,
                               rng, dtype, c.reset_after, fused)

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

    def __init__(self, config: Seq2seqConfig, rng=None, fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = resolve_dtype(c.dtype)
        self.encoder = AttentionEncoder(c.source_vocab_size, c.embed_dim, c.hidden_size, c.cell, c.num_layers,
                                        c.bidirectional, c.residual, rng, dtype, c.reset_after, fused)
        decoder_hidden = self.encoder.output_size
        self.bridge = Bridge(c.num_layers, c.hidden_size, decoder_hidden, c.cell == "lstm", rng, dtype) \
            if c.bidirectional else None
        self.decoder = AttentionDecoder(c.target_vocab_size, c.embed_dim, decoder_hidden, self.encoder.output_size,
                                        c.cell, c.num_layers, c.residual, c.score, c.attention_size, rng, dtype,
                                        c.reset_after, fused)

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


def build_model(kind: str, config: Seq2seqConfig, rng=None, fused: bool = True) -> _Model:
    """``"attention"`` for ``AttentionSeq2seq``, ``"seq2seq"`` for the bottleneck ``Seq2seq``."""
    models = {"attention": AttentionSeq2seq, "seq2seq": Seq2seq}
    if kind not in models:
        raise ValueError(f"model: unknown kind {kind!r}; choose one of {sorted(models)}")
    return models[kind](config, rng, fused)
