"""An advisory static scan of the student's code cells (Python ``ast``), for manual review.

The scan decides no score: the tests run in the judge, outside the student's process, where
nothing an answer does can reach them. It flags for a human's look (with the reason) answers
that try things an honest answer has no need of:

- patching: assigning to or deleting attributes of numpy, ``attention_course``, builtins or any
  imported module (``np.allclose = ...``), ``setattr``/``delattr`` on them, dunder attributes
  (``f.__code__ = ...``), rebinding a name the instructor's cells import or define
  (``assert_grads_close = lambda *a: None``) or a builtin (``all = ...``), ``importlib.reload``;
- calling the reference implementation: importing ``attention_course.numpy_track`` or
  ``attention_course.torch_track`` in an answer, or using a name the instructor's cells import
  from them (unless the reference solution does the same);
- leaving the notebook's control: ``os._exit``, ``os.kill``, ``os.fork``, ``os.system``, ``ctypes``,
  ``subprocess``, ``socket``, ``signal``, threads, ``get_ipython``/IPython/ZeroMQ internals,
  ``sys.modules``/frames/trace hooks, ``exec``/``eval``/``compile``/``__import__``/``globals``;
- differentiating numerically where the backward pass is to be written by hand: a difference
  quotient of two calls of one of the notebook's functions (``(f(x + eps) - f(x - eps)) / (2 * eps)``),
  a loop (over ``np.ndindex``, ``np.nditer``, ``range(x.size)``...) that shifts an array element in
  place by a plain amount and shifts it back or restores it, calling one of the notebook's functions
  in between, ``scipy.optimize.approx_fprime`` and its kin, ``numdifftools``, the numerical
  gradients of ``attention_course.testing``; and importing an autograd library (torch, jax,
  autograd) in an exercise whose own cells (instructor's and solution's) import none.

Cells are read after IPython's own input transformation (so ``!cmd`` and ``%magic`` are seen as
the ``get_ipython()`` calls they are). A cell that does not parse is skipped: it cannot run either.

``scan_in_subprocess`` runs the scan in a process of its own, with time and memory limits: a
notebook crafted to blow the scan up (deep nesting, huge cells) ends that scan with a flag, and
nothing else (``python -m autograder.scan`` is that process's entry point). ``Scanner`` does the
same for a batch in one long-lived process, with the same limits per notebook, and a fresh
process after any scan that failed.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field

from IPython.core.inputtransformer2 import TransformerManager

REFERENCE_MODULES = ("attention_course.numpy_track", "attention_course.torch_track")
PROTECTED_ROOTS = {"numpy", "attention_course", "builtins", "torch"}
FORBIDDEN_MODULES = {
    "ctypes": "loads native code (can crash or rewrite its own process)",
    "subprocess": "starts processes",
    "socket": "opens network connections",
    "multiprocessing": "starts processes",
    "signal": "changes signal handling (interrupts)",
    "pty": "starts processes",
    "resource": "changes resource limits",
    "threading": "starts threads that outlive the cell",
    "_thread": "starts threads that outlive the cell",
    "gc": "reaches objects the tests hold",
    "inspect": "reaches the frames of the tests",
    "IPython": "reaches the shell that runs the notebook",
    "ipykernel": "reaches the kernel",
    "zmq": "reaches the kernel's sockets",
    "jupyter_client": "reaches the kernel's sockets",
    "importlib": "reloads or swaps modules",
    "builtins": "can replace builtins",
    "posix": "calls the operating system directly",
    "linecache": "reads the source of other cells",
    "traceback": "reads the source of other cells",
}
# IPython keeps every executed cell's source in these names (in the grader, the student's own cells
# only: the tests never run where the student's code runs).
HISTORY_NAMES = {"In", "Out", "_ih", "_oh", "_dh", "_i", "_ii", "_iii"}
# Numerical differentiation: what computes a gradient by finite differences for the caller.
NUMERICAL_MODULES = {"numdifftools", "findiff", "scipy.differentiate"}
NUMERICAL_FUNCTIONS = {"approx_fprime", "check_grad", "derivative", "numerical_vjp", "check_gradients",
                       "check_layer_gradients"}
NUMERICAL_HOMES = ("scipy", "attention_course.testing")   # where those functions are numerical differences
# Autograd libraries: in an exercise whose own cells import none, the backward pass is to be written by hand.
AUTOGRAD_MODULES = {"torch", "jax", "autograd"}
# Methods of lists, dicts and arrays: calling one in a loop that moves an element is no sign of finite
# differences.
CONTAINER_METHODS = {"append", "extend", "insert", "pop", "remove", "clear", "copy", "get", "items", "keys", "values",
                     "update", "setdefault", "sum", "mean", "max", "min", "prod", "std", "var", "argmax", "argmin",
                     "reshape", "transpose", "swapaxes", "squeeze", "ravel", "flatten", "astype", "item", "tolist",
                     "dot", "fill", "clip", "any", "all", "cumsum", "nonzero", "repeat", "take", "view", "iternext",
                     "format", "join"}
FORBIDDEN_ATTRIBUTES = {
    "os": {"_exit", "kill", "killpg", "fork", "forkpty", "system", "popen", "abort", "setsid",
           "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe",
           "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe",
           "posix_spawn", "posix_spawnp"},
    "sys": {"modules", "_getframe", "settrace", "setprofile", "excepthook", "displayhook", "meta_path",
            "path_hooks", "setrecursionlimit"},
}
FORBIDDEN_CALLS = {"exec", "eval", "compile", "__import__", "globals", "get_ipython", "reload"}
ALLOWED_MAGICS = {"matplotlib", "time", "timeit", "precision", "pprint"}
BUILTIN_NAMES = {name for name in dir(builtins) if not name.startswith("_")}


@dataclass
class ScanContext:
    """What the instructor's cells bind, from the source notebook (solutions and hidden tests included)."""

    instructor_names: dict[str, str] = field(default_factory=dict)   # name -> origin ("import numpy", ...)
    reference_names: set[str] = field(default_factory=set)           # names imported from the reference modules
    solution_names: set[str] = field(default_factory=set)            # bound at top level by the reference answers
    solution_reference_imports: set[str] = field(default_factory=set)  # "module:name" the reference answers import
    autograd_imports: set[str] = field(default_factory=set)          # autograd libraries the instructor or answers import


