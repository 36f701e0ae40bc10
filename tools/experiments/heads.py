"""Chapter 10: what several attention heads buy over one, at the same number of parameters.

Multi-head attention splits ``d_model`` into ``h`` slices of ``d_k = d_model / h`` columns and runs
one softmax on each; the projections ``W_Q, W_K, W_V, W_O`` stay ``d_model x d_model`` whatever
``h`` is, so a Transformer with one head and one with four have exactly the same parameters. This
experiment trains the two on the translation task (word orders that differ, sentences up to 40
words), with the course's own command and every other option at its default::

    attention-course train --track torch --task translation --model transformer --heads H
        --seed SEED --max-steps STEPS --n-test N --eval-every E --no-progress

(2 encoder and 2 decoder layers, d_model 64, feed-forward 256, pre-norm, the Transformer's
recipe: warm-up, then 1/sqrt(step), and label smoothing; batches of 128 on the CPU, one thread.)
The seed sets the data, the initial weights and the order of the batches; each (heads, seed) run
is a fresh process. Every run takes the same number of steps (no early stop), and the N test pairs
are decoded greedily every E steps, so the curves can be compared step by step. A record holds the
parameters (counted from the checkpoint), every evaluation, the exact match the run ended with (the
weights of its best evaluation) and the process's CPU seconds.

    .venv/bin/python -m tools.experiments.heads                     # about an hour on a busy core
    .venv/bin/python -m tools.experiments.heads --heads 1 4 --seeds 0 --max-steps 50 --out /tmp/h.json

from the repository root; it writes ``book/results/heads.json`` (``--out`` to write elsewhere),
after every run, so that an experiment stopped early keeps what it measured.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from tools.experiments.common import RESULTS, Stopwatch, command_line, train_run, write_results

# A run's process may take this long on a busy machine before it is stopped as hung.
WALL_CLOCK_LIMIT_S = 3 * 3600


def train(heads: int, seed: int, folder: Path, max_steps: int, n_test: int, eval_every: int,
          task: str = "translation") -> dict:
    """One run of ``attention-course train --model transformer --heads HEADS`` in a fresh process; its record."""
    run = train_run(["--track", "torch", "--task", task, "--model", "transformer", "--heads", str(heads),
                     "--seed", str(seed), "--max-steps", str(max_steps), "--n-test", str(n_test),
                     "--eval-every", str(eval_every)], folder, WALL_CLOCK_LIMIT_S)
    summary, history, parameters, cpu_seconds = run["summary"], run["history"], run["parameters"], run["cpu_seconds"]
    return {"task": task, "heads": heads, "seed": seed, "parameters": parameters, "steps": summary["steps"],
            "test_exact_match": summary["test_exact_match"], "evaluations": history["evaluations"],
            "process_cpu_seconds": round(cpu_seconds, 1), "load_average": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--heads", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-steps", type=int, default=800, help="steps of every run")
    parser.add_argument("--n-test", type=int, default=300, help="test pairs decoded at each evaluation")
    parser.add_argument("--eval-every", type=int, default=50, help="steps between evaluations")
    parser.add_argument("--out", type=Path, default=RESULTS / "heads.json")
    args = parser.parse_args(argv)
    command = command_line("tools.experiments.heads", argv)
    clock = Stopwatch()
    settings = {"task": "translation", "heads": args.heads, "seeds": args.seeds, "max_steps": args.max_steps,
                "n_train": 20000, "n_test": args.n_test, "eval_every": args.eval_every, "track": "torch",
                "device": "cpu", "d_model": 64, "layers": 2}
    records = []
    expected = len(args.heads) * len(args.seeds)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for heads in args.heads:
                record = train(heads, seed, Path(tmp) / f"heads{heads}-seed{seed}", args.max_steps, args.n_test,
                               args.eval_every)
                records.append(record)
                clock.log(f"{heads} heads, seed {seed}: {record['parameters']:,} parameters, exact match "
                          f"{record['test_exact_match']:.3f} ({record['process_cpu_seconds']:.0f} CPU s)")
                write_results(args.out, "heads", settings, records, clock.seconds, command, cpus=os.cpu_count(),
                              complete=len(records) == expected)
    print(args.out)


if __name__ == "__main__":
    main()
