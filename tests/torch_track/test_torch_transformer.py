"""Tests for attention_course/torch_track/transformer.py: parity with the NumPy track and with torch.nn's own
MultiheadAttention, LayerNorm and Transformer layers; the fast (SDPA) and the step-by-step paths agree."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.core.configs import TransformerConfig
from attention_course.numpy_track import transformer as numpy_transformer
from attention_course.torch_track import transformer as torch_transformer

N, T, d, heads = 2, 5, 8, 2


def config(**changes) -> TransformerConfig:
    values = dict(source_vocab_size=7, target_vocab_size=6, d_model=d, num_heads=heads, num_layers=2,
                  feedforward_size=12, dtype="float64")
    return TransformerConfig(**{**values, **changes})


def twins(parity, rng, name, *args):
    numpy_layer = getattr(numpy_transformer, name)(*args)
    return numpy_layer, parity.copied(numpy_layer, getattr(torch_transformer, name)(*args), rng)


def compare(parity, numpy_layer, module, inputs: dict, rng, numpy_kwargs=None, torch_kwargs=None):
    """Output, input gradients and parameter gradients for a random upstream gradient."""
    out = numpy_layer.forward(**inputs, **(numpy_kwargs or {}))
    dout = rng.standard_normal(out.shape)
    grads = numpy_layer.backward(dout)
    grads = grads if isinstance(grads, tuple) else (grads,)
    tensors = {name: parity.as_torch(value, requires_grad=True) for name, value in inputs.items()}
    out_t = module(*tensors.values(), **(torch_kwargs or {}))
    (out_t * parity.as_torch(dout)).sum().backward()
    parity.assert_close("output", out_t, out)
    for (name, tensor), grad in zip(tensors.items(), grads, strict=True):
        parity.assert_close(f"gradient of {name}", tensor.grad, grad)
    parity.assert_parameter_grads(numpy_layer, module)


def mask(lengths, steps):
    return np.arange(steps)[None, :] < np.asarray(lengths)[:, None]


def test_layer_norm_parity(parity, rng):
    numpy_layer, module = twins(parity, rng, "LayerNorm", d)
    compare(parity, numpy_layer, module, {"x": rng.standard_normal((N, T, d)) * 2}, rng)
    reference = torch.nn.LayerNorm(d, dtype=torch.float64)
    with torch.no_grad():
        reference.weight.copy_(module.gamma)
        reference.bias.copy_(module.beta)
    x = torch.randn(N, T, d, dtype=torch.float64)
    torch.testing.assert_close(module(x), reference(x))


def test_positional_encoding_matches(parity):
    table = torch_transformer.positional_encoding(40, 9, like=torch.zeros(1, dtype=torch.float64))
    parity.assert_close("PE", table, numpy_transformer.positional_encoding(40, 9))


def test_feed_forward_parity(parity, rng):
    numpy_layer, module = twins(parity, rng, "FeedForward", d, 12)
    compare(parity, numpy_layer, module, {"x": rng.standard_normal((N, T, d))}, rng)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_parity(parity, rng, causal, need_weights):
    numpy_layer, module = twins(parity, rng, "MultiHeadAttention", d, heads)
    key_mask = mask([T, 3], T)
    compare(parity, numpy_layer, module, {"query": rng.standard_normal((N, T, d))}, rng,
            {"key_mask": key_mask, "causal": causal},
            {"key_mask": parity.as_torch(key_mask), "causal": causal, "need_weights": need_weights})
    if need_weights:
        parity.assert_close("weights", module.attention_weights, numpy_layer.attention_weights)
    else:
        assert module.attention_weights is None  # the fused kernel keeps none


def test_cross_attention_parity(parity, rng):
    numpy_layer, module = twins(parity, rng, "MultiHeadAttention", d, heads)
    key_mask = mask([T, 2], T)
    compare(parity, numpy_layer, module, {"query": rng.standard_normal((N, 3, d)),
                                          "source": rng.standard_normal((N, T, d))}, rng,
            {"key_mask": key_mask}, {"key_mask": parity.as_torch(key_mask)})


def nn_multihead(module) -> torch.nn.MultiheadAttention:
    """torch.nn.MultiheadAttention holding the course layer's weights."""
    reference = torch.nn.MultiheadAttention(module.d_model, module.num_heads, batch_first=True,
                                            dtype=module.W_q.dtype)
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([module.W_q, module.W_k, module.W_v], dim=1).T)
        reference.in_proj_bias.copy_(torch.cat([module.b_q, module.b_k, module.b_v]))
        reference.out_proj.weight.copy_(module.W_o.T)
        reference.out_proj.bias.copy_(module.b_o)
    return reference


