"""Moving weights: between the two tracks, and between the NumPy layers and ``torch.nn``'s own modules.

**Between the tracks** (``numpy_to_torch``, ``torch_to_numpy``, ``state_dict_to_numpy``). The two
tracks use the same parameter names and layouts (``encoder.rnn.0.forward_layer.cell.W_x`` is
(D, 3H) in both, and the GRU follows the lectures' convention in both), so a copy is name for
name, with the names and shapes checked; a checkpoint is ``state_dict_to_numpy``'s dict.

**With torch.nn's modules** (``to_torch``, ``from_torch`` and the ``affine_``/``embedding_``
functions). With the same weights, a NumPy layer and its ``torch.nn`` counterpart compute the
same function, so the tests can hold every hand-written forward and backward pass against
torch's autograd, and an exercise can hand a ``torch.nn.GRU``'s weights to NumPy code.

=================================  ============================================================
NumPy                              torch
=================================  ============================================================
``RNN``                            ``nn.RNN(nonlinearity="tanh", batch_first=True)``
``LSTM``                           ``nn.LSTM(batch_first=True)``
``GRU(reset_after=True)``          ``nn.GRU(batch_first=True)``
``Bidirectional(f, b)``            the same with ``bidirectional=True`` (``*_reverse`` weights)
``Stacked([l_1, ..., l_k])``       the same with ``num_layers=k``
``Affine``                         ``nn.Linear``
``Embedding``                      ``nn.Embedding``
=================================  ============================================================

How the parameters correspond, for layer ``k`` of a torch module (``sfx`` is ``""`` for the
forward direction and ``"_reverse"`` for the backward one):

* ``weight_ih_l{k}{sfx} = W_x^T`` (G*H, D) and ``weight_hh_l{k}{sfx} = W_h^T`` (G*H, H): torch
  multiplies ``W x``, the course ``x W``. The gate blocks are in the same order on both sides:
  (i, f, g, o) for the LSTM, (r, z, n) for the GRU.
* RNN and LSTM: the course has one bias ``b``, torch two that are always added,
  ``b = b_ih + b_hh``. To torch: ``b_ih = b``, ``b_hh = 0``; from torch: ``b = b_ih + b_hh``.
* GRU: ``b = b_ih`` and ``b_h = b_hh``, and the one convention that differs: torch's update gate
  is the course's ``1 - z``, so the z blocks of ``W_x``, ``W_h``, ``b`` and ``b_h`` change sign
  (``core.registries`` explains it; ``CellSpec.torch_gate_signs`` is the sign vector).
  Only ``reset_after=True`` matches torch: the lectures' GRU resets ``h`` *before* the product
  with ``W_hn``, which no setting of ``torch.nn.GRU`` does.
* ``nn.Linear.weight = W^T`` (D_out, D_in), ``bias = b``; ``nn.Embedding.weight = W`` (V, D).

Every function copies values into the existing arrays or tensors (the NumPy arrays in place,
so optimizers' references stay valid) and returns its destination. This module sits above both
tracks; neither track imports it.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .numpy_track.base import Layer
from .numpy_track.layers import Affine, Embedding
from .numpy_track.recurrent import GRU, LSTM, RNN, Recurrent
from .numpy_track.wrappers import Bidirectional, Residual, Stacked
from .torch_track.track import weights as state_dict_to_numpy  # the checkpoint format

__all__ = ["numpy_to_torch", "torch_to_numpy", "state_dict_to_numpy", "to_torch", "from_torch", "affine_to_torch",
           "affine_from_torch", "embedding_to_torch", "embedding_from_torch"]


# --- between the tracks: names and layouts match ---------------------------------------------


def _match(numpy_layer: Layer, module: nn.Module):
    numpy_params = {name: value for name, value, _ in numpy_layer.named_parameters()}
    torch_params = dict(module.named_parameters())
    missing, extra = sorted(set(numpy_params) - set(torch_params)), sorted(set(torch_params) - set(numpy_params))
    if missing or extra:
        raise ValueError(f"the tracks' parameters differ: only in NumPy {missing}, only in torch {extra}")
    for name, value in numpy_params.items():
        if tuple(value.shape) != tuple(torch_params[name].shape):
            raise ValueError(f"parameter {name!r}: NumPy shape {value.shape}, "
                             f"torch shape {tuple(torch_params[name].shape)}")
    return numpy_params, torch_params


@torch.no_grad()
def numpy_to_torch(numpy_layer: Layer, module: nn.Module) -> nn.Module:
    """Copy every parameter of a NumPy layer into the torch module of the same name
    (keeping its device and dtype)."""
    numpy_params, torch_params = _match(numpy_layer, module)
    for name, value in numpy_params.items():
        target = torch_params[name]
        source = torch.from_numpy(np.ascontiguousarray(value))
        target.copy_(source.to(device=target.device, dtype=target.dtype))
    return module


@torch.no_grad()
def torch_to_numpy(module: nn.Module, numpy_layer: Layer) -> Layer:
    """Copy every parameter of a torch module into the NumPy layer of the same name, in place (keeping its dtype)."""
    numpy_params, torch_params = _match(numpy_layer, module)
    for name, value in numpy_params.items():
        value[...] = torch_params[name].detach().to("cpu", torch.float64).numpy()
    return numpy_layer


# --- with torch.nn's recurrent modules, Linear and Embedding ---------------------------------

_RESET_BEFORE_MESSAGE = (
    "a GRU with reset_after=False (the lectures' form, r * h before the product with W_hn) cannot be mapped "
    "onto torch.nn.GRU, which applies the reset gate after the product (r * (h W_hn + b_hn)); "
    "build the GRU with reset_after=True"
)


def _directions(layer: Layer) -> list[Recurrent]:
    """The recurrent layers of one torch "layer": [forward] or [forward, backward]."""
    if isinstance(layer, Bidirectional):
        return [layer.forward_layer, layer.backward_layer]
    if isinstance(layer, Residual):
        raise ValueError("Residual: torch.nn.RNN/LSTM/GRU have no skip connections, so a Residual layer "
                         "has no torch counterpart")
    if not isinstance(layer, Recurrent):
        raise ValueError(f"layer: expected an RNN, LSTM or GRU (or Bidirectional/Stacked of them), "
                         f"got {type(layer).__name__}")
    return [layer]


def _layout(layer: Layer) -> list[list[Recurrent]]:
    """``layout[k][d]``: the NumPy layer for torch's layer ``k``, direction ``d``."""
    layers = layer.layers if isinstance(layer, Stacked) else [layer]
    layout = [_directions(one) for one in layers]
    kinds = {type(part) for directions in layout for part in directions}
    if len(kinds) != 1:
        raise ValueError(f"layer: every part must be the same kind of recurrent layer to match one torch "
                         f"module, got {sorted(kind.__name__ for kind in kinds)}")
    if len({len(directions) for directions in layout}) != 1:
        raise ValueError("layer: every layer of a Stacked must be bidirectional, or none, to match one torch module")
    for directions in layout:
        if directions[0].reverse:
            raise ValueError("layer: a recurrent layer with reverse=True has no unidirectional torch counterpart; "
                             "wrap it in Bidirectional")
    return layout


