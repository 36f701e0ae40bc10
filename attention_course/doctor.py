"""``attention-course doctor``: what the course runs on, and what is missing.

Prints the versions of Python and the packages, the BLAS NumPy uses, and whether CUDA is
usable and on which device. Exits 1, naming each problem and how to fix it, when something the
course needs is missing; ``--require grading,book,cuda`` makes those extras needed too.
"""

from __future__ import annotations

import platform
import shutil
import sys
from importlib import metadata

__all__ = ["doctor_command", "collect"]

MIN_PYTHON = (3, 10)
MIN_TORCH = (2, 1)
CORE = ["numpy", "tqdm", "matplotlib", "threadpoolctl"]
EXTRAS = {"grading": ["nbgrader"], "book": ["jupyter-book", "ipywidgets"]}
INSTALL = {"core": "pip install attention-course", "torch": "pip install torch  (CPU: torch==2.13.0)",
           "grading": "pip install 'attention-course[grading]'", "book": "pip install 'attention-course[book]'"}


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _numeric(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def collect(require: set[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """Returns (facts as (name, value) rows, problems)."""
    facts, problems = [], []
    python = ".".join(map(str, sys.version_info[:3]))
    facts.append(("python", f"{python} ({platform.python_implementation()}, {sys.executable})"))
    if sys.version_info[:2] < MIN_PYTHON:
        problems.append(f"Python {python} is too old: the course needs >= {'.'.join(map(str, MIN_PYTHON))}")
    for name in CORE:
        version = _version(name)
        facts.append((name, version or "MISSING"))
        if version is None:
            problems.append(f"{name} is missing: {INSTALL['core']}")
    try:
        from threadpoolctl import threadpool_info

        import numpy  # noqa: F401  (loads its BLAS so threadpoolctl can see it)

        blas = [f"{i.get('internal_api')} {i.get('version')} ({i.get('architecture')}, {i.get('num_threads')} threads)"
                for i in threadpool_info() if i.get("user_api") == "blas"]
        facts.append(("numpy BLAS", "; ".join(blas) or "none found"))
    except ImportError:
        pass

    torch_version = _version("torch")
    facts.append(("torch", torch_version or "MISSING"))
    if torch_version is None:
        problems.append(f"torch is missing (the torch track needs it): {INSTALL['torch']}")
    else:
        try:
            import torch

            if _numeric(torch.__version__) < MIN_TORCH:
                problems.append(f"torch {torch.__version__} is too old: the torch track needs >= 2.1")
            facts.append(("torch threads", str(torch.get_num_threads())))
            facts.append(("torch built with CUDA", torch.version.cuda or "no (CPU build)"))
            if torch.cuda.is_available():
                names = [f"cuda:{i} {torch.cuda.get_device_name(i)}" for i in range(torch.cuda.device_count())]
                facts.append(("CUDA usable", "yes: " + ", ".join(names)))
                facts.append(("cuDNN", str(torch.backends.cudnn.version())))
            else:
                facts.append(("CUDA usable", "no (the torch track runs on the CPU)"))
                if "cuda" in require:
                    problems.append("CUDA was required but torch sees no usable GPU (a CPU build of torch, no "
                                    "driver, or no device)")
        except Exception as error:  # a broken install must be reported, not crash the doctor
            problems.append(f"torch {torch_version} is installed but does not import: {error}")

    for extra, names in EXTRAS.items():
        for name in names:
            version = _version(name)
            facts.append((name, version or f"not installed (needed for {extra})"))
            if version is None and extra in require:
                problems.append(f"{name} is missing ({extra} was required): {INSTALL[extra]}")
    bwrap = shutil.which("bwrap")
    facts.append(("bubblewrap (grading sandbox)", bwrap or "not installed"))
    if bwrap is None and "grading" in require:
        problems.append("bubblewrap is missing (grading runs student code in it): apt-get install bubblewrap")
    return facts, problems


def doctor_command(args) -> int:
    require = {part.strip() for part in (args.require or "").split(",") if part.strip()}
    unknown = require - {"grading", "book", "cuda"}
    if unknown:
        print(f"attention-course doctor: error: --require takes grading, book, cuda; got {sorted(unknown)}",
              file=sys.stderr)
        return 2
    facts, problems = collect(require)
    width = max(len(name) for name, _ in facts)
    for name, value in facts:
        print(f"{name:<{width}}  {value}")
    if problems:
        print(f"\n{len(problems)} problem(s):", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    print("\nall good")
    return 0
