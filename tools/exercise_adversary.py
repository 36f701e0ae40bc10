"""The adversary of ``tools/check_exercise.py --adversarial``: fake answers, mutants of the solution,
and the equivalence test for a mutant that keeps full marks.

An exercise's tests are only as good as the wrong answers they refuse. This module writes those
wrong answers from the solution notebook itself, as a student would hand them in:

* **fakes** (``fake_notebook``): every answer function replaced by one that returns zeros, its
  first argument, ``None``, random values of the solution's shapes, raises, or is a *self-consistent
  linear map*: a fixed linear map of the float inputs, with its exact transpose as the backward
  pass (NumPy: a ``*_backward`` function beside its ``*_forward``; torch: autograd differentiates
  the map), so that it passes any check of a backward against its own forward;
* **mutants** (``mutants``): one small change of the code between ``### BEGIN SOLUTION`` and
  ``### END SOLUTION``: a flipped sign, another axis, a dropped term, a transpose removed, an
  off-by-one, the mask ignored, a changed constant, a swapped function, comparison or pair of
  returned values, a dropped statement or accumulation;
* **the core mistake** (``core_mistake``): the wrong answer the exercise exists to teach against,
  named as ``CORE_MISTAKE`` in the exercise's ``reference.py`` (so never released and all secret):
  a visible test must fail on it with a message that names it;
* **equivalence** (``python tools/exercise_adversary.py run JOB OUT``, run in a process of
  its own): the solution's test cells are run once with every call of an answer function
  recorded (a value passed from one call's output to the next, such as a cache, is recorded as
  that link); each surviving mutant and the solution then replay the calls, on the recorded
  inputs and on random perturbations of them (attention weights stay rows that sum to one,
  masks stay as they are), and must agree on every output and, for torch code, every gradient.
  A mutant that agrees is *equivalent* (no test can tell it apart); one that does not is a
  *survivor*: the tests miss a real mistake.

Nothing here runs inside the grader: the fakes and mutants are notebooks graded like any
student's. The fake functions' helpers start with ``_`` so that the judge does not take them for
the exercise's answers.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
FAKE_KINDS = ("zeros", "first_argument", "none", "random", "exception", "linear")
SOLUTION_PREFIX = "_adv_solution_"


# ------------------------------------------------------------------------------------------------
# Notebook structure
def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def answer_cells(nb) -> list:
    """The solution (answer) code cells, in notebook order."""
    return [cell for cell in nb.cells if cell.cell_type == "code" and _meta(cell).get("solution")]


def answer_functions(nb) -> list[str]:
    """The public top-level functions the answer cells define (what the tests call)."""
    names = []
    for cell in answer_cells(nb):
        for node in ast.parse(cell.source).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and node.name not in names:
                names.append(node.name)
    return names


def _defined_functions(nb) -> set[str]:
    found = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        found.update(node.name for node in tree.body if isinstance(node, ast.FunctionDef))
    return found


def roles(nb) -> dict[str, str]:
    """``"forward"``, ``"backward"`` or ``"plain"`` for each answer function.

    A backward function is named ``<stem>_backward`` and has a forward ``<stem>_forward`` or
    ``<stem>`` in the notebook (an answer or given code): it takes the upstream gradients, then the
    forward's cache as its last positional argument, and returns one gradient per float input of
    the forward, in the forward's order. A forward of an answer backward returns its cache last.
    """
    defined = _defined_functions(nb)
    found = {}
    for name in answer_functions(nb):
        found[name] = "plain"
    for name in answer_functions(nb):
        if name.endswith("_backward"):
            stem = name[: -len("_backward")]
            partner = next((f for f in (f"{stem}_forward", stem) if f in defined), None)
            if partner is not None:
                found[name] = "backward"
                if partner in found:
                    found[partner] = "forward"
    return found


# ------------------------------------------------------------------------------------------------
# Fakes
# The helpers a fake answer cell defines (they run in the grading sandbox: NumPy always, torch only
# when an argument is a tensor). Every name starts with "_": the judge proxies only public names.
FAKE_RUNTIME = r'''
import numpy as _adv_np


def _adv_is_tensor(value):
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def _adv_is_float(value):
    if isinstance(value, _adv_np.ndarray):
        return value.dtype.kind == "f"
    return _adv_is_tensor(value) and value.is_floating_point()


def _adv_map(fn, value):
    if isinstance(value, (_adv_np.ndarray, bool, int, float, _adv_np.generic)) or _adv_is_tensor(value):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(_adv_map(fn, item) for item in value)
    if isinstance(value, list):
        return [_adv_map(fn, item) for item in value]
    if isinstance(value, dict):
        return {key: _adv_map(fn, item) for key, item in value.items()}
    return value


def _adv_leaves(value, found):
    if _adv_is_float(value):
        found.append(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _adv_leaves(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _adv_leaves(item, found)
    return found


def _adv_zero(value):
    if _adv_is_tensor(value):
        import torch
        return torch.zeros_like(value)
    if isinstance(value, _adv_np.ndarray):
        return _adv_np.zeros_like(value)
    return type(value)(0)


_ADV_RNG = _adv_np.random.default_rng(20240601)


def _adv_random(value):
    if _adv_is_tensor(value):
        import torch
        if value.dtype == torch.bool:
            return torch.as_tensor(_ADV_RNG.random(tuple(value.shape)) < 0.5)
        if not value.is_floating_point():
            return torch.as_tensor(_ADV_RNG.integers(0, 3, tuple(value.shape)), dtype=value.dtype)
        return torch.as_tensor(_ADV_RNG.standard_normal(tuple(value.shape)), dtype=value.dtype)
    if isinstance(value, _adv_np.ndarray):
        if value.dtype == bool:
            return _ADV_RNG.random(value.shape) < 0.5
        if value.dtype.kind in "iu":
            return _ADV_RNG.integers(0, 3, value.shape).astype(value.dtype)
        return _ADV_RNG.standard_normal(value.shape).astype(value.dtype)
    if isinstance(value, bool):
        return bool(_ADV_RNG.random() < 0.5)
    if isinstance(value, int):
        return int(_ADV_RNG.integers(0, 3))
    return float(_ADV_RNG.standard_normal())


def _adv_size(value):
    return int(value.numel()) if _adv_is_tensor(value) else int(value.size)


def _adv_taps(k, j, n_out, n_in):
    """A fixed sparse linear map from n_in to n_out numbers: three random taps per output."""
    rng = _adv_np.random.default_rng([k, j, n_out, max(n_in, 1), 7])
    return rng.integers(0, max(n_in, 1), size=(3, n_out)), rng.standard_normal((3, n_out)) / _adv_np.sqrt(3.0)


def _adv_linear(k, inputs, like):
    """Output k of the fake linear map: sum over inputs j of taps(k, j) applied to input j."""
    n_out = _adv_size(like)
    if _adv_is_tensor(like):
        import torch
        total = torch.zeros(n_out, dtype=like.dtype)
        for j, x in enumerate(inputs):
            if not _adv_is_tensor(x) or _adv_size(x) == 0:
                continue
            index, coef = _adv_taps(k, j, n_out, _adv_size(x))
            flat = x.reshape(-1).to(like.dtype)
            total = total + (flat[torch.as_tensor(index)] * torch.as_tensor(coef, dtype=like.dtype)).sum(0)
        return total.reshape(like.shape)
    total = _adv_np.zeros(n_out, dtype=like.dtype)
    for j, x in enumerate(inputs):
        if _adv_is_tensor(x) or _adv_size(x) == 0:
            continue
        index, coef = _adv_taps(k, j, n_out, _adv_size(x))
        total += (_adv_np.asarray(x, dtype=like.dtype).reshape(-1)[index] * coef).sum(0)
    return total.reshape(like.shape)


def _adv_linear_transpose(j, douts, like):
    """Gradient j of the fake linear map: the exact transpose of _adv_linear."""
    n_in = _adv_size(like)
    grad = _adv_np.zeros(n_in, dtype=like.dtype)
    for k, dout in enumerate(douts):
        if _adv_size(dout) == 0 or n_in == 0:
            continue
        index, coef = _adv_taps(k, j, _adv_size(dout), n_in)
        _adv_np.add.at(grad, index.ravel(), (coef * _adv_np.asarray(dout).reshape(-1)[None, :]).ravel())
    return grad.reshape(like.shape)


def _adv_replace_leaves(value, make, counter):
    if _adv_is_float(value):
        counter[0] += 1
        return make(counter[0] - 1, value)
    if isinstance(value, tuple):
        return tuple(_adv_replace_leaves(item, make, counter) for item in value)
    if isinstance(value, list):
        return [_adv_replace_leaves(item, make, counter) for item in value]
    if isinstance(value, dict):
        return {key: _adv_replace_leaves(item, make, counter) for key, item in value.items()}
    return value


def _adv_fake_call(kind, role, solution, args, kwargs):
    if kind == "exception":
        raise RuntimeError("an answer that gives up")
    if kind == "none":
        return None
    if kind == "first_argument":
        return args[0] if args else next(iter(kwargs.values()), None)
    if kind in ("zeros", "random"):
        return _adv_map(_adv_zero if kind == "zeros" else _adv_random, solution(*args, **kwargs))
    # kind == "linear": a fixed linear map of the float inputs, and its transpose
    if role == "backward":
        cache = args[-1] if args else None
        shapes = None
        if isinstance(cache, dict) and "_adv_cache" in cache:
            shapes, cache = [tuple(s) for s in cache["_adv_shapes"]], cache["_adv_cache"]
        out = solution(*(tuple(args[:-1]) + (cache,)), **kwargs)
        douts = _adv_leaves((tuple(args[:-1]), kwargs), [])
        used = set()

        def gradient(order, like):
            j = order
            if shapes is not None:
                j = next((i for i, s in enumerate(shapes) if s == tuple(like.shape) and i not in used), order)
            used.add(j)
            return _adv_linear_transpose(j, douts, like)

        return _adv_replace_leaves(out, gradient, [0])
    inputs = _adv_leaves((args, kwargs), [])
    out = solution(*args, **kwargs)
    if role == "forward" and isinstance(out, tuple) and out:
        body = _adv_replace_leaves(out[:-1], lambda k, like: _adv_linear(k, inputs, like), [0])
        return tuple(body) + ({"_adv_cache": out[-1], "_adv_shapes": [list(x.shape) for x in inputs]},)
    return _adv_replace_leaves(out, lambda k, like: _adv_linear(k, inputs, like), [0])
'''


class _Rename(ast.NodeTransformer):
    def __init__(self, names: set[str]):
        self.names = names

    def visit_Name(self, node):
        if node.id in self.names:
            return ast.copy_location(ast.Name(id=SOLUTION_PREFIX + node.id, ctx=node.ctx), node)
        return node

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        if node.name in self.names:
            node.name = SOLUTION_PREFIX + node.name
        return node


def _fake_cell(source: str, faked: set[str], kind: str, role_of: dict[str, str]) -> str:
    tree = ast.parse(source)
    defined = [node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in faked]
    tree = _Rename(faked).visit(tree)
    lines = [FAKE_RUNTIME, ast.unparse(tree), ""]
    for name in defined:
        lines.append(f"def {name}(*args, **kwargs):\n"
                     f"    return _adv_fake_call({kind!r}, {role_of.get(name, 'plain')!r}, "
                     f"{SOLUTION_PREFIX}{name}, args, kwargs)\n")
    return "\n".join(lines)


def fake_answers(nb, kind: str, only: str | None = None) -> dict[str, str]:
    """grade_id -> the answer cell's source for a fake of ``kind`` (every function, or ``only`` one)."""
    if kind not in FAKE_KINDS:
        raise ValueError(f"unknown fake {kind!r}: one of {', '.join(FAKE_KINDS)}")
    functions = answer_functions(nb)
    faked = {only} if only else set(functions)
    if only is not None and only not in functions:
        raise ValueError(f"{only!r} is not an answer function ({', '.join(functions)})")
    role_of = roles(nb)
    answers = {}
    for cell in answer_cells(nb):
        # a cell that refers to a faked function gets the renamed solution too, so that it can call it
        tree = ast.parse(cell.source)
        mentions = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} | \
                   {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        if mentions & faked:
            defines_faked = any(isinstance(node, ast.FunctionDef) and node.name in faked for node in tree.body)
            if defines_faked:
                answers[_meta(cell)["grade_id"]] = _fake_cell(cell.source, faked, kind, role_of)
    return answers


# ------------------------------------------------------------------------------------------------
# The core mistake: the wrong answer the exercise exists to teach against
CORE_MISTAKE = "CORE_MISTAKE"   # its name in the exercise's reference.py (never released, all secret)
CORE_MISTAKE_KEYS = ("what", "message", "answers")
HIDDEN_BEGIN = "### BEGIN HIDDEN TESTS"
HIDDEN_FAILED = "a hidden test of this cell failed"   # how the judge's feedback on a hidden part starts


def core_mistake(reference_file) -> dict | None:
    """The exercise's core mistake, as its ``reference.py`` names it (read, never run), or None.

    ``CORE_MISTAKE = {"what": ..., "message": ..., "answers": {function: body}}``: ``what`` says
    the mistake in a sentence, ``message`` is what the failure message of a visible test must
    contain (the words that name the mistake), ``answers`` the body of each answer function
    that makes it (indented as you like; it replaces the code between the solution markers).
    """
    if reference_file is None or not Path(reference_file).is_file():
        return None
    tree = ast.parse(Path(reference_file).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == CORE_MISTAKE
                                                for t in node.targets):
            value = ast.literal_eval(node.value)
            if not isinstance(value, dict) or sorted(value) != sorted(CORE_MISTAKE_KEYS):
                raise ValueError(f"{reference_file}: {CORE_MISTAKE} must be a dict with the keys "
                                 f"{', '.join(CORE_MISTAKE_KEYS)}")
            if not (isinstance(value["answers"], dict) and value["answers"]
                    and all(isinstance(k, str) and isinstance(v, str) for k, v in value["answers"].items())):
                raise ValueError(f"{reference_file}: {CORE_MISTAKE}['answers'] maps answer functions to bodies")
            if not (isinstance(value["message"], str) and value["message"].strip()):
                raise ValueError(f"{reference_file}: {CORE_MISTAKE}['message'] is the text a visible failure must hold")
            return value
    return None


def with_body(source: str, body: str) -> str:
    """An answer cell's ``source`` with the code between its solution markers replaced by ``body``
    (dedented, then indented as the markers are), the markers dropped, as a student hands it in."""
    import textwrap

    lines = source.split("\n")
    begin = next(i for i, line in enumerate(lines) if BEGIN in line)
    end = next(i for i, line in enumerate(lines) if END in line)
    indent = re.match(r"\s*", lines[begin]).group(0)
    new = [indent + line if line.strip() else "" for line in textwrap.dedent(body).strip("\n").split("\n")]
    return "\n".join(lines[:begin] + new + lines[end + 1:])


def core_mistake_answers(nb, mistake: dict) -> dict[str, str]:
    """grade_id -> the answer cell's source with the core mistake made (the other answers solved)."""
    answers = {}
    for function, body in mistake["answers"].items():
        cells = [cell for cell in answer_cells(nb)
                 if any(isinstance(node, ast.FunctionDef) and node.name == function for node in ast.parse(cell.source).body)]
        if len(cells) != 1:
            raise ValueError(f"the core mistake names {function!r}, which {len(cells)} answer cells define")
        grade_id = _meta(cells[0])["grade_id"]
        answers[grade_id] = with_body(answers.get(grade_id, cells[0].source), body)
    return answers


def visible_part(source: str) -> str:
    """What a test cell runs before its first hidden part (the student sees it)."""
    return source.split(HIDDEN_BEGIN, 1)[0]


def names_the_mistake(record: dict, mistake: dict) -> bool:
    """Whether a test cell's grading record is a failure of its *visible* part whose message holds
    the core mistake's ``message`` (a hidden part's failure shows only the instructor's reason)."""
    feedback = str(record.get("feedback", ""))
    return (not record.get("passed") and not feedback.startswith(HIDDEN_FAILED)
            and mistake["message"].lower() in str(record.get("message", "")).lower())


# ------------------------------------------------------------------------------------------------
# Mutants
@dataclass
class Mutant:
    grade_id: str
    line: int            # in the answer cell, 1-based
    kind: str
    before: str
    after: str
    source: str          # the whole mutated answer cell

    @property
    def description(self) -> str:
        return f"{self.kind}: line {self.line}: `{self.before}` -> `{self.after}`"


SWAPPED_CALLS = {"tanh": ["sigmoid"], "sigmoid": ["tanh"], "exp": ["log"], "log": ["exp"],
                 "sum": ["mean"], "mean": ["sum"], "max": ["min"], "min": ["max"], "amax": ["amin"],
                 "amin": ["amax"], "maximum": ["minimum"], "minimum": ["maximum"], "cumsum": ["cumprod"],
                 "relu": ["abs"], "softmax": ["log_softmax"], "sqrt": ["square"], "square": ["sqrt"]}
DROPPED_CALLS = {"transpose", "swapaxes", "flip", "abs", "sqrt", "exp", "tanh", "sigmoid", "relu", "clamp",
                 "clip", "square", "squeeze", "contiguous"}
FLIPPED_COMPARE = {ast.Lt: [ast.LtE, ast.Gt], ast.LtE: [ast.Lt, ast.GtE], ast.Gt: [ast.GtE, ast.Lt],
                   ast.GtE: [ast.Gt, ast.LtE], ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq]}