def _check_module(layout: list[list[Recurrent]], module) -> None:
    """Raise a ValueError when ``module`` is not the torch counterpart of ``layout``."""
    first = layout[0][0]
    expected = {RNN: torch.nn.RNN, LSTM: torch.nn.LSTM, GRU: torch.nn.GRU}[type(first)]
    if isinstance(first, GRU) and not first.cell.reset_after:
        raise ValueError(_RESET_BEFORE_MESSAGE)
    if type(module) is not expected:
        raise ValueError(f"module: a NumPy {type(first).__name__} maps onto torch.nn.{expected.__name__}, "
                         f"got {type(module).__name__}")
    if isinstance(first, RNN) and module.nonlinearity != "tanh":
        raise ValueError(f"module: the NumPy RNN uses tanh, the torch RNN has nonlinearity={module.nonlinearity!r}")
    if not module.bias:
        raise ValueError("module: the NumPy recurrent layers have biases; build the torch module with bias=True")
    if getattr(module, "proj_size", 0):
        raise ValueError(f"module: proj_size={module.proj_size} has no NumPy counterpart; use proj_size=0")
    checks = [
        ("num_layers", len(layout), module.num_layers),
        ("bidirectional", len(layout[0]) == 2, bool(module.bidirectional)),
    ]
    for name, ours, theirs in checks:
        if ours != theirs:
            raise ValueError(f"module: {name} is {theirs}, the NumPy layer needs {ours}")


