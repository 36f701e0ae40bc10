"""The benchmark baselines compute what they claim to.

The baselines live in ``benchmarks/baselines/``, outside the package, so they are loaded
from their file paths rather than imported.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

BASELINES = Path(__file__).resolve().parents[2] / "benchmarks" / "baselines"


def load_baseline(name):
    """Import ``benchmarks/baselines/<name>.py`` as a module, without touching sys.path."""
    spec = importlib.util.spec_from_file_location(f"baselines_{name}", BASELINES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- repeat_attention -------------------------------------------------------------------


@pytest.fixture(scope="module")
def repeat_attention():
    return load_baseline("repeat_attention")


def test_repeat_time_attention_matches_torch_autograd(repeat_attention):
    N, T_enc, T_dec, H = 3, 5, 4, 6
    rng = np.random.default_rng(0)
    encoder_states = rng.standard_normal((N, T_enc, H))
    decoder_states = rng.standard_normal((N, T_dec, H))
    d_context = rng.standard_normal((N, T_dec, H))

    layer = repeat_attention.RepeatTimeAttention()
    context = layer.forward(encoder_states, decoder_states)
    d_encoder_states, d_decoder_states = layer.backward(d_context)

    enc = torch.tensor(encoder_states, requires_grad=True)
    dec = torch.tensor(decoder_states, requires_grad=True)
    weights = torch.softmax(dec @ enc.transpose(1, 2), dim=-1)  # (N, T_dec, T_enc)
    expected_context = weights @ enc
    expected_context.backward(torch.tensor(d_context))

    assert context.dtype == np.float64
    np.testing.assert_allclose(context, expected_context.detach().numpy(), rtol=0, atol=1e-10)
    np.testing.assert_allclose(
        layer.attention_weights, weights.detach().numpy(), rtol=0, atol=1e-10
    )
    np.testing.assert_allclose(d_encoder_states, enc.grad.numpy(), rtol=0, atol=1e-10,
                               err_msg="d_encoder_states")
    np.testing.assert_allclose(d_decoder_states, dec.grad.numpy(), rtol=0, atol=1e-10,
                               err_msg="d_decoder_states")


def test_repeat_time_attention_follows_input_dtype(repeat_attention):
    rng = np.random.default_rng(1)
    encoder_states = rng.standard_normal((2, 3, 4)).astype(np.float32)
    decoder_states = rng.standard_normal((2, 5, 4)).astype(np.float32)
    layer = repeat_attention.RepeatTimeAttention()
    context = layer.forward(encoder_states, decoder_states)
    d_encoder_states, d_decoder_states = layer.backward(np.ones_like(context))
    assert context.dtype == np.float32
    assert d_encoder_states.dtype == np.float32 and d_decoder_states.dtype == np.float32


def test_repeat_time_attention_rejects_mismatched_widths(repeat_attention):
    layer = repeat_attention.RepeatTimeAttention()
    with pytest.raises(ValueError, match="decoder_states"):
        layer.forward(np.zeros((2, 3, 4)), np.zeros((2, 5, 6)))


# --- plain_torch_seq2seq ----------------------------------------------------------------


@pytest.fixture(scope="module")
def seq2seq():
    return load_baseline("plain_torch_seq2seq")


@pytest.fixture(scope="module")
def dates():
    from attention_course.data import build_vocabularies, encode_pairs, generate_dates

    train, test = generate_dates(256, 32, seed=0)
    src_vocab, tgt_vocab = build_vocabularies(train + test)
    return train, test, src_vocab, tgt_vocab, encode_pairs(train, src_vocab, tgt_vocab)


def tiny_model(seq2seq, src_vocab, tgt_vocab, seed=0):
    torch.manual_seed(seed)
    config = seq2seq.PlainSeq2SeqConfig(embedding_dim=8, encoder_hidden=16, decoder_hidden=16,
                                        attention_dim=16, lr=1e-2)
    return seq2seq.PlainSeq2Seq(len(src_vocab), len(tgt_vocab), config, pad_id=tgt_vocab.pad_id)


def mean_loss(seq2seq, model, tensors, pad_id):
    with torch.no_grad():
        logits = model(tensors["source"], tensors["source_mask"], tensors["decoder_input"])
        return torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), tensors["decoder_target"].flatten(), ignore_index=pad_id
        ).item()


def test_plain_torch_seq2seq_loss_goes_down(seq2seq, dates):
    from attention_course.data import iterate_batches

    _, _, src_vocab, tgt_vocab, train_batch = dates
    model = tiny_model(seq2seq, src_vocab, tgt_vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=model.config.lr)
    everything = seq2seq.to_tensors(train_batch)
    before = mean_loss(seq2seq, model, everything, tgt_vocab.pad_id)

    rng = np.random.default_rng(0)
    steps = 0
    while steps < 30:
        for indices in iterate_batches(len(train_batch), 64, rng):
            seq2seq.train_step(model, optimizer, seq2seq.to_tensors(train_batch.subset(indices)),
                               tgt_vocab.pad_id, model.config.clip_norm)
            steps += 1
            if steps == 30:
                break
    after = mean_loss(seq2seq, model, everything, tgt_vocab.pad_id)

    assert after < 0.75 * before, f"loss went from {before:.3f} to {after:.3f} in 30 steps"


def test_plain_torch_seq2seq_ignores_source_padding(seq2seq, dates):
    _, _, src_vocab, tgt_vocab, train_batch = dates
    model = tiny_model(seq2seq, src_vocab, tgt_vocab).eval()
    tensors = seq2seq.to_tensors(train_batch.subset(np.arange(16)))
    source, source_mask = tensors["source"], tensors["source_mask"]
    N, T_enc = source.shape
    extra = 7
    padded_source = torch.cat(
        [source, torch.full((N, extra), src_vocab.pad_id, dtype=source.dtype)], dim=1
    )  # (N, T_enc + extra)
    padded_mask = torch.cat([source_mask, torch.zeros((N, extra), dtype=torch.bool)], dim=1)

    with torch.no_grad():
        logits = model(source, source_mask, tensors["decoder_input"])
        padded_logits = model(padded_source, padded_mask, tensors["decoder_input"])
        # Attending to the padding as if it were real must change the output, or the check
        # above could not fail.
        attention = model.attention
        encoder_states, keys, state = model.encode(padded_source, padded_mask)
        _, masked_weights = attention(state, keys, encoder_states, padded_mask)
        _, unmasked_weights = attention(state, keys, encoder_states,
                                        torch.ones_like(padded_mask))

    assert padded_logits.shape == logits.shape
    torch.testing.assert_close(padded_logits, logits, rtol=0, atol=1e-6)
    assert torch.all(masked_weights[~padded_mask] == 0)
    assert not torch.allclose(masked_weights, unmasked_weights, atol=1e-3)


def test_train_plain_torch_reports_its_run(seq2seq, dates):
    train, test, *_ = dates
    lines = []
    result = seq2seq.train_plain_torch(
        train[:64], test, seed=0, target_accuracy=1.0, max_steps=3, eval_every=2,
        batch_size=32, config=seq2seq.PlainSeq2SeqConfig(embedding_dim=8, encoder_hidden=8,
                                                         decoder_hidden=8, attention_dim=8),
        log=lines.append,
    )
    assert result["steps"] == 3
    assert result["reached"] is False
    assert 0.0 <= result["test_exact_match"] <= 1.0
    assert result["train_seconds"] > 0
    assert len(lines) == 2, "evaluates at step 2 and once more when it stops at step 3"
