"""Tests for attention_course/viz/curves.py: curves over seeds that read without colour."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attention_course.viz import line_style, plot_over_seeds  # noqa: E402


def test_each_line_has_its_own_marker_and_dashes():
    styles = [line_style(index) for index in range(6)]
    assert len({style["marker"] for style in styles}) == 6
    assert len({str(style["linestyle"]) for style in styles}) == 6


def test_the_mean_and_a_band_of_one_sd_or_the_range():
    x = np.arange(4)
    runs = {"a": np.array([[0.0, 1, 2, 3], [2.0, 3, 4, 5]]), "b": np.array([[1.0, 1, 1, 1], [1.0, 1, 1, 1]])}
    figure, ax = plt.subplots()
    plot_over_seeds(ax, x, runs, band="range")
    lines = ax.get_lines()
    np.testing.assert_allclose(lines[0].get_ydata(), [1, 2, 3, 4])
    assert lines[0].get_marker() != lines[1].get_marker()
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(0.0) and band.max() == pytest.approx(5.0)
    assert [line.get_label() for line in lines] == ["a", "b"]
    with pytest.raises(ValueError, match="curves\\['a'\\]"):
        plot_over_seeds(ax, np.arange(3), runs)
    plt.close(figure)


def test_a_band_is_cut_at_the_limits_a_value_can_reach():
    figure, ax = plt.subplots()
    plot_over_seeds(ax, np.arange(2), {"a": np.array([[0.9, 1.0], [1.0, 1.0], [0.6, 1.0]])}, limits=(0, 1))
    assert ax.collections[0].get_paths()[0].vertices[:, 1].max() <= 1.0
    plt.close(figure)