def _parameter_names(k: int, direction: int) -> tuple[str, str, str, str]:
    suffix = f"_l{k}" + ("_reverse" if direction else "")
    return tuple(name + suffix for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))


def _check_shape(name: str, got: tuple, expected: tuple) -> None:
    if tuple(got) != tuple(expected):
        raise ValueError(f"{name}: expected shape {tuple(expected)}, got {tuple(got)}")


def _z_sign(layer: Recurrent) -> np.ndarray:
    """+1 on every column of a gate block, -1 on the GRU's z block (torch's z is our 1 - z)."""
    return layer.cell.spec.torch_gate_signs(layer.hidden_size)


def to_torch(layer: Layer, module):
    """Copy a NumPy RNN/LSTM/GRU (or Bidirectional/Stacked of them) into its torch module.

    ``weight_ih = W_x^T``, ``weight_hh = W_h^T``; the RNN's and LSTM's single bias goes to
    ``bias_ih`` (``bias_hh = 0``); the GRU's z blocks change sign (see the module docstring).
    The torch parameters keep their dtype and device.

    Shapes:
        W_x: (D, G*H) -> weight_ih_l{k}: (G*H, D).  W_h: (H, G*H) -> weight_hh_l{k}: (G*H, H).
        b: (G*H,) -> bias_ih_l{k}.  b_h (GRU): (G*H,) -> bias_hh_l{k}.

    Returns:
        ``module``, its parameters overwritten.

    Raises:
        ValueError: a GRU with ``reset_after=False``, a module of another kind, size or shape
            (naming the torch parameter), or a layer with no torch counterpart (Residual).
    """
    layout = _layout(layer)
    _check_module(layout, module)
    torch_params = dict(module.named_parameters())
    copies = []  # every shape is checked before anything is written
    for k, directions in enumerate(layout):
        for direction, part in enumerate(directions):
            sign = _z_sign(part)
            p = part.cell.params
            b_h = p["b_h"] * sign if "b_h" in p else np.zeros_like(p["b"])
            values = ((p["W_x"] * sign).T, (p["W_h"] * sign).T, p["b"] * sign, b_h)
            for name, value in zip(_parameter_names(k, direction), values):
                _check_shape(name, torch_params[name].shape, value.shape)
                copies.append((torch_params[name], value))
    with torch.no_grad():
        for target, value in copies:
            target.copy_(torch.from_numpy(np.ascontiguousarray(value)).to(target.dtype))
    return module


def from_torch(module, layer: Layer) -> Layer:
    """Copy a torch RNN/LSTM/GRU module into its NumPy counterpart, in place.

    ``W_x = weight_ih^T``, ``W_h = weight_hh^T``; the RNN's and LSTM's bias is
    ``b = bias_ih + bias_hh``; the GRU's ``b = bias_ih``, ``b_h = bias_hh`` and its z blocks change
    sign (see the module docstring). The NumPy arrays keep their dtype.

    Shapes:
        weight_ih_l{k}: (G*H, D) -> W_x: (D, G*H).  weight_hh_l{k}: (G*H, H) -> W_h: (H, G*H).

    Returns:
        ``layer``, its parameters overwritten in place.

    Raises:
        ValueError: as ``to_torch``.
    """
    layout = _layout(layer)
    _check_module(layout, module)
    torch_params = {name: value.detach().cpu().double().numpy() for name, value in module.named_parameters()}
    for k, directions in enumerate(layout):  # every shape is checked before anything is written
        for direction, part in enumerate(directions):
            p = part.cell.params
            expected = (p["W_x"].T.shape, p["W_h"].T.shape, p["b"].shape, p["b"].shape)
            for name, shape in zip(_parameter_names(k, direction), expected):
                _check_shape(name, torch_params[name].shape, shape)
    for k, directions in enumerate(layout):
        for direction, part in enumerate(directions):
            sign = _z_sign(part)
            p = part.cell.params
            w_ih, w_hh, b_ih, b_hh = (torch_params[name] for name in _parameter_names(k, direction))
            if "b_h" in p:
                p["b"][...] = b_ih * sign
                p["b_h"][...] = b_hh * sign
            else:
                p["b"][...] = b_ih + b_hh
            p["W_x"][...] = w_ih.T * sign
            p["W_h"][...] = w_hh.T * sign
    return layer


