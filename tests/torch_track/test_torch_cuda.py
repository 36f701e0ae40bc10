"""The torch track on a CUDA GPU: parity with the NumPy track on cuDNN, and short training runs.

Every test here needs a GPU (``-m cuda`` selects them; without one they are skipped). They use
numpy, torch, pytest and the package only. Parity is in float64, within 1e-10 of the NumPy
track, with masks (rows of different lengths, a fully padded row): the fused recurrent path
runs cuDNN's kernels, and ``TimeAttention`` with ``scaled_dot`` in training mode runs
``F.scaled_dot_product_attention``.
"""

import numpy as np
import pytest
import torch

from attention_course.data import build_vocabularies, encode_pairs, generate_dates
from attention_course.numpy_track import attention as np_attention
from attention_course.numpy_track import recurrent as np_recurrent
from attention_course.numpy_track import seq2seq as np_seq2seq
from attention_course.torch_track import attention as th_attention
from attention_course.torch_track import recurrent as th_recurrent
from attention_course.torch_track import seq2seq as th_seq2seq
from attention_course.torch_track.decoding import greedy_translate
from attention_course.torch_track.functional import (scaled_dot_product_attention,
                                                     scaled_dot_product_attention_reference)
from attention_course.torch_track.trainer import Trainer, resolve_device
from attention_course.training import TrainConfig, exact_match

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() "
                                                                       "is False)")]

DEVICE = "cuda"
N, T, D, H = 3, 5, 3, 4
KINDS = {"rnn": ("RNN", {}), "lstm": ("LSTM", {}), "gru": ("GRU", {"reset_after": False}),
         "gru_reset_after": ("GRU", {"reset_after": True})}


def random_state(kind, rng):
    return (rng.standard_normal((N, H)), rng.standard_normal((N, H))) if kind == "lstm" else rng.standard_normal((N, H))


def test_resolve_device_finds_the_gpu():
    assert resolve_device("cuda").type == "cuda"
    assert resolve_device("cuda:0") == torch.device("cuda:0")


