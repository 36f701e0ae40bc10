"""Tests for attention_course/viz/words.py and positions.py: what each picture draws."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attention_course.numpy_track.transformer import positional_encoding  # noqa: E402
from attention_course.viz import plot_position_columns, plot_position_similarity, plot_word_weights  # noqa: E402


def test_word_weights_one_bar_a_word_the_marked_one_hatched():
    fig, ax = plt.subplots()
    plot_word_weights(ax, ["a", "b", "c"], [0.2, 0.7, 0.1, 0.0], marked=1, title="q")
    bars = ax.patches
    assert [bar.get_height() for bar in bars] == pytest.approx([0.2, 0.7, 0.1])  # the padding is cut
    assert bars[1].get_hatch() == "///" and not bars[0].get_hatch()
    assert [label.get_text() for label in ax.get_xticklabels()] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="marked"):
        plot_word_weights(ax, ["a"], [1.0], marked=3)
    with pytest.raises(ValueError, match="weights"):
        plot_word_weights(ax, ["a", "b"], [1.0])
    plt.close(fig)


def test_position_pictures_draw_the_columns_and_an_offset_only_similarity():
    table = positional_encoding(120, 16)
    fig, (left, right) = plt.subplots(1, 2)
    plot_position_columns(left, table, [0, 6])
    np.testing.assert_allclose(left.lines[1].get_ydata(), table[:, 6])
    plot_position_similarity(right, table, [0, 40], max_offset=50)
    first, second = (line.get_ydata() for line in right.lines)
    assert first[0] == pytest.approx(1.0)
    np.testing.assert_allclose(first, second, atol=1e-12)  # the same curve from any start: offsets only
    assert first[1] > first[10]  # neighbours are more alike than positions far apart
    with pytest.raises(ValueError, match="positions"):
        plot_position_similarity(right, table, [100], max_offset=50)
    plt.close(fig)
