"""Copy parameters between the tracks, in both directions.

The two tracks use the same parameter names and layouts (``encoder.rnn.0.forward_layer.cell.W_x``
is (D, 3H) in both), so a copy is name for name, with the shapes checked.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

__all__ = ["numpy_to_torch", "torch_to_numpy", "state_dict_to_numpy"]


def _match(numpy_layer, module: nn.Module):
    numpy_params = {name: value for name, value, _ in numpy_layer.named_parameters()}
    torch_params = dict(module.named_parameters())
    missing, extra = sorted(set(numpy_params) - set(torch_params)), sorted(set(torch_params) - set(numpy_params))
    if missing or extra:
        raise ValueError(f"the tracks' parameters differ: only in NumPy {missing}, only in torch {extra}")
    for name, value in numpy_params.items():
        if tuple(value.shape) != tuple(torch_params[name].shape):
            raise ValueError(f"parameter {name!r}: NumPy shape {value.shape}, torch shape {tuple(torch_params[name].shape)}")
    return numpy_params, torch_params


@torch.no_grad()
def numpy_to_torch(numpy_layer, module: nn.Module) -> nn.Module:
    """Copy every parameter of a NumPy layer into the torch module (keeping its device and dtype)."""
    numpy_params, torch_params = _match(numpy_layer, module)
    for name, value in numpy_params.items():
        target = torch_params[name]
        target.copy_(torch.from_numpy(np.ascontiguousarray(value)).to(device=target.device, dtype=target.dtype))
    return module


@torch.no_grad()
def torch_to_numpy(module: nn.Module, numpy_layer):
    """Copy every parameter of a torch module into the NumPy layer, in place (keeping its dtype)."""
    numpy_params, torch_params = _match(numpy_layer, module)
    for name, value in numpy_params.items():
        value[...] = torch_params[name].detach().to("cpu", torch.float64).numpy()
    return numpy_layer


def state_dict_to_numpy(module: nn.Module) -> dict[str, np.ndarray]:
    """Every parameter as a NumPy array (float32 or float64), by name: the checkpoint format."""
    out = {}
    for name, value in module.named_parameters():
        value = value.detach().cpu()
        out[name] = value.numpy() if value.dtype in (torch.float32, torch.float64) else value.float().numpy()
    return out
