"""Plain data across the sandbox's wall: what may cross, how it is framed, and how it is read back.

The grader's two processes (the sandbox that runs the student's code and the judge that runs the
tests) exchange messages in one format. A message is a tree of plain values:

* ``None``, ``bool``, ``int``, ``float`` (``nan`` and ``inf`` included), ``complex``, ``str``;
* ``list``, ``tuple`` and ``dict`` (string or integer keys) of plain values;
* NumPy arrays and scalars of a numeric or boolean dtype, and torch tensors, sent as their raw
  bytes with dtype and shape (a tensor keeps its dtype; bfloat16 travels as float32);
* ``Handle``: a reference to an object that stays on the other side (a cache, a module);
* ``ModuleSpec``: a description of a ``torch.nn`` module (its class, constructor arguments and
  parameter values), from which the other side builds its own copy; only the classes in
  ``MODULES`` may be described.

Nothing is ever unpickled. Reading checks every size against fixed limits (bytes, depth, items,
string length) before it allocates, and every dtype against a list: a message from the sandbox
is the student's data, and the worst it can do is fail to decode, with a ``WireError``.

Framing: ``MAGIC`` (4 bytes), the header length (4 bytes, big-endian), a JSON header, then the
binary buffers the header lists, one after another.

This file stands alone (it imports only numpy, and torch when a tensor or module is met): the
sandbox runs it from a read-only copy without the rest of the autograder.
"""

from __future__ import annotations

import json
import math
import select
import struct
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["WireError", "WireTimeout", "Handle", "ModuleSpec", "MODULES", "Limits", "encode", "decode", "send",
           "receive"]

MAGIC = b"ACW1"


class WireError(ValueError):
    """A message that cannot be encoded (not plain data) or decoded (malformed, too big)."""


class WireTimeout(Exception):
    """The other side did not send a whole message before the reader's deadline."""


class OverBudget(WireError):
    """A message the reader's ``on_size`` refused by its size; it was read and dropped whole, so the
    stream stays in step."""


class _NotPlain(WireError):
    """A value that is not plain data: the sandbox keeps it and sends a handle instead."""


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 256 * 1024 * 1024      # the whole message
    max_header: int = 16 * 1024 * 1024      # the JSON part
    max_depth: int = 48
    max_items: int = 200_000                # values in the tree
    max_string: int = 4 * 1024 * 1024       # characters in one string


DEFAULT_LIMITS = Limits()

