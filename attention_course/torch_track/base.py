"""What every torch-track module shares: initial values from the neutral core, dtypes, shape checks.

Parameters are registered from ``attention_course.core.initializers`` (plain NumPy arrays, the
same the NumPy track draws for the same seed), so the two tracks start from identical weights
under the same names (``W_x``, ``W_h``, ``W_a``, ...) and in the same layout, without either
building the other's layers: ``attention_course.convert`` copies them name for name.

Nothing here chooses a device: modules are created on the CPU and moved with ``.to(device)``;
tensors made inside ``forward`` take ``device=``/``dtype=`` from an input.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..core.shapes import ShapeError, assert_shape

__all__ = ["register_params", "resolve_dtype", "check_tensor", "ShapeError", "BATCH_FIELDS", "batch_to_tensors"]

# The arrays of a ``ParallelBatch`` that a model's forward pass takes, in its order.
BATCH_FIELDS = ("source", "source_mask", "decoder_input", "decoder_target", "target_mask")

_DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_dtype(dtype) -> torch.dtype:
    """A torch dtype from a torch dtype, a NumPy dtype or a name such as "float32"."""
    if isinstance(dtype, torch.dtype):
        return dtype
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if name not in _DTYPES:
        raise ValueError(f"dtype: expected one of {sorted(_DTYPES)}, got {dtype!r}")
    return _DTYPES[name]


def register_params(module: nn.Module, initial: dict[str, np.ndarray], dtype) -> None:
    """Register each initial value (from ``core.initializers``) on ``module`` as a parameter of ``dtype``."""
    dtype = resolve_dtype(dtype)
    for name, value in initial.items():
        module.register_parameter(name, nn.Parameter(torch.from_numpy(value).to(dtype)))


def check_tensor(name: str, tensor, expected, sizes: dict | None = None, kind: str = "float") -> dict:
    """Shape and dtype-kind check with a message naming the argument (see ``core.shapes``)."""
    if not isinstance(tensor, torch.Tensor):
        raise ShapeError(f"{name}: expected a torch tensor, got {type(tensor).__name__}")
    ok = {"float": tensor.is_floating_point(), "int": not tensor.is_floating_point() and tensor.dtype != torch.bool
          and not tensor.is_complex(), "bool": tensor.dtype == torch.bool}[kind]
    if not ok:
        article = "an" if kind == "int" else "a"
        raise ShapeError(f"{name}: expected {article} {kind} tensor, got dtype {tensor.dtype}")
    return assert_shape(name, tensor, expected, sizes)


def batch_to_tensors(batch, device) -> dict[str, torch.Tensor]:
    """The arrays of a ``ParallelBatch`` as tensors on ``device``, by field name."""
    return {name: torch.from_numpy(np.ascontiguousarray(getattr(batch, name))).to(device) for name in BATCH_FIELDS}
