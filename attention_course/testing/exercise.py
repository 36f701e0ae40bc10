"""Checks for the test cells of the exercise notebooks, made hard to fool from inside the kernel.

An answer cell runs in the same Python process as the tests that grade it, so it can replace
what those tests rely on (``np.allclose = lambda *a, **k: True``, a course helper such as
``attention_course.testing.assert_grads_close``, the reference layer a test compares with), or
simply call the reference layer instead of implementing the exercise. Every test cell of an
exercise therefore starts with::

    from attention_course.testing.exercise import load_checks
    checks = load_checks()

``load_checks`` executes this file afresh under a private name: a new module object, never
entered in ``sys.modules``, so nothing an answer cell did to the imported copy reaches it. The
fresh copy then runs ``verify()``, which raises ``TamperingError`` naming the first thing it
finds replaced:

* the builtins (``isinstance``, ``len``, ``AssertionError``, ``__import__``, ...): each must be the
  interpreter's own C function or type of that name;
* numpy's comparison and array functions (``numpy.allclose``, ``numpy.testing.assert_allclose``,
  ``numpy.where``, ...): a Python function must have exactly the code (and literal defaults)
  compiled fresh from its source file, a C function the right type and name;
* every loaded module of this package (``attention_course.testing.*`` and the reference
  implementation): each function and method must have exactly the code compiled fresh from the
  module's file, and every name imported from a sibling module must still be that object;
* torch's autograd entry points, when torch is loaded.

The comparisons here never call a numpy function. They use operators and methods of arrays
verified to be exactly ``numpy.ndarray`` with a float or bool dtype (the methods of a built-in type
cannot be replaced); random test inputs come from a small generator written here (splitmix64),
not from ``numpy.random``.

``checks.forbid_reference("WeightSum", ...)`` guards the call of the student's function: while it
runs, every method of the named reference classes (in ``numpy_track`` and, where it imports, in
``torch_track``) and every named reference function raises ``RuntimeError("the exercise must not
call the reference implementation ...")``; their code is swapped back afterwards.

Limits (an in-kernel check cannot be complete; a static scan of submissions, outside the kernel,
complements it): an answer that replaces ``load_checks`` itself, edits ``sys.modules``, reaches the
checks object through frames or the garbage collector while the tests call it, copies a reference
function's code object before the guard swaps it, hides failing cells through IPython hooks
(``set_custom_exc``, AST or input transformers, ``showtraceback``), or loads a second copy of the
package from its files, is not caught here.
"""

from __future__ import annotations

__all__ = ["TamperingError", "load_checks", "verify", "forbid_reference", "random", "lengths_mask", "as_array",
           "assert_shape", "assert_close", "assert_equal", "assert_finite", "numerical_vjp", "check_gradients",
           "tensor", "autograd_vjp", "REFERENCE_CALL_MESSAGE"]

# Taken from literals, never from a name an answer cell could rebind.
_type = (0).__class__.__class__
_FunctionType = _type(lambda: None)
_BuiltinFunctionType = _type([].append)
_HEAPTYPE = 1 << 9
_builtins = __builtins__ if _type(__builtins__) is _type({}) else __builtins__.__dict__

REFERENCE_CALL_MESSAGE = "the exercise must not call the reference implementation"

