"""Encoders, decoders and the two models in torch.

* ``Seq2seq`` (chapter 1): the encoder squeezes the whole source into its final state, the only
  thing the decoder sees: the bottleneck.
* ``AttentionSeq2seq`` (chapters 2-7): the ``AttentionEncoder`` keeps every hidden state; the
  ``AttentionDecoder`` attends over them at every step and combines context and state (Luong et
  al. 2015), ``h~_i = tanh(W_c [c_i ; s_i] + b_c)``; with a bidirectional encoder the decoder starts
  from ``s_0 = tanh(W_s h_1← + b_s)`` (Bahdanau et al. 2015), one bridge per layer.
* Chapter 8's variants, chosen by the config: local and hard attention (``make_attention``) and
  Bahdanau's decoder (``BahdanauDecoder``).

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
from ..core.registries import attention_spec, bind
from .attention import TimeAttention
from .base import check_tensor, resolve_dtype
from .hard_attention import HardAttention, step_losses
from .layers import Affine, Embedding, SoftmaxCrossEntropy
from .local_attention import LocalAttention
from .recurrent import GRU, LSTM, RNN
from .wrappers import Bidirectional, Residual, Stacked

__all__ = ["CELLS", "DECODERS", "make_recurrent", "make_attention", "Encoder", "AttentionEncoder", "Decoder",
           "AttentionDecoder", "BahdanauDecoder", "Bridge", "Seq2seqConfig", "Seq2seq", "AttentionSeq2seq",
           "build_model"]

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


def make_attention(config: Seq2seqConfig, encoder_size: int, decoder_size: int, *, rng=None,
                   dtype=torch.float32) -> nn.Module:
    """The attention module ``config.attention`` names: ``TimeAttention`` ("global"), ``LocalAttention``
    ("local-m", "local-p") or ``HardAttention`` ("hard"), as on the NumPy track."""
    c = config
    if c.attention == "global":
        return TimeAttention(c.score, encoder_size, decoder_size, c.attention_size, rng=rng, dtype=dtype)
    if attention_spec(c.attention).local:
        return LocalAttention(c.score, encoder_size, decoder_size, c.attention_size, kind=c.attention,
                              window=c.window, rng=rng, dtype=dtype)
    return HardAttention(c.score, encoder_size, decoder_size, c.attention_size, estimator=c.hard_estimator,
                         baseline=c.hard_baseline, temperature=c.gumbel_temperature, rng=rng, dtype=dtype)


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
        self.attention = make_attention(c, H_enc, H, rng=rng, dtype=dtype)
        self.combine = Affine(H_enc + H, H, rng=rng, dtype=dtype)
        self.out = Affine(H, c.target_vocab_size, rng=rng, dtype=dtype)

    @property
    def attention_weights(self) -> torch.Tensor | None:
        return self.attention.attention_weights

    def _attend(self, decoder_states, encoder_states, source_mask, need_weights: bool, **options):
        context = self.attention(encoder_states, decoder_states, source_mask, need_weights=need_weights, **options)
        return torch.tanh(self.combine(torch.cat([context, decoder_states], dim=-1)))  # (N, T_dec, H)

    def _decoding_options(self, step: int) -> dict:
        """One decoder step at a time: local-m needs the step's index, hard attention takes the likeliest position."""
        if isinstance(self.attention, LocalAttention):
            return {"first_step": step}
        if isinstance(self.attention, HardAttention):
            return {"sample": False}
        return {}

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
        for step in range(max_length):
            decoder_states = self.rnn(self.embed(ids), None, state)  # (N, 1, H)
            state = self.rnn.final_state
            attentional = self._attend(decoder_states, encoder_states, source_mask, need_weights=True,
                                       **self._decoding_options(step))
            ids = self.out(attentional).argmax(dim=-1)
            out.append(ids)
            weights.append(self.attention.attention_weights)
            if stop_id is not None:
                finished |= ids[:, 0] == stop_id
                if bool(finished.all()):
                    break
        return torch.cat(out, dim=1), torch.cat(weights, dim=1)


