"""The command line, end to end: training reaches the target, errors are one line with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from attention_course.cli import main
from attention_course.data import save_pairs_tsv


def run_main(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One real training run on the built-in dates task, shared by the tests below."""
    out = tmp_path_factory.mktemp("run")
    completed = subprocess.run(
        [sys.executable, "-m", "attention_course", "train", "--out", str(out), "--target-accuracy", "0.99",
         "--max-steps", "800", "--seed", "0", "--no-progress"],
        capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stderr
    return out, completed


def test_train_reaches_99_percent_on_dates_and_reports_json_last(trained):
    out, completed = trained
    summary = json.loads(completed.stdout.strip().splitlines()[-1])
    assert summary["test_exact_match"] >= 0.99
    assert summary["stopped_because"] == "target accuracy reached"
    assert 0 < summary["steps"] <= 800
    assert summary["train_seconds"] > 0
    assert 0 < summary["peak_rss_mb"] <= 500
    assert (out / "alignments.png").stat().st_size > 10_000
    history = json.loads((out / "history.json").read_text())
    assert len(history["losses"]) == summary["steps"]
    assert history["losses"][-1] < history["losses"][0] / 10
    # progress and evaluation lines go to stderr, not stdout
    assert "test exact match" in completed.stderr


def test_translate_prints_output_and_alignment(trained, capsys):
    out, _ = trained
    code, stdout, _ = run_main(capsys, "translate", "--checkpoint", str(out / "checkpoint"),
                               "september 27, 1994", "27.9.94")
    assert code == 0
    lines = stdout.splitlines()
    assert lines[0] == "1994-09-27"
    assert "1994-09-27" in lines and "1994-09-27" == lines[lines.index("1994-09-27")]
    assert sum(line == "1994-09-27" for line in lines) == 2
    # the alignment names, for the first year digit, a source character
    assert any("<- '" in line for line in lines)


def test_translate_year_attends_to_year(trained, capsys):
    from attention_course.checkpoint import load_checkpoint
    from attention_course.data import encode_pairs
    from attention_course.numpy_track.decoding import greedy_translate

    out, _ = trained
    model, source_vocab, target_vocab, config = load_checkpoint(out / "checkpoint")
    text = "september 27, 1994"
    batch = encode_pairs([(text, "")], source_vocab, target_vocab)
    outputs, weights = greedy_translate(model, batch, target_vocab, config["max_output_length"])
    assert outputs == ["1994-09-27"]
    year_positions = set(range(text.index("1994"), text.index("1994") + 4))
    # the last three year digits look at the year in the source
    for step in (1, 2, 3):
        assert int(weights[0, step].argmax()) in year_positions


def test_translate_unknown_character_is_one_line_exit_2(trained, capsys):
    out, _ = trained
    code, stdout, stderr = run_main(capsys, "translate", "--checkpoint", str(out / "checkpoint"), "sept€mber 1, 1999")
    assert code == 2
    assert stdout == ""
    assert len(stderr.strip().splitlines()) == 1
    assert "'€'" in stderr and "position 4" in stderr


def test_translate_missing_checkpoint(tmp_path, capsys):
    code, _, stderr = run_main(capsys, "translate", "--checkpoint", str(tmp_path / "nothing"), "1/2/99")
    assert code == 2
    assert "no checkpoint folder" in stderr and len(stderr.strip().splitlines()) == 1


def test_translate_damaged_checkpoint(trained, tmp_path, capsys):
    out, _ = trained
    broken = tmp_path / "ck"
    broken.mkdir()
    (broken / "config.json").write_text((out / "checkpoint" / "config.json").read_text())
    (broken / "weights.npz").write_bytes(b"not a zip file")
    code, _, stderr = run_main(capsys, "translate", "--checkpoint", str(broken), "1/2/99")
    assert code == 2
    assert "damaged checkpoint" in stderr


def write_tsv(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("content, expected", [
    (["a\tb", "no tab here"], ":2:"),
    ([], "empty"),
    (["a\tb\tc"], "3 fields"),
    (["\tb"], ":1:"),
])
def test_train_bad_tsv_gives_one_line_error(tmp_path, capsys, content, expected):
    good = write_tsv(tmp_path / "good.tsv", ["abc\tcba", "ab\tba"])
    bad = write_tsv(tmp_path / "bad.tsv", content)
    code, stdout, stderr = run_main(capsys, "train", "--train", str(bad), "--test", str(good),
                                    "--out", str(tmp_path / "out"), "--max-steps", "1", "--no-progress")
    assert code == 2
    assert expected in stderr and "bad.tsv" in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert stdout == ""
    assert not (tmp_path / "out").exists()


def test_train_missing_file(tmp_path, capsys):
    good = write_tsv(tmp_path / "good.tsv", ["abc\tcba"])
    code, _, stderr = run_main(capsys, "train", "--train", str(tmp_path / "missing.tsv"), "--test", str(good),
                               "--out", str(tmp_path / "out"), "--no-progress")
    assert code == 2
    assert "missing.tsv" in stderr


def test_train_needs_both_files(tmp_path, capsys):
    good = write_tsv(tmp_path / "good.tsv", ["abc\tcba"])
    code, _, stderr = run_main(capsys, "train", "--train", str(good), "--out", str(tmp_path / "out"))
    assert code == 2
    assert "--train and --test" in stderr


@pytest.mark.parametrize("option, value", [("--target-accuracy", "1.5"), ("--max-seconds", "-1"),
                                           ("--max-cpu-seconds", "0"), ("--epochs", "zero"),
                                           ("--track", "jax")])
def test_train_bad_options_exit_2(capsys, option, value):
    with pytest.raises(SystemExit) as stopped:
        main(["train", option, value])
    assert stopped.value.code == 2
    assert option in capsys.readouterr().err


def test_train_on_tsv_files_copy_task(tmp_path, capsys):
    from attention_course.data import generate_toy_splits

    train, test = generate_toy_splits("reverse", 600, 50, 3, 6, seed=1, alphabet="abcdef")
    save_pairs_tsv(train, tmp_path / "train.tsv")
    save_pairs_tsv(test, tmp_path / "test.tsv")
    code, stdout, _ = run_main(capsys, "train", "--train", str(tmp_path / "train.tsv"), "--test",
                               str(tmp_path / "test.tsv"), "--out", str(tmp_path / "out"), "--max-steps", "30",
                               "--eval-every", "10", "--hidden-size", "16", "--embed-dim", "8", "--no-progress")
    assert code == 0
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["steps"] == 30
    assert summary["task"].startswith("tsv:")
    assert 0.0 <= summary["test_exact_match"] <= 1.0
    assert (tmp_path / "out" / "checkpoint" / "weights.npz").exists()


def test_same_seed_same_run(tmp_path, capsys):
    runs = []
    for name in ("a", "b"):
        code, stdout, _ = run_main(capsys, "train", "--n-train", "300", "--n-test", "20", "--max-steps", "5",
                                   "--eval-every", "5", "--hidden-size", "8", "--embed-dim", "4", "--seed", "3",
                                   "--out", str(tmp_path / name), "--no-progress")
        assert code == 0
        runs.append(json.loads(stdout.strip().splitlines()[-1]))
    assert runs[0]["final_loss"] == runs[1]["final_loss"]
    weights = [np.load(tmp_path / name / "checkpoint" / "weights.npz") for name in ("a", "b")]
    for key in weights[0].files:
        np.testing.assert_array_equal(weights[0][key], weights[1][key])


@pytest.mark.parametrize("task", ["dates", "classify"])
def test_train_stops_at_a_cpu_seconds_budget(tmp_path, capsys, task):
    code, stdout, stderr = run_main(capsys, "train", "--task", task, "--n-train", "300", "--n-test", "20",
                                    "--max-cpu-seconds", "0.4", "--eval-every", "1000", "--hidden-size", "8",
                                    "--embed-dim", "4", "--out", str(tmp_path), "--no-progress")
    assert code == 0, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["stopped_because"] == "max_cpu_seconds reached" and summary["cpu_seconds"] >= 0.4


def test_torch_track_trains_and_its_checkpoint_runs_in_numpy(tmp_path, capsys):
    pytest.importorskip("torch")
    code, stdout, _ = run_main(capsys, "train", "--track", "torch", "--device", "cpu", "--n-train", "400",
                               "--n-test", "20", "--max-steps", "20", "--eval-every", "10", "--hidden-size", "8",
                               "--embed-dim", "4", "--out", str(tmp_path), "--no-progress")
    assert code == 0
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["track"] == "torch" and summary["device"] == "cpu" and summary["steps"] == 20
    history = json.loads((tmp_path / "history.json").read_text())
    assert history["losses"][-1] < history["losses"][0]
    # one checkpoint format: the NumPy track and the torch track give the same translation
    outputs = []
    for track in ("numpy", "torch"):
        code, stdout, _ = run_main(capsys, "translate", "--track", track, "--checkpoint", str(tmp_path / "checkpoint"),
                                   "--no-alignment", "march 3, 2001", "3.3.01")
        assert code == 0
        outputs.append(stdout)
    assert outputs[0] == outputs[1]


def test_torch_track_cuda_without_gpu_is_a_clear_error(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    code, stdout, stderr = run_main(capsys, "train", "--track", "torch", "--device", "cuda", "--max-steps", "1",
                                    "--out", str(tmp_path / "out"), "--no-progress")
    assert code == 2 and stdout == ""
    assert "no usable CUDA GPU" in stderr and len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_device_option_needs_the_torch_track(capsys):
    code, _, stderr = run_main(capsys, "train", "--device", "cuda", "--max-steps", "1")
    assert code == 2 and "--track torch" in stderr


def test_doctor_reports_versions_and_fails_on_a_missing_requirement(capsys):
    code, stdout, _ = run_main(capsys, "doctor")
    assert code == 0
    for name in ("python", "numpy", "torch", "numpy BLAS", "CUDA usable"):
        assert name in stdout
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        code, _, stderr = run_main(capsys, "doctor", "--require", "cuda")
        assert code == 1 and "CUDA was required" in stderr
    code, _, stderr = run_main(capsys, "doctor", "--require", "gpu")
    assert code == 2 and "--require" in stderr


def test_peak_memory_is_the_commands_own_not_its_parents(tmp_path):
    # The kernel carries ru_maxrss over fork+exec: a parent holding 600 MB would show through.
    ballast = np.ones(75_000_000)  # 600 MB in this process
    completed = subprocess.run(
        [sys.executable, "-m", "attention_course", "train", "--n-train", "300", "--n-test", "20", "--max-steps", "2",
         "--hidden-size", "8", "--embed-dim", "4", "--out", str(tmp_path), "--no-progress"],
        capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    summary = json.loads(completed.stdout.strip().splitlines()[-1])
    assert 0 < summary["peak_rss_mb"] < 400
    del ballast


def test_the_word_level_translation_task_trains_and_translates_by_words(tmp_path, capsys):
    from attention_course.data.translation import generate_translation

    code, out, err = run_main(capsys, "train", "--task", "translation", "--n-train", "300", "--n-test", "20",
                              "--max-steps", "3", "--eval-every", "3", "--hidden-size", "8", "--embed-dim", "8",
                              "--out", str(tmp_path / "run"), "--no-progress")
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["task"] == "translation" and summary["steps"] == 3
    config = json.loads((tmp_path / "run" / "checkpoint" / "config.json").read_text())
    assert config["source_vocab"]["level"] == "word"
    (source, _), = generate_translation(1, 0, seed=0)[0]
    code, out, err = run_main(capsys, "translate", "--checkpoint", str(tmp_path / "run" / "checkpoint"), source)
    assert code == 0, err
    words = source.split(" ")
    assert all(word in out for word in words[:3]), out  # the alignment is labelled with the source's words
    code, _, err = run_main(capsys, "translate", "--checkpoint", str(tmp_path / "run" / "checkpoint"),
                            source + " zebra")
    assert code == 2 and "unknown word 'zebra'" in err
