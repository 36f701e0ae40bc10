"""Reading and repairing a submission before it runs: each repair is a flag, nothing is lost silently.

Then what the judge gets (``job_cells``: each code cell with its kind), and how records become
scores (``score_tests``: fail closed).
"""

from __future__ import annotations

import copy
import json

import nbformat
import pytest
from nbgrader.preprocessors import OverwriteCells

from autograder.prepare import job_cells, load_submission, plan_notebook, prepare, restore, score_tests

from grader_helpers import FIXTURES

ASSIGNMENT = "fx_softmax"


@pytest.fixture
def plan(fixture_course):
    released = fixture_course.root / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    scores = {"test_softmax_shape": 1.0, "test_softmax_values": 2.0, "test_softmax_backward": 2.0}
    return plan_notebook(ASSIGNMENT, released, FIXTURES / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", scores)


def _ids(nb) -> list:
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]


@pytest.mark.parametrize("content, reason", [
    (b"{not json", "is not valid JSON"),
    (b"\xff\xfe\x00garbage", "is not UTF-8 text"),
    (b'{"cells": "no list"}', "is not a notebook"),
    (b"[1, 2, 3]", "is not a notebook"),
])
def test_unreadable_files_give_a_reason(tmp_path, content, reason):
    path = tmp_path / "sub.ipynb"
    path.write_bytes(content)
    nb, flags = load_submission(path)
    assert nb is None and reason in flags[0]


def test_missing_keys_are_repaired_and_counted(tmp_path, fixture_course):
    data = json.loads(nbformat.writes(fixture_course.solved(ASSIGNMENT)))
    for cell in data["cells"]:
        del cell["metadata"]
        cell.pop("outputs", None)
        cell.pop("id", None)
    path = tmp_path / "sub.ipynb"
    path.write_text(json.dumps(data))
    nb, flags = load_submission(path)
    assert nb is not None and len(nb.cells) == len(data["cells"])
    assert f"{len(data['cells'])} cell(s) of sub.ipynb had no metadata at all" in flags


def test_a_test_cell_deleted_after_a_read_only_cell_is_restored_in_place(fixture_course, plan):
    nb = fixture_course.solved(ASSIGNMENT)
    nb.cells = [c for c in nb.cells if c.metadata.nbgrader.get("grade_id") != "test_softmax_backward"]
    # nbgrader's own add_missing_cells fails on this notebook (its predecessor is a read-only non-test cell).
    with pytest.raises(KeyError):
        OverwriteCells(add_missing_cells=True).preprocess(copy.deepcopy(nb), {"nbgrader": {
            "notebook": ASSIGNMENT, "assignment": ASSIGNMENT, "student": "x",
            "db_url": f"sqlite:///{fixture_course.root / 'gradebook.db'}"}})
    flags = restore(nb, plan)
    assert _ids(nb) == _ids(plan.released)
    assert flags == ["test cell 'test_softmax_backward' was missing from the submission: restored from the source"]


def test_stripped_metadata_is_recovered_by_content(fixture_course, plan):
    nb = fixture_course.solved(ASSIGNMENT)
    for cell in nb.cells:
        cell.metadata = {}
    flags = restore(nb, plan)
    assert _ids(nb) == _ids(plan.released)
    assert any("recovered by matching the released notebook" in flag for flag in flags)


def test_changed_points_and_repeated_ids_are_reset(fixture_course, plan):
    nb = fixture_course.solved(ASSIGNMENT)
    shape_test = next(c for c in nb.cells if c.metadata.nbgrader.get("grade_id") == "test_softmax_shape")
    shape_test.metadata.nbgrader["points"] = 100
    impostor = copy.deepcopy(shape_test)
    impostor.source = "pass"
    nb.cells.append(impostor)
    flags = restore(nb, plan)
    assert shape_test.metadata.nbgrader["points"] == 1
    assert "nbgrader" not in nb.cells[-1].metadata
    assert any("changed (points)" in flag for flag in flags)
    assert any("repeated grade id 'test_softmax_shape'" in flag for flag in flags)


def test_prepare_restores_hidden_tests_and_scores_a_missing_notebook_zero(fixture_course, plan, tmp_path):
    path = tmp_path / f"{ASSIGNMENT}.ipynb"
    nbformat.write(fixture_course.solved(ASSIGNMENT), path)
    db_url = f"sqlite:///{fixture_course.root / 'gradebook.db'}"
    prepared = prepare(path, plan, "alice", ASSIGNMENT, db_url)
    assert prepared.flags == [] and prepared.nb is not None
    assert "BEGIN HIDDEN TESTS" in "".join(c.source for c in prepared.nb.cells)
    missing = prepare(tmp_path / "absent.ipynb", plan, "alice", ASSIGNMENT, db_url)
    assert missing.nb is None and "was not submitted" in missing.notes[0]
    assert score_tests({}, plan) == {k: 0.0 for k in plan.max_scores}


def test_the_judge_gets_each_code_cell_with_its_kind(fixture_course, plan, tmp_path):
    path = tmp_path / f"{ASSIGNMENT}.ipynb"
    nb = fixture_course.solved(ASSIGNMENT)
    nb.cells.append(nbformat.v4.new_code_cell("extra = 1"))  # a cell the student added
    nbformat.write(nb, path)
    prepared = prepare(path, plan, "alice", ASSIGNMENT, f"sqlite:///{fixture_course.root / 'gradebook.db'}")
    kinds = [(cell["grade_id"], cell["kind"]) for cell in job_cells(prepared.nb)]
    assert kinds == [("setup", "readonly"), ("softmax", "student"), ("test_softmax_shape", "test"),
                     ("test_softmax_values", "test"), ("softmax_backward", "student"),
                     ("backward_helpers", "readonly"), ("test_softmax_backward", "test"), (None, "student")]
    assert plan.names == ["softmax", "softmax_backward"] and plan.test_ids == set(plan.max_scores)


