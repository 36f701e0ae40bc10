"""Encoders, decoders and the two models of the course.

* ``Seq2seq`` (chapter 1): the encoder squeezes the whole source into its final state, the
  only thing the decoder sees. That fixed-size state is the bottleneck.
* ``AttentionSeq2seq`` (chapters 2-7): the ``AttentionEncoder`` keeps every hidden state; the
  ``AttentionDecoder`` attends over them at every step. Its recurrent layer runs over the whole
  (teacher-forced) target in one call, then ``TimeAttention`` computes every step's context at
  once, and the output combines context and state (Luong et al. 2015):
  ``h~_i = tanh(W_c [c_i ; s_i] + b_c)``, ``p(y_i | y_<i, x) = softmax(W_o h~_i + b_o)``.
  With a bidirectional encoder the decoder starts from ``s_0 = tanh(W_s h_1← + b_s)``
  (Bahdanau et al. 2015), one bridge per layer.
* Chapter 8's variants, chosen by the config: the decoder's attention (``attention``: "global",
  "local-m", "local-p", "hard", see ``make_attention``), and Bahdanau's decoder
  (``decoder="bahdanau"``, ``BahdanauDecoder``), which scores with ``s_{i-1}`` and feeds the
  context into the recurrence, one step at a time.

Token ids: ``source`` (N, T_enc) and ``decoder_input`` (N, T_dec) are int arrays; ``mask``
arrays are bool, True on real tokens, padding at the end.
"""

from __future__ import annotations

import numpy as np

from ..core.configs import Seq2seqConfig
from ..core.initializers import init_rng
from ..core.layer_stack import stack_layers
from ..core.registries import attention_spec, bind
from ..core.shapes import check_array
from .attention import TimeAttention
from .base import Layer, as_dtype
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
                   residual: bool = False, reset_after: bool = False, rng=None, dtype=np.float64) -> Stacked:
    """``num_layers`` recurrent layers, optionally bidirectional, with skip connections from layer 2 on."""
    return stack_layers(CELLS, (Bidirectional, Residual, Stacked), cell, input_size, hidden_size,
                        num_layers=num_layers, bidirectional=bidirectional, residual=residual,
                        reset_after=reset_after, rng=init_rng(rng), dtype=dtype)


def _recurrent(config: Seq2seqConfig, input_size: int, hidden_size: int, bidirectional: bool, rng) -> Stacked:
    """The recurrent layers of an encoder or decoder, as ``config`` describes them."""
    return make_recurrent(config.cell, input_size, hidden_size, num_layers=config.num_layers,
                          bidirectional=bidirectional, residual=config.residual, reset_after=config.reset_after,
                          rng=rng, dtype=np.dtype(config.dtype))


def make_attention(config: Seq2seqConfig, encoder_size: int, decoder_size: int, *, rng=None, dtype=np.float64) -> Layer:
    """The attention layer ``config.attention`` names: ``TimeAttention`` ("global"),
    ``LocalAttention`` ("local-m", "local-p", half-width ``config.window``) or ``HardAttention``
    ("hard", trained by ``config.hard_estimator`` with ``config.hard_baseline``), with the score
    ``config.score``."""
    c = config
    if c.attention == "global":
        return TimeAttention(c.score, encoder_size, decoder_size, c.attention_size, rng=rng, dtype=dtype)
    if attention_spec(c.attention).local:
        return LocalAttention(c.score, encoder_size, decoder_size, c.attention_size, kind=c.attention,
                              window=c.window, rng=rng, dtype=dtype)
    return HardAttention(c.score, encoder_size, decoder_size, c.attention_size, estimator=c.hard_estimator,
                         baseline=c.hard_baseline, temperature=c.gumbel_temperature, rng=rng, dtype=dtype)


def _check_tokens(name: str, ids: np.ndarray, mask: np.ndarray | None, sizes: dict | None = None) -> dict:
    sizes = check_array(name, ids, ("N", None), sizes, kind="int")
    if mask is not None:
        check_array(f"{name}_mask", mask, ids.shape, kind="bool")
    return sizes


def _batch_size(state: list) -> int:
    """N of a list of layer states (arrays, or ``(h, c)`` tuples)."""
    first = state[0]
    return len(first[0] if isinstance(first, tuple) else first)