_BUILTIN_FUNCTIONS = (
    "__import__", "abs", "all", "any", "callable", "compile", "delattr", "divmod", "exec", "getattr", "globals",
    "hasattr", "hash", "id", "isinstance", "issubclass", "iter", "len", "max", "min", "next", "open", "print",
    "repr", "round", "setattr", "sorted", "sum", "vars",
)
_BUILTIN_TYPES = (
    "bool", "bytes", "classmethod", "dict", "enumerate", "filter", "float", "frozenset", "int", "list", "map",
    "memoryview", "object", "property", "range", "reversed", "set", "slice", "staticmethod", "str", "super",
    "tuple", "type", "zip", "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "Exception",
    "FloatingPointError", "ImportError", "IndexError", "KeyError", "LookupError", "MemoryError",
    "ModuleNotFoundError", "NameError", "NotImplementedError", "OSError", "OverflowError", "RecursionError",
    "RuntimeError", "RuntimeWarning", "StopIteration", "TypeError", "UserWarning", "ValueError", "Warning",
    "ZeroDivisionError",
)
# numpy's public functions the tests and the reference implementation lean on (name -> expected __name__).
_NUMPY_FUNCTIONS = {
    "allclose": "allclose", "isclose": "isclose", "array_equal": "array_equal", "array_equiv": "array_equiv",
    "all": "all", "any": "any", "sum": "sum", "max": "max", "min": "min", "mean": "mean", "abs": "absolute",
    "absolute": "absolute", "exp": "exp", "log": "log", "tanh": "tanh", "sqrt": "sqrt", "maximum": "maximum",
    "minimum": "minimum", "isfinite": "isfinite", "isnan": "isnan", "matmul": "matmul", "einsum": "einsum",
    "where": "where", "concatenate": "concatenate", "stack": "stack", "zeros": "zeros", "zeros_like": "zeros_like",
    "ones": "ones", "ones_like": "ones_like", "empty": "empty", "array": "array", "asarray": "asarray",
    "broadcast_to": "broadcast_to", "swapaxes": "swapaxes",
    "random.default_rng": "default_rng", "testing.assert_allclose": "assert_allclose",
    "testing.assert_array_equal": "assert_array_equal", "testing.assert_array_almost_equal":
    "assert_array_almost_equal", "testing.assert_almost_equal": "assert_almost_equal",
    "testing.assert_equal": "assert_equal", "testing.assert_array_less": "assert_array_less",
}
# torch's autograd, which the torch exercises' tests use to differentiate the student's code: (module, qualname).
_TORCH_FUNCTIONS = (
    ("torch.autograd", "grad"), ("torch.autograd", "backward"), ("torch.autograd", "_make_grads"),
    ("torch.autograd", "_tensor_or_tensors_to_tuple"), ("torch.autograd.graph", "_engine_run_backward"),
)


class TamperingError(AssertionError):
    """Something the tests rely on was replaced in the kernel; the message names it."""