class BahdanauDecoder(nn.Module):
    """Bahdanau's attention decoder: attend with ``s_{i-1}``, feed ``c_i`` into the recurrence, step by step.

    ``e_ij = a(s_{i-1}, h_j)``, ``c_i = sum_j alpha_ij h_j``, ``s_i = f(s_{i-1}, [E y_{i-1} ; c_i])``
    (the context is part of the cell's input, so every gate gets a ``C c_i`` term, as in the
    seminar's GRU), logits ``W_o tanh(W_c [c_i ; s_i ; E y_{i-1}] + b_c) + b_o``. The same names,
    parameters and equations as the NumPy track's ``BahdanauDecoder`` (read its docstring); one
    recurrent layer, global attention. The loop over the steps is plain Python: step ``i``'s input
    needs ``c_i``, which needs ``s_{i-1}``, so no fused kernel can run all steps at once.
    """

    def __init__(self, config: Seq2seqConfig, rng=None, *, fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        if c.num_layers != 1:
            raise ValueError(f"BahdanauDecoder: one recurrent layer, got num_layers={c.num_layers}")
        dtype = resolve_dtype(c.dtype)
        H, H_enc = self.hidden_size, self.encoder_size = c.decoder_hidden_size, c.encoder_output_size
        self.embed = Embedding(c.target_vocab_size, c.embed_dim, rng=rng, dtype=dtype)
        self.rnn = _recurrent(c, c.embed_dim + H_enc, H, False, rng, fused)
        self.attention = TimeAttention(c.score, H_enc, H, c.attention_size, rng=rng, dtype=dtype)
        self.combine = Affine(H_enc + H + c.embed_dim, H, rng=rng, dtype=dtype)
        self.out = Affine(H, c.target_vocab_size, rng=rng, dtype=dtype)
        self.attention_weights = None
        self.final_state = None

    @property
    def cell(self) -> nn.Module:
        return self.rnn.layers[0].cell

    def _step(self, embedded: torch.Tensor, state: tuple, encoder_states, source_mask):
        """One step: returns the new state (a tuple), the context (N, H_enc) and the weights (N, T_enc)."""
        query = state[0].unsqueeze(1)  # s_{i-1}: (N, 1, H)
        context = self.attention(encoder_states, query, source_mask).squeeze(1)  # (N, H_enc)
        cell = self.cell
        state = cell.step(cell.input_projection(torch.cat([embedded, context], dim=-1)), state)
        return state, context, self.attention.attention_weights.squeeze(1)

    def forward(self, decoder_input: torch.Tensor, encoder_states: torch.Tensor, initial_state,
                source_mask: torch.Tensor | None = None) -> torch.Tensor:
        _check_tokens("decoder_input", decoder_input, None)
        embedded = self.embed(decoder_input)  # (N, T_dec, D)
        N, T_dec, _ = embedded.shape
        state = self.cell.check_state(initial_state[0], N, "initial_state")
        states, contexts, weights = [], [], []
        for i in range(T_dec):
            state, context, step_weights = self._step(embedded[:, i], state, encoder_states, source_mask)
            states.append(state[0])
            contexts.append(context)
            weights.append(step_weights)
        self.final_state = [self.cell.from_tuple(state)]
        self.attention_weights = torch.stack(weights, dim=1)  # (N, T_dec, T_enc)
        joined = torch.cat([torch.stack(contexts, dim=1), torch.stack(states, dim=1), embedded], dim=-1)
        return self.out(torch.tanh(self.combine(joined)))

    @torch.no_grad()
    def generate(self, encoder_states: torch.Tensor, initial_state, source_mask: torch.Tensor | None, start_id: int,
                 max_length: int, stop_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy decoding. Returns ids (N, T_out) and attention weights (N, T_out, T_enc)."""
        N = encoder_states.shape[0]
        state = self.cell.check_state(initial_state[0], N, "initial_state")
        ids = torch.full((N,), start_id, dtype=torch.long, device=encoder_states.device)
        out, weights = [], []
        finished = torch.zeros(N, dtype=torch.bool, device=encoder_states.device)
        for _ in range(max_length):
            embedded = self.embed(ids)  # (N, D)
            state, context, step_weights = self._step(embedded, state, encoder_states, source_mask)
            ids = self.out(torch.tanh(self.combine(torch.cat([context, state[0], embedded], dim=-1)))).argmax(dim=-1)
            out.append(ids.unsqueeze(1))
            weights.append(step_weights.unsqueeze(1))
            if stop_id is not None:
                finished |= ids == stop_id
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
    """Seq2seq with attention: ``AttentionEncoder`` (bidirectional by default) and an attention decoder,
    Luong's ``AttentionDecoder`` or ``BahdanauDecoder`` (``config.decoder``).

    With hard attention trained by REINFORCE, the loss of a training-mode forward pass also
    carries the estimator's term (zero in value: see ``HardAttention.estimator_loss``).
    """

    def __init__(self, config: Seq2seqConfig, rng=None, *, fused: bool = True) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.config = config
        self.encoder = AttentionEncoder(config, rng, fused=fused)
        self.bridge = Bridge(config, rng) if config.bidirectional else None
        self.decoder = DECODERS[config.decoder](config, rng, fused=fused)
        attention = self.decoder.attention
        self._reinforce = isinstance(attention, HardAttention) and attention.estimator == "reinforce"

    def _initial_state(self):
        state = self.encoder.final_state
        return state if self.bridge is None else self.bridge(state)

    def forward(self, source, source_mask, decoder_input, decoder_target, target_mask=None) -> torch.Tensor:
        """The mean cross-entropy of the target tokens, under teacher forcing."""
        self._check_batch(source, source_mask, decoder_input, decoder_target, target_mask)
        encoder_states = self.encoder(source, source_mask)
        logits = self.decoder(decoder_input, encoder_states, self._initial_state(), source_mask)
        loss = self.loss_layer(logits, decoder_target, target_mask)
        if self._reinforce and self.training:
            loss = loss + self.decoder.attention.estimator_loss(*step_losses(logits, decoder_target, target_mask))
        return loss

    @property
    def attention_weights(self) -> torch.Tensor | None:
        return self.decoder.attention_weights

    @torch.no_grad()
    def generate(self, source, source_mask, start_id: int, max_length: int, stop_id: int | None = None):
        """Greedy decoding; returns ids (N, T_out) and attention weights (N, T_out, T_enc)."""
        encoder_states = self.encoder(source, source_mask)
        return self.decoder.generate(encoder_states, self._initial_state(), source_mask, start_id, max_length, stop_id)


DECODERS = bind("decoder", {"luong": AttentionDecoder, "bahdanau": BahdanauDecoder})


def build_model(kind: str, config: Seq2seqConfig, rng=None, *, fused: bool = True) -> _Model:
    """``"attention"`` for ``AttentionSeq2seq``, ``"seq2seq"`` for the bottleneck ``Seq2seq``."""
    models = {"attention": AttentionSeq2seq, "seq2seq": Seq2seq}
    if kind not in models:
        raise ValueError(f"model: unknown kind {kind!r}; choose one of {sorted(models)}")
    return models[kind](config, rng, fused=fused)
