"""The Neural Turing Machine on the copy task, against an LSTM without memory trained for the same time.

For each seed, each in a fresh process, one after the other:

* ``ntm``: ``attention-course train --task copy --model ntm --track torch`` (an LSTM controller of
  100 units, 128 memory locations of width 20, one read and one write head; Adam at 1e-3, batches
  of 32 fresh sequences of lengths 1-20), until the test bit accuracy reaches 99.9% or 10 minutes
  have passed;
* ``lstm``: ``--model lstm`` (120 units: as many parameters as the NTM), trained for as long as
  that seed's NTM trained.

Each prints the time and steps to 99% bit accuracy on lengths 1-20, the bit accuracy there at the
end, and on fresh sequences of lengths 10 to 80 (Graves et al.'s generalisation test: nothing
longer than 20 was ever trained on).

    .venv/bin/python benchmarks/ntm_copy.py [--seeds 0 1 2] [--max-seconds 600] [--out results.json]

A results file can be extended later: ``--resume FILE --seeds --baseline-seeds 1 2`` keeps the
runs of FILE and trains the LSTM baselines of its seeds 1 and 2 (each for as long as that seed's
NTM trained); the file then lists both commands.

Wall-clock seconds depend on what else the machine runs; each run also reports its CPU seconds
(one thread: what it would take on an idle core).

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

ROOT = Path(__file__).resolve().parent.parent


def run_json(command: list[str], timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def train(model: str, seed: int, max_seconds: float, out: Path, target: float | None) -> dict:
    command = [sys.executable, "-m", "attention_course", "train", "--task", "copy", "--model", model,
               "--track", "torch", "--seed", str(seed), "--max-seconds", str(max_seconds), "--out", str(out),
               "--no-progress"]
    if target is not None:
        command += ["--target-accuracy", str(target)]
    return run_json(command, timeout=max_seconds + 600)


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


def step_cost(steps: int, seed: int = 0) -> dict:
    """The NTM's cost of a training step (with the command's evaluation every 100 steps), in this process."""
    sys.path.insert(0, str(ROOT))
    from attention_course.ntm_copy import CopyTrainConfig, build_copy_model, copy_model_config, train_copy

    model = build_copy_model("ntm", copy_model_config("ntm"), "torch", seed=seed)
    result = train_copy(model, CopyTrainConfig(max_steps=steps, seed=seed))
    return {"steps": steps, "seed": seed, "cpu_seconds_per_step": result.cpu_seconds / steps,
            "wall_seconds_per_step": result.train_seconds / steps, "load_average": round(os.getloadavg()[0], 2)}


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
            f"99% after {to_99}{cpu}; bit accuracy 1-20 {r['test_bit_accuracy']:.4f}; by length {by_length}")


def cpu_to_99(r: dict, cost: dict | None) -> float | None:
    """A run's CPU seconds to 99%: measured, or (a run from before they were recorded) steps x the measured cost."""
    if r.get("cpu_seconds_to_99") is not None:
        return r["cpu_seconds_to_99"]
    if r["steps_to_99"] is None or cost is None:
        return None
    return round(r["steps_to_99"] * cost["cpu_seconds_per_step"], 1)


def summarise(runs: list[dict], args, load, cost: dict | None = None) -> dict:
    summary = {"runs": runs, "seeds": [run["seed"] for run in runs], "max_seconds": args.max_seconds,
               "target_accuracy": args.target_accuracy, "step_cost": cost}
    for name in ("ntm", "lstm"):
        rows = [run[name] for run in runs if run[name] is not None]
        summary[name] = {
            "seeds": [r["seed"] for r in rows],
            "seconds_to_99": [r["seconds_to_99"] for r in rows],
            "cpu_seconds_to_99": [cpu_to_99(r, cost) for r in rows],
            "cpu_seconds_to_99_estimated": [r.get("cpu_seconds_to_99") is None and cpu_to_99(r, cost) is not None
                                            for r in rows],
            "steps_to_99": [r["steps_to_99"] for r in rows],
            "train_seconds": [r["train_seconds"] for r in rows],
            "bit_accuracy_1_20": [r["test_bit_accuracy"] for r in rows],
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
                             "name its seeds: their LSTMs train for as long as their NTMs did)")
    parser.add_argument("--max-seconds", type=float, default=600.0, help="the NTM's time limit")
    parser.add_argument("--target-accuracy", type=float, default=0.999, help="the NTM stops at this bit accuracy")
    parser.add_argument("--step-cost", type=int, metavar="STEPS",
                        help="first measure the NTM's CPU and wall seconds per training step over this many steps")
    parser.add_argument("--keep", type=Path, help="keep the runs (checkpoints, histories) in this folder")
    parser.add_argument("--out", type=Path, help="also write the results here as JSON, after every run (the book "
                                                 "reads book/results/ntm_copy.json)")
    args = parser.parse_args()
    baseline_seeds = args.seeds if args.baseline_seeds is None else args.baseline_seeds
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)", flush=True)
    runs = []
    cost = None
    args.earlier_commands = []
    earlier = {}
    if args.resume:
        previous = json.loads(args.resume.read_text())
        args.earlier_commands = previous.get("earlier_commands", []) + [previous["command"]]
        cost = previous.get("step_cost")
        for run in previous["runs"]:
            run = dict(run, **{name: None if run[name] is None else portable(run[name], name, run["seed"])
                              for name in ("ntm", "lstm")})
            runs.append(run)
            earlier[run["seed"]] = run
            for name in ("ntm", "lstm"):
                if run[name] is not None:
                    print(describe(run["seed"], name, run[name]) + f" (from {args.resume})", flush=True)
    if args.step_cost:
        cost = step_cost(args.step_cost)
        print(f"a training step of the NTM: {cost['cpu_seconds_per_step']:.3f} CPU s, "
              f"{cost['wall_seconds_per_step']:.3f} s wall-clock (over {cost['steps']} steps)", flush=True)
    if args.include:
        runs.append(included_run(args.include[0], args.include[1] if len(args.include) > 1 else None))
        for name in ("ntm", "lstm"):
            if runs[-1][name] is not None:
                print(describe(runs[-1]["seed"], name, runs[-1][name]) + " (included)", flush=True)

    def save() -> dict:
        summary = summarise(runs, args, load, cost)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(summary, indent=1) + "\n")
        return summary

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        fresh = {}
        for seed in args.seeds:
            ntm = train("ntm", seed, args.max_seconds, folder / f"ntm-{seed}", args.target_accuracy)
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
            lstm = train("lstm", seed, run["ntm"]["train_seconds"], folder / f"lstm-{seed}", None)
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