def load_checks(verify: bool = True):
    """A fresh, private copy of this module, verified (``verify()``) unless ``verify=False``."""
    import importlib.util

    # The path as compiled into this function's own code: a module's __file__ can be rebound.
    path = (lambda: None).__code__.co_filename
    spec = importlib.util.spec_from_file_location("_attention_course_checks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if verify:
        module.verify()
    return module


# ----------------------------------------------------------------------------- verification
def _fail(what: str, why: str):
    raise TamperingError(f"{what} {why}. The tests do not run in a kernel in which it was changed: "
                         f"remove the code that changes it and restart the kernel.")


def _is_static_type(obj, name: str) -> bool:
    return (isinstance(obj, _type) and not (_type.__dict__["__flags__"].__get__(obj) & _HEAPTYPE)
            and _type.__dict__["__name__"].__get__(obj) == name)


def _verify_builtins() -> None:
    for name in _BUILTIN_FUNCTIONS:
        obj = _builtins.get(name)
        if (_type(obj) is not _BuiltinFunctionType or _BuiltinFunctionType.__dict__["__name__"].__get__(obj) != name
                or _type(obj.__self__).__name__ != "module" or obj.__self__.__name__ not in ("builtins", "io", "_io")):
            _fail(f"the builtin {name}", "was replaced")
    for name in _BUILTIN_TYPES:
        obj = _builtins.get(name)
        if _type(obj) is not _type or not _is_static_type(obj, name):
            _fail(f"the builtin {name}", "was replaced")


def _resolve(root, dotted: str):
    obj = root
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


class _Sources:
    """Source files compiled fresh: code objects by qualified name, lines, syntax trees."""

    def __init__(self) -> None:
        self._files = {}
        self._trees = {}

    def _load(self, path: str):
        if path not in self._files:
            with open(path, "rb") as handle:
                source = handle.read()
            code = compile(source, path, "exec", dont_inherit=True)
            codes = {}
            stack = [code]
            while stack:
                current = stack.pop()
                for const in current.co_consts:
                    if _type(const) is _type(code):
                        codes.setdefault(const.co_qualname, []).append(const)
                        stack.append(const)
            self._files[path] = (codes, source)
        return self._files[path]

    def codes(self, path: str) -> dict:
        return self._load(path)[0]

    def tree(self, path: str):
        if path not in self._trees:
            import ast

            self._trees[path] = ast.parse(self._load(path)[1], path)
        return self._trees[path]

    def definition(self, path: str, code):
        """The ``def`` statement that compiled to ``code``, parsed from its own lines (or None)."""
        import ast

        lines = self._load(path)[1].decode("utf-8", "replace").split("\n")
        first = code.co_firstlineno - 1
        while first < len(lines) and lines[first].lstrip().startswith("@"):
            first += 1
        if first >= len(lines):
            return None
        indent = len(lines[first]) - len(lines[first].lstrip())
        for end in range(first + 1, min(first + 40, len(lines)) + 1):
            chunk = "\n".join(line[indent:] for line in lines[first:end])
            try:
                tree = ast.parse(chunk + "\n    pass")
            except SyntaxError:
                continue
            node = tree.body[0] if tree.body else None
            return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        return None


def _function_file(fn) -> str | None:
    namespace = _FunctionType.__dict__["__globals__"].__get__(fn)
    path = namespace.get("__file__")
    return path if _type(path) is str else None


def _defaults_ok(fn, node) -> bool:
    """The literal defaults of the definition ``node`` are still ``fn``'s defaults."""
    import ast

    def literal(expr):
        try:
            return True, ast.literal_eval(expr)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False, None

    defaults = fn.__defaults__ or ()
    if len(defaults) != len(node.args.defaults):
        return False
    for live, expr in zip(defaults, node.args.defaults):
        known, value = literal(expr)
        if known and (_type(live) is not _type(value) or not live == value):
            return False
    kwdefaults = fn.__kwdefaults__ or {}
    for arg, expr in zip(node.args.kwonlyargs, node.args.kw_defaults):
        if expr is None:
            if arg.arg in kwdefaults:
                return False
            continue
        if arg.arg not in kwdefaults:
            return False
        known, value = literal(expr)
        if known and (_type(kwdefaults[arg.arg]) is not _type(value) or not kwdefaults[arg.arg] == value):
            return False
    return True


def _installed(path: str) -> bool:
    """``path`` belongs to the Python installation or the environment (not to a student's folder)."""
    import sys

    roots = {sys.base_prefix, sys.prefix, sys.exec_prefix}
    return any(path.startswith(root.rstrip("/") + "/") for root in roots if root and root != "/")


def _verify_function(label: str, fn, qualname: str, sources: _Sources, inside: str) -> None:
    """``fn`` is a plain function with the code of ``qualname`` in its own file, under ``inside``."""
    if _type(fn) is not _FunctionType:
        _fail(label, f"is not the original function (got a {_type(fn).__name__})")
    path = _function_file(fn)
    if path is None or not path.startswith(inside):
        _fail(label, "was replaced by a function defined elsewhere")
    live = fn.__code__
    matches = [fresh for fresh in sources.codes(path).get(qualname, ()) if live == fresh]
    if live.co_qualname != qualname or not matches:
        _fail(label, f"was modified: its code no longer matches {path}")
    node = sources.definition(path, matches[-1])
    if node is not None and not _defaults_ok(fn, node):
        _fail(label, "was modified: its default arguments were changed")


def _verify_numpy(sources: _Sources) -> None:
    import sys

    numpy = sys.modules.get("numpy")
    if numpy is None:
        return
    inside = numpy.__file__.rsplit("numpy", 1)[0] + "numpy"
    if not _is_static_type(numpy.ndarray, "ndarray"):
        _fail("numpy.ndarray", "was replaced")
    for dotted, name in _NUMPY_FUNCTIONS.items():
        label = f"numpy.{dotted}"
        try:
            obj = _resolve(numpy, dotted)
        except AttributeError:
            continue  # not in this numpy version
        kind = _type(obj)
        if _is_static_type(kind, "_ArrayFunctionDispatcher"):
            if obj.__name__ != name:
                _fail(label, "was replaced by another numpy function")
            implementation = obj._implementation
            if _type(implementation) is _BuiltinFunctionType:
                if implementation.__name__ != name:
                    _fail(label, "was replaced by another numpy function")
            else:
                _verify_function(label, implementation, name, sources, inside)
        elif kind is _FunctionType:
            _verify_function(label, obj, name, sources, inside)
        elif (_is_static_type(kind, "ufunc") or kind is _BuiltinFunctionType
              or kind.__name__ == "cython_function_or_method"):
            if obj.__name__ != name:
                _fail(label, f"was replaced (it is now {obj.__name__!r})")
        else:
            _fail(label, f"was replaced (it is now a {kind.__name__})")


def _live_functions(obj) -> list | None:
    """The plain functions a class attribute carries (a method, a static/class method, a property)."""
    if _type(obj) is _FunctionType:
        return [obj]
    if isinstance(obj, (staticmethod, classmethod)):
        return _live_functions(obj.__func__)
    if isinstance(obj, property):
        return [f for f in (obj.fget, obj.fset, obj.fdel) if f is not None]
    return None


def _verify_module(module, sources: _Sources, inside: str, imports: bool) -> None:
    """Every function and method defined in ``module``'s file still has the code compiled from it."""
    import ast
    import sys

    name = module.__name__
    path = module.__dict__.get("__file__")
    if _type(path) is not str or not path.startswith(inside):
        _fail(f"the module {name}", "was replaced")
    codes, tree = sources.codes(path), sources.tree(path)
    namespace = module.__dict__

    def check(label, live, qualname, decorated, node):
        functions = _live_functions(live)
        if functions is None and not decorated:
            _fail(label, f"is not the original function (got a {_type(live).__name__})")
        for fn in functions if functions is not None else [live]:
            if decorated:
                # Bound to a decorator's wrapper, from the installed libraries: compare the function it wraps.
                if _type(fn) is _FunctionType:
                    source = _function_file(fn)
                    if source is None or not (source.startswith(inside) or _installed(source)):
                        _fail(label, "was replaced by a function defined elsewhere")
                for _ in range(8):
                    inner = getattr(fn, "__wrapped__", None)
                    if inner is None:
                        break
                    fn = inner
                if _type(fn) is not _FunctionType:
                    continue  # a decorator that keeps no function: nothing to compare
            if not any(fn.__code__ == fresh for fresh in codes.get(qualname, ())):
                if _type(fn) is _FunctionType and _function_file(fn) == path:
                    _fail(label, f"was modified: its code no longer matches {path}")
                _fail(label, "was replaced by a function defined elsewhere")
            if fn.__code__.co_name == node.name and not _defaults_ok(fn, node):
                _fail(label, "was modified: its default arguments were changed")

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name in namespace:
                check(f"{name}.{node.name}", namespace[node.name], node.name, bool(node.decorator_list), node)
        elif isinstance(node, ast.ClassDef):
            cls = namespace.get(node.name)
            if cls is None:
                continue
            if not isinstance(cls, _type):
                _fail(f"{name}.{node.name}", "was replaced by something that is not a class")
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in cls.__dict__:
                    simple = all(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod", "property")
                                 for d in item.decorator_list)
                    check(f"{name}.{node.name}.{item.name}", cls.__dict__[item.name], f"{node.name}.{item.name}",
                          not simple, item)
        elif imports and isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").split(".")[0]
                                                                 == name.split(".")[0]):
            if node.level == 0:
                source_name = node.module
            else:
                package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
                for _ in range(node.level - 1):
                    package = package.rsplit(".", 1)[0]
                source_name = package + ("." + node.module if node.module else "")
            source = sys.modules.get(source_name)
            for alias in node.names:
                bound = alias.asname or alias.name
                if source is None or bound not in namespace:
                    continue
                if f"{source_name}.{alias.name}" in sys.modules:
                    expected = sys.modules[f"{source_name}.{alias.name}"]
                elif alias.name in source.__dict__:
                    expected = source.__dict__[alias.name]
                else:
                    continue
                if namespace[bound] is not expected:
                    _fail(f"{name}.{bound}", f"was rebound (it should be {source_name}.{alias.name})")
        elif imports and isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                target = alias.name if alias.asname else alias.name.split(".")[0]
                if bound in namespace and target in sys.modules and namespace[bound] is not sys.modules[target]:
                    _fail(f"{name}.{bound}", f"was rebound (it should be the module {target})")


