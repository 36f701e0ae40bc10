"""Step-by-step attention as in "Deep Learning from Scratch 2", chapter 8, in NumPy.

This is the slow baseline of the attention speed benchmark: a faithful re-implementation of
the book's layers, which broadcast by materialising copies with ``repeat`` and loop over the
decoder steps in Python. It is correct (``tests/benchmarks/test_baselines.py`` checks it
against PyTorch autograd) and written the way the book writes it, not made slow on purpose.

For one decoder step, with encoder states hs_1..hs_T and decoder state h:

    score_t = hs_t . h                      (dot-product score)
    a = softmax(score)                      (attention weights over the source)
    c = sum_t a_t hs_t                      (context)

Layers follow the dtype of their inputs. None of them has parameters, so ``params`` and
``grads`` are empty dicts, kept for the layer protocol.
"""

import numpy as np


def _check_shape(name, array, expected):
    """Raise a ValueError naming ``name`` unless ``array.shape`` matches ``expected``.

    ``expected`` is a tuple whose entries are ints or None (any size).
    """
    ok = array.ndim == len(expected) and all(
        e is None or e == s for e, s in zip(expected, array.shape)
    )
    if not ok:
        shown = tuple("*" if e is None else e for e in expected)
        raise ValueError(f"{name}: expected shape {shown}, got {array.shape}")


def _softmax(x):
    """Softmax over the last axis, shifted by the row maximum so exp cannot overflow."""
    x = x - x.max(axis=-1, keepdims=True)
    exp = np.exp(x)
    return exp / exp.sum(axis=-1, keepdims=True)


class RepeatWeightSum:
    """Weighted sum of the encoder states: c = sum_t a_t hs_t.

    The weights are broadcast over the hidden axis by an explicit ``repeat``.

    Shapes:
        hs: (N, T, H) encoder states
        a:  (N, T)    attention weights
        c:  (N, H)    context
    """

    def __init__(self):
        self.params, self.grads = {}, {}
        self.cache = None

    def forward(self, hs, a):
        N, T, H = hs.shape
        _check_shape("a", a, (N, T))
        ar = a.reshape(N, T, 1).repeat(H, axis=2)  # (N, T, H)
        t = hs * ar
        c = np.sum(t, axis=1)  # (N, H)
        self.cache = (hs, ar)
        return c

    def backward(self, dc):
        hs, ar = self.cache
        N, T, H = hs.shape
        _check_shape("dc", dc, (N, H))
        dt = dc.reshape(N, 1, H).repeat(T, axis=1)  # (N, T, H): backward of sum is repeat
        dar = dt * hs
        dhs = dt * ar
        da = np.sum(dar, axis=2)  # (N, T): backward of repeat is sum
        return dhs, da


class RepeatAttentionWeight:
    """Attention weights from dot-product scores: a = softmax_t(hs_t . h).

    The decoder state is broadcast over the source axis by an explicit ``repeat``.

    Shapes:
        hs: (N, T, H) encoder states
        h:  (N, H)    decoder state
        a:  (N, T)    attention weights
    """

    def __init__(self):
        self.params, self.grads = {}, {}
        self.cache = None

    def forward(self, hs, h):
        N, T, H = hs.shape
        _check_shape("h", h, (N, H))
        hr = h.reshape(N, 1, H).repeat(T, axis=1)  # (N, T, H)
        t = hs * hr
        s = np.sum(t, axis=2)  # (N, T)
        a = _softmax(s)
        self.cache = (hs, hr, a)
        return a

    def backward(self, da):
        hs, hr, a = self.cache
        N, T, H = hs.shape
        _check_shape("da", da, (N, T))
        # Softmax backward: ds = a * (da - sum_t a_t da_t).
        ds = a * (da - np.sum(a * da, axis=1, keepdims=True))
        dt = ds.reshape(N, T, 1).repeat(H, axis=2)  # (N, T, H)
        dhs = dt * hr
        dhr = dt * hs
        dh = np.sum(dhr, axis=1)  # (N, H): backward of repeat is sum
        return dhs, dh


class RepeatAttention:
    """One decoder step of attention: weights from h, then the weighted sum of hs.

    Shapes:
        hs: (N, T, H) encoder states
        h:  (N, H)    decoder state
        c:  (N, H)    context
    """

    def __init__(self):
        self.params, self.grads = {}, {}
        self.attention_weight_layer = RepeatAttentionWeight()
        self.weight_sum_layer = RepeatWeightSum()
        self.attention_weight = None  # (N, T) after forward

    def forward(self, hs, h):
        a = self.attention_weight_layer.forward(hs, h)
        c = self.weight_sum_layer.forward(hs, a)
        self.attention_weight = a
        return c

    def backward(self, dc):
        dhs0, da = self.weight_sum_layer.backward(dc)
        dhs1, dh = self.attention_weight_layer.backward(da)
        dhs = dhs0 + dhs1
        return dhs, dh


class RepeatTimeAttention:
    """Attention for every decoder step, one ``RepeatAttention`` per step in a Python loop.

    context[:, t] = sum_s softmax_s(encoder_states[:, s] . decoder_states[:, t]) encoder_states[:, s]

    Shapes:
        encoder_states:    (N, T_enc, H)
        decoder_states:    (N, T_dec, H)
        context:           (N, T_dec, H)
        attention_weights: (N, T_dec, T_enc), set by forward
    """

    def __init__(self):
        self.params, self.grads = {}, {}
        self.layers = None
        self.attention_weights = None

    def forward(self, encoder_states, decoder_states):
        """Return the context of every decoder step, shape (N, T_dec, H)."""
        _check_shape("encoder_states", encoder_states, (None, None, None))
        N, T_enc, H = encoder_states.shape
        _check_shape("decoder_states", decoder_states, (N, None, H))
        T_dec = decoder_states.shape[1]
        dtype = np.result_type(encoder_states, decoder_states)

        context = np.empty((N, T_dec, H), dtype=dtype)
        self.attention_weights = np.empty((N, T_dec, T_enc), dtype=dtype)
        self.layers = []
        for t in range(T_dec):
            layer = RepeatAttention()
            context[:, t, :] = layer.forward(encoder_states, decoder_states[:, t, :])
            self.attention_weights[:, t, :] = layer.attention_weight
            self.layers.append(layer)
        return context

    def backward(self, d_context):
        """Return (d_encoder_states, d_decoder_states) for the upstream gradient d_context."""
        if self.layers is None:
            raise RuntimeError("backward called before forward")
        N, T_dec, T_enc = self.attention_weights.shape
        _check_shape("d_context", d_context, (N, T_dec, None))
        H = d_context.shape[2]

        d_encoder_states = np.zeros((N, T_enc, H), dtype=d_context.dtype)
        d_decoder_states = np.empty((N, T_dec, H), dtype=d_context.dtype)
        for t, layer in enumerate(self.layers):
            d_hs, d_h = layer.backward(d_context[:, t, :])
            # Every step read the same encoder states, so their gradients add up.
            d_encoder_states += d_hs
            d_decoder_states[:, t, :] = d_h
        return d_encoder_states, d_decoder_states
