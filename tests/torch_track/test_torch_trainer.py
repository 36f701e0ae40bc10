"""Tests for attention_course/torch_track/trainer.py: devices, a short training run, greedy translation."""

import numpy as np
import pytest
import torch

from attention_course.data import build_vocabularies, encode_pairs, generate_dates
from attention_course.numpy_track.seq2seq import Seq2seqConfig
from attention_course.torch_track.seq2seq import build_model
from attention_course.torch_track.base import batch_to_tensors
from attention_course.torch_track.decoding import greedy_translate
from attention_course.torch_track.trainer import DeviceError, Trainer, resolve_device
from attention_course.training import TrainConfig


@pytest.fixture(scope="module")
def dates():
    train_pairs, test_pairs = generate_dates(256, 12, seed=0)
    source_vocab, target_vocab = build_vocabularies(train_pairs + test_pairs)
    train = encode_pairs(train_pairs, source_vocab, target_vocab)
    test = encode_pairs(test_pairs, source_vocab, target_vocab)
    return train, test, source_vocab, target_vocab


def tiny_model(dates, kind="attention", **overrides):
    _, _, source_vocab, target_vocab = dates
    options = dict(source_vocab_size=len(source_vocab), target_vocab_size=len(target_vocab), embed_dim=8,
                   hidden_size=16)
    return build_model(kind, Seq2seqConfig(**(options | overrides)), rng=0)


def train(dates, steps=30, seed=0, **model_options):
    model = tiny_model(dates, **model_options)
    trainer = Trainer(model, TrainConfig(batch_size=32, lr=0.02, max_steps=steps, seed=seed), device="cpu")
    return model, trainer.fit(dates[0], progress=False)


def test_resolve_device_cpu():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")).type == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is here")
def test_resolve_device_cuda_without_a_gpu_says_why():
    with pytest.raises(DeviceError, match="no usable CUDA GPU.*--device cpu"):
        resolve_device("cuda")
    with pytest.raises(ValueError):  # DeviceError is a ValueError: the CLI reports it in one line
        Trainer(tiny_model_for_errors(), TrainConfig(max_steps=1), device="cuda:0")


def tiny_model_for_errors():
    return build_model("attention", Seq2seqConfig(source_vocab_size=5, target_vocab_size=5, embed_dim=2,
                                                  hidden_size=2))


@pytest.mark.parametrize("device, match", [("tpu", "device"), ("mps", "expected 'cpu' or 'cuda'"),
                                           ("not a device", "device")])
def test_resolve_device_rejects_other_devices(device, match):
    with pytest.raises(DeviceError, match=match):
        resolve_device(device)


def test_amp_on_the_cpu_is_refused():
    with pytest.raises(DeviceError, match="amp"):
        Trainer(tiny_model_for_errors(), TrainConfig(max_steps=1), device="cpu", amp=True)


def test_batch_to_tensors_keeps_dtypes(dates):
    tensors = batch_to_tensors(dates[1], "cpu")
    assert tensors["source"].dtype == torch.int64 and tensors["source_mask"].dtype == torch.bool
    assert tensors["decoder_target"].shape == dates[1].decoder_target.shape


@pytest.mark.parametrize("kind, options", [("attention", {}), ("attention", {"cell": "lstm", "score": "scaled_dot"}),
                                           ("seq2seq", {"bidirectional": False})],
                         ids=["attention_gru", "attention_lstm_scaled_dot", "seq2seq_gru"])
def test_short_training_reduces_the_loss(dates, kind, options):
    model, result = train(dates, kind=kind, **options)
    assert result.steps == 30 and result.stopped_because == "max_steps reached"
    assert all(np.isfinite(result.losses)) and all(isinstance(loss, float) for loss in result.losses)
    first, last = np.mean(result.losses[:3]), np.mean(result.losses[-5:])
    assert last < 0.75 * first, f"loss went from {first:.3f} to {last:.3f}"
    assert model.training, "fit leaves the model in training mode"


def test_training_is_deterministic_on_the_cpu(dates):
    _, first = train(dates, steps=12)
    _, second = train(dates, steps=12)
    _, other_seed = train(dates, steps=12, seed=1)
    assert first.losses == second.losses and first.grad_norms == second.grad_norms
    assert first.losses != other_seed.losses, "the seed orders the batches"


def test_fit_restores_the_thread_count(dates):
    before = torch.get_num_threads()
    train(dates, steps=2)
    assert torch.get_num_threads() == before


def test_gradient_clipping_is_reported_before_clipping(dates):
    model = tiny_model(dates)
    trainer = Trainer(model, TrainConfig(batch_size=32, lr=0.02, max_steps=1, max_grad_norm=1e-3), device="cpu")
    loss, norm = trainer.train_step(batch_to_tensors(dates[0].subset(np.arange(32)), "cpu"))
    assert loss.dim() == 0 and float(norm) > 1e-3, "the norm before clipping"


@pytest.mark.parametrize("kind", ["attention", "seq2seq"])
def test_greedy_translate_returns_strings_and_weights(dates, kind):
    _, test, _, target_vocab = dates
    model = tiny_model(dates, kind=kind, **({} if kind == "attention" else {"bidirectional": False}))
    model.train()
    texts, weights = greedy_translate(model, test, target_vocab, max_length=11)
    assert len(texts) == len(test) and all(isinstance(text, str) for text in texts)
    assert all(len(text) <= 11 for text in texts)
    assert model.training, "the mode is restored"
    if kind == "seq2seq":
        assert weights is None
        return
    assert weights.shape == (len(test), 11, test.source.shape[1]) and weights.dtype == np.float32
    real = weights.sum(axis=-1)
    assert np.all((np.abs(real - 1) < 1e-5) | (real == 0)), "each step's weights sum to 1 (or 0 after stopping)"
    assert (weights[~np.broadcast_to(test.source_mask[:, None, :], weights.shape)] == 0).all(), "no weight on padding"
    chunked, _ = greedy_translate(model, test, target_vocab, max_length=11, chunk=5)
    assert chunked == texts, "chunking changes nothing"


def test_greedy_translate_default_length_is_the_target_width(dates):
    _, test, _, target_vocab = dates
    _, weights = greedy_translate(tiny_model(dates), test, target_vocab)
    assert weights.shape[1] == test.decoder_target.shape[1]


def test_cuda_warm_up_leaves_model_and_optimizer_untouched(dates):
    # The warm-up runs on CUDA before the clock; here it is called directly on the CPU to show it
    # works on a throwaway copy: the model's weights, its gradients and Adam's state stay as they were.
    model = tiny_model(dates)
    trainer = Trainer(model, TrainConfig(max_steps=1, batch_size=8))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainer._warm_up(batch_to_tensors(dates[0], "cpu"))
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]), name
        assert p.grad is None, name
    assert not trainer.optimizer.state