def _verify_package(sources: _Sources) -> None:
    import sys

    own = __file__
    root = own[: own.rindex("testing")]  # .../attention_course/
    for name, module in list(sys.modules.items()):
        if name != "attention_course" and not name.startswith("attention_course."):
            continue
        if _type(module).__name__ != "module" or module.__name__ != name:
            _fail(f"the module {name}", "was replaced in sys.modules")
        _verify_module(module, sources, root, imports=True)


def _verify_torch(sources: _Sources) -> None:
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return
    inside = torch.__file__.rsplit("torch", 1)[0] + "torch"
    if not _is_static_type(torch._C.TensorBase, "TensorBase"):
        _fail("torch._C.TensorBase", "was replaced")
    if _type(torch.from_numpy) is not _BuiltinFunctionType or torch.from_numpy.__name__ != "from_numpy":
        _fail("torch.from_numpy", "was replaced")
    for module_name, qualname in _TORCH_FUNCTIONS:
        module = sys.modules.get(module_name)
        if module is not None and qualname in module.__dict__:
            _verify_function(f"{module_name}.{qualname}", module.__dict__[qualname], qualname, sources, inside)
    graph = sys.modules.get("torch.autograd.graph")
    if graph is not None:
        engine = _type(graph.Variable._execution_engine)
        if engine.__flags__ & _HEAPTYPE or engine.__name__ not in ("_ImperativeEngine", "_EngineBase"):
            _fail("torch's autograd engine (torch.autograd.Variable._execution_engine)", "was replaced")


