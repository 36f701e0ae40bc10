"""What every torch-track module shares: parameters initialised exactly as the NumPy track's.

Each module builds its NumPy counterpart with the same ``rng`` and takes its initial values,
so the two tracks start from identical weights for the same seed, under the same names
(``W_x``, ``W_h``, ``W_a``, ...) and in the same layout: ``convert`` copies them name for name.

Nothing here chooses a device: modules are created on the CPU and moved with ``.to(device)``;
tensors made inside ``forward`` take ``device=``/``dtype=`` from an input.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..testing.shapes import ShapeError

__all__ = ["params_from_reference", "resolve_dtype", "check_tensor", "ShapeError"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_dtype(dtype) -> torch.dtype:
    """A torch dtype from a torch dtype, a NumPy dtype or a name such as "float32"."""
    if isinstance(dtype, torch.dtype):
        return dtype
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if name not in _DTYPES:
        raise ValueError(f"dtype: expected one of {sorted(_DTYPES)}, got {dtype!r}")
    return _DTYPES[name]


def params_from_reference(module: nn.Module, reference, dtype) -> None:
    """Register every parameter of the NumPy layer ``reference`` on ``module``, same name and value."""
    dtype = resolve_dtype(dtype)
    for name, value in reference.params.items():
        module.register_parameter(name, nn.Parameter(torch.from_numpy(np.array(value)).to(dtype)))


def check_tensor(name: str, tensor, expected, sizes: dict | None = None, kind: str = "float") -> dict:
    """Shape and dtype-kind check with a message naming the argument (see ``testing.shapes``)."""
    from ..testing.shapes import assert_shape

    if not isinstance(tensor, torch.Tensor):
        raise ShapeError(f"{name}: expected a torch tensor, got {type(tensor).__name__}")
    ok = {"float": tensor.is_floating_point(), "int": not tensor.is_floating_point() and tensor.dtype != torch.bool
          and not tensor.is_complex(), "bool": tensor.dtype == torch.bool}[kind]
    if not ok:
        article = "an" if kind == "int" else "a"
        raise ShapeError(f"{name}: expected {article} {kind} tensor, got dtype {tensor.dtype}")
    return assert_shape(name, tensor, expected, sizes)
