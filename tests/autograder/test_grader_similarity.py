"""Copies flagged for review (``autograder/similarity.py``): the package's code pasted into an answer, or
one answer copied into another, is found with its lines; answers written from the page are not."""

from __future__ import annotations

import inspect
import textwrap

from autograder import sandbox, similarity
from autograder.similarity import CopyCheck, package_sources

from attention_course.numpy_track import WeightSum
from attention_course.numpy_track.transformer import MultiHeadAttention


def _check() -> CopyCheck:
    offered = set(sandbox.library_modules(["attention_course.functional"]))
    return CopyCheck(package_sources(sandbox.package_root(), offered))


def test_the_packages_code_pasted_into_an_answer_is_flagged_with_its_lines():
    check = _check()
    pasted = "import numpy as np\n\n\n" + textwrap.dedent(inspect.getsource(MultiHeadAttention.backward))
    renamed = pasted.replace("dout", "upstream").replace("self", "layer")  # names do not hide it
    flags = check.flags({"pasted": pasted, "renamed": renamed})
    for who in ("pasted", "renamed"):
        assert any("attention_course/numpy_track/transformer.py" in f for f in flags[who]), flags
    assert "lines 4-" in next(f for f in flags["pasted"] if "transformer.py" in f)


def test_an_answer_written_from_the_equations_is_not_flagged():
    honest = '''
import numpy as np

def weight_sum_backward(dc, hs, a):
    """dhs_j = sum_i a_ij dc_i, da_ij = h_j . dc_i"""
    if a.ndim == 2:
        return a[:, :, None] * dc[:, None, :], np.einsum("nh,njh->nj", dc, hs)
    return np.einsum("nij,nih->njh", a, dc), np.einsum("nih,njh->nij", dc, hs)
'''
    assert _check().flags({"honest": honest}) == {}


def test_answers_copied_from_each_other_are_flagged_both_ways():
    original = textwrap.dedent(inspect.getsource(WeightSum.backward)).replace("self._cache", "cache")
    other = original.replace("encoder_states", "states").replace("d_context", "upstream")
    different = ("def backward(dout, cache):\n    x, w = cache\n    total = np.zeros_like(x)\n"
                 "    for i in range(len(w)):\n        total += w[i] * dout\n    return total, None\n")
    check = CopyCheck({})  # no package: only the batch
    flags = check.flags({"ann": original, "bob": other, "cid": different})
    assert any("student bob's answer" in f for f in flags["ann"]) and any("student ann's answer" in f for f in flags["bob"])
    assert "cid" not in flags


def test_what_the_released_notebook_holds_is_not_a_copy():
    skeleton = textwrap.dedent(inspect.getsource(MultiHeadAttention.backward))
    check = _check()
    assert check.flags({"student": skeleton}, boilerplate_sources=[skeleton]) == {}
    assert similarity.normalise("x = 'a'  # note\ny = x")[0] == "V=SV=V"


def test_the_copy_check_loads_copydetects_winnowing_without_its_report_writer():
    """copydetect's package imports matplotlib for its HTML reports; the copy check loads only its
    winnowing functions (``_copydetect_utils``), and leaves copydetect importable as a whole."""
    import subprocess
    import sys

    from autograder.course import REPO_ROOT

    code = ("import sys\nfrom autograder import similarity\n"
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'\n"
            "assert not [m for m in sys.modules if m.startswith('copydetect')], 'copydetect left half-imported'\n"
            "assert similarity.get_document_fingerprints.__module__ == 'copydetect.utils'\n"
            "import copydetect\n"
            "assert copydetect.CopyDetector and copydetect.utils.get_document_fingerprints\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