BINOP_SWAP = {ast.Add: [ast.Sub], ast.Sub: [ast.Add], ast.Mult: [ast.Div], ast.Div: [ast.Mult],
              ast.Pow: [ast.Mult], ast.FloorDiv: [ast.Div], ast.Mod: [ast.FloorDiv]}


def _solution_lines(source: str) -> tuple[int, int] | None:
    lines = source.split("\n")
    begin = next((i for i, line in enumerate(lines) if BEGIN in line), None)
    end = next((i for i, line in enumerate(lines) if END in line), None)
    if begin is None or end is None:
        return None
    return begin + 2, end  # 1-based, inclusive: the lines strictly between the markers


def _segment(source: str, node) -> str:
    return ast.get_source_segment(source, node) or ast.unparse(node)


def _offsets(source: str) -> list[int]:
    starts, total = [], 0
    for line in source.split("\n"):
        starts.append(total)
        total += len(line.encode("utf-8")) + 1
    return starts


def _replace(source: str, node, text: str) -> str:
    """``source`` with ``node``'s span replaced by ``text`` (AST offsets are UTF-8 byte columns)."""
    data = source.encode("utf-8")
    starts = _offsets(source)
    start = starts[node.lineno - 1] + node.col_offset
    end = starts[node.end_lineno - 1] + node.end_col_offset
    return (data[:start] + text.encode("utf-8") + data[end:]).decode("utf-8")