def _transform(source: str) -> ast.Module | None:
    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except (SyntaxError, ValueError, RecursionError):
        return None


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _is_reference(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in REFERENCE_MODULES)


def _top_level_bindings(tree: ast.Module) -> dict[str, str]:
    """Names a cell binds at module level, each with its origin."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                names[bound] = f"import {alias.name if alias.asname else alias.name.split('.')[0]}"
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                names[alias.asname or alias.name] = f"from {node.module} import {alias.name}"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = f"def {node.name}"
    return names


def _imported_tops(tree: ast.AST) -> set[str]:
    """The top-level packages a cell imports (``import torch.nn`` -> ``torch``)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def _amount(value: ast.AST) -> bool:
    """A plain amount: names and numbers, scaled (``eps``, ``2 * h``, ``-delta / 2``), nothing summed."""
    if isinstance(value, (ast.Name, ast.Constant)):
        return True
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, (ast.USub, ast.UAdd)):
        return _amount(value.operand)
    return isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Mult, ast.Div, ast.Pow)) \
        and _amount(value.left) and _amount(value.right)


def _element_stores(node: ast.AST) -> dict[str, list[str]]:
    """For each array element a loop stores into (``x[i]``, ``x.flat[i]``...), how, in the order of the
    source: ``"up"``/``"down"`` for a shift by a plain amount (``x[i] += eps``, ``x[i] = old - eps``),
    ``"sum"`` for another in-place sum, ``"set"`` for any other assignment."""
    stores: list[tuple[int, int, str, str]] = []
    for inner in ast.walk(node):
        if isinstance(inner, ast.AugAssign) and isinstance(inner.target, ast.Subscript):
            shift = _amount(inner.value) and isinstance(inner.op, (ast.Add, ast.Sub))
            kind = ("up" if isinstance(inner.op, ast.Add) else "down") if shift else \
                "sum" if isinstance(inner.op, (ast.Add, ast.Sub)) else "set"
            stores.append((inner.lineno, inner.col_offset, ast.unparse(inner.target), kind))
        elif isinstance(inner, ast.Assign):
            value = inner.value
            shift = isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Sub)) and (
                (_amount(value.right) and isinstance(value.left, (ast.Name, ast.Subscript)))
                or (isinstance(value.op, ast.Add) and _amount(value.left) and isinstance(value.right, (ast.Name, ast.Subscript))))
            for target in inner.targets:
                if isinstance(target, ast.Subscript):
                    kind = ("up" if isinstance(value.op, ast.Add) else "down") if shift else "set"
                    stores.append((inner.lineno, inner.col_offset, ast.unparse(target), kind))
    found: dict[str, list[str]] = {}
    for *_, element, kind in sorted(stores):
        found.setdefault(element, []).append(kind)
    return found


