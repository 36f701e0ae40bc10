"""Tests for attention_course/numpy_track/transformer.py: every layer's gradients, the masks, the model."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.core.configs import TransformerConfig
from attention_course.numpy_track.transformer import (FeedForward, LayerNorm, MultiHeadAttention, PositionalEncoding,
                                                      TransformerDecoderLayer, TransformerEncoder,
                                                      TransformerEncoderLayer, TransformerSeq2seq, attention_mask,
                                                      positional_encoding)
from attention_course.testing import ShapeError, check_layer_gradients

HYPOTHESIS = settings(max_examples=20, deadline=None)
N, T, d, heads = 2, 5, 8, 2


def config(**changes) -> TransformerConfig:
    values = dict(source_vocab_size=7, target_vocab_size=6, d_model=d, num_heads=heads, num_layers=2,
                  feedforward_size=12, dtype="float64")
    return TransformerConfig(**{**values, **changes})


def randomized(layer, rng, scale=0.5):
    """Every parameter drawn at random (LayerNorm's gamma and beta included, which start at 1 and 0)."""
    for _, value, _ in layer.named_parameters():
        value[...] = rng.uniform(-scale, scale, value.shape) + (1 if value.ndim == 1 and value.all() else 0)
    return layer


# --- layer normalisation, positions, feed-forward ---------------------------------------------


def test_layer_norm_values_and_gradients(rng):
    layer = randomized(LayerNorm(d), rng)
    x = rng.standard_normal((N, T, d)) * 3 + 1
    y = layer.forward(x)
    normalised = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, normalised * layer.params["gamma"] + layer.params["beta"], rtol=1e-12)
    check_layer_gradients(layer, {"x": x})


def test_positional_encoding_values():
    table = positional_encoding(50, 7)
    t = np.arange(50)
    np.testing.assert_allclose(table[:, 0], np.sin(t))
    np.testing.assert_allclose(table[:, 1], np.cos(t))
    np.testing.assert_allclose(table[:, 4], np.sin(t / 10000 ** (4 / 7)))
    np.testing.assert_allclose(table[:, 5], np.cos(t / 10000 ** (4 / 7)))
    assert table.shape == (50, 7) and len({row.tobytes() for row in table}) == 50  # every position its own code


def test_positional_encoding_layer_gradients(rng):
    layer = PositionalEncoding(d)
    x = rng.standard_normal((N, T, d))
    np.testing.assert_allclose(layer.forward(x), x * np.sqrt(d) + positional_encoding(T, d))
    check_layer_gradients(layer, {"x": x})
    assert layer.forward(x.astype(np.float32)).dtype == np.float32


def test_feed_forward_gradients(rng):
    layer = randomized(FeedForward(d, 12, rng=0), rng)
    check_layer_gradients(layer, {"x": rng.standard_normal((N, T, d))})


# --- multi-head attention ---------------------------------------------------------------------


def lengths_mask(lengths, steps):
    return np.arange(steps)[None, :] < np.asarray(lengths)[:, None]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_self_attention_gradients(rng, causal, masked):
    layer = randomized(MultiHeadAttention(d, heads, rng=0), rng)
    mask = lengths_mask([T, 3], T) if masked else None
    check_layer_gradients(layer, {"query": rng.standard_normal((N, T, d))},
                          forward_kwargs={"key_mask": mask, "causal": causal})


def test_cross_attention_gradients(rng):
    layer = randomized(MultiHeadAttention(d, heads, rng=0), rng)
    check_layer_gradients(layer, {"query": rng.standard_normal((N, 3, d)), "source": rng.standard_normal((N, T, d))},
                          forward_kwargs={"key_mask": lengths_mask([T, 2], T)})


def test_multi_head_attention_is_h_attentions_side_by_side(rng):
    layer = randomized(MultiHeadAttention(d, heads, rng=0), rng)
    query, source = rng.standard_normal((N, 3, d)), rng.standard_normal((N, T, d))
    out = layer.forward(query, source)
    p = layer.params
    Q, K, V = query @ p["W_q"] + p["b_q"], source @ p["W_k"] + p["b_k"], source @ p["W_v"] + p["b_v"]
    d_k = d // heads
    joined = []
    for m in range(heads):
        part = slice(m * d_k, (m + 1) * d_k)
        scores = Q[..., part] @ K[..., part].transpose(0, 2, 1) / np.sqrt(d_k)
        weights = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
        np.testing.assert_allclose(layer.attention_weights[:, m], weights, rtol=1e-12)
        joined.append(weights @ V[..., part])
    np.testing.assert_allclose(out, np.concatenate(joined, -1) @ p["W_o"] + p["b_o"], rtol=1e-12)


