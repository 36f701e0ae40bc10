"""The two tracks are one map: the same module names and class names for the same idea."""

from __future__ import annotations

import inspect
import pkgutil

import pytest

import attention_course.numpy_track as numpy_track

torch_track = pytest.importorskip("attention_course.torch_track")

# Modules that exist in one track only, by design: numpy's optimizers (torch has its own);
# torch's functional forms (F.scaled_dot_product_attention). Each track's ``base`` holds what
# its own modules share.
NUMPY_ONLY = {"optim", "base"}
TORCH_ONLY = {"functional", "base"}


def modules(package) -> set[str]:
    return {info.name for info in pkgutil.iter_modules(package.__path__)}


def public_classes(module) -> set[str]:
    return {name for name, value in vars(module).items()
            if inspect.isclass(value) and value.__module__ == module.__name__ and not name.startswith("_")}


def test_same_modules():
    assert modules(numpy_track) - NUMPY_ONLY == modules(torch_track) - TORCH_ONLY


@pytest.mark.parametrize("name", sorted(modules(numpy_track) - NUMPY_ONLY - {"trainer", "track", "decoding"}))
def test_same_classes_in_each_module(name):
    import importlib

    ours = public_classes(importlib.import_module(f"attention_course.numpy_track.{name}"))
    theirs = importlib.import_module(f"attention_course.torch_track.{name}")
    missing = {cls for cls in ours if not inspect.isclass(getattr(theirs, cls, None))}
    assert not missing, f"torch_track.{name} lacks {sorted(missing)}"


def test_every_numpy_layer_is_exported_by_both():
    numpy_names = {n for n in numpy_track.__all__ if inspect.isclass(getattr(numpy_track, n))}
    torch_names = set(torch_track.__all__)
    missing = numpy_names - torch_names - {"Layer", "SGD", "Adam"}
    assert not missing, f"torch_track does not export {sorted(missing)}"