def _shifted_and_restored(kinds: list[str]) -> bool:
    """A shift followed by the opposite shift or by an assignment (putting the value back): how finite
    differences move an element. (Set, then accumulate: ``dx[t] = a; dx[t] += b`` is no perturbation.)"""
    undo = {"up": {"down", "set"}, "down": {"up", "set"}}
    return any(later in undo[kind] for index, kind in enumerate(kinds) if kind in undo for later in kinds[index + 1:])


def build_context(instructor_cells: list[str], solution_cells: list[str]) -> ScanContext:
    context = ScanContext()
    for source in instructor_cells + solution_cells:
        tree = _transform(source)
        if tree is not None:
            context.autograd_imports.update(_imported_tops(tree) & AUTOGRAD_MODULES)
    for source in instructor_cells:
        tree = _transform(source)
        if tree is None:
            continue
        context.instructor_names.update(_top_level_bindings(tree))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and _is_reference(node.module):
                context.reference_names.update(a.asname or a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module == "attention_course":
                context.reference_names.update(a.asname or a.name for a in node.names
                                               if a.name in ("numpy_track", "torch_track"))
    for source in solution_cells:
        tree = _transform(source)
        if tree is None:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                context.solution_names.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                context.solution_names.add(node.name)
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    context.solution_reference_imports.add(f"{node.module}:{alias.name}")
                    context.solution_names.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    context.solution_reference_imports.add(f"{alias.name}:")
            if isinstance(node, ast.Name) and node.id in context.reference_names:
                context.solution_reference_imports.add(f"name:{node.id}")
    return context


class _CellScanner(ast.NodeVisitor):
    def __init__(self, context: ScanContext, modules: dict[str, str], where: str) -> None:
        self.context = context
        self.modules = modules          # alias -> module, from every import seen so far
        self.where = where
        self.findings: list[str] = []
        self.depth = 0
        self.numerical_loop = 0         # inside a loop already flagged as finite differences
        self.quotients: set[int] = set()  # differences of calls already flagged

    def flag(self, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", "?")
        self.findings.append(f"{self.where}, line {line}: {message}")

    # -- helpers ---------------------------------------------------------------------------
    def _module_of(self, node: ast.AST) -> str | None:
        """The module a name or attribute chain starts from, when it starts from an imported module."""
        root = _root(node)
        if isinstance(root, ast.Name):
            if root.id in self.modules:
                return self.modules[root.id]
            if root.id in ("__builtins__", "builtins"):
                return "builtins"
        return None

    def _protected(self, node: ast.AST) -> str | None:
        """Why changing ``node`` (an attribute target) is tampering, or None."""
        module = self._module_of(node)
        if module is not None:
            return f"patches {module}"
        root = _root(node)
        if isinstance(root, ast.Name):
            origin = self.context.instructor_names.get(root.id)
            if origin is not None and root.id not in self.context.solution_names:
                return f"patches {root.id!r} ({origin}, from the instructor's cells)"
            if root.id in BUILTIN_NAMES:
                return f"patches the builtin {root.id!r}"
        return None

    def _check_import(self, node: ast.AST, module: str, name: str | None) -> None:
        full = f"{module}.{name}" if name else module
        if _is_reference(full) or (module == "attention_course" and name in ("numpy_track", "torch_track")):
            key = f"{module}:{name or ''}"
            if key not in self.context.solution_reference_imports:
                self.flag(node, f"imports the reference implementation ({full})")
        top = module.split(".")[0]
        if top in FORBIDDEN_MODULES:
            self.flag(node, f"imports {top} ({FORBIDDEN_MODULES[top]})")
        elif name is not None and top in FORBIDDEN_ATTRIBUTES and name in FORBIDDEN_ATTRIBUTES[top]:
            self.flag(node, f"imports {top}.{name}")
        self._check_numerical_import(node, module, name)

    def _numerical(self, full: str) -> bool:
        """``full`` (a dotted name) is a numerical-differentiation module or function."""
        parts = full.split(".")
        if any(full == m or full.startswith(m + ".") for m in NUMERICAL_MODULES):
            return True
        return parts[-1] in NUMERICAL_FUNCTIONS and any(full.startswith(home + ".") for home in NUMERICAL_HOMES)

    def _check_numerical_import(self, node: ast.AST, module: str, name: str | None) -> None:
        full = f"{module}.{name}" if name else module
        if self._numerical(full):
            self.flag(node, f"imports {full}, which differentiates numerically: a backward pass by finite "
                            "differences, not by hand")
        top = module.split(".")[0]
        if top in AUTOGRAD_MODULES and top not in self.context.autograd_imports:
            self.flag(node, f"imports {top}, an autograd library this exercise does not use: its backward pass is "
                            "to be written by hand")

    def _user_callee(self, call: ast.Call) -> str | None:
        """The name of a function the notebook itself defines or holds (not a module's, not a builtin, not
        a list's or an array's method) that ``call`` calls, or None."""
        name = _dotted(call.func)
        if name is None:
            return None
        root = name.split(".")[0]
        if root in self.modules or root in ("__builtins__", "builtins") or (root in BUILTIN_NAMES and "." not in name):
            return None
        if "." in name and name.rsplit(".", 1)[1] in CONTAINER_METHODS:
            return None
        return name

    def _callees(self, node: ast.AST) -> set[str]:
        return {callee for inner in ast.walk(node) if isinstance(inner, ast.Call)
                and (callee := self._user_callee(inner)) is not None}

    def _quotient_of_calls(self, node: ast.BinOp) -> tuple[ast.BinOp, str] | None:
        """In the numerator of a division, a difference whose two sides call one same function of the
        notebook's: ``(f(x + eps) - f(x - eps)) / (2 * eps)``, ``(np.sum(dout * f()[0]) - loss) / h``..."""
        for inner in ast.walk(node.left):
            if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub):
                shared = self._callees(inner.left) & self._callees(inner.right)
                if shared:
                    return inner, sorted(shared)[0]
        return None

    def _perturbation_loop(self, node: ast.AST) -> tuple[str, str] | None:
        """A loop that shifts an array element in place by a plain amount and puts it back (or shifts it the
        other way), calling a function of the notebook's in between: (the element, the function), or None.
        (Accumulating twice into one element, ``dh[t] += a; dh[t] += b``, is no perturbation.)"""
        for element, kinds in _element_stores(node).items():
            if _shifted_and_restored(kinds):
                calls = [callee for inner in ast.walk(node) if isinstance(inner, ast.Call)
                         and (callee := self._user_callee(inner)) is not None]
                if calls:
                    return element, max(calls, key=calls.count)
        return None

    def _check_binding(self, node: ast.AST, name: str, origin: str | None = None) -> None:
        if self.depth:
            return
        if name in self.context.solution_names:
            return
        instructor = self.context.instructor_names.get(name)
        if instructor is not None and instructor != origin:
            self.flag(node, f"rebinds {name!r}, which the instructor's cells define ({instructor})")
        elif instructor is None and name in BUILTIN_NAMES:
            self.flag(node, f"rebinds the builtin {name!r}")

    # -- scopes ----------------------------------------------------------------------------
    def _scoped(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_FunctionDef(self, node):
        self._check_binding(node, node.name, f"def {node.name}")
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.depth += 1
        for child in node.body:
            self.visit(child)
        self.visit(node.args)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self._check_binding(node, node.name, f"def {node.name}")
        self._scoped(node)

    visit_Lambda = _scoped
    visit_ListComp = _scoped
    visit_SetComp = _scoped
    visit_DictComp = _scoped
    visit_GeneratorExp = _scoped

    # -- statements ------------------------------------------------------------------------
    def _loop(self, node):
        found = None if self.numerical_loop else self._perturbation_loop(node)
        if found is not None:
            element, callee = found
            self.flag(node, f"differentiates numerically: a loop that shifts {element} in place and calls {callee}() "
                            "each time (a backward pass by finite differences, not by hand)")
            self.numerical_loop += 1
        self.generic_visit(node)
        if found is not None:
            self.numerical_loop -= 1

    visit_For = _loop
    visit_AsyncFor = _loop
    visit_While = _loop

    def visit_BinOp(self, node):
        if isinstance(node.op, ast.Div):
            found = self._quotient_of_calls(node)
            if found is not None and not self.numerical_loop and id(found[0]) not in self.quotients:
                self.quotients.add(id(found[0]))
                self.flag(node, f"differentiates numerically: a difference quotient of two calls of {found[1]}() "
                                "(a backward pass by finite differences, not by hand)")
        self.generic_visit(node)

    def visit_Import(self, node):
        for alias in node.names:
            self._check_import(node, alias.name, None)
            bound = alias.asname or alias.name.split(".")[0]
            self.modules[bound] = alias.name if alias.asname else alias.name.split(".")[0]
            self._check_binding(node, bound, f"import {self.modules[bound]}")

    def visit_ImportFrom(self, node):
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            self._check_import(node, module, alias.name)
            bound = alias.asname or alias.name
            self._check_binding(node, bound, f"from {node.module} import {alias.name}")
            # `from attention_course import testing` binds a module.
            self.modules[bound] = f"{module}.{alias.name}"

    def visit_Global(self, node):
        for name in node.names:
            if name in self.context.instructor_names and name not in self.context.solution_names:
                self.flag(node, f"declares global {name!r}, which the instructor's cells define")

    visit_Nonlocal = visit_Global

    def visit_Name(self, node):
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._check_binding(node, node.id)
        elif node.id in self.context.reference_names and f"name:{node.id}" not in self.context.solution_reference_imports:
            self.flag(node, f"uses {node.id!r}, the reference implementation the tests import")
        if node.id == "__builtins__":
            self.flag(node, "reaches __builtins__")
        if isinstance(node.ctx, ast.Load) and (node.id in HISTORY_NAMES or re.fullmatch(r"_i\d+", node.id)):
            self.flag(node, f"reads {node.id}, IPython's record of executed cells")
        if isinstance(node.ctx, ast.Load) and node.id in self.modules and self._numerical(self.modules[node.id]):
            self.flag(node, f"uses {self.modules[node.id]}, which differentiates numerically: a backward pass by "
                            "finite differences, not by hand")

    def visit_Attribute(self, node):
        chain = []
        inner = node
        while isinstance(inner, ast.Attribute):
            chain.append(inner.attr)
            inner = inner.value
        dotted = _dotted(node)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            verb = "assigns to" if isinstance(node.ctx, ast.Store) else "deletes"
            target = dotted or f"....{node.attr}"
            reason = self._protected(node)
            if reason:
                self.flag(node, f"{verb} {target}: {reason}")
            elif node.attr.startswith("__") and node.attr.endswith("__"):
                self.flag(node, f"{verb} the dunder attribute {target}")
        module = self._module_of(node)
        if module is not None and dotted is not None:
            # Every prefix of the chain: np.a.b reads np.a too.
            parts = dotted.split(".")[1:]
            for length in range(1, len(parts) + 1):
                full = ".".join([module, *parts[:length]])
                if _is_reference(full) and f"{full}:" not in self.context.solution_reference_imports:
                    self.flag(node, f"uses the reference implementation ({full})")
                    break
            top = module.split(".")[0]
            attribute = (module.split(".")[1:] + parts)[0] if (module.split(".")[1:] + parts) else ""
            if top in FORBIDDEN_ATTRIBUTES and attribute in FORBIDDEN_ATTRIBUTES[top]:
                self.flag(node, f"uses {top}.{attribute}")
            for length in range(1, len(parts) + 1):
                full = ".".join([module, *parts[:length]])
                if self._numerical(full):
                    self.flag(node, f"uses {full}, which differentiates numerically: a backward pass by finite "
                                    "differences, not by hand")
                    break
        for attribute in chain:
            if attribute in ("__dict__", "__globals__", "__subclasses__", "__code__", "__builtins__",
                             "__closure__", "__self__", "f_back", "f_globals", "f_locals", "gi_frame", "tb_frame"):
                self.flag(node, f"reaches {dotted or attribute}")
                break
        # The inner attributes of the chain were checked above; visit what the chain starts from.
        self.visit(inner)

    def visit_Subscript(self, node):
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            reason = self._protected(node.value) if isinstance(node.value, (ast.Attribute, ast.Name)) else None
            if reason and not isinstance(node.value, ast.Name):
                self.flag(node, f"changes an item of {_dotted(node.value)}: {reason}")
        self.generic_visit(node)

    def _allowed_magic(self, node: ast.Call) -> bool:
        """``%matplotlib inline``, ``%time``, ``%%timeit`` ...: harmless magics (a cell magic's body is scanned)."""
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in ("run_line_magic", "run_cell_magic")
                and isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name)
                and func.value.func.id == "get_ipython" and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in ALLOWED_MAGICS):
            return False
        for argument in node.args[1:]:
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str) and argument.value.strip():
                tree = _transform(argument.value)
                if tree is None:
                    continue
                inner = _CellScanner(self.context, self.modules, f"{self.where} (in %{node.args[0].value})")
                inner.visit(tree)
                self.findings.extend(inner.findings)
            elif not isinstance(argument, ast.Constant):
                self.visit(argument)
        return True

    def visit_Call(self, node):
        if self._allowed_magic(node):
            return
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name in FORBIDDEN_CALLS and (isinstance(func, ast.Name) or name == "reload"):
            self.flag(node, f"calls {name}()")
        if name in ("setattr", "delattr") and isinstance(func, ast.Name) and node.args:
            target = node.args[0]
            reason = self._protected(target) if isinstance(target, (ast.Name, ast.Attribute)) else None
            if reason or not isinstance(target, (ast.Name, ast.Attribute)):
                self.flag(node, f"calls {name}() on {_dotted(target) or 'a computed object'}"
                                f"{': ' + reason if reason else ''}")
        if name == "vars" and isinstance(func, ast.Name) and node.args and self._protected(node.args[0]):
            self.flag(node, f"calls vars() on {_dotted(node.args[0])}")
        if name == "import_module" and node.args:
            argument = node.args[0]
            if not isinstance(argument, ast.Constant) or not isinstance(argument.value, str):
                self.flag(node, "imports a computed module name")
            else:
                self._check_import(node, argument.value, None)
        if name == "getattr" and isinstance(func, ast.Name) and len(node.args) >= 2:
            attribute = node.args[1]
            module = self._module_of(node.args[0])
            if isinstance(attribute, ast.Constant) and isinstance(attribute.value, str):
                top = (module or "").split(".")[0]
                if top in FORBIDDEN_ATTRIBUTES and attribute.value in FORBIDDEN_ATTRIBUTES[top]:
                    self.flag(node, f"uses {top}.{attribute.value}")
            elif module is not None:
                self.flag(node, f"calls getattr() on {module} with a computed name")
        self.generic_visit(node)