def test_padding_gets_no_weight_and_changes_nothing(rng):
    layer = randomized(MultiHeadAttention(d, heads, rng=0), rng)
    query, source = rng.standard_normal((N, 3, d)), rng.standard_normal((N, T, d))
    mask = lengths_mask([T, 2], T)
    out = layer.forward(query, source, mask)
    weights = layer.attention_weights
    np.testing.assert_array_equal(weights[1, :, :, 2:], 0)
    np.testing.assert_allclose(weights.sum(-1), 1.0)
    junk = source.copy()
    junk[1, 2:] = 1e3 * rng.standard_normal((T - 2, d))
    np.testing.assert_allclose(layer.forward(query, junk, mask), out, rtol=1e-12)


@HYPOTHESIS
@given(seed=st.integers(0, 2 ** 16), steps=st.integers(2, 7), later=st.integers(0, 6))
def test_causal_attention_never_sees_the_future(seed, steps, later):
    """Perturbing input t changes no output before t."""
    later = later % steps
    rng = np.random.default_rng(seed)
    layer = randomized(MultiHeadAttention(d, heads, rng=0), rng)
    x = rng.standard_normal((1, steps, d))
    out = layer.forward(x, causal=True)
    np.testing.assert_array_equal(np.triu(layer.attention_weights[0, 0], k=1), 0)
    changed = x.copy()
    changed[0, later] += rng.standard_normal(d)
    perturbed = layer.forward(changed, causal=True)
    np.testing.assert_array_equal(perturbed[0, :later], out[0, :later])
    assert not np.allclose(perturbed[0, later], out[0, later])


def test_attention_mask():
    mask = attention_mask(lengths_mask([3, 1], 3), 2, 3, causal=True)
    assert mask.shape == (2, 1, 2, 3)
    np.testing.assert_array_equal(mask[0, 0], [[True, True, False], [True, True, True]])
    np.testing.assert_array_equal(mask[1, 0], [[True, False, False], [True, False, False]])
    assert attention_mask(None, 2, 2, causal=False) is None


def test_bad_shapes_name_the_argument(rng):
    layer = MultiHeadAttention(d, heads, rng=0)
    with pytest.raises(ShapeError, match=r"query: expected shape \(N, T_q, 8\), got \(2, 5, 6\)"):
        layer.forward(rng.standard_normal((N, T, 6)))
    with pytest.raises(ShapeError, match=r"key_mask: expected shape \(2, 4\)"):
        layer.forward(rng.standard_normal((N, T, d)), rng.standard_normal((N, 4, d)), np.ones((N, T), dtype=bool))
    with pytest.raises(ValueError, match="d_model must be a multiple of num_heads, got 8 and 3"):
        MultiHeadAttention(8, 3)
    with pytest.raises(ValueError, match="d_model must be a multiple of num_heads"):
        TransformerConfig(5, 5, d_model=10, num_heads=4)


# --- the layers and the model -----------------------------------------------------------------


@pytest.mark.parametrize("norm_first", [True, False])
def test_encoder_layer_gradients(rng, norm_first):
    layer = randomized(TransformerEncoderLayer(config(norm_first=norm_first), rng=0), rng)
    check_layer_gradients(layer, {"x": rng.standard_normal((N, T, d))},
                          forward_kwargs={"mask": lengths_mask([T, 3], T)})


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_layer_gradients(rng, norm_first):
    layer = randomized(TransformerDecoderLayer(config(norm_first=norm_first), rng=0), rng)
    check_layer_gradients(layer, {"y": rng.standard_normal((N, 3, d)),
                                  "encoder_states": rng.standard_normal((N, T, d))},
                          forward_kwargs={"source_mask": lengths_mask([T, 2], T)})


def batch(rng):
    return {"source": rng.integers(0, 7, (N, T)), "source_mask": lengths_mask([T, 3], T),
            "decoder_input": rng.integers(0, 6, (N, 4)), "decoder_target": rng.integers(0, 6, (N, 4)),
            "target_mask": lengths_mask([4, 2], 4)}


