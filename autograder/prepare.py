"""Turn a submitted file into the notebook to grade, recording every repair as a flag.

Runs in the main process (it reads the gradebook), before any student code runs; every step
is guarded, so a notebook crafted to break one ends as that submission's flag, and nothing else:

1. ``load_submission``: bytes -> a valid nbformat-4 notebook, or None with the reason (too big,
   not UTF-8, invalid JSON, not a notebook, an nbformat other than 3 or 4). An nbformat 3 notebook
   is converted, as Jupyter opens it; every 4.x is read. Missing ``metadata``/``outputs`` keys are
   repaired.
2. ``restore``: the instructor's cells come back as released:
   - nbgrader metadata with an unknown or repeated grade id is dropped (the cell is student code);
     metadata a student changed (points, locked, ...) is reset to the released one;
   - cells whose nbgrader metadata was stripped are re-identified by content (a read-only cell by
     its exact source, an answer cell by its first line, e.g. the ``def`` line) in released order;
   - a read-only or test cell still missing is re-inserted after its released predecessor
     (nbgrader's own ``add_missing_cells`` raises KeyError when that predecessor is a read-only
     non-test cell, and is not used);
   - nbgrader's ``OverwriteCells`` then restores the source of every read-only cell from the
     gradebook, hidden tests included, and ``CheckCellMetadata`` validates the result.
3. ``job_cells``: the notebook as the judge needs it: the student's cells and the read-only code
   (run in the sandbox), the test cells (run in the judge only, never sent to the sandbox).

The advisory static scan (``scan.py``) runs separately, in a process of its own.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, OverwriteCells, OverwriteKernelspec

from . import references, sandbox, scan
from .errors import GradingError
from .judge import api_names, course_imports, preload_for

MAX_NOTEBOOK_BYTES = 50 * 1024 * 1024
MAX_CELLS = 2000
_CELL_ID = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")


@dataclass
class NotebookPlan:
    """What grading needs to know about one notebook of the assignment (from release and source)."""

    name: str
    released: nbformat.NotebookNode
    max_scores: dict[str, float]
    context: scan.ScanContext
    modules: dict[str, str]
    locked_sources: dict[str, str] = field(default_factory=dict)   # the source notebook's read-only cells
    names: list[str] = field(default_factory=list)       # what the answer cells define: the tests' proxies
    preload: list[str] = field(default_factory=list)     # modules the sandbox imports once per worker
    test_ids: set[str] = field(default_factory=set)      # graded by tests (the rest of max_scores: by hand)
    course_modules: list[str] = field(default_factory=list)   # what the read-only cells import of the package
    reference: str | None = None                         # the exercise's reference.py (judge only)


@dataclass
class Prepared:
    student: str
    notebook: str
    nb: nbformat.NotebookNode | None          # None: nothing to run; every test scores 0
    flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _grade_id(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta.get("grade_id") if isinstance(meta, dict) else None


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def plan_notebook(name: str, released_path: Path, source_path: Path, max_scores: dict[str, float]) -> NotebookPlan:
    """What grading needs of one notebook. Raises ``GradingError`` (before any student code runs)
    when a read-only cell imports what the sandbox never offers, or the reference does not parse."""
    released = nbformat.read(released_path, as_version=4)
    source = nbformat.read(source_path, as_version=4) if source_path.exists() else released
    instructor, solutions, readonly, locked_sources, test_ids = [], [], [], {}, set()
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("locked") and meta.get("grade_id"):
            locked_sources[meta["grade_id"]] = cell.source
        if meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
            test_ids.add(meta.get("grade_id"))
        if cell.cell_type != "code":
            continue
        if meta.get("solution"):
            solutions.append(cell.source)
        elif meta.get("locked") or meta.get("grade"):
            instructor.append(cell.source)
            if not meta.get("grade"):
                readonly.append(cell.source)
    modules = course_imports(readonly)
    try:
        sandbox.library_modules(modules)
    except GradingError as exc:
        raise GradingError(f"{name}.ipynb: {exc}") from None
    reference = references.reference_path(source_path) if source_path.exists() else None
    if reference is not None:  # (that it loads, the workers check before any notebook runs)
        try:
            compile(reference.read_bytes(), str(reference), "exec")
        except (SyntaxError, ValueError, OSError) as exc:
            raise GradingError(f"{reference} does not load: {type(exc).__name__}: {exc}") from None
    return NotebookPlan(name=name, released=released, max_scores=max_scores,
                        context=scan.build_context(instructor, solutions),
                        modules=scan.instructor_modules(instructor), locked_sources=locked_sources,
                        names=api_names(solutions), preload=preload_for(instructor + solutions, modules),
                        test_ids=test_ids & set(max_scores), course_modules=modules,
                        reference=str(reference) if reference else None)


def load_submission(path: Path, notes: list[str] | None = None) -> tuple[nbformat.NotebookNode | None, list[str]]:
    """The submitted notebook, repaired where that is safe; or None and the reason. What was done
    that needs no review (an older format converted) goes to ``notes``."""
    flags: list[str] = []
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        return None, [f"{path.name} is {size // (1024 * 1024)} MiB, over the {MAX_NOTEBOOK_BYTES // (1024 * 1024)} MiB limit"]
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        return None, [f"{path.name} is not UTF-8 text"]
    except json.JSONDecodeError as exc:
        return None, [f"{path.name} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"]
    except RecursionError:
        return None, [f"{path.name} is nested too deeply to read"]
    if not isinstance(data, dict):
        return None, [f"{path.name} is not a notebook (not a JSON object)"]
    version = data.get("nbformat")
    if version in (1, 2, 3):
        # An older notebook (cells in worksheets): converted by nbformat, as Jupyter opens it.
        worksheets = data.get("worksheets")
        count = sum(len(w.get("cells", [])) for w in worksheets if isinstance(w, dict)) \
            if isinstance(worksheets, list) else 0
        if count > MAX_CELLS:
            return None, [f"{path.name} has {count} cells, over the grader's limit of {MAX_CELLS}"]
        try:
            data = json.loads(nbformat.writes(nbformat.reads(json.dumps(data), as_version=4)))
        except Exception as exc:  # noqa: BLE001 - any failure means: not a notebook we can convert
            return None, [f"{path.name} is an nbformat {version} notebook that cannot be converted to "
                          f"version 4 ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''})"]
        if notes is not None:
            notes.append(f"{path.name} was an nbformat {version} notebook: converted to version 4")
    elif version is None:
        return None, [f"{path.name} is not a notebook (no nbformat version)"]
    elif version != 4:
        return None, [f"{path.name} has nbformat {version!r}: the grader reads versions 3 and 4 (save it "
                      "again with Jupyter)"]
    if not isinstance(data.get("cells"), list):
        return None, [f"{path.name} is not a notebook (no list of cells)"]
    if len(data["cells"]) > MAX_CELLS:
        return None, [f"{path.name} has {len(data['cells'])} cells, over the grader's limit of {MAX_CELLS}"]
    cells, stripped, dropped, seen_ids = [], 0, 0, set()
    for cell in data["cells"]:
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            dropped += 1
            continue
        clean = {"cell_type": cell["cell_type"], "source": _source(cell)}
        metadata = cell.get("metadata")
        if not isinstance(metadata, dict):
            metadata, stripped = {}, stripped + 1
        clean["metadata"] = metadata
        if cell["cell_type"] == "code":
            clean["outputs"], clean["execution_count"] = [], None
        elif isinstance(cell.get("attachments"), dict):
            clean["attachments"] = cell["attachments"]
        cell_id = cell.get("id")
        if not isinstance(cell_id, str) or not _CELL_ID.match(cell_id) or cell_id in seen_ids:
            cell_id = uuid.uuid4().hex[:12]
        seen_ids.add(cell_id)
        clean["id"] = cell_id
        cells.append(clean)
    if dropped:
        flags.append(f"{dropped} malformed cell(s) dropped from {path.name}")
    if stripped:
        flags.append(f"{stripped} cell(s) of {path.name} had no metadata at all")
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    nb = nbformat.from_dict({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": cells})
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        return None, flags + [f"{path.name} is not a valid notebook: {str(exc).splitlines()[0]}"]
    return nb, flags


_NBGRADER_KEYS = ("grade", "solution", "locked", "points", "task", "grade_id")


def restore(nb, plan: NotebookPlan) -> list[str]:
    """Bring back the instructor's cells as released (before OverwriteCells restores hidden tests)."""
    flags: list[str] = []
    released = [c for c in plan.released.cells if _grade_id(c)]
    by_id = {_grade_id(c): c for c in released}
    order = [_grade_id(c) for c in released]

    # Known ids keep the released metadata; unknown or repeated ones make plain student cells.
    seen: set[str] = set()
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader")
        if meta is None:
            continue
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        if grade_id not in by_id or grade_id in seen:
            del cell.metadata["nbgrader"]
            flags.append(f"cell {index} carries {'a repeated' if grade_id in seen else 'an unknown'} grade id "
                         f"{grade_id!r}: graded as student code")
            continue
        seen.add(grade_id)
        reference = by_id[grade_id]
        changed = [k for k in _NBGRADER_KEYS if meta.get(k) != reference.metadata.nbgrader.get(k)]
        if changed:
            flags.append(f"nbgrader metadata of cell {grade_id!r} was changed ({', '.join(changed)}): reset")
        cell.metadata["nbgrader"] = copy.deepcopy(reference.metadata.nbgrader)
        for key in ("deletable", "editable"):
            if key in reference.metadata:
                cell.metadata[key] = reference.metadata[key]
        # A read-only cell may read as released, or as in the source (with its hidden tests).
        versions = {reference.source.rstrip(), plan.locked_sources.get(grade_id, reference.source).rstrip()}
        if reference.metadata.nbgrader.get("locked") and (
                cell.cell_type != reference.cell_type or cell.source.rstrip() not in versions):
            flags.append(f"read-only cell {grade_id!r} was edited: restored from the source")

    # Stripped metadata: re-identify cells by content, in released order.
    missing = [g for g in order if g not in seen]
    plain = [i for i, c in enumerate(nb.cells) if "nbgrader" not in c.metadata]
    recovered = 0
    if missing and plain:
        used: set[int] = set()
        for grade_id in missing:
            reference = by_id[grade_id]
            meta = reference.metadata.nbgrader
            ref_lines = [line for line in reference.source.splitlines() if line.strip()]
            for index in plain:
                cell = nb.cells[index]
                if index in used or cell.cell_type != reference.cell_type:
                    continue
                if meta.get("locked"):
                    match = cell.source.rstrip() == reference.source.rstrip()
                else:
                    lines = [line for line in cell.source.splitlines() if line.strip()]
                    match = bool(ref_lines and lines) and lines[0].strip() == ref_lines[0].strip()
                if match:
                    cell.metadata["nbgrader"] = copy.deepcopy(meta)
                    used.add(index)
                    seen.add(grade_id)
                    recovered += 1
                    break
        if recovered:
            flags.append(f"nbgrader metadata was missing from {recovered} cell(s): recovered by matching "
                         "the released notebook")

    # Read-only and test cells still missing: re-insert after their released predecessor.
    for position, grade_id in enumerate(order):
        if grade_id in seen:
            continue
        reference = by_id[grade_id]
        meta = reference.metadata.nbgrader
        if not (meta.get("locked") or meta.get("grade")):
            flags.append(f"answer cell {grade_id!r} is missing from the submission")
            continue
        anchor = None
        for previous in reversed(order[:position]):
            if previous in seen:
                anchor = next(i for i, c in enumerate(nb.cells) if _grade_id(c) == previous)
                break
        cell = copy.deepcopy(reference)
        cell["id"] = uuid.uuid4().hex[:12]
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        nb.cells.insert(0 if anchor is None else anchor + 1, cell)
        seen.add(grade_id)
        kind = "test cell" if meta.get("grade") else "read-only cell"
        flags.append(f"{kind} {grade_id!r} was missing from the submission: restored from the source")
    return flags


