"""The torch-track tests: collected only where torch is installed.

The helpers that run a NumPy layer and its torch twin side by side (the ``parity`` fixture) are
in ``tests/conftest.py``, shared with ``tests/test_convert.py``.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError:  # torch is an optional extra: without it there is nothing here to test
    collect_ignore_glob = ["test_torch_*.py"]


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU")
