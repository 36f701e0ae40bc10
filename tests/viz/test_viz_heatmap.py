"""Tests for attention_course/viz/heatmap.py: alignment heat maps with a colour bar, and as text."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attention_course.viz import alignment_text, plot_alignment  # noqa: E402


def test_a_heat_map_has_a_colour_bar_from_0_to_1_and_labelled_axes():
    weights = np.array([[0.9, 0.1, 0.0], [0.2, 0.3, 0.5]])
    ax = plot_alignment(weights, list("abc"), ["x", "y"], title="t")
    figure = ax.figure
    assert len(figure.axes) == 2, "one map and its colour bar"
    assert ax.images[0].get_clim() == (0.0, 1.0)
    assert [label.get_text() for label in ax.get_xticklabels()] == ["a", "b", "c"]
    assert ax.get_xlabel() and ax.get_ylabel()
    plt.close(figure)


def test_maps_that_share_a_colour_bar_draw_none_of_their_own():
    figure, axes = plt.subplots(1, 2)
    for ax in axes:
        plot_alignment(np.eye(2), ["a", "b"], ["x", "y"], ax=ax, colorbar=False)
    assert len(figure.axes) == 2
    plt.close(figure)


def test_a_wrong_shape_is_named_and_the_text_map_names_the_strongest_source():
    with pytest.raises(ValueError, match="weights"):
        plot_alignment(np.zeros(3), ["a"], ["x"])
    text = alignment_text(np.array([[0.1, 0.9]]), ["a", "b"], ["x"])
    assert "<- 'b' 0.90" in text