class _OverwriteCellsOn(OverwriteCells):
    """nbgrader's OverwriteCells, on a gradebook the caller holds open (nbgrader's opens one per
    notebook: a third of the time it takes)."""

    def __init__(self, gradebook, **kwargs) -> None:
        super().__init__(**kwargs)
        self._gradebook = gradebook

    def preprocess(self, nb, resources):
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        self.db_url = resources["nbgrader"]["db_url"]
        self.gradebook = self._gradebook
        # (add_missing_cells is off: ``restore`` has put back what was missing)
        return super(OverwriteCells, self).preprocess(nb, resources)


def _overwrite_kernelspec(nb, resources: dict, gradebook) -> None:
    """nbgrader's OverwriteKernelspec, on an open gradebook."""
    kernelspec = gradebook.find_notebook(resources["nbgrader"]["notebook"],
                                         resources["nbgrader"]["assignment"]).kernelspec
    if kernelspec:
        nb.metadata["kernelspec"] = json.loads(kernelspec)


class _RememberingValidator(MetadataValidator):
    """nbgrader's cell-metadata validator, that validates each distinct (metadata, cell type) once.

    nbgrader's checks of one cell depend on its nbgrader metadata and its cell type alone, but
    each calls ``jsonschema.validate``, which first validates nbgrader's schema itself against
    the JSON Schema metaschema: most of the time it took to prepare a notebook. After ``restore``
    every cell's nbgrader metadata is a copy of the released one, so a class's notebooks share it
    and the set remembered stays as small as the assignments graded in the process. Only what
    passed is remembered, and the notebook-wide checks (repeated grade ids) run for every notebook."""

    _passed: set[tuple[str, str]] = set()

    def validate_cell(self, cell) -> None:
        try:
            key = (str(cell.cell_type), json.dumps(cell.metadata["nbgrader"], sort_keys=True))
        except (KeyError, TypeError, ValueError):   # (no nbgrader metadata, or not JSON: not remembered)
            key = None
        if key not in self._passed:
            super().validate_cell(cell)
            if key is not None:
                self._passed.add(key)