def test_matches_torch_nn_multihead_attention(parity, rng):
    numpy_layer, module = twins(parity, rng, "MultiHeadAttention", d, heads)
    reference = nn_multihead(module)
    query, source = torch.randn(N, 3, d, dtype=torch.float64), torch.randn(N, T, d, dtype=torch.float64)
    key_mask = torch.from_numpy(mask([T, 2], T))
    ours = module(query, source, key_mask, need_weights=True)
    theirs, weights = reference(query, source, source, key_padding_mask=~key_mask)  # torch: True = leave out
    parity.assert_close("cross-attention", ours, theirs.detach())
    parity.assert_close("head-averaged weights", module.attention_weights.mean(dim=1), weights.detach())
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    x = torch.randn(N, T, d, dtype=torch.float64)
    parity.assert_close("causal self-attention", module(x, causal=True),
                        reference(x, x, x, attn_mask=causal)[0].detach())


def test_a_source_with_no_real_token_gives_zeros_not_nan(rng):
    module = torch_transformer.MultiHeadAttention(d, heads, rng=0).double()
    query, source = torch.randn(N, 3, d, dtype=torch.float64), torch.randn(N, T, d, dtype=torch.float64)
    key_mask = torch.from_numpy(mask([T, 0], T))
    for need_weights in (False, True):
        out = module(query, source, key_mask, need_weights=need_weights)
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out[1], module.b_o.expand(3, d))  # no context: only the output bias


@pytest.mark.parametrize("norm_first", [True, False])
def test_encoder_and_decoder_layer_parity(parity, rng, norm_first):
    c = config(norm_first=norm_first)
    numpy_layer, module = twins(parity, rng, "TransformerEncoderLayer", c)
    key_mask = mask([T, 3], T)
    compare(parity, numpy_layer, module, {"x": rng.standard_normal((N, T, d))}, rng, {"mask": key_mask},
            {"mask": parity.as_torch(key_mask)})
    numpy_layer, module = twins(parity, rng, "TransformerDecoderLayer", c)
    compare(parity, numpy_layer, module, {"y": rng.standard_normal((N, 3, d)),
                                          "encoder_states": rng.standard_normal((N, T, d))}, rng,
            {"source_mask": key_mask}, {"source_mask": parity.as_torch(key_mask)})


def copy_into_nn(module, reference) -> None:
    """The course's layer's weights into torch.nn.TransformerEncoderLayer / DecoderLayer."""
    with torch.no_grad():
        pairs = [(module.self_attention, reference.self_attn)]
        if hasattr(reference, "multihead_attn"):
            pairs.append((module.cross_attention, reference.multihead_attn))
        for ours, theirs in pairs:
            theirs.load_state_dict(nn_multihead(ours).state_dict())
        reference.linear1.weight.copy_(module.feed_forward.expand.W.T)
        reference.linear1.bias.copy_(module.feed_forward.expand.b)
        reference.linear2.weight.copy_(module.feed_forward.contract.W.T)
        reference.linear2.bias.copy_(module.feed_forward.contract.b)
        for index in (1, 2, 3):
            if hasattr(reference, f"norm{index}"):
                getattr(reference, f"norm{index}").weight.copy_(getattr(module, f"norm_{index}").gamma)
                getattr(reference, f"norm{index}").bias.copy_(getattr(module, f"norm_{index}").beta)


@pytest.mark.parametrize("norm_first", [True, False])
def test_layers_match_torch_nn_transformer_layers(parity, rng, norm_first):
    c = config(norm_first=norm_first)
    options = dict(dim_feedforward=12, dropout=0.0, batch_first=True, norm_first=norm_first, dtype=torch.float64)
    _, encoder_layer = twins(parity, rng, "TransformerEncoderLayer", c)
    reference = torch.nn.TransformerEncoderLayer(d, heads, **options).eval()
    copy_into_nn(encoder_layer, reference)
    x = torch.randn(N, T, d, dtype=torch.float64)
    key_mask = torch.from_numpy(mask([T, 3], T))
    parity.assert_close("encoder layer", encoder_layer(x, key_mask)[0], reference(x, src_key_padding_mask=~key_mask)[0])
    _, decoder_layer = twins(parity, rng, "TransformerDecoderLayer", c)
    reference = torch.nn.TransformerDecoderLayer(d, heads, **options).eval()
    copy_into_nn(decoder_layer, reference)
    y = torch.randn(N, 4, d, dtype=torch.float64)
    causal = torch.ones(4, 4, dtype=torch.bool).triu(1)
    parity.assert_close("decoder layer", decoder_layer(y, x, key_mask),
                        reference(y, x, tgt_mask=causal, memory_key_padding_mask=~key_mask))