@pytest.mark.parametrize("norm_first", [True, False])
def test_model_parameter_gradients(rng, norm_first):
    model = randomized(TransformerSeq2seq(config(norm_first=norm_first, num_layers=1), rng=0), rng)
    data = batch(rng)

    class Loss:  # the model's loss as a layer of its parameters alone
        def __init__(self):
            self.named_parameters = model.named_parameters

        def forward(self):
            return np.asarray(model.forward(**data))

        def backward(self, dout):
            model.backward(float(dout))
            return ()

    check_layer_gradients(Loss(), {})


def test_encoder_padding_changes_nothing(rng):
    encoder = randomized(TransformerEncoder(config(), rng=0), rng)
    source = rng.integers(0, 7, (1, 4))
    states = encoder.forward(source, np.ones((1, 4), dtype=bool))
    padded = np.concatenate([source, rng.integers(0, 7, (1, 3))], axis=1)
    np.testing.assert_allclose(encoder.forward(padded, lengths_mask([4], 7))[:, :4], states, rtol=1e-10)


def test_decoder_is_causal(rng):
    model = randomized(TransformerSeq2seq(config(), rng=0), rng)
    data = batch(rng)
    encoder_states = model.encoder.forward(data["source"], data["source_mask"])
    logits = model.decoder.forward(data["decoder_input"], encoder_states, data["source_mask"])
    changed = data["decoder_input"].copy()
    changed[:, 2] = (changed[:, 2] + 1) % 6
    perturbed = model.decoder.forward(changed, encoder_states, data["source_mask"])
    np.testing.assert_array_equal(perturbed[:, :2], logits[:, :2])
    assert not np.allclose(perturbed[:, 2:], logits[:, 2:])


def test_greedy_decoding_and_every_weight(rng):
    model = randomized(TransformerSeq2seq(config(), rng=0), rng, scale=1.0)
    data = batch(rng)
    ids, alignment = model.generate(data["source"], data["source_mask"], 1, 6)
    assert ids.shape == (N, 6) and alignment.shape == (N, 6, T)
    np.testing.assert_allclose(alignment.sum(-1), 1.0)
    np.testing.assert_array_equal(alignment[1, :, 3:], 0)  # the second source has 3 real tokens
    # teacher forcing on its own output gives back the same choices
    forced = np.concatenate([np.ones((N, 1), dtype=np.int64), ids[:, :-1]], axis=1)
    logits = model.decoder.forward(forced, model.encoder.forward(data["source"], data["source_mask"]),
                                   data["source_mask"])
    np.testing.assert_array_equal(logits.argmax(-1), ids)
    ids_again, maps = model.generate(data["source"], data["source_mask"], 1, 6, all_weights=True)
    np.testing.assert_array_equal(ids_again, ids)
    assert maps["encoder"].shape == (2, N, heads, T, T)
    assert maps["decoder"].shape == (2, N, heads, 6, 6) and maps["cross"].shape == (2, N, heads, 6, T)
    np.testing.assert_allclose(maps["cross"][-1].mean(axis=1), alignment)
    np.testing.assert_array_equal(np.triu(maps["decoder"], k=1), 0)


def test_parameter_names_and_dtype(rng):
    model = TransformerSeq2seq(config(num_layers=1, dtype="float32"), rng=0)
    names = {name for name, _, _ in model.named_parameters()}
    assert "encoder.layers.0.self_attention.W_q" in names and "decoder.layers.0.cross_attention.b_o" in names
    assert "encoder.norm.gamma" in names and "decoder.out.W" in names
    assert "encoder.norm.gamma" not in {n for n, _, _ in TransformerSeq2seq(config(norm_first=False)).named_parameters()}
    data = batch(rng)
    loss = model.forward(**data)
    model.backward()
    assert np.isfinite(loss) and model.decoder.out.grads["W"].dtype == np.float32