class _CheckCellMetadata(CheckCellMetadata):
    """nbgrader's ``CheckCellMetadata`` (the same checks, the same error) with the validator above."""

    def preprocess(self, nb, resources):
        try:
            _RememberingValidator().validate_nb(nb)
        except ValidationError:
            raise ValidationError("Notebook failed to validate; the nbgrader metadata may be corrupted.") from None
        return nb, resources


def sanitize(nb, plan: NotebookPlan, resources: dict, gradebook=None) -> None:
    """nbgrader's own sanitizing, as ``nbgrader autograde`` does it (after ``restore``); on
    ``gradebook`` when the caller holds one open."""
    if gradebook is None:
        steps = (ClearOutput(), OverwriteKernelspec(), OverwriteCells(add_missing_cells=False), _CheckCellMetadata())
        for preprocessor in steps:
            nb, resources = preprocessor.preprocess(nb, resources)
        return
    nb, resources = ClearOutput().preprocess(nb, resources)
    _overwrite_kernelspec(nb, resources, gradebook)
    for preprocessor in (_OverwriteCellsOn(gradebook, add_missing_cells=False), _CheckCellMetadata()):
        nb, resources = preprocessor.preprocess(nb, resources)


def student_cells(nb) -> list[tuple[str, str]]:
    """(where, source) of the code cells the student controls: answers and cells they added."""
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("locked"):
            continue
        where = f"cell {meta['grade_id']!r}" if meta.get("grade_id") else f"cell {index}"
        cells.append((where, cell.source))
    return cells