@pytest.mark.parametrize("records, expected", [
    ({"test_softmax_shape": {"passed": True}}, {"test_softmax_shape": 1.0}),
    ({"test_softmax_shape": {"passed": "yes"}}, {}),          # only an explicit True passes
    ({"test_softmax_shape": {"passed": 1}}, {}),
    ({"test_softmax_shape": True}, {}),
    ({"test_softmax_values": {"passed": True, "message": ""}, "unknown": {"passed": True}},
     {"test_softmax_values": 2.0}),
])
def test_points_come_only_from_an_explicit_pass_record(plan, records, expected):
    assert score_tests(records, plan) == {k: expected.get(k, 0.0) for k in plan.max_scores}


def test_a_cell_graded_by_hand_gets_no_automatic_score(plan):
    plan.max_scores["written_answer"] = 3.0
    assert score_tests({"written_answer": {"passed": True}}, plan)["written_answer"] is None


def test_an_nbformat_3_notebook_is_converted_and_every_4x_read(tmp_path, fixture_course):
    from nbformat.v3 import new_code_cell as v3_code_cell, new_notebook as v3_notebook, new_worksheet

    old = v3_notebook(worksheets=[new_worksheet(cells=[v3_code_cell(input="x = 1"), v3_code_cell(input="y = 2")])])
    path = tmp_path / "old.ipynb"
    path.write_text(nbformat.writes(old, version=3))
    notes: list[str] = []
    nb, flags = load_submission(path, notes)
    assert nb is not None and [c.source for c in nb.cells] == ["x = 1", "y = 2"] and flags == []
    assert notes == ["old.ipynb was an nbformat 3 notebook: converted to version 4"]
    for minor in range(6):
        data = json.loads(nbformat.writes(fixture_course.solved(ASSIGNMENT)))
        data["nbformat_minor"] = minor
        path.write_text(json.dumps(data))
        nb, flags = load_submission(path)
        assert nb is not None and len(nb.cells) == len(data["cells"]), minor
    data["nbformat"] = 5
    path.write_text(json.dumps(data))
    nb, flags = load_submission(path)
    assert nb is None and "has nbformat 5: the grader reads versions 3 and 4" in flags[0]


def _metadata_variants(nb):
    """(name, notebook) pairs: the solved notebook and, for each of nbgrader's cell checks, a copy
    that breaks it (the schema, the points, the grade id, markdown cells, task cells, the version)."""
    def variant(change):
        copied = copy.deepcopy(nb)
        change(copied)
        return copied

    def graded(copied):
        return next(c for c in copied.cells if c.metadata.get("nbgrader", {}).get("grade"))

    def markdown(copied):   # (only the cell type changes: its metadata is the valid test cell's)
        cell = next(c for c in copied.cells if c.metadata.get("nbgrader", {}).get("grade")
                    and not c.metadata.nbgrader.get("solution"))
        cell.cell_type = "markdown"
        cell.pop("outputs", None)
        cell.pop("execution_count", None)

    def task(copied):
        graded(copied).metadata.nbgrader["task"] = True

    def repeated(copied):
        cells = [c for c in copied.cells if c.metadata.get("nbgrader", {}).get("grade_id")]
        cells[1].metadata.nbgrader["grade_id"] = cells[0].metadata.nbgrader["grade_id"]

    return [("valid", variant(lambda copied: None)),
            ("points not a number", variant(lambda c: graded(c).metadata.nbgrader.update(points="many"))),
            ("no points", variant(lambda c: graded(c).metadata.nbgrader.pop("points"))),
            ("empty grade id", variant(lambda c: graded(c).metadata.nbgrader.update(grade_id=""))),
            ("markdown grade cell, not a solution", variant(markdown)),
            ("task cell that is code", variant(task)),
            ("repeated grade id", variant(repeated)),
            ("old schema", variant(lambda c: graded(c).metadata.nbgrader.update(schema_version=1)))]


def test_the_metadata_check_agrees_with_nbgraders_and_remembers_only_what_passed(fixture_course):
    """prepare's CheckCellMetadata validates each distinct cell metadata once per batch (nbgrader's
    validates the schema itself on every cell): it must accept and refuse exactly what nbgrader's
    does, in any order, a notebook that broke a check after a valid one included."""
    from nbgrader.preprocessors import CheckCellMetadata

    from autograder.prepare import _CheckCellMetadata, _RememberingValidator

    variants = _metadata_variants(fixture_course.solved(ASSIGNMENT))

    def outcome(preprocessor, nb):
        try:
            preprocessor.preprocess(copy.deepcopy(nb), {})
            return "passed"
        except Exception as exc:  # noqa: BLE001 - the kind of error is what is compared
            return type(exc).__name__

    expected = {name: outcome(CheckCellMetadata(), nb) for name, nb in variants}
    assert expected["valid"] == "passed"
    assert all(result != "passed" for name, result in expected.items() if name != "valid"), expected
    _RememberingValidator._passed.clear()
    for order in (variants, variants[::-1], [variants[0]] + variants + [variants[0]]):
        assert {name: outcome(_CheckCellMetadata(), nb) for name, nb in order} == expected
    assert _RememberingValidator._passed, "nothing was remembered"
