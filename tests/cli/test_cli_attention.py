"""The command line's chapter 8 options: --attention global|local-m|local-p|hard (with --window,
--hard-estimator, --baseline) and --decoder luong|bahdanau train, save, load in either track and
translate with alignments; options that do not apply are one-line errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attention_course.checkpoint import load_checkpoint
from attention_course.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints_v1"
SMALL = ["--n-train", "300", "--n-test", "20", "--eval-every", "10", "--hidden-size", "8", "--embed-dim", "8",
         "--no-progress"]


def run_main(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("track, options, expected", [
    ("numpy", ["--attention", "local-m", "--window", "3"], {"attention": "local-m", "window": 3}),
    ("torch", ["--attention", "local-p"], {"attention": "local-p", "window": 2}),
    ("numpy", ["--attention", "hard", "--baseline", "learned"], {"attention": "hard", "hard_baseline": "learned"}),
    ("torch", ["--attention", "hard", "--hard-estimator", "gumbel"], {"attention": "hard", "hard_estimator": "gumbel"}),
    ("torch", ["--decoder", "bahdanau"], {"decoder": "bahdanau", "attention": "global"}),
], ids=["local-m_numpy", "local-p_torch", "hard_learned_numpy", "hard_gumbel_torch", "bahdanau_torch"])
def test_each_variant_trains_saves_loads_in_both_tracks_and_translates(tmp_path, capsys, track, options, expected):
    if track == "torch":
        pytest.importorskip("torch")
    code, out, err = run_main(capsys, "train", "--track", track, "--max-steps", "20", "--out", str(tmp_path),
                              *SMALL, *options)
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["steps"] == 20 and summary["attention"] == expected["attention"]
    history = json.loads((tmp_path / "history.json").read_text())
    assert history["losses"][-1] < history["losses"][0]
    config = json.loads((tmp_path / "checkpoint" / "config.json").read_text())["config"]
    assert {key: config[key] for key in expected} == expected
    texts = ["march 3, 2001", "3.3.01"]
    outputs = []
    for other in ("numpy", "torch"):
        code, out, err = run_main(capsys, "translate", "--track", other, "--checkpoint", str(tmp_path / "checkpoint"),
                                  *texts)
        assert code == 0, err
        outputs.append(out)
        assert "<- '" in out, "an alignment is printed"
    assert outputs[0] == outputs[1], "one checkpoint, the same translations and alignments on both tracks"


def test_local_m_alignments_stay_in_their_window(tmp_path, capsys):
    code, _, err = run_main(capsys, "train", "--attention", "local-m", "--window", "1", "--task", "translation",
                            "--max-steps", "5", "--out", str(tmp_path), *SMALL)
    assert code == 0, err
    model, source_vocab, target_vocab, description = load_checkpoint(tmp_path / "checkpoint")
    from attention_course.data import encode_pairs
    from attention_course.numpy_track.decoding import greedy_decode

    text = "the tall farmer near the river saw a small bird"
    decoded = greedy_decode(model, encode_pairs([(text, "")], source_vocab, target_vocab), target_vocab,
                            description["max_output_length"])
    weights = decoded.attention_weights[0]  # (T_out, T_enc)
    T_enc = len(text.split())
    for i, row in enumerate(weights[:len(target_vocab.split(decoded.texts[0])) + 1]):
        centre = min(i, T_enc - 1)
        outside = np.abs(np.arange(T_enc) - centre) > 1
        assert np.all(row[outside] == 0) and row[centre] > 0, (i, row)


@pytest.mark.parametrize("options, message", [
    (["--window", "3"], "--window is local attention's half-width; it does not apply to --attention global"),
    (["--attention", "local-p", "--baseline", "learned"], "--baseline is an option of hard attention"),
    (["--attention", "local-m", "--hard-estimator", "gumbel"], "--hard-estimator is an option of hard attention"),
    (["--attention", "hard", "--hard-estimator", "gumbel", "--baseline", "learned"],
     "--baseline is REINFORCE's; the Gumbel-softmax estimator has none"),
    (["--decoder", "bahdanau", "--attention", "local-p"], "--decoder bahdanau uses global attention"),
    (["--model", "seq2seq", "--unidirectional", "--attention", "hard"], "they do not apply to --model seq2seq"),
    (["--model", "seq2seq", "--unidirectional", "--decoder", "bahdanau"], "they do not apply to --model seq2seq"),
])
def test_options_that_do_not_apply_are_one_line_errors(tmp_path, capsys, options, message):
    code, out, err = run_main(capsys, "train", "--max-steps", "1", "--out", str(tmp_path / "out"), *options)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("option, value", [("--attention", "monotonic"), ("--decoder", "graves"),
                                           ("--window", "0"), ("--baseline", "mean")])
def test_unknown_choices_exit_2(capsys, option, value):
    with pytest.raises(SystemExit) as stopped:
        main(["train", option, value])
    assert stopped.value.code == 2 and option in capsys.readouterr().err


@pytest.mark.parametrize("track", ["numpy", pytest.param("torch", marks=pytest.mark.skipif(
    __import__("importlib").util.find_spec("torch") is None, reason="torch is not installed"))])
def test_a_checkpoint_written_before_the_variants_is_a_global_luong_model(track):
    description = json.loads((FIXTURES / "attention_gru" / "config.json").read_text())
    assert "attention" not in description["config"] and "decoder" not in description["config"]
    model, _, _, _ = load_checkpoint(FIXTURES / "attention_gru", track)
    assert model.config.attention == "global" and model.config.decoder == "luong"
    assert type(model.decoder).__name__ == "AttentionDecoder"
    assert type(model.decoder.attention).__name__ == "TimeAttention"