def verify() -> None:
    """Raise ``TamperingError`` if a builtin, a numpy function, a module of this package or torch's
    autograd was replaced or modified since it was imported."""
    _verify_builtins()
    sources = _Sources()
    _verify_numpy(sources)
    _verify_package(sources)
    _verify_torch(sources)


# ----------------------------------------------------------------------------- the reference guard
_STUBS = {}  # (free variables, message) -> code; _GUARDED: (names, autograd) -> functions (this copy only)
_GUARDED = {}


def _stub_code(code, message: str):
    """A code object that raises RuntimeError(message), with as many free variables as ``code``."""
    key = (len(code.co_freevars), message)
    if key in _STUBS:
        return _STUBS[key]
    names = [f"_free{i}" for i in range(len(code.co_freevars))]
    lines = ["def _outer():"] + [f"    {n} = None" for n in names] + [
        "    def _stub(*args, **kwargs):",
        f"        raise RuntimeError({message!r})",
    ]
    if names:
        lines.append("        return " + ", ".join(names))
    lines.append("    return _stub")
    namespace = {}
    exec(compile("\n".join(lines), "<forbidden reference>", "exec", dont_inherit=True), namespace)
    _STUBS[key] = namespace["_outer"]().__code__
    return _STUBS[key]


def _reference_objects(name: str) -> list:
    import sys

    found = []
    for track in ("attention_course.numpy_track", "attention_course.torch_track"):
        module = sys.modules.get(track)
        # The torch track is only looked at once torch is loaded (importing torch takes seconds); a
        # guarded call that imports it anew is refused on exit instead.
        if module is None and (track.endswith("numpy_track") or "torch" in sys.modules):
            import warnings

            try:
                with warnings.catch_warnings():  # a warning on stderr would fail the test cell
                    warnings.simplefilter("ignore")
                    __import__(track)
                module = sys.modules.get(track)
            except Exception:  # the torch track may be missing or broken: nothing of it to block
                module = None
        if module is not None and name in module.__dict__:
            found.append(module.__dict__[name])
    return found