def batch(rng):
    return {"source": rng.integers(0, 7, (N, T)), "source_mask": mask([T, 3], T),
            "decoder_input": rng.integers(0, 6, (N, 4)), "decoder_target": rng.integers(0, 6, (N, 4)),
            "target_mask": mask([4, 2], 4)}


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("training", [True, False])
def test_model_parity(parity, rng, norm_first, training):
    numpy_model = numpy_transformer.TransformerSeq2seq(config(norm_first=norm_first), rng=0)
    module = torch_transformer.TransformerSeq2seq(config(norm_first=norm_first), rng=0)
    parity.assert_same_parameters(numpy_model, module)  # the same initial weights for a seed
    module = parity.copied(numpy_model, module, rng).train(training)
    parity.model_parity(numpy_model, module, batch(rng))


def test_greedy_decoding_parity(parity, rng):
    numpy_model = numpy_transformer.TransformerSeq2seq(config(), rng=0)
    module = parity.copied(numpy_model, torch_transformer.TransformerSeq2seq(config(), rng=0), rng).eval()
    data = batch(rng)
    ids, alignment = numpy_model.generate(data["source"], data["source_mask"], 1, 6, 2)
    ids_t, alignment_t = module.generate(parity.as_torch(data["source"]), parity.as_torch(data["source_mask"]), 1, 6, 2)
    np.testing.assert_array_equal(ids_t.numpy(), ids)
    parity.assert_close("alignment", alignment_t, alignment)
    for use_cache in (True, False):
        _, maps = module.generate(parity.as_torch(data["source"]), parity.as_torch(data["source_mask"]), 1, 6, 2,
                                  all_weights=True, use_cache=use_cache)
        _, numpy_maps = numpy_model.generate(data["source"], data["source_mask"], 1, 6, 2, all_weights=True,
                                             use_cache=use_cache)
        for name, value in numpy_maps.items():
            parity.assert_close(f"{name} weights (cache: {use_cache})", maps[name], value)


def test_causal_decoder_never_sees_the_future(rng):
    module = torch_transformer.TransformerSeq2seq(config(), rng=0).double().eval()
    data = {name: torch.from_numpy(value) for name, value in batch(rng).items()}
    states = module.encoder(data["source"], data["source_mask"])
    logits = module.decoder(data["decoder_input"], states, data["source_mask"])
    changed = data["decoder_input"].clone()
    changed[:, 3] = (changed[:, 3] + 1) % 6
    perturbed = module.decoder(changed, states, data["source_mask"])
    torch.testing.assert_close(perturbed[:, :3], logits[:, :3], rtol=0, atol=0)
    assert not torch.allclose(perturbed[:, 3], logits[:, 3])


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2 ** 16), num_layers=st.integers(1, 3), num_heads=st.sampled_from([1, 2, 4]),
       norm_first=st.booleans(), steps=st.integers(1, 9), stop=st.sampled_from([None, 2]),
       lengths=st.lists(st.integers(0, 6), min_size=1, max_size=4))
def test_cached_decoding_writes_exactly_the_uncached_tokens(seed, num_layers, num_heads, norm_first, steps, stop,
                                                            lengths):
    """The torch track's key/value cache: the same tokens as the decoder run over the whole prefix at every
    step, the same weights, for any model, padding and stopping rule."""
    torch.manual_seed(seed)
    module = torch_transformer.TransformerSeq2seq(
        config(num_layers=num_layers, num_heads=num_heads, norm_first=norm_first), rng=seed).eval()
    with torch.no_grad():
        for name, value in module.named_parameters():
            value.uniform_(-1.0, 1.0)
            if name.endswith("gamma"):
                value.add_(1.0)
    rng = np.random.default_rng(seed)
    source = torch.from_numpy(rng.integers(0, 7, (len(lengths), 6)))
    source_mask = torch.from_numpy(mask(lengths, 6))
    ids, maps = module.generate(source, source_mask, 1, steps, stop, all_weights=True)
    ids_uncached, maps_uncached = module.generate(source, source_mask, 1, steps, stop, all_weights=True,
                                                  use_cache=False)
    torch.testing.assert_close(ids, ids_uncached, rtol=0, atol=0)
    for name in maps:
        torch.testing.assert_close(maps[name], maps_uncached[name], rtol=1e-9, atol=1e-12, msg=name)