def test_the_track_builds_the_transformer_and_its_checkpoint_loads(tmp_path, rng):
    from attention_course.checkpoint import load_checkpoint, save_checkpoint
    from attention_course.core.configs import Seq2seqConfig, model_config
    from attention_course.data import build_vocabularies
    from attention_course.tracks import get_track

    track = get_track("numpy")
    model = track.build_model("transformer", config(dtype="float32"), seed=3)
    again = track.build_model("transformer", config(dtype="float32"), seed=3)
    assert all(np.array_equal(a, b) for (_, a, _), (_, b, _) in zip(model.named_parameters(),
                                                                    again.named_parameters()))
    with pytest.raises(ValueError, match="model 'transformer': expected a TransformerConfig, got a Seq2seqConfig"):
        track.build_model("transformer", Seq2seqConfig(7, 6))
    assert model_config("transformer", config().to_dict()) == config()
    assert isinstance(model_config("attention", Seq2seqConfig(7, 6).to_dict()), Seq2seqConfig)
    source_vocab, target_vocab = build_vocabularies([("abc", "xy")])
    c = TransformerConfig(len(source_vocab), len(target_vocab), d_model=8, num_heads=2, num_layers=1)
    model = track.build_model("transformer", c, seed=1)
    save_checkpoint(tmp_path, "transformer", c, track.weights(model), source_vocab, target_vocab, 4)
    loaded, _, _, description = load_checkpoint(tmp_path, "numpy")
    assert isinstance(loaded, TransformerSeq2seq) and description["config"]["d_model"] == 8
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(loaded.state_dict()[name], value)


# --- greedy decoding with a key/value cache ---------------------------------------------------


@HYPOTHESIS
@given(seed=st.integers(0, 2 ** 16), num_layers=st.integers(1, 3), num_heads=st.sampled_from([1, 2, 4]),
       norm_first=st.booleans(), steps=st.integers(1, 9), stop=st.sampled_from([None, 2]),
       lengths=st.lists(st.integers(0, 6), min_size=1, max_size=4))
def test_cached_decoding_writes_exactly_the_uncached_tokens(seed, num_layers, num_heads, norm_first, steps, stop,
                                                            lengths):
    """Decoding one token at a time from a key/value cache chooses the same tokens as running the decoder
    over the whole prefix at every step, with the same weights, for any model, padding (a source of no
    real token included) and stopping rule."""
    rng = np.random.default_rng(seed)
    model = randomized(TransformerSeq2seq(config(num_layers=num_layers, num_heads=num_heads, norm_first=norm_first),
                                          rng=seed), rng, scale=1.0)
    source = rng.integers(0, 7, (len(lengths), 6))
    mask = lengths_mask(lengths, 6)
    ids, maps = model.generate(source, mask, 1, steps, stop, all_weights=True)
    ids_uncached, maps_uncached = model.generate(source, mask, 1, steps, stop, all_weights=True, use_cache=False)
    np.testing.assert_array_equal(ids, ids_uncached)
    assert maps.keys() == maps_uncached.keys()
    for name in maps:
        np.testing.assert_allclose(maps[name], maps_uncached[name], rtol=1e-9, atol=1e-12, err_msg=name)


def test_cached_decoding_runs_each_position_through_the_decoder_once(rng, monkeypatch):
    """With the cache every step embeds one new token and the full decoder pass never runs; without it,
    step t embeds all t tokens again."""
    model = randomized(TransformerSeq2seq(config(), rng=0), rng, scale=1.0)
    data = batch(rng)
    widths, embed = [], model.decoder.embed.forward
    monkeypatch.setattr(model.decoder.embed, "forward", lambda ids: widths.append(ids.shape[1]) or embed(ids))
    passes = []
    full_pass = model.decoder.forward
    monkeypatch.setattr(model.decoder, "forward", lambda *args: passes.append(1) or full_pass(*args))
    model.generate(data["source"], data["source_mask"], 1, 6)
    assert widths == [1] * 6 and not passes
    widths.clear()
    model.generate(data["source"], data["source_mask"], 1, 6, use_cache=False)
    assert widths == [1, 2, 3, 4, 5, 6, 6] and len(passes) == 7  # and one pass for the weights


def test_a_decoder_step_is_the_last_row_of_the_full_pass(rng):
    """``TransformerDecoder.step`` on the newest token, after the earlier ones went through the cache, gives
    the logits that the causal full pass gives at that position."""
    model = randomized(TransformerSeq2seq(config(norm_first=False), rng=0), rng, scale=1.0)
    data = batch(rng)
    from attention_course.numpy_track.transformer import KeyValueCache

    states = model.encoder.forward(data["source"], data["source_mask"])
    full = model.decoder.forward(data["decoder_input"], states, data["source_mask"])  # (N, 4, V)
    cache = KeyValueCache(len(model.decoder.layers))
    for t in range(data["decoder_input"].shape[1]):
        logits = model.decoder.step(data["decoder_input"][:, t], states, data["source_mask"], cache)
        np.testing.assert_allclose(logits, full[:, t], rtol=1e-10, atol=1e-12)
    assert cache.length == 4 and cache.layers[0].keys.shape == (N, heads, 4, d // heads)