def _paren(node) -> str:
    return f"({ast.unparse(node)})"


def _call_name(node) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            return func.attr
        if isinstance(func, ast.Name):
            return func.id
    return None


def _swapped_call(node, name: str) -> ast.Call:
    new = copy.deepcopy(node)
    if isinstance(new.func, ast.Attribute):
        new.func.attr = name
    else:
        new.func.id = name
    return new


def _is_mask_name(node) -> bool:
    return isinstance(node, ast.Name) and "mask" in node.id.lower()


def _node_edits(node, source: str) -> list[tuple[str, object, str]]:
    """(kind, node to replace, replacement text) for one expression node."""
    edits = []
    if isinstance(node, ast.BinOp) and (_is_mask_name(node.left) or _is_mask_name(node.right)):
        other = node.right if _is_mask_name(node.left) else node.left
        edits.append(("mask ignored", node, _paren(other)))
    if isinstance(node, ast.BinOp):
        for other in BINOP_SWAP.get(type(node.op), []):
            kind = "flipped sign" if isinstance(node.op, (ast.Add, ast.Sub)) else "another operator"
            edits.append((kind, node, _paren(ast.BinOp(left=node.left, op=other(), right=node.right))))
        if isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
            edits.append(("dropped term", node, _paren(node.left)))
            if not isinstance(node.op, ast.Pow):
                edits.append(("dropped term", node, _paren(node.right)))
        if isinstance(node.op, ast.Sub):
            edits.append(("flipped sign", node, _paren(ast.BinOp(left=node.right, op=ast.Sub(), right=node.left))))
        if isinstance(node.op, ast.MatMult):
            edits.append(("transpose", node, _paren(ast.BinOp(left=node.right, op=ast.MatMult(), right=node.left))))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        if isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, int) \
                and not isinstance(node.operand.value, bool):
            value = -node.operand.value
            for new in (value - 1, value + 1):
                edits.append(("off by one" if abs(new) > 0 else "another axis", node, f"({new})"))
        else:
            edits.append(("flipped sign", node, _paren(node.operand)))
    elif isinstance(node, ast.Constant) and not isinstance(node.value, bool):
        if isinstance(node.value, int):
            for new in (node.value + 1, node.value - 1):
                edits.append(("off by one", node, f"({new})"))
        elif isinstance(node.value, float):
            options = [0.0, 2 * node.value, node.value / 2, -node.value] if node.value else [1.0]
            for new in dict.fromkeys(options):
                if new != node.value:
                    edits.append(("changed constant", node, repr(new)))
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        edits.append(("changed constant", node, repr(not node.value)))
    elif isinstance(node, ast.Attribute) and node.attr in ("T", "mT", "H") and isinstance(node.ctx, ast.Load):
        edits.append(("transpose", node, _paren(node.value)))
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        for other in FLIPPED_COMPARE.get(type(node.ops[0]), []):
            edits.append(("another comparison", node,
                          _paren(ast.Compare(left=node.left, ops=[other()], comparators=node.comparators))))
    elif isinstance(node, ast.Call):
        name = _call_name(node)
        for other in SWAPPED_CALLS.get(name, []):
            edits.append(("another function", node, _paren(_swapped_call(node, other))))
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        is_module = isinstance(receiver, ast.Name) and receiver.id in ("np", "numpy", "torch", "F", "math")
        if name in DROPPED_CALLS:
            if receiver is not None and not is_module:
                edits.append(("dropped call", node, _paren(receiver)))
            elif node.args:
                edits.append(("dropped call", node, _paren(node.args[0])))
        if name == "einsum" and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            for spec in _einsum_swaps(node.args[0].value):
                new = copy.deepcopy(node)
                new.args[0] = ast.Constant(value=spec)
                edits.append(("another axis", node, _paren(new)))
        if name == "where" and len(node.args) == 3:
            edits.append(("mask ignored", node, _paren(node.args[1])))
            edits.append(("mask ignored", node, _paren(node.args[2])))
        if name in ("masked_fill", "masked_fill_") and receiver is not None:
            edits.append(("mask ignored", node, _paren(receiver)))
        for index, arg in enumerate(node.args):
            if _is_mask_name(arg):
                new = copy.deepcopy(node)
                new.args[index] = ast.Constant(value=None)
                edits.append(("mask ignored", node, _paren(new)))
        for index, keyword in enumerate(node.keywords):
            if _is_mask_name(keyword.value):
                new = copy.deepcopy(node)
                new.keywords[index].value = ast.Constant(value=None)
                edits.append(("mask ignored", node, _paren(new)))
        if len(node.args) >= 2 and name not in ("where", "range", "reshape", "view", "zeros", "ones", "empty",
                                                 "full", "arange", "linspace", "einsum"):
            new = copy.deepcopy(node)
            new.args[0], new.args[1] = new.args[1], new.args[0]
            edits.append(("swapped arguments", node, _paren(new)))
    elif isinstance(node, (ast.List, ast.Tuple)) and isinstance(node.ctx, ast.Load) and len(node.elts) >= 2:
        for index in range(len(node.elts) - 1):
            new = copy.deepcopy(node)
            new.elts[index], new.elts[index + 1] = new.elts[index + 1], new.elts[index]
            edits.append(("swapped values", node, _paren(new)))
    elif isinstance(node, ast.Subscript):
        edits += _index_edits(node)
    return edits