class Encoder(Layer):
    """Embedding and recurrent layers; ``forward`` returns only the final state (the bottleneck).

    Built from ``config``: ``source_vocab_size``, ``embed_dim``, ``hidden_size`` (per direction),
    ``cell``, ``num_layers``, ``bidirectional``, ``residual``, ``reset_after``, ``dtype``.

    Shapes:
        source: (N, T_enc) int.  mask: (N, T_enc) bool.
        returns: ``final_state``, a list with one state per layer (for a one-layer GRU, one (N, H) array).
    """

    def __init__(self, config: Seq2seqConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        self.embed = self.add_child("embed", Embedding(c.source_vocab_size, c.embed_dim, rng=rng,
                                                       dtype=np.dtype(c.dtype)))
        self.rnn = self.add_child("rnn", _recurrent(c, c.embed_dim, c.hidden_size, c.bidirectional, rng))
        self.final_state = None
        self._shape = None

    @property
    def output_size(self) -> int:
        return self.rnn.output_size

    def _encode(self, source: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        _check_tokens("source", source, mask)
        embedded = self.embed.forward(source)  # (N, T_enc, D)
        encoder_states = self.rnn.forward(embedded, mask)  # (N, T_enc, H_out)
        self.final_state = self.rnn.final_state
        self._shape = encoder_states.shape
        return encoder_states

    def forward(self, source: np.ndarray, mask: np.ndarray | None = None):
        self._encode(source, mask)
        return self.final_state

    def backward(self, d_final_state) -> None:
        self.embed.backward(self.rnn.backward(np.zeros(self._shape, dtype=self.embed.params["W"].dtype), d_final_state))


class AttentionEncoder(Encoder):
    """The encoder improvement: return every hidden state, not just the last.

    Shapes:
        source: (N, T_enc) int.  mask: (N, T_enc) bool.
        returns encoder_states: (N, T_enc, H_out), zero at padded positions;
        ``final_state`` is set as in ``Encoder``.
    """

    def forward(self, source: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        return self._encode(source, mask)

    def backward(self, d_encoder_states: np.ndarray, d_final_state=None) -> None:
        self.embed.backward(self.rnn.backward(d_encoder_states, d_final_state))


class Decoder(Layer):
    """The plain seq2seq decoder: embedding, recurrent layers started from the encoder's state, affine.

    Built from ``config``: ``target_vocab_size``, ``embed_dim``, ``decoder_hidden_size``, ``cell``,
    ``num_layers``, ``residual``, ``reset_after``, ``dtype``; always unidirectional.

    Shapes:
        decoder_input: (N, T_dec) int (BOS then the target, teacher forcing).  returns logits: (N, T_dec, V).
    """

    def __init__(self, config: Seq2seqConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype, H = np.dtype(c.dtype), c.decoder_hidden_size
        self.embed = self.add_child("embed", Embedding(c.target_vocab_size, c.embed_dim, rng=rng, dtype=dtype))
        self.rnn = self.add_child("rnn", _recurrent(c, c.embed_dim, H, False, rng))
        self.out = self.add_child("out", Affine(H, c.target_vocab_size, rng=rng, dtype=dtype))

    def forward(self, decoder_input: np.ndarray, initial_state) -> np.ndarray:
        _check_tokens("decoder_input", decoder_input, None)
        embedded = self.embed.forward(decoder_input)  # (N, T_dec, D)
        decoder_states = self.rnn.forward(embedded, None, initial_state)  # s_i
        return self.out.forward(decoder_states)

    def backward(self, d_logits: np.ndarray):
        """Returns the gradient of the initial state (for the encoder)."""
        self.embed.backward(self.rnn.backward(self.out.backward(d_logits)))
        return self.rnn.initial_state_grad

    def generate(self, initial_state, start_id: int, max_length: int, stop_id: int | None = None) -> np.ndarray:
        """Greedy decoding: feed back the most likely token. Returns ids (N, T_out <= max_length).

        Stops early once every sequence has produced ``stop_id``.
        """
        N = _batch_size(initial_state)
        ids = np.full((N, 1), start_id, dtype=np.int64)
        state, out = initial_state, []
        finished = np.zeros(N, dtype=bool)
        for _ in range(max_length):
            logits = self.out.forward(self.rnn.forward(self.embed.forward(ids), None, state))
            state = self.rnn.final_state
            ids = logits.argmax(axis=-1)  # (N, 1)
            out.append(ids)
            if stop_id is not None:
                finished |= ids[:, 0] == stop_id
                if finished.all():
                    break
        return np.concatenate(out, axis=1)


class AttentionDecoder(Layer):
    """The decoder improvement: attend over the encoder states at every step.

    ``s_i``: the recurrent state after reading ``y_{i-1}``; ``c_i``: its context from
    ``TimeAttention``; ``h~_i = tanh(W_c [c_i ; s_i] + b_c)``; logits ``W_o h~_i + b_o``.

    Built from ``config``: as ``Decoder``, plus ``score``, ``attention_size``, the encoder's
    output width ``encoder_output_size`` (H_enc), and the kind of attention (``attention``,
    ``window``, ``hard_*``: see ``make_attention``).

    Shapes:
        decoder_input: (N, T_dec) int.  encoder_states: (N, T_enc, H_enc).  source_mask: (N, T_enc) bool.
        returns logits: (N, T_dec, V); ``attention_weights``: (N, T_dec, T_enc).
    """

    def __init__(self, config: Seq2seqConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        dtype = np.dtype(c.dtype)
        H, H_enc = self.hidden_size, self.encoder_size = c.decoder_hidden_size, c.encoder_output_size
        self.embed = self.add_child("embed", Embedding(c.target_vocab_size, c.embed_dim, rng=rng, dtype=dtype))
        self.rnn = self.add_child("rnn", _recurrent(c, c.embed_dim, H, False, rng))
        self.attention = self.add_child("attention", make_attention(c, H_enc, H, rng=rng, dtype=dtype))
        self.combine = self.add_child("combine", Affine(H_enc + H, H, rng=rng, dtype=dtype))
        self.out = self.add_child("out", Affine(H, c.target_vocab_size, rng=rng, dtype=dtype))
        self._attentional = None

    @property
    def attention_weights(self) -> np.ndarray:
        return self.attention.attention_weights

    def _combine(self, context, decoder_states):
        """``h~_i = tanh(W_c [c_i ; s_i] + b_c)``."""
        joined = np.concatenate([context, decoder_states], axis=-1)  # [c_i ; s_i]
        return np.tanh(self.combine.forward(joined))  # (N, T_dec, H)

    def _decoding_options(self, step: int) -> dict:
        """What the attention needs to know when it sees one decoder step at a time: local-m, the
        step's index (``p_i = i``); hard attention, to take the likeliest position, not a sample."""
        if isinstance(self.attention, LocalAttention):
            return {"first_step": step}
        if isinstance(self.attention, HardAttention):
            return {"sample": False}
        return {}

    def forward(self, decoder_input: np.ndarray, encoder_states: np.ndarray,
                initial_state, source_mask: np.ndarray | None = None) -> np.ndarray:
        _check_tokens("decoder_input", decoder_input, None)
        embedded = self.embed.forward(decoder_input)  # (N, T_dec, D)
        decoder_states = self.rnn.forward(embedded, None, initial_state)  # s_i
        context = self.attention.forward(encoder_states, decoder_states, source_mask)  # c_i
        self._attentional = self._combine(context, decoder_states)  # h~_i
        return self.out.forward(self._attentional)

    def backward(self, d_logits: np.ndarray):
        """Returns ``(d_encoder_states, d_initial_state)``."""
        d_attentional = self.out.backward(d_logits)
        tanh_grad = 1 - self._attentional * self._attentional
        d_concat = self.combine.backward(d_attentional * tanh_grad)  # d[c_i ; s_i]
        H_enc = self.encoder_size
        d_context, d_states = d_concat[..., :H_enc], d_concat[..., H_enc:]
        d_encoder_states, d_decoder_states = self.attention.backward(d_context)
        d_decoder_states += d_states
        self.embed.backward(self.rnn.backward(d_decoder_states))
        return d_encoder_states, self.rnn.initial_state_grad

    def generate(self, encoder_states: np.ndarray, initial_state, source_mask: np.ndarray | None, start_id: int,
                 max_length: int, stop_id: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Greedy decoding. Returns ids (N, T_out) and attention weights (N, T_out, T_enc).

        Stops early once every sequence has produced ``stop_id``.
        """
        N, T_enc, _ = encoder_states.shape
        ids = np.full((N, 1), start_id, dtype=np.int64)
        state, out, weights = initial_state, [], []
        finished = np.zeros(N, dtype=bool)
        for step in range(max_length):
            decoder_states = self.rnn.forward(self.embed.forward(ids), None, state)  # (N, 1, H)
            state = self.rnn.final_state
            context = self.attention.forward(encoder_states, decoder_states, source_mask,
                                             **self._decoding_options(step))
            logits = self.out.forward(self._combine(context, decoder_states))
            ids = logits.argmax(axis=-1)  # (N, 1)
            out.append(ids)
            weights.append(self.attention.attention_weights)
            if stop_id is not None:
                finished |= ids[:, 0] == stop_id
                if finished.all():
                    break
        return np.concatenate(out, axis=1), np.concatenate(weights, axis=1)


class BahdanauDecoder(Layer):
    """Bahdanau's attention decoder (Bahdanau et al. 2015, appendix A; the seminar's equations).

    It attends *before* its recurrent update, with the previous state, and feeds the
    context into that update, one step at a time::

        e_ij = a(s_{i-1}, h_j),  alpha_ij = softmax_j(e_ij),  c_i = sum_j alpha_ij h_j,
        s_i = f(s_{i-1}, y_{i-1}, c_i),
        p(y_i | y_<i, x) = softmax(W_o tanh(W_c [c_i ; s_i ; E y_{i-1}] + b_c) + b_o).

    The context enters the recurrence as part of its input: the cell reads
    ``[E y_{i-1} ; c_i]``, so its input weights are ``W_x = [W ; C]`` and every gate gets
    a ``C c_i`` term, exactly the seminar's GRU,
    ``z_i = sigma(W_z E y_{i-1} + U_z s_{i-1} + C_z c_i)`` (likewise ``r_i`` and the
    candidate state). The output ``g(y_{i-1}, s_i, c_i)`` is one ``tanh`` layer over the
    three (the paper has a maxout layer there). Unlike Luong's decoder
    (``AttentionDecoder``), the recurrence cannot run over all the steps in one call:
    step ``i``'s input needs ``c_i``, which needs ``s_{i-1}``. Any score and cell of the
    config; one recurrent layer, global attention.

    Built from ``config`` as ``AttentionDecoder``. Parameters: ``embed``, ``rnn`` (one
    layer reading ``D + H_enc`` inputs), ``attention`` (a ``TimeAttention``), ``combine``
    (``H_enc + H + D`` to ``H``), ``out``.

    Shapes:
        decoder_input: (N, T_dec) int.  encoder_states: (N, T_enc, H_enc).
        source_mask: (N, T_enc) bool.  returns logits: (N, T_dec, V).
        attention_weights: (N, T_dec, T_enc).
    """

    def __init__(self, config: Seq2seqConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        if c.num_layers != 1:
            raise ValueError(f"BahdanauDecoder: one recurrent layer, got num_layers={c.num_layers}")
        dtype = np.dtype(c.dtype)
        H, H_enc, D = c.decoder_hidden_size, c.encoder_output_size, c.embed_dim
        self.hidden_size, self.encoder_size = H, H_enc
        self.embed = self.add_child("embed", Embedding(c.target_vocab_size, D, rng=rng, dtype=dtype))
        self.rnn = self.add_child("rnn", _recurrent(c, D + H_enc, H, False, rng))
        self.attention = self.add_child("attention", TimeAttention(c.score, H_enc, H, c.attention_size,
                                                                   rng=rng, dtype=dtype))
        self.combine = self.add_child("combine", Affine(H_enc + H + D, H, rng=rng, dtype=dtype))
        self.out = self.add_child("out", Affine(H, c.target_vocab_size, rng=rng, dtype=dtype))
        self.attention_weights = None
        self.final_state = None
        self._cache = None

    @property
    def cell(self):
        """The recurrent cell, which the decoder runs one step at a time itself."""
        return self.rnn.layers[0].cell

    def _step(self, embedded, state: tuple, encoder_states, source_mask,
              recurrent_params):
        """One step: attend with ``s_{i-1}``, then the recurrence on
        ``[E y_{i-1} ; c_i]``.

        Returns the new state (a tuple), the context (N, H_enc), the weights
        (N, T_enc), and what the step's backward pass needs.
        """
        cell, dtype = self.cell, embedded.dtype
        query = state[0][:, None, :]  # s_{i-1}: (N, 1, H)
        context = self.attention.forward(encoder_states, query, source_mask)[:, 0]
        inputs = np.concatenate([embedded, context], axis=-1)  # (N, D + H_enc)
        xw = inputs @ as_dtype(cell.params["W_x"], dtype) + cell._input_bias(dtype)
        state, cell_cache = cell._step(xw, state, recurrent_params)
        weights = self.attention.attention_weights[:, 0]  # (N, T_enc)
        return state, context, weights, (query, inputs, cell_cache)

    def forward(self, decoder_input: np.ndarray, encoder_states: np.ndarray, initial_state,
                source_mask: np.ndarray | None = None) -> np.ndarray:
        _check_tokens("decoder_input", decoder_input, None)
        embedded = self.embed.forward(decoder_input)  # (N, T_dec, D)
        N, T_dec, _ = embedded.shape
        cell, dtype = self.cell, embedded.dtype
        recurrent_params = cell._recurrent_params(dtype)
        state = cell._check_state(initial_state[0], N, dtype, "initial_state")
        states, contexts, weights, step_caches = [], [], [], []
        for i in range(T_dec):
            state, context, step_weights, cache = self._step(
                embedded[:, i], state, encoder_states, source_mask, recurrent_params)
            states.append(state[0])
            contexts.append(context)
            weights.append(step_weights)
            step_caches.append(cache)
        self.final_state = [cell._from_tuple(state)]
        self.attention_weights = np.stack(weights, axis=1)  # (N, T_dec, T_enc)
        joined = np.concatenate([np.stack(contexts, axis=1), np.stack(states, axis=1),
                                 embedded], axis=-1)  # (N, T_dec, H_enc + H + D)
        attentional = np.tanh(self.combine.forward(joined))  # (N, T_dec, H)
        self._cache = (encoder_states, source_mask, step_caches, recurrent_params, attentional)
        return self.out.forward(attentional)

    def backward(self, d_logits: np.ndarray):
        """Returns ``(d_encoder_states, d_initial_state)``.

        The attention layer keeps the cache of one call only: going back through step
        ``i`` runs that step's attention forward again (same inputs, same result), then its
        backward, and adds up the parameter gradients of all the steps.
        """
        encoder_states, source_mask, step_caches, recurrent_params, attentional = self._cache
        cell, dtype = self.cell, attentional.dtype
        H_enc, H, D = self.encoder_size, self.hidden_size, self.config.embed_dim
        d_attentional = self.out.backward(d_logits)
        d_joined = self.combine.backward(d_attentional * (1 - attentional * attentional))
        d_contexts, d_states = d_joined[..., :H_enc], d_joined[..., H_enc:H_enc + H]
        d_embedded = d_joined[..., H_enc + H:].copy()  # (N, T_dec, D)
        N, T_dec, _ = d_embedded.shape

        W_x = as_dtype(cell.params["W_x"], dtype)
        cell_grads = {name: np.zeros_like(grad) for name, grad in cell.grads.items()}
        attention_grads = {name: np.zeros_like(grad)
                           for name, _, grad in self.attention.named_parameters()}
        d_encoder = np.zeros_like(encoder_states)
        d_state = cell._zeros(N, dtype)
        for i in range(T_dec - 1, -1, -1):
            query, inputs, cell_cache = step_caches[i]
            d_state = (d_state[0] + d_states[:, i],) + d_state[1:]
            dxw, d_state, d_recurrent = cell._step_backward(cell_cache, d_state,
                                                            recurrent_params, cell_grads["W_h"])
            cell_grads["W_x"] += inputs.T @ dxw
            cell_grads["b"] += dxw.sum(axis=0)
            if d_recurrent is not None:
                cell_grads["b_h"] += d_recurrent.sum(axis=0)
            d_inputs = dxw @ W_x.T  # (N, D + H_enc)
            d_embedded[:, i] += d_inputs[:, :D]
            d_context = d_inputs[:, D:] + d_contexts[:, i]
            self.attention.forward(encoder_states, query, source_mask)  # step i's cache
            d_encoder_i, d_query = self.attention.backward(d_context[:, None, :])
            d_encoder += d_encoder_i
            for name, _, grad in self.attention.named_parameters():
                attention_grads[name] += grad
            d_state = (d_state[0] + d_query[:, 0],) + d_state[1:]
        for name, grad in cell.grads.items():
            grad[...] = cell_grads[name]
        for name, _, grad in self.attention.named_parameters():
            grad[...] = attention_grads[name]
        self.embed.backward(d_embedded)
        return d_encoder, [cell._from_tuple(d_state)]

    def generate(self, encoder_states: np.ndarray, initial_state, source_mask: np.ndarray | None,
                 start_id: int, max_length: int, stop_id: int | None = None):
        """Greedy decoding. Returns ids (N, T_out) and attention weights (N, T_out, T_enc).

        Stops early once every sequence has produced ``stop_id``.
        """
        N = encoder_states.shape[0]
        cell = self.cell
        dtype = self.embed.params["W"].dtype
        recurrent_params = cell._recurrent_params(dtype)
        state = cell._check_state(initial_state[0], N, dtype, "initial_state")
        ids = np.full(N, start_id, dtype=np.int64)
        out, weights = [], []
        finished = np.zeros(N, dtype=bool)
        for _ in range(max_length):
            embedded = self.embed.forward(ids[:, None])[:, 0]  # (N, D)
            state, context, step_weights, _ = self._step(embedded, state, encoder_states,
                                                         source_mask, recurrent_params)
            joined = np.concatenate([context, state[0], embedded], axis=-1)
            ids = self.out.forward(np.tanh(self.combine.forward(joined))).argmax(axis=-1)
            out.append(ids[:, None])
            weights.append(step_weights[:, None])
            if stop_id is not None:
                finished |= ids == stop_id
                if finished.all():
                    break
        return np.concatenate(out, axis=1), np.concatenate(weights, axis=1)


class Bridge(Layer):
    """Bahdanau's initial decoder state from a bidirectional encoder, per layer: ``s_0 = tanh(W_s h_1← + b_s)``.

    ``h_1←`` is the backward direction's state after it has read the whole source (it ends at
    the first token). For an LSTM decoder the initial cell state is zero. One ``Affine``
    (``hidden_size`` to ``decoder_hidden_size``) per layer of ``config``.
    """

    def __init__(self, config: Seq2seqConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        c = self.config = config
        self.lstm = c.cell == "lstm"
        self.layers = [self.add_child(str(i), Affine(c.hidden_size, c.decoder_hidden_size, rng=rng,
                                                     dtype=np.dtype(c.dtype)))
                       for i in range(c.num_layers)]
        self._cache = None

    @staticmethod
    def _hidden(state):
        return state[0] if isinstance(state, tuple) else state

    def forward(self, encoder_final_state: list) -> list:
        initial, cache = [], []
        for affine, (_, backward_state) in zip(self.layers, encoder_final_state):
            h_first = self._hidden(backward_state)
            s0 = np.tanh(affine.forward(h_first))
            cache.append((s0, backward_state))
            initial.append((s0, np.zeros_like(s0)) if self.lstm else s0)
        self._cache = cache
        return initial

    def backward(self, d_initial: list) -> list:
        grads = []
        for affine, (s0, backward_state), d in zip(self.layers, self._cache, d_initial):
            d_s0 = d[0] if self.lstm else d
            dh = affine.backward(d_s0 * (1 - s0 * s0))
            d_backward = (dh, np.zeros_like(dh)) if isinstance(backward_state, tuple) else dh
            grads.append((None, d_backward))
        return grads


class _Model(Layer):
    """What both models share: the loss over the target, and the training step."""

    def __init__(self) -> None:
        super().__init__()
        self.loss_layer = SoftmaxCrossEntropy()

    def _check_batch(self, source, source_mask, decoder_input, decoder_target, target_mask) -> None:
        sizes = _check_tokens("source", source, source_mask)
        check_array("decoder_input", decoder_input, ("N", None), sizes, kind="int")
        check_array("decoder_target", decoder_target, decoder_input.shape, kind="int")
        if target_mask is not None:
            check_array("target_mask", target_mask, decoder_input.shape, kind="bool")


class _CrossEntropyOfEachStep(SoftmaxCrossEntropy):
    """The mean cross-entropy, keeping each step's too, and its weight in the mean
    (``step_losses``): what REINFORCE hands to hard attention as the loss of each step's draw."""

    def forward(self, logits: np.ndarray, targets: np.ndarray, mask: np.ndarray | None = None) -> float:
        self.step_losses = step_losses(logits, targets, mask)
        return super().forward(logits, targets, mask)


class Seq2seq(_Model):
    """The bottleneck baseline: an ``Encoder`` whose final state starts a ``Decoder``."""

    def __init__(self, config: Seq2seqConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.config = config
        if config.bidirectional:
            raise ValueError("Seq2seq: the bottleneck baseline has a unidirectional encoder (bidirectional=False)")
        self.encoder = self.add_child("encoder", Encoder(config, rng))
        self.decoder = self.add_child("decoder", Decoder(config, rng))

    def forward(self, source, source_mask, decoder_input, decoder_target,
                target_mask=None) -> float:
        """The mean cross-entropy of the target tokens, under teacher forcing."""
        self._check_batch(source, source_mask, decoder_input, decoder_target,
                          target_mask)
        state = self.encoder.forward(source, source_mask)
        logits = self.decoder.forward(decoder_input, state)
        return self.loss_layer.forward(logits, decoder_target, target_mask)

    def backward(self, dloss: float = 1.0) -> None:
        self.encoder.backward(self.decoder.backward(self.loss_layer.backward(dloss)))

    def generate(self, source, source_mask, start_id: int, max_length: int, stop_id: int | None = None):
        """Greedy decoding; returns ids (N, T_out) and ``None`` (no attention to show)."""
        state = self.encoder.forward(source, source_mask)
        return self.decoder.generate(state, start_id, max_length, stop_id), None


class AttentionSeq2seq(_Model):
    """Seq2seq with attention: ``AttentionEncoder`` (bidirectional by default) and an attention decoder,
    Luong's ``AttentionDecoder`` or ``BahdanauDecoder`` (``config.decoder``).

    With hard attention trained by REINFORCE, ``forward`` also keeps each step's cross-entropy,
    which ``backward`` hands to the attention as the loss its sample led to.
    """

    def __init__(self, config: Seq2seqConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.config = config
        self.encoder = self.add_child("encoder", AttentionEncoder(config, rng))
        self.bridge = self.add_child("bridge", Bridge(config, rng)) if config.bidirectional else None
        self.decoder = self.add_child("decoder", DECODERS[config.decoder](config, rng))
        attention = self.decoder.attention
        self._reinforce = isinstance(attention, HardAttention) and attention.estimator == "reinforce"
        if self._reinforce:
            self.loss_layer = _CrossEntropyOfEachStep()

    def _initial_state(self):
        state = self.encoder.final_state
        return state if self.bridge is None else self.bridge.forward(state)

    def forward(self, source, source_mask, decoder_input, decoder_target,
                target_mask=None) -> float:
        """The mean cross-entropy of the target tokens, under teacher forcing."""
        self._check_batch(source, source_mask, decoder_input, decoder_target,
                          target_mask)
        encoder_states = self.encoder.forward(source, source_mask)
        initial_state = self._initial_state()
        logits = self.decoder.forward(decoder_input, encoder_states, initial_state,
                                      source_mask)
        return self.loss_layer.forward(logits, decoder_target, target_mask)

    def backward(self, dloss: float = 1.0) -> None:
        if self._reinforce:  # each step's loss, the one its sample led to
            losses, weights = self.loss_layer.step_losses
            self.decoder.attention.set_step_losses(losses, weights * dloss)
        d_encoder_states, d_initial = self.decoder.backward(self.loss_layer.backward(dloss))
        d_final = d_initial if self.bridge is None else self.bridge.backward(d_initial)
        self.encoder.backward(d_encoder_states, d_final)

    @property
    def attention_weights(self) -> np.ndarray:
        return self.decoder.attention_weights

    def generate(self, source, source_mask, start_id: int, max_length: int, stop_id: int | None = None):
        """Greedy decoding; returns ids (N, T_out) and attention weights (N, T_out, T_enc)."""
        encoder_states = self.encoder.forward(source, source_mask)
        return self.decoder.generate(encoder_states, self._initial_state(), source_mask, start_id, max_length, stop_id)


DECODERS = bind("decoder", {"luong": AttentionDecoder, "bahdanau": BahdanauDecoder})


def build_model(kind: str, config: Seq2seqConfig, rng=None) -> _Model:
    """``"attention"`` for ``AttentionSeq2seq``, ``"seq2seq"`` for the bottleneck ``Seq2seq``."""
    models = {"attention": AttentionSeq2seq, "seq2seq": Seq2seq}
    if kind not in models:
        raise ValueError(f"model: unknown kind {kind!r}; choose one of {sorted(models)}")
    return models[kind](config, rng)