def scan_cells(cells: list[tuple[str, str]], context: ScanContext,
               instructor_modules: dict[str, str] | None = None) -> list[str]:
    """Findings for the student's cells, given as ``(where, source)`` in notebook order."""
    modules = dict(instructor_modules or {})
    findings: list[str] = []
    for where, source in cells:
        tree = _transform(source)
        if tree is None:
            continue
        scanner = _CellScanner(context, modules, where)
        scanner.visit(tree)
        findings.extend(scanner.findings)
    return findings


def instructor_modules(instructor_cells: list[str]) -> dict[str, str]:
    """Module aliases the instructor's cells import (``np`` -> ``numpy``)."""
    modules: dict[str, str] = {}
    for source in instructor_cells:
        tree = _transform(source)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    modules[bound] = alias.name if alias.asname else alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return modules


SCAN_SECONDS = 30
SCAN_MEMORY = 1024 * 1024 * 1024
SCAN_ANSWER_BYTES = 16 * 1024 * 1024  # findings name at most a few lines per cell


def _limit_scan() -> None:
    """In the scan's own process, first thing: its memory is bounded (its CPU time is bounded
    per request, by ``_cpu_budget``)."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (SCAN_MEMORY, SCAN_MEMORY))


def _cpu_budget() -> None:
    """Before each request: the process may use SCAN_SECONDS more of CPU time, then the kernel
    ends it (SIGXCPU); the parent reports that scan as failed and starts a fresh process."""
    import resource

    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = used.ru_utime + used.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(spent) + 1 + SCAN_SECONDS
    if hard != resource.RLIM_INFINITY and soft > hard:
        raise SystemExit(3)  # out of budget for good: the parent starts a fresh process
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _request(cells: list[tuple[str, str]], context: ScanContext, modules: dict[str, str] | None) -> str:
    return json.dumps({"cells": cells, "modules": modules or {},
                       "context": {key: sorted(value) if isinstance(value, set) else value
                                   for key, value in asdict(context).items()}})


def _answer(request: dict) -> list[str]:
    data = request["context"]
    context = ScanContext(instructor_names=dict(data["instructor_names"]), reference_names=set(data["reference_names"]),
                          solution_names=set(data["solution_names"]),
                          solution_reference_imports=set(data["solution_reference_imports"]),
                          autograd_imports=set(data.get("autograd_imports", ())))
    cells = [(str(where), str(source)) for where, source in request["cells"]]
    return scan_cells(cells, context, request.get("modules"))


def _failed(returncode) -> list[str]:
    return [f"the static scan failed on this notebook (exit status {returncode}): review the code by hand"]


def _timed_out() -> list[str]:
    return [f"the static scan ran past its {SCAN_SECONDS} s limit: review the code by hand"]


def _findings(text: str):
    try:
        findings = json.loads(text)
    except ValueError:
        return None
    return [str(finding) for finding in findings] if isinstance(findings, list) else None


def scan_in_subprocess(cells: list[tuple[str, str]], context: ScanContext,
                       modules: dict[str, str] | None = None) -> list[str]:
    """``scan_cells`` in a process of its own (time and memory limits); a scan that fails is one flag."""
    try:
        done = subprocess.run([sys.executable, "-m", "autograder.scan"], input=_request(cells, context, modules),
                              capture_output=True, text=True, timeout=SCAN_SECONDS + 10)
    except subprocess.TimeoutExpired:
        return _timed_out()
    findings = _findings(done.stdout)
    if done.returncode != 0 or findings is None:
        return _failed(done.returncode)
    return findings


class Scanner:
    """Scans one notebook after another in one long-lived process (``python -m autograder.scan
    --serve``: one JSON request per line in, one JSON answer per line out), so that a batch pays
    the interpreter's and IPython's start-up once, not once per notebook.

    Each request gets the same limits as ``scan_in_subprocess``: SCAN_SECONDS of CPU time (the
    process's budget is moved before each request), SCAN_SECONDS + 10 of wall-clock time for
    the answer (the parent's deadline), the memory limit. A request that breaks a limit, or any
    answer that is not a list, ends that process: that scan is one flag, and the next request
    starts a fresh process, so nothing one notebook did carries over to the next one's scan.
    Not thread-safe: one per thread.
    """

    def __init__(self) -> None:
        self._process: subprocess.Popen | None = None
        self.seconds = SCAN_SECONDS + 10  # the wall-clock deadline of one answer

    def _start(self) -> subprocess.Popen:
        if self._process is None:
            self._process = subprocess.Popen([sys.executable, "-m", "autograder.scan", "--serve"],
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=subprocess.DEVNULL)
        return self._process

    def _end(self) -> int | None:
        process, self._process = self._process, None
        if process is None:
            return None
        process.kill()
        for stream in (process.stdin, process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        return process.wait()

    def scan(self, cells: list[tuple[str, str]], context: ScanContext,
             modules: dict[str, str] | None = None) -> list[str]:
        import os
        import select
        import time

        process = self._start()
        try:  # json.dumps writes no raw newline: the request is one line
            process.stdin.write(_request(cells, context, modules).encode() + b"\n")
            process.stdin.flush()
        except OSError:
            return _failed(self._end())
        deadline = time.monotonic() + self.seconds
        answer = bytearray()
        while not answer.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([process.stdout], [], [], left)[0]:
                self._end()
                return _timed_out()
            chunk = os.read(process.stdout.fileno(), 1 << 20)
            if not chunk:  # the process ended (a limit, or a crash)
                return _failed(self._end())
            answer += chunk
            if len(answer) > SCAN_ANSWER_BYTES:
                return _failed(self._end())
        findings = _findings(answer.decode("utf-8", "replace"))
        if findings is None:
            return _failed(self._end())
        return findings

    def close(self) -> None:
        self._end()


def main() -> int:
    """Read a scan request on stdin, print the findings as JSON; with ``--serve``, one request
    per line, one answer per line, until stdin ends."""
    _limit_scan()
    if sys.argv[1:] == ["--serve"]:
        for line in sys.stdin:
            _cpu_budget()
            print(json.dumps(_answer(json.loads(line))), flush=True)
        return 0
    _cpu_budget()
    print(json.dumps(_answer(json.loads(sys.stdin.read()))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