def _einsum_swaps(spec: str) -> list[str]:
    """The subscripts with two neighbouring letters of one operand (or of the output) swapped."""
    found = []
    parts = spec.replace(" ", "").split("->")
    operands = parts[0].split(",")
    for index, operand in enumerate(operands + parts[1:]):
        for position in range(len(operand) - 1):
            if operand[position] == operand[position + 1] or "." in operand[position:position + 2]:
                continue
            swapped = operand[:position] + operand[position + 1] + operand[position] + operand[position + 2:]
            new_operands = list(operands)
            output = parts[1:]
            if index < len(operands):
                new_operands[index] = swapped
            else:
                output = [swapped]
            found.append(",".join(new_operands) + ("->" + output[0] if output else ""))
    return found


def _shift(expr, delta: int):
    return ast.BinOp(left=copy.deepcopy(expr), op=ast.Add() if delta > 0 else ast.Sub(), right=ast.Constant(abs(delta)))


def _index_edits(node: ast.Subscript) -> list:
    """Off-by-one edits of a subscript's index expressions and slice bounds that are not literals
    (literal bounds are already mutated as constants)."""
    edits = []
    elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    for position, element in enumerate(elements):
        targets = []
        if isinstance(element, ast.Slice):
            targets = [(bound, getattr(element, bound)) for bound in ("lower", "upper")
                       if getattr(element, bound) is not None]
        elif isinstance(element, (ast.Name, ast.BinOp)):
            targets = [(None, element)]
        for bound, expr in targets:
            if isinstance(expr, ast.Constant) or (isinstance(expr, ast.UnaryOp) and isinstance(expr.operand, ast.Constant)):
                continue
            for delta in (1, -1):
                new = copy.deepcopy(node)
                new_elements = new.slice.elts if isinstance(new.slice, ast.Tuple) else None
                target = new_elements[position] if new_elements is not None else new.slice
                if bound is None:
                    if new_elements is not None:
                        new_elements[position] = _shift(expr, delta)
                    else:
                        new.slice = _shift(expr, delta)
                else:
                    setattr(target, bound, _shift(expr, delta))
                edits.append(("off by one", node, _paren(new)))
    return edits