# dtypes that may cross, by their NumPy name.
_DTYPES = {name: np.dtype(name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128")}


@dataclass(frozen=True)
class Handle:
    """An object that stays on the side that made it; ``key`` names it there, ``kind`` is its type's name."""

    key: int
    kind: str = ""


# torch.nn classes a test may hand to a student's function, with the constructor arguments read
# back from an instance (their values are plain data).
MODULES = {
    "RNN": ("input_size", "hidden_size", "num_layers", "nonlinearity", "bias", "batch_first", "dropout",
            "bidirectional"),
    "LSTM": ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional",
             "proj_size"),
    "GRU": ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional"),
    "Linear": ("in_features", "out_features"),
    "Embedding": ("num_embeddings", "embedding_dim"),
}


@dataclass
class ModuleSpec:
    """A ``torch.nn.<name>`` module as plain data: constructor arguments and parameter values."""

    name: str
    arguments: dict
    parameters: dict = field(default_factory=dict)   # parameter name -> array or tensor
    training: bool = True

    @classmethod
    def of(cls, module) -> "ModuleSpec":
        name = type(module).__name__
        if name not in MODULES or type(module).__module__.split(".")[0] != "torch":
            raise WireError(f"a {type(module).__name__} cannot cross to the sandbox: only torch.nn "
                            f"{', '.join(sorted(MODULES))} modules can be described")
        arguments = {key: getattr(module, key) for key in MODULES[name]}
        if name == "Linear":
            arguments["bias"] = module.bias is not None
        if name == "RNN":
            arguments["nonlinearity"] = module.nonlinearity
        return cls(name, arguments, {key: value.detach() for key, value in module.named_parameters()},
                   module.training)

    def build(self):
        """The module itself (in the process that reads the spec)."""
        import torch

        if self.name not in MODULES:
            raise WireError(f"unknown module {self.name!r}")
        allowed = set(MODULES[self.name]) | ({"bias"} if self.name == "Linear" else set())
        if set(self.arguments) - allowed:
            raise WireError(f"{self.name}: unexpected arguments {sorted(set(self.arguments) - allowed)}")
        dtypes = {tensor.dtype for tensor in self.parameters.values()}
        dtype = dtypes.pop() if len(dtypes) == 1 else torch.float32
        module = getattr(torch.nn, self.name)(**self.arguments, dtype=dtype)
        own = dict(module.named_parameters())
        if set(own) != set(self.parameters):
            raise WireError(f"{self.name}: parameters {sorted(self.parameters)} do not match {sorted(own)}")
        with torch.no_grad():
            for key, value in self.parameters.items():
                if tuple(value.shape) != tuple(own[key].shape):
                    raise WireError(f"{self.name}.{key}: shape {tuple(value.shape)}, expected {tuple(own[key].shape)}")
                own[key].copy_(value)
        return module.train(self.training)


def _torch():
    import sys

    return sys.modules.get("torch")


# --- encoding ----------------------------------------------------------------------------------


class _Encoder:
    def __init__(self, make_handle, limits: Limits) -> None:
        self.buffers: list[bytes] = []
        self.size = 0
        self.items = 0
        self.make_handle = make_handle
        self.limits = limits

    def _buffer(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > self.limits.max_bytes:
            raise WireError(f"the data is larger than {self.limits.max_bytes // (1024 * 1024)} MiB")
        self.buffers.append(data)
        return len(self.buffers) - 1

    def _array(self, array: np.ndarray, tag: str, extra: dict) -> dict:
        if array.dtype.name not in _DTYPES:
            raise _NotPlain(f"an array of dtype {array.dtype} cannot cross (numeric and boolean dtypes only)")
        data = np.ascontiguousarray(array).tobytes()
        return {tag: self._buffer(data), "dtype": array.dtype.name, "shape": list(array.shape), **extra}

    def value(self, value, depth: int = 0):
        """``value`` as a JSON tree; what is not plain data becomes a handle where handles are made."""
        try:
            return self._plain(value, depth)
        except _NotPlain:
            if self.make_handle is None:
                raise
            return self._plain(self.make_handle(value), depth)

    def _plain(self, value, depth: int):
        self.items += 1
        if self.items > self.limits.max_items:
            raise WireError(f"more than {self.limits.max_items} values")
        if depth > self.limits.max_depth:
            raise WireError(f"nested deeper than {self.limits.max_depth} levels")
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int) and type(value) in (int,):
            return value if abs(value) < 2 ** 63 else {"int": str(value)}
        if isinstance(value, float) and type(value) is float:
            return value if math.isfinite(value) else {"float": repr(value)}
        if type(value) is complex:
            return {"complex": [self.value(value.real, depth + 1), self.value(value.imag, depth + 1)]}
        if isinstance(value, Handle):
            return {"handle": value.key, "kind": value.kind}
        if isinstance(value, ModuleSpec):
            return {"module": value.name, "arguments": self.value(value.arguments, depth + 1),
                    "parameters": self.value(value.parameters, depth + 1), "training": bool(value.training)}
        if type(value) is np.ndarray:
            return self._array(value, "array", {})
        if isinstance(value, np.generic) and type(value).__module__ == "numpy":
            return self._array(np.asarray(value), "scalar", {})
        torch = _torch()
        if torch is not None and type(value) in (torch.Tensor, torch.nn.Parameter):
            tensor = value.detach().cpu()
            dtype = tensor.dtype
            if dtype == torch.bfloat16:
                tensor = tensor.float()
            return self._array(tensor.numpy(), "tensor", {"torch_dtype": str(dtype).replace("torch.", ""),
                                                          "requires_grad": bool(value.requires_grad)})
        if torch is not None and isinstance(value, torch.nn.Module) and type(value).__name__ in MODULES:
            return self.value(ModuleSpec.of(value), depth)
        if type(value) in (list, tuple):
            items = [self.value(item, depth + 1) for item in value]
            return items if type(value) is list else {"tuple": items}
        if type(value) is dict:
            keys = list(value)
            if not all(type(key) in (str, int) for key in keys):
                raise _NotPlain("a dict can cross only with string or integer keys")
            return {"dict": [[key, self.value(value[key], depth + 1)] for key in keys]}
        raise _NotPlain(f"a {type(value).__module__}.{type(value).__qualname__} is not plain data")


def encode(value, make_handle=None, limits: Limits = DEFAULT_LIMITS) -> bytes:
    """One framed message holding ``value``.

    ``make_handle(obj) -> Handle`` is called for any object that is not plain data (the sandbox
    keeps such objects and sends a handle); without it such an object is a ``WireError``.
    """
    encoder = _Encoder(make_handle, limits)
    tree = encoder.value(value)
    header = json.dumps({"value": tree, "buffers": [len(b) for b in encoder.buffers]},
                        separators=(",", ":"), allow_nan=False).encode()
    if len(header) > limits.max_header:
        raise WireError(f"the message's structure is larger than {limits.max_header // (1024 * 1024)} MiB")
    return MAGIC + struct.pack(">I", len(header)) + header + b"".join(encoder.buffers)


# --- decoding ----------------------------------------------------------------------------------


class _Decoder:
    def __init__(self, buffers: list[memoryview], resolve_handle, limits: Limits) -> None:
        self.buffers = buffers
        self.resolve_handle = resolve_handle
        self.limits = limits
        self.items = 0

    def _array(self, node: dict, tag: str) -> np.ndarray:
        index, dtype_name, shape = node.get(tag), node.get("dtype"), node.get("shape")
        if not isinstance(index, int) or not 0 <= index < len(self.buffers):
            raise WireError("an array refers to a missing buffer")
        if dtype_name not in _DTYPES:
            raise WireError(f"dtype {dtype_name!r} may not cross")
        if not isinstance(shape, list) or len(shape) > 32 or not all(type(n) is int and n >= 0 for n in shape):
            raise WireError("an array has a malformed shape")
        dtype = _DTYPES[dtype_name]
        buffer = self.buffers[index]
        if math.prod(shape) * dtype.itemsize != len(buffer):
            raise WireError(f"an array of shape {tuple(shape)} and dtype {dtype_name} does not fit its "
                            f"{len(buffer)} bytes")
        return np.frombuffer(buffer, dtype=dtype).reshape(shape).copy()

    def value(self, node, depth: int = 0):
        self.items += 1
        if self.items > self.limits.max_items or depth > self.limits.max_depth:
            raise WireError("the message is nested too deeply or holds too many values")
        if node is None or isinstance(node, (bool, int, float)):
            return node
        if isinstance(node, str):
            if len(node) > self.limits.max_string:
                raise WireError(f"a string longer than {self.limits.max_string} characters")
            return node
        if isinstance(node, list):
            return [self.value(item, depth + 1) for item in node]
        if not isinstance(node, dict) or len(node) < 1:
            raise WireError("malformed message")
        if "tuple" in node:
            return tuple(self._list(node["tuple"], depth))
        if "dict" in node:
            pairs = node["dict"]
            if not isinstance(pairs, list):
                raise WireError("malformed dict")
            out = {}
            for pair in pairs:
                if not (isinstance(pair, list) and len(pair) == 2 and type(pair[0]) in (str, int)):
                    raise WireError("malformed dict entry")
                out[pair[0]] = self.value(pair[1], depth + 1)
            return out
        if "array" in node:
            return self._array(node, "array")
        if "scalar" in node:
            array = self._array(node, "scalar")
            if array.shape != ():
                raise WireError("a scalar with a shape")
            return array[()]
        if "tensor" in node:
            return self._tensor(node)
        if "float" in node:
            if node["float"] not in ("nan", "inf", "-inf"):
                raise WireError("malformed float")
            return float(node["float"])
        if "int" in node:
            text = node["int"]
            if not isinstance(text, str) or len(text) > 4000 or not text.lstrip("-").isdigit():
                raise WireError("malformed int")
            return int(text)
        if "complex" in node:
            parts = self._list(node["complex"], depth)
            if len(parts) != 2 or not all(isinstance(p, (int, float)) for p in parts):
                raise WireError("malformed complex")
            return complex(parts[0], parts[1])
        if "handle" in node:
            if type(node["handle"]) is not int or not isinstance(node.get("kind", ""), str):
                raise WireError("malformed handle")
            handle = Handle(node["handle"], node.get("kind", "")[:200])
            return self.resolve_handle(handle) if self.resolve_handle is not None else handle
        if "module" in node:
            if node["module"] not in MODULES:
                raise WireError(f"module {node['module']!r} may not cross")
            arguments = self.value(node.get("arguments"), depth + 1)
            parameters = self.value(node.get("parameters"), depth + 1)
            if not isinstance(arguments, dict) or not isinstance(parameters, dict):
                raise WireError("malformed module")
            return ModuleSpec(node["module"], arguments, parameters, bool(node.get("training", True)))
        raise WireError("malformed message")

    def _list(self, items, depth: int) -> list:
        if not isinstance(items, list):
            raise WireError("malformed message")
        return [self.value(item, depth + 1) for item in items]

    def _tensor(self, node: dict):
        import torch

        array = self._array(node, "tensor")
        name = node.get("torch_dtype")
        dtype = getattr(torch, name, None) if isinstance(name, str) and name.isidentifier() else None
        if not isinstance(dtype, torch.dtype):
            raise WireError(f"torch dtype {name!r} may not cross")
        tensor = torch.from_numpy(array).to(dtype)
        if node.get("requires_grad") is True and tensor.is_floating_point():
            tensor.requires_grad_(True)
        return tensor


def decode(message: bytes, resolve_handle=None, limits: Limits = DEFAULT_LIMITS):
    """The value of one framed message; a ``WireError`` if it is malformed or over a limit.

    ``resolve_handle(handle)`` turns a handle back into its object (on the side that holds it);
    without it, handles are returned as they are.
    """
    if len(message) > limits.max_bytes + limits.max_header + 8:
        raise WireError("the message is too large")
    if len(message) < 8 or message[:4] != MAGIC:
        raise WireError("not a message of this grader")
    (length,) = struct.unpack(">I", message[4:8])
    if length > limits.max_header or 8 + length > len(message):
        raise WireError("malformed message header")
    try:
        header = json.loads(message[8:8 + length])
    except (ValueError, RecursionError):
        raise WireError("malformed message header") from None
    if not isinstance(header, dict) or not isinstance(header.get("buffers"), list):
        raise WireError("malformed message header")
    view, offset, buffers = memoryview(message), 8 + length, []
    for size in header["buffers"]:
        if type(size) is not int or size < 0 or offset + size > len(message):
            raise WireError("malformed message buffers")
        buffers.append(view[offset:offset + size])
        offset += size
    if offset != len(message):
        raise WireError("trailing bytes after the message")
    try:
        return _Decoder(buffers, resolve_handle, limits).value(header.get("value"))
    except WireError:
        raise
    except RecursionError:
        raise WireError("the message is nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - whatever the data makes NumPy or torch raise: not readable
        raise WireError(f"malformed message ({type(exc).__name__})") from None


# --- a stream of messages (a socket) -----------------------------------------------------------


def send(sock, value, make_handle=None, limits: Limits = DEFAULT_LIMITS) -> None:
    """Write one message, prefixed with its length (8 bytes, big-endian)."""
    data = encode(value, make_handle, limits)
    sock.sendall(struct.pack(">Q", len(data)) + data)


def _read_exactly(sock, size: int, deadline: float | None) -> bytearray:
    """``size`` bytes from ``sock``, in one preallocated buffer; ``WireTimeout`` past ``deadline``
    (``time.monotonic()``), which covers the whole frame, not each read."""
    data = bytearray(size)
    view, received = memoryview(data), 0
    while received < size:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            ready = select.select([sock], [], [], remaining)[0] if remaining > 0 else []
            if not ready:
                raise WireTimeout(f"{received} of {size} bytes arrived before the deadline")
        count = sock.recv_into(view[received:], min(size - received, 1 << 20))
        if not count:
            raise EOFError("the other side closed the connection")
        received += count
    return data


def _drop(sock, size: int, deadline: float | None) -> None:
    while size > 0:
        chunk = min(size, 1 << 24)
        _read_exactly(sock, chunk, deadline)
        size -= chunk


def receive(sock, resolve_handle=None, limits: Limits = DEFAULT_LIMITS, deadline: float | None = None,
            on_size=None):
    """Read one message written by ``send``; ``EOFError`` when the other side is gone, ``WireTimeout``
    when the whole message has not arrived by ``deadline`` (``time.monotonic()``; None: no deadline).

    ``on_size(size)``, when given, sees each message's size before its body is read and may refuse
    it by raising ``OverBudget``: the body is then read and dropped (within the deadline) and the
    ``OverBudget`` raised, so the next message can be read.
    """
    (size,) = struct.unpack(">Q", _read_exactly(sock, 8, deadline))
    if on_size is not None:
        try:
            on_size(size)
        except OverBudget:
            _drop(sock, size, deadline)
            raise
    if size > limits.max_bytes + limits.max_header + 8:
        raise WireError(f"a message of {size} bytes is over the limit")
    return decode(_read_exactly(sock, size, deadline), resolve_handle, limits)