@pytest.mark.parametrize("with_initial_state", [False, True], ids=["zero_state", "initial_state"])
@pytest.mark.parametrize("lengths", [None, [5, 2, 3], [5, 0, 2]], ids=["no_mask", "ragged", "fully_padded_row"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("fused", [True, False], ids=["cudnn", "loop"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_time_layer_parity_on_cuda(parity, rng, kind, fused, reverse, lengths, with_initial_state):
    layer_name, options = KINDS[kind]
    numpy_layer = getattr(np_recurrent, layer_name)(D, H, reverse=reverse, rng=1, **options)
    module = getattr(th_recurrent, layer_name)(D, H, reverse=reverse, fused=fused, **options)
    module = parity.copied(numpy_layer, module, rng, device=DEVICE)
    mask = None if lengths is None else parity.lengths_mask(lengths, T)
    initial = random_state(kind, rng) if with_initial_state else None
    parity.sequence_parity(numpy_layer, module, rng.standard_normal((N, T, D)), mask, initial, rng, device=DEVICE)
    assert all(p.device.type == "cuda" for p in module.parameters())


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru_reset_after"])
def test_cudnn_backward_in_eval_mode(parity, rng, kind):
    """cuDNN keeps what backward needs only when asked: eval mode must not stop autograd."""
    layer_name, options = KINDS[kind]
    numpy_layer = getattr(np_recurrent, layer_name)(D, H, rng=1, **options)
    module = parity.copied(numpy_layer, getattr(th_recurrent, layer_name)(D, H, **options), rng, device=DEVICE)
    module.eval()
    parity.sequence_parity(numpy_layer, module, rng.standard_normal((N, T, D)), parity.lengths_mask([5, 0, 2], T),
                           random_state(kind, rng), rng, device=DEVICE)
    with torch.no_grad():
        assert not module(torch.zeros(N, T, D, dtype=torch.float64, device=DEVICE)).requires_grad


@pytest.mark.parametrize("bidirectional, residual", [(True, True), (False, True)], ids=["bidirectional", "residual"])
@pytest.mark.parametrize("kind", ["lstm", "gru_reset_after", "rnn"])
def test_stacked_parity_on_cuda(parity, rng, kind, bidirectional, residual):
    cell, reset_after = ("gru", True) if kind == "gru_reset_after" else (kind, False)
    options = dict(num_layers=2, bidirectional=bidirectional, residual=residual, reset_after=reset_after, rng=3)
    numpy_layer = np_seq2seq.make_recurrent(cell, D, H, **options)
    module = th_seq2seq.make_recurrent(cell, D, H, **options)
    module = parity.copied(numpy_layer, module, rng, device=DEVICE)
    xs, mask = rng.standard_normal((N, T, D)), parity.lengths_mask([5, 0, 2], T)
    numpy_layer.forward(xs, mask)
    initial = parity.random_like(numpy_layer.final_state, rng)
    parity.sequence_parity(numpy_layer, module, xs, mask, initial, rng, device=DEVICE)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("score", ["dot", "scaled_dot", "general", "additive"])
def test_time_attention_parity_on_cuda(parity, rng, score, need_weights):
    H_enc, H_dec = (4, 4) if score in ("dot", "scaled_dot") else (4, 3)
    numpy_layer = np_attention.TimeAttention(score, H_enc, H_dec, 3, rng=1)
    module = parity.copied(numpy_layer, th_attention.TimeAttention(score, H_enc, H_dec, 3), rng, device=DEVICE)
    encoder_states, decoder_states = rng.standard_normal((N, T, H_enc)), rng.standard_normal((N, 4, H_dec))
    mask = parity.lengths_mask([5, 0, 2], T)
    context = numpy_layer.forward(encoder_states, decoder_states, mask)
    d_context = rng.standard_normal(context.shape)
    d_encoder, d_decoder = numpy_layer.backward(d_context)
    enc_t = parity.as_torch(encoder_states, DEVICE, requires_grad=True)
    dec_t = parity.as_torch(decoder_states, DEVICE, requires_grad=True)
    context_t = module(enc_t, dec_t, parity.as_torch(mask, DEVICE), need_weights=need_weights)
    (context_t * parity.as_torch(d_context, DEVICE)).sum().backward()
    parity.assert_close("context", context_t, context)
    parity.assert_close("d_encoder_states", enc_t.grad, d_encoder)
    parity.assert_close("d_decoder_states", dec_t.grad, d_decoder)
    parity.assert_parameter_grads(numpy_layer, module)


def test_fast_attention_on_cuda_fully_masked_row(rng):
    q, k, v = (torch.tensor(rng.standard_normal((2, 3, T, 8)), device=DEVICE, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[True, True, False, False, False], [False] * 5], device=DEVICE)[:, None, None, :]
    out = scaled_dot_product_attention(q, k, v, mask)
    expected, _ = scaled_dot_product_attention_reference(q, k, v, mask)
    assert torch.allclose(out, expected, atol=1e-12, rtol=0)
    out.sum().backward()
    assert torch.isfinite(q.grad).all() and (q.grad[1] == 0).all() and (out[1] == 0).all()
    for dtype in (torch.float32, torch.bfloat16):  # the flash and memory-efficient kernels
        q16, k16, v16 = (x.detach().to(dtype) for x in (q, k, v))
        out16 = scaled_dot_product_attention(q16, k16, v16, mask)
        assert out16.dtype == dtype and torch.isfinite(out16).all() and (out16[1] == 0).all()
        assert torch.allclose(out16.double(), expected, atol=1e-1 if dtype == torch.bfloat16 else 1e-4)


def config(**overrides):
    options = dict(source_vocab_size=6, target_vocab_size=7, embed_dim=3, hidden_size=3, dtype="float64")
    return np_seq2seq.Seq2seqConfig(**(options | overrides))


MODELS = {
    "gru_bidirectional_general": config(),
    "gru_reset_after_bidirectional_2_residual_scaled_dot": config(reset_after=True, num_layers=2, residual=True,
                                                                  score="scaled_dot"),
    "lstm_bidirectional_2_residual_additive": config(cell="lstm", num_layers=2, residual=True, score="additive"),
    "lstm_scaled_dot": config(cell="lstm", bidirectional=False, score="scaled_dot"),
    "rnn_bidirectional_dot": config(cell="rnn", score="dot"),
}


@pytest.mark.parametrize("training", [True, False], ids=["train_mode", "eval_mode"])
@pytest.mark.parametrize("name", list(MODELS))
def test_attention_seq2seq_parity_on_cuda(parity, rng, name, training):
    numpy_model = np_seq2seq.AttentionSeq2seq(MODELS[name], rng=3)
    module = th_seq2seq.AttentionSeq2seq(MODELS[name], rng=3, fused=True)
    parity.assert_same_parameters(numpy_model, module)
    module = parity.copied(numpy_model, module, rng, device=DEVICE).train(training)
    batch = dict(source=rng.integers(0, 6, (N, T)), source_mask=parity.lengths_mask([5, 2, 0], T),
                 decoder_input=rng.integers(0, 7, (N, 4)), decoder_target=rng.integers(0, 7, (N, 4)),
                 target_mask=parity.lengths_mask([4, 2, 3], 4))
    parity.model_parity(numpy_model, module, batch, device=DEVICE)

    source = np.where(batch["source_mask"], batch["source"], 0)
    mask = parity.lengths_mask([5, 2, 3], T)
    ids, weights = numpy_model.generate(source, mask, 0, 6)
    ids_t, weights_t = module.generate(parity.as_torch(source, DEVICE), parity.as_torch(mask, DEVICE), 0, 6)
    assert ids_t.device.type == "cuda"
    np.testing.assert_array_equal(ids_t.cpu().numpy(), ids)
    parity.assert_close("generated attention weights", weights_t, weights)


def test_seq2seq_parity_on_cuda(parity, rng):
    cfg = config(cell="lstm", bidirectional=False, num_layers=2, residual=True)
    numpy_model = np_seq2seq.Seq2seq(cfg, rng=3)
    module = parity.copied(numpy_model, th_seq2seq.Seq2seq(cfg, rng=3), rng, device=DEVICE)
    batch = dict(source=rng.integers(0, 6, (N, T)), source_mask=parity.lengths_mask([5, 2, 1], T),
                 decoder_input=rng.integers(0, 7, (N, 4)), decoder_target=rng.integers(0, 7, (N, 4)),
                 target_mask=parity.lengths_mask([4, 2, 3], 4))
    parity.model_parity(numpy_model, module, batch, device=DEVICE)


# --- training on the GPU ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def dates():
    train_pairs, test_pairs = generate_dates(2000, 200, seed=0)
    source_vocab, target_vocab = build_vocabularies(train_pairs + test_pairs)
    return (encode_pairs(train_pairs, source_vocab, target_vocab), encode_pairs(test_pairs, source_vocab, target_vocab),
            source_vocab, target_vocab, [target for _, target in test_pairs])


# On the CPU these runs reach a loss of about 0.01 (GRU) and 0.006 (LSTM) by step 300, and 87% /
# 95% exact match: the thresholds leave a wide margin for other kernels' rounding.
@pytest.mark.parametrize("cell, reset_after, amp, loss_below, match_above", [
    ("gru", True, False, 0.1, 0.5),
    ("lstm", False, False, 0.1, 0.5),
    ("gru", False, False, 0.1, 0.5),
    ("lstm", False, True, 0.3, 0.2),
    ("gru", True, True, 0.3, 0.2),
], ids=["gru_reset_after", "lstm", "gru_loop", "lstm_amp", "gru_reset_after_amp"])
def test_short_training_on_cuda(dates, cell, reset_after, amp, loss_below, match_above):
    train, test, source_vocab, target_vocab, targets = dates
    cfg = np_seq2seq.Seq2seqConfig(len(source_vocab), len(target_vocab), embed_dim=16, hidden_size=32, cell=cell,
                                   reset_after=reset_after)
    model = th_seq2seq.AttentionSeq2seq(cfg, rng=0)
    trainer = Trainer(model, TrainConfig(batch_size=64, lr=0.01, max_steps=300, seed=0), device=DEVICE, amp=amp)
    result = trainer.fit(train, progress=False)
    assert all(p.device.type == "cuda" for p in model.parameters())
    assert all(np.isfinite(result.losses)), "the loss stayed finite"
    final_loss = float(np.mean(result.losses[-10:]))
    assert final_loss < loss_below, f"loss {final_loss:.3f} after 300 steps (first {result.losses[0]:.3f})"
    predictions, weights = greedy_translate(model, test, target_vocab)
    assert weights.shape == (len(test), test.decoder_target.shape[1], test.source.shape[1])
    accuracy = exact_match(predictions, targets)
    assert accuracy > match_above, f"exact match {accuracy:.3f}"


def test_model_moves_between_devices_and_dtypes(parity, rng):
    cfg = config(cell="lstm", num_layers=2, residual=True, dtype="float32")
    module = th_seq2seq.AttentionSeq2seq(cfg, rng=1)
    batch = dict(source=rng.integers(0, 6, (N, T)), source_mask=parity.lengths_mask([5, 2, 3], T),
                 decoder_input=rng.integers(0, 7, (N, 4)), decoder_target=rng.integers(0, 7, (N, 4)),
                 target_mask=parity.lengths_mask([4, 2, 3], 4))
    on_cpu = module.double()(**{k: parity.as_torch(v) for k, v in batch.items()})
    on_gpu = module.to(DEVICE)(**{k: parity.as_torch(v, DEVICE) for k, v in batch.items()})
    assert on_gpu.device.type == "cuda" and on_gpu.dtype == torch.float64
    parity.assert_close("loss on cpu and gpu", on_gpu, on_cpu)
    back = module.to("cpu", torch.float32)(**{k: parity.as_torch(v) for k, v in batch.items()})
    assert back.dtype == torch.float32 and abs(float(back.detach()) - float(on_cpu.detach())) < 1e-5