def _statement_edits(statement, assigned_before: set[str], source: str) -> list[tuple[str, object, str]]:
    edits = []
    if isinstance(statement, ast.AugAssign):
        target = _segment(source, statement.target)
        value = _segment(source, statement.value)
        edits.append(("dropped accumulation", statement, f"{target} = {value}"))
        edits.append(("dropped statement", statement, "pass"))
    elif isinstance(statement, ast.Assign):
        names = {n.id for t in statement.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        subscript = any(isinstance(t, ast.Subscript) for t in statement.targets)
        if subscript or (names and names <= assigned_before):
            edits.append(("dropped statement", statement, "pass"))
    elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        edits.append(("dropped statement", statement, "pass"))
    values = []
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        values = [statement.value]
    elif isinstance(statement, ast.Return) and statement.value is not None:
        values = statement.value.elts if isinstance(statement.value, ast.Tuple) else [statement.value]
    for value in values:
        if isinstance(value, (ast.BinOp, ast.Call, ast.Subscript, ast.Name)):
            edits.append(("flipped sign", value, f"(-{_paren(value)})"))
    return edits


def mutants(nb) -> list[Mutant]:
    """Every single-edit mutant of the solution code (between the markers) of every answer cell,
    without duplicates or no-ops, in a fixed order."""
    found: list[Mutant] = []
    seen: set[str] = set()
    for cell in answer_cells(nb):
        source = cell.source
        region = _solution_lines(source)
        if region is None:
            continue
        first, last = region
        original = ast.dump(ast.parse(source))
        seen.add(original)
        tree = ast.parse(source)
        edits = []
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.Module)):
                continue
            assigned: set[str] = {a.arg for a in function.args.args} if isinstance(function, ast.FunctionDef) else set()
            for statement in _statements(function.body):
                if first <= statement.lineno and statement.end_lineno <= last:
                    edits += _statement_edits(statement, set(assigned), source)
                for target in getattr(statement, "targets", []) + ([statement.target] if hasattr(statement, "target") else []):
                    assigned.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        for node in ast.walk(tree):
            if isinstance(node, (ast.expr,)) and hasattr(node, "lineno") and first <= node.lineno \
                    and node.end_lineno <= last and not _in_docstring(node, tree):
                edits += _node_edits(node, source)
        for kind, node, text in edits:
            try:
                new_source = _replace(source, node, text) if not isinstance(node, ast.stmt) \
                    else _replace_statement(source, node, text)
                dumped = ast.dump(ast.parse(new_source))
            except SyntaxError:
                continue
            if dumped in seen:
                continue
            seen.add(dumped)
            line, before, after = _changed_line(source, new_source)
            found.append(Mutant(grade_id=_meta(cell)["grade_id"], line=line, kind=kind, before=before, after=after,
                                source=new_source))
    return found


def _changed_line(source: str, new_source: str) -> tuple[int, str, str]:
    """The first line that differs (1-based), before and after, shortened."""
    old_lines, new_lines = source.split("\n"), new_source.split("\n")
    for index, (old, new) in enumerate(zip(old_lines, new_lines)):
        if old != new:
            return index + 1, _shorten(old, new), _shorten(new, old)
    index = min(len(old_lines), len(new_lines))
    return index + 1, (old_lines[index:] or [""])[0].strip(), (new_lines[index:] or [""])[0].strip()


