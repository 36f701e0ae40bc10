"""The book's longer experiments: each module trains small models of the package over several
seeds and writes its results to ``book/results/<name>.json``, which a chapter loads and plots.

Run one from the repository root, e.g. ``.venv/bin/python -m tools.experiments.bottleneck``.
A test under ``tests/tools/experiments/`` reruns a small instance of each from scratch.
"""