class _Forbid:
    def __init__(self, names, autograd: bool) -> None:
        self.names, self.autograd = names, autograd
        self.swapped = []

    def _functions(self):
        import sys

        seen = []
        for name in self.names:
            objects = _reference_objects(name)
            if not objects:
                raise LookupError(f"forbid_reference: no reference object named {name!r}")
            for obj in objects:
                if isinstance(obj, _type):
                    for cls in obj.__mro__:
                        module = cls.__dict__.get("__module__", "")
                        if not module.startswith("attention_course.") or cls.__name__ == "Layer":
                            continue
                        for attr, value in cls.__dict__.items():
                            for fn in _live_functions(value) or ():
                                seen.append((f"{name} ({cls.__name__}.{attr})", fn))
                else:
                    for fn in _live_functions(obj) or ():
                        seen.append((name, fn))
        torch = sys.modules.get("torch")
        if self.autograd and torch is not None:
            for label, fn in (("torch.Tensor.backward", torch.Tensor.backward),
                              ("torch.autograd.grad", torch.autograd.grad),
                              ("torch.autograd.backward", torch.autograd.backward)):
                seen.append((label, fn))
        return seen

    def __enter__(self):
        import sys

        done = set()
        key = (self.names, self.autograd, "attention_course.torch_track" in sys.modules, "torch" in sys.modules)
        if key not in _GUARDED:
            _GUARDED[key] = self._functions()
        functions = _GUARDED[key]
        self.modules_before = set(sys.modules)
        self.count_before = len(sys.modules)
        for label, fn in functions:
            if id(fn) in done:
                continue
            done.add(id(fn))
            if "autograd" in label or "Tensor" in label:
                message = f"a hand-written backward pass must not call torch's autograd ({label})"
            else:
                message = f"{REFERENCE_CALL_MESSAGE} {label}: implement it yourself"
            original = fn.__code__
            fn.__code__ = _stub_code(original, message)
            self.swapped.append((fn, original))
        return self

    def __exit__(self, exc_type, exc, traceback):
        import sys

        while self.swapped:
            fn, original = self.swapped.pop()
            fn.__code__ = original
        if exc_type is None and len(sys.modules) != self.count_before:
            # A reference imported only while the guarded call ran was not blocked: refuse it all the same.
            watched = ("attention_course.", "torch") if self.autograd else ("attention_course.",)
            new = sorted(name for name in set(sys.modules) - self.modules_before
                         if name.startswith(watched) and "." not in name.replace("attention_course.", "", 1))
            if new:
                raise RuntimeError(f"{REFERENCE_CALL_MESSAGE} (nor autograd, in a hand-written backward pass): "
                                   f"it imported {', '.join(new)} while it ran")
        return False


def forbid_reference(*names: str, autograd: bool = False) -> _Forbid:
    """Context manager: the named reference classes and functions raise while it is active.

    ``names`` are names in ``attention_course.numpy_track`` (and ``torch_track``): for a class,
    every method of it and of its bases in this package (except the generic ``Layer``) is
    blocked. ``autograd=True`` also blocks torch's autograd, for hand-written backward passes.
    """
    return _Forbid(names, autograd)


# ----------------------------------------------------------------------------- arrays
def _numpy():
    import sys

    numpy = sys.modules.get("numpy")
    if numpy is None:
        import numpy
    return numpy


def _ndarray():
    ndarray = _numpy().ndarray
    if not _is_static_type(ndarray, "ndarray"):
        _fail("numpy.ndarray", "was replaced")
    return ndarray