def _shorten(line: str, other: str, room: int = 90) -> str:
    """``line`` stripped, cut to ``room`` characters around where it differs from ``other``."""
    line, other = line.strip(), other.strip()
    if len(line) <= room:
        return line
    start = next((i for i, (a, b) in enumerate(zip(line, other)) if a != b), 0)
    start = max(0, min(start - room // 3, len(line) - room))
    return ("..." if start else "") + line[start:start + room] + ("..." if start + room < len(line) else "")


def _statements(body):
    for statement in body:
        yield statement
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(statement, name, None)
            if inner and not isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
                yield from _statements(inner)


def _replace_statement(source: str, node, text: str) -> str:
    lines = source.split("\n")
    indent = re.match(r"\s*", lines[node.lineno - 1]).group(0)
    return "\n".join(lines[: node.lineno - 1] + [indent + text] + lines[node.end_lineno:])


def _in_docstring(node, tree) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def sample(found: list[Mutant], limit: int | None, seed: int = 0) -> list[Mutant]:
    """At most ``limit`` mutants, one of each kind of edit in turn (the kinds in an order ``seed``
    picks), each kind's drawn at random; all of them when ``limit`` is None."""
    if limit is None or len(found) <= limit:
        return list(found)
    import random

    rng = random.Random(seed)
    groups: dict[str, list[Mutant]] = {}
    for mutant in found:
        groups.setdefault(mutant.kind, []).append(mutant)
    kinds = sorted(groups)
    rng.shuffle(kinds)
    for kind in kinds:
        rng.shuffle(groups[kind])
    chosen: list[Mutant] = []
    while len(chosen) < limit:
        for kind in kinds:
            if groups[kind] and len(chosen) < limit:
                chosen.append(groups[kind].pop())
    return sorted(chosen, key=found.index)


# ------------------------------------------------------------------------------------------------
# Equivalence (runs in a process of its own: ``python tools/exercise_adversary.py run JOB OUT``)
@dataclass
class Call:
    function: str
    args: object          # the arguments, with ("__link__", call, path) where a value came from an earlier call
    kwargs: object


@dataclass
class Recorder:
    """Wraps the answer functions and records every call; ``kept()`` is a few per function and shape,
    with the calls whose outputs they take as inputs (a cache, say)."""

    limit_per_signature: int = 3
    limit: int = 20000
    calls: list = field(default_factory=list)
    signatures: list = field(default_factory=list)
    outputs: list = field(default_factory=list)      # kept alive, so that ids stay unique
    origin: dict = field(default_factory=dict)       # id(value) -> (call index, path)

    def wrap(self, name, fn):
        def recorded(*args, **kwargs):
            if len(self.calls) >= self.limit:
                return fn(*args, **kwargs)
            self.signatures.append(_signature(name, (args, kwargs)))
            self.calls.append(Call(name, self._freeze(args), self._freeze(kwargs)))
            out = fn(*args, **kwargs)
            self.outputs.append(out)
            self._index(out, len(self.calls) - 1, ())
            return out

        recorded.__wrapped__ = fn
        return recorded

    def _index(self, value, call, path):
        if isinstance(value, (bool, int, float, str, type(None))):
            return
        self.origin[id(value)] = (call, path)
        if isinstance(value, (tuple, list)):
            for index, item in enumerate(value):
                self._index(item, call, path + (index,))
        elif isinstance(value, dict):
            for key, item in value.items():
                self._index(item, call, path + (key,))

    def _freeze(self, value):
        if id(value) in self.origin and not isinstance(value, (bool, int, float, str, type(None))):
            call, path = self.origin[id(value)]
            return ("__link__", call, list(path))
        if isinstance(value, tuple):
            return tuple(self._freeze(item) for item in value)
        if isinstance(value, list):
            return [self._freeze(item) for item in value]
        if isinstance(value, dict):
            return {key: self._freeze(item) for key, item in value.items()}
        return _copy_value(value)

    def kept(self) -> list[Call]:
        counts: dict = {}
        keep: set[int] = set()
        for index, signature in enumerate(self.signatures):
            if counts.get(signature, 0) < self.limit_per_signature:
                counts[signature] = counts.get(signature, 0) + 1
                keep.add(index)
        pending = list(keep)
        while pending:
            for link in _links(self.calls[pending.pop()]):
                if link not in keep:
                    keep.add(link)
                    pending.append(link)
        order = sorted(keep)
        renumber = {old: new for new, old in enumerate(order)}
        return [Call(self.calls[i].function, _renumber(self.calls[i].args, renumber),
                     _renumber(self.calls[i].kwargs, renumber)) for i in order]


def _signature(name, value):
    shapes = []

    def walk(v):
        if hasattr(v, "shape"):
            shapes.append(tuple(v.shape))
        elif isinstance(v, (tuple, list)):
            for item in v:
                walk(item)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)
    walk(value)
    return name, tuple(shapes)


def _links(call: Call) -> list[int]:
    found = []

    def walk(v):
        if _is_link(v):
            found.append(v[1])
        elif isinstance(v, (tuple, list)):
            for item in v:
                walk(item)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)
    walk((call.args, call.kwargs))
    return found


def _renumber(value, renumber):
    if _is_link(value):
        return ("__link__", renumber[value[1]], value[2])
    if isinstance(value, tuple):
        return tuple(_renumber(item, renumber) for item in value)
    if isinstance(value, list):
        return [_renumber(item, renumber) for item in value]
    if isinstance(value, dict):
        return {key: _renumber(item, renumber) for key, item in value.items()}
    return value


def _is_tensor(value) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def _copy_value(value):
    if _is_tensor(value):
        copied = value.detach().clone()
        return copied.requires_grad_(value.requires_grad) if copied.is_floating_point() else copied
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - a value that cannot be copied is passed as it is
        return value


def _is_link(value) -> bool:
    return isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], str) and value[0] == "__link__"


def _follow(outputs, link):
    value = outputs[link[1]]
    for step in link[2]:
        value = value[step]
    return value