def prepare(path: Path | None, plan: NotebookPlan, student: str, assignment: str, db_url: str,
            gradebook=None) -> Prepared:
    """The notebook to grade, or ``nb=None`` with the reason; never raises for a bad submission.
    ``gradebook``: the gradebook at ``db_url``, when the caller holds it open."""
    prepared = Prepared(student=student, notebook=plan.name, nb=None)
    if path is None or not path.exists():
        prepared.notes.append(f"{plan.name}.ipynb was not submitted: scored 0")
        return prepared
    try:
        nb, flags = load_submission(path, prepared.notes)
        prepared.flags.extend(flags)
        if nb is None:
            return prepared
        prepared.flags.extend(restore(nb, plan))
        resources = {"nbgrader": {"notebook": plan.name, "assignment": assignment, "student": student,
                                  "db_url": db_url}}
        sanitize(nb, plan, resources, gradebook)
    except (Exception, RecursionError, MemoryError) as exc:  # noqa: BLE001 - one submission's problem
        prepared.flags.append(f"{plan.name}.ipynb could not be prepared for grading: "
                              f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return prepared
    prepared.nb = nb
    return prepared


def job_cells(nb) -> list[dict]:
    """The code cells in notebook order, each with its kind: ``student`` (answers and cells the
    student added: run in the sandbox), ``readonly`` (instructor code: run in both), ``test``
    (run in the judge only)."""
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        grade_id = meta.get("grade_id")
        if meta.get("grade") and not meta.get("solution") and meta.get("locked"):
            kind = "test"
        elif meta.get("locked") and not meta.get("solution"):
            kind = "readonly"
        else:
            kind = "student"
        cells.append({"index": index, "kind": kind, "source": cell.source, "grade_id": grade_id})
    return cells


def score_tests(tests: dict[str, dict], plan: NotebookPlan) -> dict[str, float | None]:
    """Points per graded cell, fail closed: a test cell scores only with an explicit pass record;
    a cell graded by hand (a written answer) is ``None``."""
    scores: dict[str, float | None] = {}
    for grade_id, points in plan.max_scores.items():
        if grade_id not in plan.test_ids:
            scores[grade_id] = None
            continue
        record = tests.get(grade_id)
        passed = isinstance(record, dict) and record.get("passed") is True
        scores[grade_id] = points if passed else 0.0
    return scores
