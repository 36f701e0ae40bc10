"""Tests for attention_course/core/registries.py: one list of cells and scores, bound by both tracks."""

from __future__ import annotations

import numpy as np
import pytest

from attention_course.core.registries import CELLS, SCORES, bind, cell_spec, score_sizes, score_spec


def test_unknown_names_get_the_list_of_choices():
    choices = r"\['gru', 'lstm', 'rnn'\]"
    with pytest.raises(ValueError, match=rf"cell: unknown recurrent cell 'elman'; choose one of {choices}"):
        cell_spec("elman")
    with pytest.raises(ValueError, match=r"score: unknown score function 'cosine'; choose one of"):
        score_spec("cosine")


def test_score_sizes_rules():
    assert score_sizes("dot", 4, None) == (4, 4) and score_sizes("scaled_dot", None, None) == (None, None)
    assert score_sizes("general", 3, 5) == (3, 5)
    with pytest.raises(ValueError, match="needs equal encoder and decoder widths, got 3 and 5"):
        score_sizes("dot", 3, 5)
    with pytest.raises(ValueError, match="has parameters: give encoder_size and decoder_size"):
        score_sizes("additive", 3, None)


def test_only_the_grus_update_gate_changes_sign_for_torch():
    H = 3
    gru = cell_spec("gru").torch_gate_signs(H)
    np.testing.assert_array_equal(gru, [1, 1, 1, -1, -1, -1, 1, 1, 1])  # gates (r, z, n)
    for name in ("rnn", "lstm"):
        signs = CELLS[name].torch_gate_signs(H)
        assert signs.shape == (CELLS[name].num_gates * H,) and (signs == 1).all()


def test_bind_refuses_a_track_whose_names_differ():
    assert bind("score", {name: object for name in SCORES}) == {name: object for name in SCORES}
    with pytest.raises(ValueError, match=r"the track lacks \['dot'\] and has unknown \['cosine'\]"):
        bind("score", {name: object for name in SCORES if name != "dot"} | {"cosine": object})


def test_both_tracks_implement_every_entry():
    from attention_course.numpy_track import SCORE_FUNCTIONS as numpy_scores
    from attention_course.numpy_track.seq2seq import CELLS as numpy_cells

    assert set(numpy_scores) == set(SCORES) and set(numpy_cells) == set(CELLS)
    for name, cls in numpy_cells.items():
        assert cls.cell_class.spec is CELLS[name]
    torch_track = pytest.importorskip("attention_course.torch_track")
    from attention_course.torch_track.seq2seq import CELLS as torch_cells

    assert set(torch_track.SCORE_FUNCTIONS) == set(SCORES) and set(torch_cells) == set(CELLS)
    for name, cls in torch_cells.items():
        assert cls.cell_class.spec is CELLS[name]