def _perturbed(value, rng, strength: int):
    """A random neighbour of a recorded input: weights stay weights, signs of non-negative values and
    exact zeros (padding) stay, masks and integers stay as they are."""
    import numpy as np

    if strength == 0:
        return _copy_value(value)
    if _is_tensor(value):
        if not value.is_floating_point():
            return value.clone()
        import torch

        array = _perturbed(value.detach().cpu().numpy().astype(np.float64), rng, strength)
        return torch.as_tensor(array, dtype=value.dtype).requires_grad_(value.requires_grad)
    if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size:
        noise = rng.standard_normal(value.shape)
        if value.min() >= 0:
            new = value * np.exp(0.7 * noise)
            sums = value.sum(axis=-1, keepdims=True)
            if np.all((np.abs(sums - 1) < 1e-9) | (sums == 0)):
                total = new.sum(axis=-1, keepdims=True)
                new = np.where(total > 0, new / np.where(total > 0, total, 1), 0.0)
            return new.astype(value.dtype)
        spread = float(value.std()) or 1.0
        return np.where(value == 0, 0.0, value + 0.5 * spread * noise).astype(value.dtype)
    if isinstance(value, float) and not isinstance(value, bool):
        return value * float(np.exp(0.2 * rng.standard_normal())) if value > 0 else value
    if isinstance(value, tuple):
        return tuple(_perturbed(item, rng, strength) for item in value)
    if isinstance(value, list):
        return [_perturbed(item, rng, strength) for item in value]
    if isinstance(value, dict):
        return {key: _perturbed(item, rng, strength) for key, item in value.items()}
    return _copy_value(value)


def _resolve(value, outputs, rng, strength):
    if _is_link(value):
        return _follow(outputs, value)
    if isinstance(value, tuple):
        return tuple(_resolve(item, outputs, rng, strength) for item in value)
    if isinstance(value, list):
        return [_resolve(item, outputs, rng, strength) for item in value]
    if isinstance(value, dict):
        return {key: _resolve(item, outputs, rng, strength) for key, item in value.items()}
    return _perturbed(value, rng, strength)


def _float_leaves(value, found):
    import numpy as np

    if _is_tensor(value):
        found.append(value.detach().cpu().double().numpy())
    elif isinstance(value, np.ndarray):
        found.append(value.astype(np.float64) if value.dtype.kind in "biuf" else value)
    elif isinstance(value, (bool, int, float)):
        found.append(np.asarray(float(value)))
    elif isinstance(value, (tuple, list)):
        for item in value:
            _float_leaves(item, found)
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            _float_leaves(value[key], found)
    elif value is None:
        found.append(None)
    return found


def _agree(a, b, rtol=1e-6) -> str | None:
    """None when the two results agree, else what differs."""
    import numpy as np

    left, right = _float_leaves(a, []), _float_leaves(b, [])
    if len(left) != len(right):
        return f"{len(left)} values against {len(right)}"
    for index, (x, y) in enumerate(zip(left, right)):
        if x is None or y is None:
            if (x is None) != (y is None):
                return f"value {index}: None against a value"
            continue
        if x.shape != y.shape:
            return f"value {index}: shape {x.shape} against {y.shape}"
        if x.dtype.kind not in "biuf" or y.dtype.kind not in "biuf":
            continue
        if not np.array_equal(np.isnan(x), np.isnan(y)):
            return f"value {index}: NaN at different places"
        finite = ~np.isnan(x)
        scale = max(1.0, float(np.abs(y[finite]).max()) if finite.any() else 1.0)
        if finite.any() and not np.allclose(x[finite], y[finite], rtol=rtol, atol=1e-9 * scale, equal_nan=True):
            worst = float(np.abs(x[finite] - y[finite]).max())
            return f"value {index}: differs by up to {worst:.3g}"
    return None


def _gradients(fn, args, kwargs, rng):
    """For torch code: the output and the gradients of sum(dout * output) for every float tensor
    argument (made to require a gradient), or None when there is no float tensor argument."""
    import numpy as np
    import torch

    leaves = []

    def mark(value):
        if _is_tensor(value) and value.is_floating_point():
            value = value.detach().clone().requires_grad_(True)
            leaves.append(value)
            return value
        if isinstance(value, tuple):
            return tuple(mark(item) for item in value)
        if isinstance(value, list):
            return [mark(item) for item in value]
        if isinstance(value, dict):
            return {key: mark(item) for key, item in value.items()}
        return value

    args, kwargs = mark(args), mark(kwargs)
    if not leaves:
        return None
    out = fn(*args, **kwargs)
    outs = [o for o in (out if isinstance(out, (tuple, list)) else [out]) if _is_tensor(o) and o.requires_grad]
    if not outs:
        return [np.zeros(leaf.shape) for leaf in leaves]
    douts = [torch.as_tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype) for o in outs]
    grads = torch.autograd.grad(outs, leaves, douts, allow_unused=True)
    return [np.zeros(tuple(leaf.shape)) if g is None else g.detach().double().numpy() for leaf, g in zip(leaves, grads)]


def _namespace(cells: list[str], reference):
    namespace = {"__name__": "__exercise__", "reference": reference}
    for source in cells:
        exec(compile(source, "<cell>", "exec"), namespace)  # noqa: S102 - the instructor's own notebook
    return namespace


