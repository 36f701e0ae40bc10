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

Token ids: ``source`` (N, T_enc) and ``decoder_input`` (N, T_dec) are int arrays; ``mask``
arrays are bool, True on real tokens, padding at the end.
"""

from __future__ import annotations

import numpy as np

from ..core.configs import Seq2seqConfig
from ..core.initializers import init_rng
from ..core.layer_stack import stack_layers
from ..core.registries import bind
from ..core.shapes import check_array
from .attention import TimeAttention
from .base import Layer
from .layers import Affine, Embedding, SoftmaxCrossEntropy
from .recurrent import GRU, LSTM, RNN
from .wrappers import Bidirectional, Residual, Stacked

__all__ = ["CELLS", "make_recurrent", "Encoder", "AttentionEncoder", "Decoder", "AttentionDecoder", "Bridge",
           "Seq2seqConfig", "Seq2seq", "AttentionSeq2seq", "build_model"]

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


def _check_tokens(name: str, ids: np.ndarray, mask: np.ndarray | None, sizes: dict | None = None) -> dict:
    sizes = check_array(name, ids, ("N", None), sizes, kind="int")
    if mask is not None:
        check_array(f"{name}_mask", mask, ids.shape, kind="bool")
    return sizes


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
        encoder_states = self.rnn.forward(self.embed.forward(source), mask)  # (N, T_enc, H_out)
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
        source: (N, T_enc) int.  mask: (N, T_enc) bool.  returns encoder_states: (N, T_enc, H_out),
        zero at padded positions; ``final_state`` is set as in ``Encoder``.
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
        decoder_states = self.rnn.forward(self.embed.forward(decoder_input), None, initial_state)
        return self.out.forward(decoder_states)

    def backward(self, d_logits: np.ndarray):
        """Returns the gradient of the initial state (for the encoder)."""
        self.embed.backward(self.rnn.backward(self.out.backward(d_logits)))
        return self.rnn.initial_state_grad

    def generate(self, initial_state, start_id: int, max_length: int, stop_id: int | None = None) -> np.ndarray:
        """Greedy decoding: feed back the most likely token. Returns ids (N, T_out <= max_length).

        Stops early once every sequence has produced ``stop_id``.
        """
        first = initial_state[0]
        N = len(first[0] if isinstance(first, tuple) else first)
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

    Built from ``config``: as ``Decoder``, plus ``score``, ``attention_size`` and the encoder's
    output width ``encoder_output_size`` (H_enc).

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
        self.attention = self.add_child("attention", TimeAttention(c.score, H_enc, H, c.attention_size, rng=rng,
                                                                   dtype=dtype))
        self.combine = self.add_child("combine", Affine(H_enc + H, H, rng=rng, dtype=dtype))
        self.out = self.add_child("out", Affine(H, c.target_vocab_size, rng=rng, dtype=dtype))
        self._attentional = None

    @property
    def attention_weights(self) -> np.ndarray:
        return self.attention.attention_weights

    def _attend(self, decoder_states, encoder_states, source_mask):
        context = self.attention.forward(encoder_states, decoder_states, source_mask)  # (N, T_dec, H_enc)
        attentional = np.tanh(self.combine.forward(np.concatenate([context, decoder_states], axis=-1)))
        return attentional  # (N, T_dec, H)

    def forward(self, decoder_input: np.ndarray, encoder_states: np.ndarray, initial_state,
                source_mask: np.ndarray | None = None) -> np.ndarray:
        _check_tokens("decoder_input", decoder_input, None)
        decoder_states = self.rnn.forward(self.embed.forward(decoder_input), None, initial_state)  # (N, T_dec, H)
        self._attentional = self._attend(decoder_states, encoder_states, source_mask)
        return self.out.forward(self._attentional)

    def backward(self, d_logits: np.ndarray):
        """Returns ``(d_encoder_states, d_initial_state)``."""
        d_attentional = self.out.backward(d_logits)
        d_concat = self.combine.backward(d_attentional * (1 - self._attentional * self._attentional))
        H_enc = self.encoder_size
        d_encoder_states, d_decoder_states = self.attention.backward(d_concat[..., :H_enc])
        d_decoder_states += d_concat[..., H_enc:]
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
        for _ in range(max_length):
            decoder_states = self.rnn.forward(self.embed.forward(ids), None, state)  # (N, 1, H)
            state = self.rnn.final_state
            logits = self.out.forward(self._attend(decoder_states, encoder_states, source_mask))
            ids = logits.argmax(axis=-1)  # (N, 1)
            out.append(ids)
            weights.append(self.attention.attention_weights)
            if stop_id is not None:
                finished |= ids[:, 0] == stop_id
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

    def forward(self, source, source_mask, decoder_input, decoder_target, target_mask=None) -> float:
        """The mean cross-entropy of the target tokens, under teacher forcing."""
        self._check_batch(source, source_mask, decoder_input, decoder_target, target_mask)
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
    """Seq2seq with attention: ``AttentionEncoder`` (bidirectional by default) and ``AttentionDecoder``."""

    def __init__(self, config: Seq2seqConfig, rng=None) -> None:
        super().__init__()
        rng = init_rng(rng)
        self.config = config
        self.encoder = self.add_child("encoder", AttentionEncoder(config, rng))
        self.bridge = self.add_child("bridge", Bridge(config, rng)) if config.bidirectional else None
        self.decoder = self.add_child("decoder", AttentionDecoder(config, rng))

    def _initial_state(self):
        state = self.encoder.final_state
        return state if self.bridge is None else self.bridge.forward(state)

    def forward(self, source, source_mask, decoder_input, decoder_target, target_mask=None) -> float:
        """The mean cross-entropy of the target tokens, under teacher forcing."""
        self._check_batch(source, source_mask, decoder_input, decoder_target, target_mask)
        encoder_states = self.encoder.forward(source, source_mask)
        logits = self.decoder.forward(decoder_input, encoder_states, self._initial_state(), source_mask)
        return self.loss_layer.forward(logits, decoder_target, target_mask)

    def backward(self, dloss: float = 1.0) -> None:
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


def build_model(kind: str, config: Seq2seqConfig, rng=None) -> _Model:
    """``"attention"`` for ``AttentionSeq2seq``, ``"seq2seq"`` for the bottleneck ``Seq2seq``."""
    models = {"attention": AttentionSeq2seq, "seq2seq": Seq2seq}
    if kind not in models:
        raise ValueError(f"model: unknown kind {kind!r}; choose one of {sorted(models)}")
    return models[kind](config, rng)