def _splitmix64(seed: int, count: int) -> list:
    mask = (1 << 64) - 1
    state = (seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & mask
    out = []
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        out.append((z >> 11) * (1.0 / (1 << 53)))
    return out


def random(shape, seed: int, scale: float = 1.0):
    """Float64 array of ``shape``, uniform in [-scale, scale), from ``seed`` (no numpy.random involved)."""
    shape = tuple(int(s) for s in shape)
    count = 1
    for size in shape:
        count *= size
    flat = _ndarray()((count,), "f8")
    flat[...] = [(2.0 * u - 1.0) * scale for u in _splitmix64(seed, count)]
    return flat.reshape(shape)


def lengths_mask(lengths, T: int):
    """Bool array (N, T): True on the first ``lengths[n]`` steps of row n (padding at the end)."""
    lengths = [int(n) for n in lengths]
    mask = _ndarray()((len(lengths), T), "?")
    mask[...] = [[t < n for t in range(T)] for n in lengths]
    return mask


def as_array(name: str, value, kind: str | None = "f"):
    """``value`` as an exact ``numpy.ndarray`` of kind ``kind`` ("f" float, "b" bool, None any): an
    ndarray (checked, not copied) or a torch tensor (detached copy). Anything else fails, naming ``name``."""
    ndarray = _ndarray()
    if _type(value) is not ndarray:
        import sys

        torch = sys.modules.get("torch")
        base = None if torch is None else torch._C.TensorBase
        if base is not None and _is_static_type(base, "TensorBase") and base in _type(value).__mro__:
            value = base.numpy(base.cpu(base.detach(value))).copy()
        else:
            raise AssertionError(f"{name}: expected a numpy array, got {_type(value).__name__}")
    if _type(value) is not ndarray:
        raise AssertionError(f"{name}: expected a numpy array, got {_type(value).__name__}")
    if kind is not None and value.dtype.kind != kind:
        wanted = {"f": "a floating-point", "b": "a bool"}.get(kind, kind)
        raise AssertionError(f"{name}: expected {wanted} array, got dtype {value.dtype}")
    return value


def assert_shape(name: str, value, shape) -> None:
    """``value`` is an array (numpy or torch) of exactly ``shape``."""
    got = tuple(as_array(name, value, None).shape)
    shape = tuple(int(s) for s in shape)
    if got != shape:
        raise AssertionError(f"{name}: expected shape {shape}, got {got}")


def _index(flat: int, shape: tuple) -> tuple:
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size)
        index.append(rest)
    return tuple(reversed(index))


def assert_finite(name: str, value) -> None:
    """No NaN and no infinity anywhere in ``value``."""
    array = as_array(name, value)
    bad = ~((array - array) == 0)  # NaN - NaN and inf - inf are NaN
    if bad.any():
        where = _index(int(bad.reshape(-1).argmax()), array.shape)
        raise AssertionError(f"{name}: not finite at index {where}: {array[where]!r}")


def assert_close(name: str, got, expected, rtol: float = 1e-7, atol: float = 1e-10) -> None:
    """``|got - expected| <= atol + rtol * |expected|`` everywhere; shapes must agree exactly.

    The message names the array, the worst index and both values there.
    """
    got = as_array(name, got)
    expected = as_array(f"{name} (expected)", expected)
    if tuple(got.shape) != tuple(expected.shape):
        raise AssertionError(f"{name}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)}")
    if got.size == 0:
        return
    assert_finite(name, got)
    excess = (got - expected).__abs__() - (expected.__abs__() * rtol + atol)
    if (excess > 0).any():
        flat = excess.reshape(-1)
        where = _index(int(flat.argmax()), got.shape)
        count = int((flat > 0).sum())
        raise AssertionError(f"{name}: mismatch at index {where}: got {float(got[where]):.10g}, expected "
                             f"{float(expected[where]):.10g} ({count} of {got.size} entries off; rtol {rtol:g}, "
                             f"atol {atol:g})")


def assert_equal(name: str, got, expected) -> None:
    """Exactly equal arrays (same shape, same values)."""
    expected = as_array(f"{name} (expected)", expected, None)
    got = as_array(name, got, expected.dtype.kind)
    if tuple(got.shape) != tuple(expected.shape):
        raise AssertionError(f"{name}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)}")
    differ = got != expected
    if differ.any():
        where = _index(int(differ.reshape(-1).argmax()), got.shape)
        raise AssertionError(f"{name}: differs at index {where}: got {got[where]!r}, expected {expected[where]!r}")


# ----------------------------------------------------------------------------- gradients
def _outputs(value) -> tuple:
    items = value if _type(value) is tuple or _type(value) is list else (value,)
    return tuple(as_array(f"output {i}", item) for i, item in enumerate(items))