def _replay(namespace, calls, strength, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    outputs, results = [], []
    for call in calls:
        fn = namespace[call.function]
        fn = getattr(fn, "__wrapped__", fn)
        state = rng.bit_generator.state
        try:
            args = _resolve(call.args, outputs, rng, strength)
            kwargs = _resolve(call.kwargs, outputs, rng, strength)
            out = fn(*args, **kwargs)
            grad_rng = np.random.default_rng(seed + len(outputs))
            grads = _gradients(fn, args, kwargs, grad_rng) if _any_tensor((args, kwargs)) else None
            results.append(("ok", out, grads))
        except Exception as exc:  # noqa: BLE001 - an input outside the domain, or a mutant that fails
            out = None
            results.append(("error", f"{type(exc).__name__}: {exc}", None))
        rng.bit_generator.state = state
        rng.standard_normal(64)  # the same stream for both programs, whatever each call consumed
        outputs.append(out)
    return results


def _any_tensor(value) -> bool:
    if _is_tensor(value):
        return value.is_floating_point()
    if isinstance(value, (tuple, list)):
        return any(_any_tensor(item) for item in value)
    if isinstance(value, dict):
        return any(_any_tensor(item) for item in value.values())
    return False


def record_calls(cells: list[dict], reference) -> tuple[list[Call], list[str]]:
    """Run the solution notebook's code cells (tests included) with the answer functions recorded."""
    recorder = Recorder()
    namespace = {"__name__": "__exercise__", "reference": reference}
    problems = []
    for cell in cells:
        try:
            exec(compile(cell["source"], f"<{cell['grade_id']}>", "exec"), namespace)  # noqa: S102
        except Exception as exc:  # noqa: BLE001 - reported: the solution must pass its own tests
            problems.append(f"{cell['grade_id']}: {type(exc).__name__}: {exc}")
        if cell["kind"] == "answer":
            for name in cell["functions"]:
                if name in namespace and not hasattr(namespace[name], "__wrapped__"):
                    namespace[name] = recorder.wrap(name, namespace[name])
    return recorder.kept(), problems


def _compare_programs(base_cells, mutant_cells, calls, reference, rounds: int) -> str | None:
    """None when the mutant agrees with the solution on every replayed call, else the first difference."""
    solution = _namespace(base_cells, reference)
    mutant = _namespace(mutant_cells, reference)
    for strength in range(rounds):
        seed = 1000 + strength
        want = _replay(solution, calls, strength, seed)
        got = _replay(mutant, calls, strength, seed)
        for index, ((w_status, w_out, w_grads), (g_status, g_out, g_grads)) in enumerate(zip(want, got)):
            where = f"call {index} ({calls[index].function}), input set {strength}"
            if w_status == "error":
                continue  # outside the solution's domain
            if g_status == "error":
                return f"{where}: the mutant raises {g_out}"
            difference = _agree(g_out, w_out)
            if difference:
                return f"{where}: output {difference}"
            if w_grads is not None:
                difference = _agree(g_grads, w_grads)
                if difference:
                    return f"{where}: gradient {difference}"
    return None


def _screen(cells, mutant, reference) -> str:
    """Run the notebook's cells in order with the mutant's answer cell, tests included, as the judge
    runs them (each test cell whole); "passes", or the first test cell that fails and why."""
    import warnings

    warnings.simplefilter("ignore")
    namespace = {"__name__": "__exercise__", "reference": reference}
    for cell in cells:
        source = mutant["source"] if cell["grade_id"] == mutant["grade_id"] else cell["source"]
        try:
            exec(compile(source, f"<{cell['grade_id']}>", "exec"), namespace)  # noqa: S102
        except Exception as exc:  # noqa: BLE001 - a failing cell is the answer we look for
            if cell["kind"] == "test":
                return f"fails {cell['grade_id']}: {type(exc).__name__}: {str(exc)[:200]}"
    return "passes"


def _verdict(cells, base, calls, mutant, reference, rounds) -> str:
    import warnings

    warnings.simplefilter("ignore")
    if mutant.get("screen", True):
        screened = _screen(cells, mutant, reference)
        if screened != "passes":
            return screened
    mutant_cells = [mutant["source"] if cell["grade_id"] == mutant["grade_id"] else cell["source"]
                    for cell in cells if cell["kind"] != "test"]
    difference = _compare_programs(base, mutant_cells, calls, reference, rounds)
    return "equivalent" if difference is None else f"differs: {difference}"


def run_job(job: dict) -> dict:
    """For each mutant of ``job``: screened against the tests (unless ``screen`` is false), then, if
    it passes them, compared with the solution. ``job`` holds the notebook's code cells in order
    (``kind``: answer, given or test; the answer functions each answer cell defines), the reference
    path and the mutants (id, grade_id, source, screen)."""
    import multiprocessing
    import os
    import time

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from autograder.references import load_reference

    reference = load_reference(job["reference"]) if job.get("reference") else None
    cells = job["cells"]
    started = time.monotonic()
    calls, problems = record_calls(cells, reference)
    solution_seconds = time.monotonic() - started
    base = [cell["source"] for cell in cells if cell["kind"] != "test"]
    results = {"calls": len(calls), "problems": problems, "mutants": {}, "solution_seconds": solution_seconds}
    limit = job.get("timeout") or max(20.0, 10 * solution_seconds)
    context = multiprocessing.get_context("fork")
    pending = list(job["mutants"])
    running = {}   # id -> (process, reader, deadline)
    workers = max(1, int(job.get("workers", 1)))
    while pending or running:
        while pending and len(running) < workers:
            mutant = pending.pop(0)
            reader, writer = context.Pipe(duplex=False)

            def child(m=mutant, w=writer):
                try:
                    w.send(_verdict(cells, base, calls, m, reference, job.get("rounds", 5)))
                except BaseException as exc:  # noqa: BLE001
                    w.send(f"differs: the mutant cannot be compared: {type(exc).__name__}: {exc}")
                finally:
                    os._exit(0)

            process = context.Process(target=child)
            process.start()
            writer.close()
            running[mutant["id"]] = (process, reader, time.monotonic() + limit)
        for identifier, (process, reader, deadline) in list(running.items()):
            if reader.poll(0.02):
                try:
                    results["mutants"][identifier] = reader.recv()
                except EOFError:
                    results["mutants"][identifier] = "fails: the process died"
            elif not process.is_alive():
                results["mutants"][identifier] = "fails: the process died"
            elif time.monotonic() > deadline:
                process.kill()
                results["mutants"][identifier] = f"fails: over the {limit:.0f} s limit"
            else:
                continue
            process.join()
            reader.close()
            del running[identifier]
    return results


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] != "run":
        print("usage: exercise_adversary.py run JOB.json OUT.json", file=sys.stderr)
        return 2
    job = json.loads(Path(argv[1]).read_text())
    try:  # one thread: a process forked from one that ran torch's thread pool can deadlock in it
        import torch

        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
    except ImportError:
        pass
    Path(argv[2]).write_text(json.dumps(run_job(job), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