def _check_kind(name: str, value, kind, what: str) -> None:
    if not isinstance(value, kind):
        raise ValueError(f"{name}: expected {what}, got {type(value).__name__}")


def affine_to_torch(affine: Affine, linear):
    """Copy an ``Affine`` into an ``nn.Linear``: ``weight = W^T``, ``bias = b`` (0 without a bias).

    Shapes:
        W: (D_in, D_out) -> weight: (D_out, D_in).  b: (D_out,) -> bias: (D_out,).

    Returns:
        ``linear``, its parameters overwritten.

    Raises:
        ValueError: a shape mismatch (naming the parameter), or an Affine with a bias and a Linear without.
    """
    _check_kind("affine", affine, Affine, "an Affine")
    _check_kind("linear", linear, torch.nn.Linear, "a torch.nn.Linear")
    W = affine.params["W"]
    _check_shape("weight", linear.weight.shape, W.T.shape)
    if "b" in affine.params and linear.bias is None:
        raise ValueError("bias: the Affine has a bias, the Linear has none (build it with bias=True)")
    with torch.no_grad():
        linear.weight.copy_(torch.from_numpy(np.ascontiguousarray(W.T)).to(linear.weight.dtype))
        if linear.bias is not None:
            b = affine.params.get("b", np.zeros(W.shape[1], dtype=W.dtype))
            _check_shape("bias", linear.bias.shape, b.shape)
            linear.bias.copy_(torch.from_numpy(b).to(linear.bias.dtype))
    return linear


def affine_from_torch(linear, affine: Affine) -> Affine:
    """Copy an ``nn.Linear`` into an ``Affine`` in place: ``W = weight^T``, ``b = bias`` (0 without a bias).

    Shapes:
        weight: (D_out, D_in) -> W: (D_in, D_out).  bias: (D_out,) -> b: (D_out,).

    Returns:
        ``affine``, its parameters overwritten in place.

    Raises:
        ValueError: a shape mismatch (naming the parameter), or a Linear with a bias and an Affine without.
    """
    _check_kind("affine", affine, Affine, "an Affine")
    _check_kind("linear", linear, torch.nn.Linear, "a torch.nn.Linear")
    W = affine.params["W"]
    weight = linear.weight.detach().cpu().double().numpy()
    _check_shape("weight", weight.shape, W.T.shape)
    if linear.bias is not None and "b" not in affine.params:
        raise ValueError("bias: the Linear has a bias, the Affine has none (build it with bias=True)")
    W[...] = weight.T
    if "b" in affine.params:
        if linear.bias is None:
            affine.params["b"][...] = 0
        else:
            bias = linear.bias.detach().cpu().double().numpy()
            _check_shape("bias", bias.shape, affine.params["b"].shape)
            affine.params["b"][...] = bias
    return affine


def embedding_to_torch(embedding: Embedding, module):
    """Copy an ``Embedding`` into an ``nn.Embedding``: ``weight = W``.

    Shapes:
        W: (V, D) -> weight: (V, D).

    Returns:
        ``module``, its weight overwritten.

    Raises:
        ValueError: a shape mismatch, naming ``weight``.
    """
    _check_kind("embedding", embedding, Embedding, "an Embedding")
    _check_kind("module", module, torch.nn.Embedding, "a torch.nn.Embedding")
    W = embedding.params["W"]
    _check_shape("weight", module.weight.shape, W.shape)
    with torch.no_grad():
        module.weight.copy_(torch.from_numpy(W).to(module.weight.dtype))
    return module


def embedding_from_torch(module, embedding: Embedding) -> Embedding:
    """Copy an ``nn.Embedding`` into an ``Embedding`` in place: ``W = weight``.

    Shapes:
        weight: (V, D) -> W: (V, D).

    Returns:
        ``embedding``, its weight overwritten in place.

    Raises:
        ValueError: a shape mismatch, naming ``weight``.
    """
    _check_kind("embedding", embedding, Embedding, "an Embedding")
    _check_kind("module", module, torch.nn.Embedding, "a torch.nn.Embedding")
    weight = module.weight.detach().cpu().double().numpy()
    _check_shape("weight", weight.shape, embedding.params["W"].shape)
    embedding.params["W"][...] = weight
    return embedding