def numerical_vjp(f, x, dout, eps: float = 1e-6):
    """``dout . (d f / d x)`` by central differences, one element of ``x`` at a time.

    ``f()`` reads ``x`` (changed in place and restored) and returns an array or a tuple of
    arrays, matched by ``dout``. Everything stays float64.
    """
    x = as_array("x", x)
    if x.dtype.itemsize != 8:
        raise AssertionError(f"numerical_vjp: x must be float64, got {x.dtype}")
    douts = _outputs(dout)
    grad = x.copy()
    grad.fill(0.0)
    shape = tuple(x.shape)
    for flat in range(x.size):
        i = _index(flat, shape)
        original = float(x[i])
        x[i] = original + eps
        plus = tuple(o.copy() for o in _outputs(f()))
        x[i] = original - eps
        minus = _outputs(f())
        x[i] = original
        if len(plus) != len(douts):
            raise AssertionError(f"numerical_vjp: f returned {len(plus)} outputs for {len(douts)} upstream gradients")
        total = 0.0
        for d, p, m in zip(douts, plus, minus):
            total += float((d * (p - m)).sum())
        grad[i] = total / (2 * eps)
    return grad


def check_gradients(f, inputs: dict, analytic: dict, dout, eps: float = 1e-6, rtol: float = 1e-6,
                    atol: float = 1e-8) -> None:
    """Every ``analytic[name]`` matches the central-difference gradient of ``f`` w.r.t. ``inputs[name]``.

    ``f()`` recomputes the output(s) from the arrays in ``inputs`` (perturbed in place), ``dout`` is
    the upstream gradient the analytic gradients were computed with.
    """
    for name, grad in analytic.items():
        numeric = numerical_vjp(f, inputs[name], dout, eps)
        assert_close(f"gradient of {name}", grad, numeric, rtol, atol)


# ----------------------------------------------------------------------------- torch
def _torch():
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        import torch
    if _type(torch.from_numpy) is not _BuiltinFunctionType or torch.from_numpy.__name__ != "from_numpy":
        _fail("torch.from_numpy", "was replaced")
    return torch


def tensor(array, requires_grad: bool = False):
    """A float64 torch tensor holding a copy of ``array`` (exactly ``torch.Tensor``, on the CPU)."""
    torch = _torch()
    out = torch.from_numpy(as_array("array", array, None).copy())
    if requires_grad:
        torch._C.TensorBase.requires_grad_(out, True)
    return out


def autograd_vjp(outputs, inputs: dict, douts) -> dict:
    """Gradients of ``sum(dout * output)`` w.r.t. each tensor in ``inputs``, as numpy arrays.

    ``outputs`` must be exactly ``torch.Tensor`` (no subclass can intercept autograd); an input that
    no gradient reaches (a detached or non-torch computation) fails with a message naming it.
    """
    torch = _torch()
    tensor_type = _type(torch.from_numpy(_ndarray()((1,), "f8")))
    outs = outputs if _type(outputs) in (tuple, list) else (outputs,)
    grads_out = douts if _type(douts) in (tuple, list) else (douts,)
    for i, out in enumerate(outs):
        if _type(out) is not tensor_type:
            raise AssertionError(f"output {i}: expected a torch.Tensor, got {_type(out).__name__}")
        if not torch._C.TensorBase.requires_grad.__get__(out):
            raise AssertionError(f"output {i} does not depend on the inputs through torch operations "
                                 f"(detached, or computed outside torch): autograd cannot differentiate it")
    names = list(inputs)
    # sum(dout * output) as one scalar: autograd's vector-Jacobian product without grad_outputs
    # (which would make torch import its symbolic-shape machinery, a second per kernel).
    total = None
    for out, dout in zip(outs, grads_out):
        term = (out * tensor(dout)).sum()
        total = term if total is None else total + term
    grads = torch.autograd.grad([total], [inputs[n] for n in names], allow_unused=True)
    result = {}
    for name, grad in zip(names, grads):
        if grad is None:
            raise AssertionError(f"no gradient reaches {name}: the computation is cut off from it")
        result[name] = as_array(f"gradient of {name}", grad)
    return result
