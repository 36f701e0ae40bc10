"""Tests for attention_course/numpy_track/ntm.py: the addressing steps, the heads, the machine, the losses."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course.core.configs import NTMConfig
from attention_course.numpy_track.ntm import (NTM, Addressing, ContentAddressing, ConvolutionalShift, HeadParameters,
                                              Interpolation, LSTMBaseline, ReadHead, Sharpening, SigmoidCrossEntropy,
                                              WriteHead)
from attention_course.testing import ShapeError, check_layer_gradients

HYPOTHESIS = settings(max_examples=25, deadline=None)
N, h, R, C, S = 2, 3, 7, 4, 3


def distribution(rng, *shape):
    """Positive weights summing to 1 over the last axis."""
    x = rng.uniform(0.05, 1.0, shape)
    return x / x.sum(axis=-1, keepdims=True)


def addressing_inputs(rng):
    return {"memory": rng.standard_normal((N, R, C)), "previous_weights": distribution(rng, N, h, R),
            "key": rng.standard_normal((N, h, C)), "strength": rng.uniform(0.5, 3, (N, h)),
            "gate": rng.uniform(0.1, 0.9, (N, h)), "shift": distribution(rng, N, h, S),
            "gamma": rng.uniform(1, 3, (N, h))}


# --- each addressing step: its backward against central differences ---------------------------


def test_content_addressing_gradients(rng):
    check_layer_gradients(ContentAddressing(), {"memory": rng.standard_normal((N, R, C)),
                                                "key": rng.standard_normal((N, h, C)),
                                                "strength": rng.uniform(0.5, 3, (N, h))})


def test_interpolation_gradients(rng):
    check_layer_gradients(Interpolation(), {"content_weights": distribution(rng, N, h, R),
                                            "previous_weights": distribution(rng, N, h, R),
                                            "gate": rng.uniform(0, 1, (N, h))})


@pytest.mark.parametrize("num_shifts", [1, 3, 5])
def test_convolutional_shift_gradients(rng, num_shifts):
    check_layer_gradients(ConvolutionalShift(), {"weights": distribution(rng, N, h, R),
                                                 "shift": distribution(rng, N, h, num_shifts)})


def test_sharpening_gradients(rng):
    check_layer_gradients(Sharpening(), {"weights": distribution(rng, N, h, R), "gamma": rng.uniform(1, 4, (N, h))})


def test_addressing_gradients(rng):
    inputs = addressing_inputs(rng)
    check_layer_gradients(Addressing(), inputs, wrt=list(inputs))


def test_head_parameters_gradients(rng):
    check_layer_gradients(HeadParameters(C, S), {"raw": rng.standard_normal((N, h, C + 3 + S))})


def test_read_head_gradients(rng):
    check_layer_gradients(ReadHead(), {"memory": rng.standard_normal((N, R, C)), "weights": distribution(rng, N, 2, R)})


@pytest.mark.parametrize("heads", [1, 3])
def test_write_head_gradients(rng, heads):
    check_layer_gradients(WriteHead(), {"memory": rng.standard_normal((N, R, C)),
                                        "weights": distribution(rng, N, heads, R),
                                        "erase": rng.uniform(0, 1, (N, heads, C)),
                                        "add": rng.uniform(-1, 1, (N, heads, C))})


def test_write_head_gradients_with_a_factor_of_zero(rng):
    # A head that erases a fully weighted location completely: the product rule must not divide by 0.
    weights = distribution(rng, N, 2, R)
    weights[0, 0] = np.eye(R)[2]
    erase = rng.uniform(0, 1, (N, 2, C))
    erase[0, 0] = 1.0
    check_layer_gradients(WriteHead(), {"memory": rng.standard_normal((N, R, C)), "weights": weights,
                                        "erase": erase, "add": rng.uniform(-1, 1, (N, 2, C))})


def test_sigmoid_cross_entropy_gradients(rng):
    logits = rng.standard_normal((N, 5, 3))
    targets = (rng.random((N, 5, 3)) > 0.5).astype(float)
    mask = np.array([[True, True, False, True, False], [False, True, True, True, True]])
    layer = SigmoidCrossEntropy()
    loss = layer.forward(logits, targets, mask)
    probabilities = 1 / (1 + np.exp(-logits))
    bits = -(targets * np.log(probabilities) + (1 - targets) * np.log(1 - probabilities))
    assert loss == pytest.approx(bits[mask].mean(), rel=1e-12)
    check_layer_gradients(layer, {"logits": logits}, forward_kwargs={"targets": targets, "mask": mask})


# --- what each step does ----------------------------------------------------------------------


def test_content_addressing_finds_the_most_similar_row(rng):
    memory = rng.standard_normal((1, R, C))
    key = 3.0 * memory[:, [4]] + 0.01 * rng.standard_normal((1, 1, C))  # row 4, rescaled: cosine ignores length
    sharp = ContentAddressing().forward(memory, key, np.array([[50.0]]))
    assert sharp[0, 0].argmax() == 4 and sharp[0, 0, 4] > 0.9
    flat = ContentAddressing().forward(memory, key, np.array([[0.0]]))
    np.testing.assert_allclose(flat, np.full((1, 1, R), 1 / R), atol=1e-15)


def test_interpolation_gate_chooses(rng):
    content, previous = distribution(rng, N, h, R), distribution(rng, N, h, R)
    np.testing.assert_array_equal(Interpolation().forward(content, previous, np.ones((N, h))), content)
    np.testing.assert_array_equal(Interpolation().forward(content, previous, np.zeros((N, h))), previous)


def test_a_one_hot_shift_rolls_the_weighting(rng):
    weights = distribution(rng, N, h, R)
    for offset in (-1, 0, 1):
        one_hot = np.zeros((N, h, 3))
        one_hot[..., offset + 1] = 1
        np.testing.assert_allclose(ConvolutionalShift().forward(weights, one_hot), np.roll(weights, offset, axis=-1))
    # the last location wraps round to the first
    at_end = np.zeros((1, 1, R))
    at_end[0, 0, -1] = 1
    assert ConvolutionalShift().forward(at_end, np.array([[[0.0, 0.0, 1.0]]]))[0, 0, 0] == 1


def test_sharpening(rng):
    weights = distribution(rng, N, h, R)
    np.testing.assert_allclose(Sharpening().forward(weights, np.ones((N, h))), weights, rtol=1e-12)
    peaked = weights + 2 * np.eye(R)[3]  # location 3 at least twice as heavy as any other
    peaked /= peaked.sum(axis=-1, keepdims=True)
    sharp = Sharpening().forward(peaked, np.full((N, h), 60.0))
    np.testing.assert_allclose(sharp[..., 3], 1.0, atol=1e-12)
    # a large gamma on a flat weighting cannot underflow to 0/0
    flat = Sharpening().forward(np.full((1, 1, 128), 1 / 128, dtype=np.float32), np.full((1, 1), 50.0, np.float32))
    assert np.isfinite(flat).all() and flat.sum() == pytest.approx(1.0)


@HYPOTHESIS
@given(seed=st.integers(0, 2 ** 16), locations=st.integers(3, 12), heads=st.integers(1, 3))
def test_every_weighting_is_a_distribution(seed, locations, heads):
    rng = np.random.default_rng(seed)
    inputs = {"memory": rng.standard_normal((2, locations, C)) * rng.uniform(0, 5),
              "previous_weights": distribution(rng, 2, heads, locations), "key": rng.standard_normal((2, heads, C)),
              "strength": rng.uniform(0, 100, (2, heads)), "gate": rng.uniform(0, 1, (2, heads)),
              "shift": distribution(rng, 2, heads, 3), "gamma": rng.uniform(1, 60, (2, heads))}
    weights = Addressing().forward(**inputs)
    assert weights.shape == (2, heads, locations)
    assert (weights >= 0).all()
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-10)


def test_read_and_write_a_location(rng):
    memory = rng.standard_normal((1, R, C))
    one_hot = np.eye(R)[None, [2]]  # (1, 1, R) on location 2
    np.testing.assert_allclose(ReadHead().forward(memory, one_hot), memory[:, [2]])
    add = rng.standard_normal((1, 1, C))
    written = WriteHead().forward(memory, one_hot, np.ones((1, 1, C)), add)
    np.testing.assert_allclose(written[0, 2], add[0, 0])  # erased, then added
    np.testing.assert_array_equal(np.delete(written[0], 2, axis=0), np.delete(memory[0], 2, axis=0))
    kept = WriteHead().forward(memory, one_hot, np.zeros((1, 1, C)), np.zeros((1, 1, C)))
    np.testing.assert_array_equal(kept, memory)


def test_shapes_are_checked_by_name(rng):
    with pytest.raises(ShapeError, match=r"key: expected shape \(N=2, h, C=4\), got \(2, 3, 5\)"):
        ContentAddressing().forward(rng.standard_normal((N, R, C)), rng.standard_normal((N, h, 5)), np.ones((N, h)))
    with pytest.raises(ShapeError, match="gate"):
        Interpolation().forward(distribution(rng, N, h, R), distribution(rng, N, h, R), np.ones((N,)))
    with pytest.raises(ValueError, match="shift: expected an odd number of offsets, at most R=7, got 4"):
        ConvolutionalShift().forward(distribution(rng, N, h, R), distribution(rng, N, h, 4))
    with pytest.raises(ValueError, match="shift_range 4 needs at least 9 memory locations"):
        NTMConfig(3, 2, memory_size=8, shift_range=4)


# --- the machine ------------------------------------------------------------------------------


def small_config(**changes):
    values = dict(input_size=3, output_size=2, controller_size=5, memory_size=6, memory_width=3, num_read_heads=2,
                  num_write_heads=2, dtype="float64")
    return NTMConfig(**{**values, **changes})


def randomized(layer, rng, scale=0.7):
    for _, value, _ in layer.named_parameters():
        value[...] = rng.uniform(-scale, scale, value.shape)
    return layer


def test_ntm_gradients(rng):
    model = randomized(NTM(small_config(), rng=0), rng)
    check_layer_gradients(model, {"inputs": rng.standard_normal((2, 4, 3))})


def test_ntm_parameters_and_weightings(rng):
    config = small_config(num_read_heads=1, num_write_heads=1, controller_size=8, memory_size=10, memory_width=4)
    model = NTM(config, rng=0)
    names = sorted(name for name, _, _ in model.named_parameters())
    assert names == ["address.W", "address.b", "controller.W_h", "controller.W_x", "controller.b", "out.W", "out.b",
                     "write.W", "write.b"]
    assert model.params == {} and model.controller.params["W_x"].shape == (3 + 4, 4 * 8)
    assert model.address.params["W"].shape == (8, 2 * (4 + 3 + 3))  # key, strength, gate, 3 shifts, gamma
    logits = model.forward(rng.standard_normal((2, 6, 3)))
    assert logits.shape == (2, 6, 2)
    assert model.read_weights.shape == (2, 6, 1, 10) and model.write_weights.shape == (2, 6, 1, 10)
    np.testing.assert_allclose(model.read_weights.sum(axis=-1), 1.0, rtol=1e-10)
    model.backward(rng.standard_normal(logits.shape))
    assert all(np.abs(grad).sum() > 0 for _, _, grad in model.named_parameters())


def test_ntm_follows_the_input_dtype(rng):
    model = NTM(small_config(dtype="float32"), rng=0)
    logits = model.forward(rng.standard_normal((2, 3, 3)).astype(np.float32))
    assert logits.dtype == np.float32
    assert model.backward(np.ones_like(logits)).dtype == np.float32


def test_lstm_baseline_gradients(rng):
    check_layer_gradients(LSTMBaseline(3, 2, hidden_size=4, rng=0, dtype=np.float64),
                          {"inputs": rng.standard_normal((2, 5, 3))})
