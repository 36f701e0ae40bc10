"""The Neural Turing Machine on the copy task, against an LSTM without memory trained for the same time.

For each seed, each in a fresh process, one after the other:

* ``ntm``: ``attention-course train --task copy --model ntm --track torch`` (an LSTM controller of
  100 units, 128 memory locations of width 20, one read and one write head; Adam at 1e-3, batches
  of 32 fresh sequences of lengths 1-20), until the test bit accuracy reaches 99.9% or it has spent
  10 minutes of CPU time (``--max-cpu-seconds``; one thread);
* ``lstm``: ``--model lstm`` (120 units: as many parameters as the NTM), trained for as many CPU
  seconds as that seed's NTM trained (``--max-cpu-seconds``).

Each prints the time and steps to 99% bit accuracy on lengths 1-20, the bit accuracy there at the
end, and on fresh sequences of lengths 10 to 80 (Graves et al.'s generalisation test: nothing
longer than 20 was ever trained on).

    .venv/bin/python benchmarks/ntm_copy.py [--seeds 0 1 2] [--max-cpu-seconds 600] [--out results.json]

A results file can be extended later: ``--resume FILE --seeds --baseline-seeds 1 2`` keeps the
runs of FILE and trains the LSTM baselines of its seeds 1 and 2 (each for as many CPU seconds as
that seed's NTM trained); the file then lists both commands.

The budgets are CPU seconds of the training process, not wall-clock seconds, so that the NTM and its
baseline get the same computation whatever else the machine runs (each uses one thread: its CPU
seconds are what it would take on an idle core). Each run also reports its wall-clock seconds, and
the file the load average before the runs.

Goal (issue 13): on this 2-core CPU the NTM reaches >= 99% bit accuracy on lengths 1-20 within 10
minutes, and >= 95% on length 40.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from attention_course.tasks import get_task

ROOT = Path(__file__).resolve().parent.parent
TASK = get_task("copy")  # the registry's: the models it trains, the figure its summary is judged by


def run_json(command: list[str], timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
                               check=False)
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def train(model: str, seed: int, max_cpu_seconds: float, out: Path, target: float | None,
          max_seconds: float | None = None) -> dict:
    """Train one model in a fresh process with a budget of ``max_cpu_seconds`` (and ``max_seconds``
    of wall-clock time, if given); its summary."""
    if model not in TASK.models:
        raise SystemExit(f"the copy task trains {TASK.models}, not {model!r}")
    command = [sys.executable, "-m", "attention_course", "train", "--task", TASK.name, "--model", model,
               "--track", "torch", "--seed", str(seed), "--max-cpu-seconds", str(max_cpu_seconds),
               "--out", str(out), "--no-progress"]
    if max_seconds is not None:
        command += ["--max-seconds", str(max_seconds)]
    if target is not None:
        command += ["--target-accuracy", str(target)]
    # The wall-clock guard: the budget's CPU seconds, on a machine that may be busy (x4), plus the evaluations.
    return run_json(command, timeout=4 * (max_seconds or max_cpu_seconds) + 600)


def cpu_budget(ntm: dict, seed: int) -> float:
    """The CPU seconds that seed's NTM trained for: its LSTM's budget."""
    if ntm.get("cpu_seconds") is None:
        raise SystemExit(f"seed {seed}: its NTM's run did not record its CPU seconds (a run from before the "
                         f"command did), so its LSTM cannot get the same budget: train that NTM again")
    return ntm["cpu_seconds"]


def portable(record: dict, model: str, seed: int) -> dict:
    """A run's record without the temporary folder it was trained in: the command writes to
    ``runs/copy-MODEL-SEED`` (inside the repository), and no checkpoint path is kept."""
    record = dict(record)
    command = record.get("command", "")
    if " --out " in command:
        out = command.rsplit(" --out ", 1)[1]
        if Path(out).is_absolute() and not Path(out).resolve().is_relative_to(ROOT):
            record["command"] = command.rsplit(" --out ", 1)[0] + f" --out runs/copy-{model}-{seed}"
    checkpoint = record.get("checkpoint")
    if checkpoint is not None and Path(checkpoint).is_absolute() and not Path(checkpoint).resolve().is_relative_to(ROOT):
        del record["checkpoint"]
    return record


def spread(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.4g}"
    return f"{statistics.mean(values):.4g} ± {statistics.stdev(values):.2g} (min {min(values):.4g}, max {max(values):.4g})"


def included_run(ntm_checkpoint: Path, lstm_checkpoint: Path | None) -> dict:
    """A run made earlier by the same command (e.g. the book's checkpoints), read from its checkpoints."""
    def trained(folder: Path) -> dict:
        return json.loads((folder / "config.json").read_text())["trained"]

    ntm = trained(ntm_checkpoint)
    return {"seed": ntm["seed"], "ntm": ntm, "lstm": None if lstm_checkpoint is None else trained(lstm_checkpoint),
            "source": f"included from {ntm_checkpoint}" + ("" if lstm_checkpoint is None else f" and {lstm_checkpoint}")}


def describe(seed: int, name: str, r: dict) -> str:
    to_99 = "never" if r["seconds_to_99"] is None else f"{r['seconds_to_99']:.0f} s ({r['steps_to_99']} steps)"
    cpu = r.get("cpu_seconds_to_99")
    cpu = "" if cpu is None else f", {cpu:.0f} CPU s"
    by_length = ", ".join(f"{L}: {a:.3f}" for L, a in r["bit_accuracy_by_length"].items())
    return (f"seed {seed} {name}: {r['parameters']:,} parameters, {r['steps']} steps in {r['train_seconds']:.0f} s; "
            f"99% after {to_99}{cpu}; bit accuracy 1-20 {r[TASK.metric]:.4f}; by length {by_length}")


def summarise(runs: list[dict], args, load) -> dict:
    summary = {"runs": runs, "seeds": [run["seed"] for run in runs], "max_seconds": args.max_seconds,
               "max_cpu_seconds": args.max_cpu_seconds,
               "target_accuracy": args.target_accuracy}
    for name in ("ntm", "lstm"):
        rows = [run[name] for run in runs if run[name] is not None]
        summary[name] = {
            "seeds": [r["seed"] for r in rows],
            "seconds_to_99": [r["seconds_to_99"] for r in rows],
            "cpu_seconds_to_99": [r.get("cpu_seconds_to_99") for r in rows],
            "cpu_seconds": [r.get("cpu_seconds") for r in rows],
            "steps_to_99": [r["steps_to_99"] for r in rows],
            "train_seconds": [r["train_seconds"] for r in rows],
            "bit_accuracy_1_20": [r[TASK.metric] for r in rows],
            "bit_accuracy_40": [r["bit_accuracy_by_length"]["40"] for r in rows],
        }
    ntm = summary["ntm"]
    summary["goal_met_wall_clock"] = bool(ntm["seeds"]) and all(
        s is not None and s <= 600 for s in ntm["seconds_to_99"]) and all(a >= 0.95 for a in ntm["bit_accuracy_40"])
    summary["goal_met_cpu_time"] = bool(ntm["seeds"]) and all(
        s is not None and s <= 600 for s in ntm["cpu_seconds_to_99"]) and all(a >= 0.95 for a in ntm["bit_accuracy_40"])
    summary["load_average_before"] = [round(x, 2) for x in load]
    summary["cpus"] = os.cpu_count()
    summary["command"] = ("benchmarks/ntm_copy.py " + " ".join(sys.argv[1:])).strip()
    summary["earlier_commands"] = list(getattr(args, "earlier_commands", []))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2],
                        help="seeds to train now (none: only the runs of --include)")
    parser.add_argument("--baseline-seeds", type=int, nargs="*",
                        help="train the LSTM baseline for these seeds only (default: every seed); the NTMs train first")
    parser.add_argument("--include", type=Path, nargs="+", metavar="CHECKPOINT",
                        help="an earlier NTM run of the same command to count as a seed (its checkpoint folder), "
                             "optionally followed by its LSTM baseline's")
    parser.add_argument("--resume", type=Path, metavar="FILE",
                        help="keep the runs of an earlier results file of this script (--baseline-seeds may then "
                             "name its seeds: their LSTMs train for as many CPU seconds as their NTMs did)")
    parser.add_argument("--max-cpu-seconds", type=float, default=600.0,
                        help="the NTM's limit in CPU seconds of its process (default 600: the goal's ten minutes)")
    parser.add_argument("--max-seconds", type=float, help="also a wall-clock limit for the NTM (default: none)")
    parser.add_argument("--target-accuracy", type=float, default=0.999, help="the NTM stops at this bit accuracy")
    parser.add_argument("--keep", type=Path, help="keep the runs (checkpoints, histories) in this folder")
    parser.add_argument("--out", type=Path, help="also write the results here as JSON, after every run (the book "
                                                 "reads book/results/ntm_copy.json)")
    args = parser.parse_args()
    baseline_seeds = args.seeds if args.baseline_seeds is None else args.baseline_seeds
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)", flush=True)
    runs = []
    args.earlier_commands = []
    earlier = {}
    if args.resume:
        previous = json.loads(args.resume.read_text())
        args.earlier_commands = previous.get("earlier_commands", []) + [previous["command"]]
        for run in previous["runs"]:
            run = dict(run, **{name: None if run[name] is None else portable(run[name], name, run["seed"])
                              for name in ("ntm", "lstm")})
            runs.append(run)
            earlier[run["seed"]] = run
            for name in ("ntm", "lstm"):
                if run[name] is not None:
                    print(describe(run["seed"], name, run[name]) + f" (from {args.resume})", flush=True)
    if args.include:
        runs.append(included_run(args.include[0], args.include[1] if len(args.include) > 1 else None))
        for name in ("ntm", "lstm"):
            if runs[-1][name] is not None:
                print(describe(runs[-1]["seed"], name, runs[-1][name]) + " (included)", flush=True)

    def save() -> dict:
        summary = summarise(runs, args, load)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(summary, indent=1) + "\n")
        return summary

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        fresh = {}
        for seed in args.seeds:
            ntm = train("ntm", seed, args.max_cpu_seconds, folder / f"ntm-{seed}", args.target_accuracy,
                        args.max_seconds)
            fresh[seed] = {"seed": seed, "ntm": ntm, "lstm": None, "load_average": os.getloadavg()[0],
                           "source": "this run"}
            runs.append(fresh[seed])
            print(describe(seed, "ntm", ntm), flush=True)
            if args.keep is None:
                fresh[seed]["ntm"] = portable(ntm, "ntm", seed)
            save()
        for seed in baseline_seeds:
            run = fresh.get(seed, earlier.get(seed))
            if run is None:
                raise SystemExit(f"--baseline-seeds {seed}: not one of --seeds {args.seeds}"
                                 + (f" nor a seed of {args.resume}" if args.resume else ""))
            lstm = train("lstm", seed, cpu_budget(run["ntm"], seed), folder / f"lstm-{seed}", None)
            print(describe(seed, "lstm", lstm), flush=True)
            run["lstm"] = lstm if args.keep is not None else portable(lstm, "lstm", seed)
            if seed not in fresh:
                run["source"] = f"{run['source']}; its LSTM: this run"
            save()
    summary = save()
    for name in ("ntm", "lstm"):
        s = summary[name]
        print(f"{name} (seeds {s['seeds']}): seconds to 99% {spread(s['seconds_to_99'])}; CPU seconds to 99% "
              f"{spread(s['cpu_seconds_to_99'])}; steps to 99% {spread(s['steps_to_99'])}; bit accuracy 1-20 "
              f"{spread(s['bit_accuracy_1_20'])}; length 40 {spread(s['bit_accuracy_40'])}")
    for kind in ("wall_clock", "cpu_time"):
        print(f"goal (every seed: 99% on lengths 1-20 within 600 s of {kind.replace('_', ' ')}, >= 95% on length "
              f"40): {'met' if summary['goal_met_' + kind] else 'NOT met'}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
