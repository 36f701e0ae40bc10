"""The package's floors: the tracks are siblings on a neutral core, and the library does not import its tests.

Each check runs in a fresh interpreter and lists the ``attention_course`` modules an import loads.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def loaded_after(statement: str, block_torch: bool = False) -> set[str]:
    code = ("import sys\n" + ("sys.modules['torch'] = None\n" if block_torch else "") + statement + "\n"
            "import json; print(json.dumps(sorted(m for m in sys.modules if m.startswith('attention_course'))))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def under(modules: set[str], package: str) -> set[str]:
    return {name for name in modules if name == package or name.startswith(package + ".")}


def test_the_numpy_track_loads_nothing_of_the_torch_track_or_testing():
    loaded = loaded_after("import attention_course.numpy_track, attention_course.numpy_track.trainer, "
                          "attention_course.numpy_track.track")
    assert under(loaded, "attention_course.numpy_track"), "the check itself must see the track load"
    assert not under(loaded, "attention_course.torch_track")
    assert not under(loaded, "attention_course.testing")


def test_the_torch_track_loads_nothing_of_the_numpy_track_or_testing():
    pytest.importorskip("torch")
    loaded = loaded_after("import attention_course.torch_track, attention_course.torch_track.trainer, "
                          "attention_course.torch_track.track")
    assert under(loaded, "attention_course.torch_track")
    assert not under(loaded, "attention_course.numpy_track")
    assert not under(loaded, "attention_course.testing")


def test_the_core_imports_neither_track():
    loaded = loaded_after("import attention_course.core.configs, attention_course.core.registries, "
                          "attention_course.core.layer_stack, attention_course.core.initializers, "
                          "attention_course.core.shapes, attention_course.training, attention_course.decoding, "
                          "attention_course.tracks, attention_course.checkpoint")
    assert under(loaded, "attention_course.core")
    for package in ("attention_course.numpy_track", "attention_course.torch_track", "attention_course.testing"):
        assert not under(loaded, package), package


def test_the_numpy_track_and_its_checkpoints_work_without_torch():
    loaded = loaded_after("import attention_course.numpy_track, attention_course.checkpoint, attention_course.viz\n"
                          "from attention_course.tracks import get_track\n"
                          "try:\n"
                          "    get_track('torch')\n"
                          "except ValueError as error:\n"
                          "    assert 'needs PyTorch' in str(error), error\n"
                          "else:\n"
                          "    raise AssertionError('the torch track loaded without torch')",
                          block_torch=True)
    assert under(loaded, "attention_course.numpy_track")
