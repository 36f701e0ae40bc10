"""Chapter 10: the Transformer against the RNN with attention, on dates and on the translation task.

For each task, seed and model, each in a fresh process, one after the other, the course's own
command: ``attention-course train --track torch --task TASK --model MODEL --seed SEED
--target-accuracy 0.99 --max-cpu-seconds S [--max-steps STEPS] --n-test N --eval-every E``, every
other option at its default:

* ``attention``: a bidirectional GRU encoder and a GRU decoder with general-score attention (the
  torch track's defaults: 48 units per direction, Adam at a constant 0.015);
* ``transformer``: 2 encoder and 2 decoder layers, d_model 64, 4 heads, feed-forward 256,
  pre-norm, trained with the Transformer's recipe (the track's defaults: Adam whose rate rises to
  its peak over a warm-up and then falls as 1/sqrt(step), and label smoothing; the values are
  recorded in the file's settings, ``transformer_recipe``).

Both train on the CPU in batches of 128 with one thread, on 20,000 generated pairs (the data seed
is the run's seed), and are scored by greedy decoding of the N test pairs every E steps; a run
stops at 99% test exact match, after S CPU seconds of its process or after STEPS steps (a limit
for every task, or one per task: ``--max-steps dates=800 translation=300``). A record holds the
steps, the wall-clock seconds and the process's CPU seconds it took (the CPU seconds do not
depend on what else the machine runs), the exact match it ended with and every evaluation on
the way. The results file is rewritten after every run.

    .venv/bin/python -m tools.experiments.transformer_vs_rnn            # hours on 2 busy cores
    .venv/bin/python -m tools.experiments.transformer_vs_rnn --tasks dates --seeds 0

from the repository root; it writes ``book/results/transformer_vs_rnn.json`` (``--out`` to write
elsewhere). ``--update`` re-runs only the ``--tasks`` and ``--models`` given and keeps the file's
records of the others (the same seeds, test pairs, evaluation interval and CPU limit are
required, and the same step limit for a task whose other model's records are kept); the file
then names the command behind each task's and model's records (``commands``, keyed
``"TASK MODEL"``). ``--resume``, with the same settings, keeps every record and runs only the
(task, model, seed) runs the file lacks (an experiment stopped early); the file keeps its first
command and lists the resuming ones (``resumed_by``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from tools.experiments.common import RESULTS, Stopwatch, command_line, train_run, write_results

TASKS = ("dates", "translation")
MODELS = ("attention", "transformer")


# A run's process may take this long on a busy machine before it is stopped as hung.
WALL_CLOCK_LIMIT_S = 6 * 3600


def transformer_recipe() -> dict:
    """The Transformer's training recipe as the command line applies it (the torch track's
    defaults and ``TransformerConfig``'s label smoothing), for the results file."""
    from dataclasses import fields

    from attention_course.core.configs import TransformerConfig
    from attention_course.torch_track.track import MODEL_DEFAULTS

    smoothing = next(field.default for field in fields(TransformerConfig) if field.name == "label_smoothing")
    return {**MODEL_DEFAULTS["transformer"], "label_smoothing": smoothing}


def train(task: str, model: str, seed: int, folder: Path, target_accuracy: float, max_cpu_seconds: float,
          max_steps: int | None = None, n_train: int | None = None, n_test: int | None = None,
          eval_every: int = 25) -> dict:
    """One run of ``attention-course train`` in a fresh process; its record."""
    options = ["--track", "torch", "--task", task, "--model", model, "--seed", str(seed),
               "--target-accuracy", str(target_accuracy), "--max-cpu-seconds", str(max_cpu_seconds),
               "--eval-every", str(eval_every)]
    for option, value in (("--max-steps", max_steps), ("--n-train", n_train), ("--n-test", n_test)):
        if value is not None:
            options += [option, str(value)]
    run = train_run(options, folder, WALL_CLOCK_LIMIT_S)
    summary, history, parameters, cpu_seconds = run["summary"], run["history"], run["parameters"], run["cpu_seconds"]
    return {"task": task, "model": model, "seed": seed, "parameters": parameters, "steps": summary["steps"],
            "train_seconds": summary["train_seconds"], "process_cpu_seconds": round(cpu_seconds, 1),
            "test_exact_match": summary["test_exact_match"],
            "reached": summary["test_exact_match"] >= target_accuracy,
            "stopped_because": summary["stopped_because"], "evaluations": history["evaluations"],
            "load_average": round(os.getloadavg()[0], 2)}


def attention_maps(folder: Path, examples: list[str]) -> list[dict]:
    """What a trained model attends to on ``examples``: for the Transformer every layer's and
    head's weights, for the RNN its alignment (rounded to 3 decimals, real tokens only)."""
    from attention_course.checkpoint import load_checkpoint
    from attention_course.data import encode_pairs

    model, source_vocab, target_vocab, description = load_checkpoint(folder / "checkpoint", "numpy")
    batch = encode_pairs([(text, "") for text in examples], source_vocab, target_vocab)
    steps = description["max_output_length"]
    if description["model"] == "transformer":
        ids, maps = model.generate(batch.source, batch.source_mask, target_vocab.bos_id, steps,
                                   target_vocab.eos_id, all_weights=True)
    else:
        ids, alignment = model.generate(batch.source, batch.source_mask, target_vocab.bos_id, steps,
                                        target_vocab.eos_id)
        maps = {"alignment": alignment[None, :, None]}  # (1 layer, N, 1 head, T_out, T_enc)
    found = []
    for i, text in enumerate(examples):
        output = target_vocab.decode(ids[i])
        source_tokens, output_tokens = source_vocab.split(text), target_vocab.split(output) + ["<eos>"]
        T_enc, T_out = len(source_tokens), min(len(output_tokens), ids.shape[1])
        entry = {"source": source_tokens, "output": output_tokens[:T_out]}
        for name, weights in maps.items():
            keys = T_enc if name != "decoder" else T_out
            queries = T_out if name != "encoder" else T_enc
            entry[name] = np.round(weights[:, i, :, :queries, :keys].astype(float), 3).tolist()
        found.append(entry)
    return found


# The inputs whose attention the page draws (the first seed's models).
EXAMPLES = {"dates": ["september 27, 1994", "Tue, 3 Mar 2020"],
            "translation": ["the tall farmer near the river saw a small bird that sang",
                            "a young girl helped the tired sailor and the dog slept"]}


def run(tasks, seeds, models=MODELS, target_accuracy: float = 0.99, max_cpu_seconds: float = 1800.0, log=None,
        max_steps: dict | None = None, done=frozenset(), **options):
    """Train every (task, seed, model) in turn, but those in ``done``; yields the records one by one
    (``max_steps``: per task)."""
    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks:
            for seed in seeds:
                for model in models:
                    if (task, model, seed) in done:
                        continue
                    folder = Path(tmp) / f"{task}-{model}-{seed}"
                    record = train(task, model, seed, folder, target_accuracy, max_cpu_seconds,
                                   max_steps=(max_steps or {}).get(task), **options)
                    if seed == seeds[0]:
                        record["attention"] = attention_maps(folder, EXAMPLES[task])
                    if log is not None:
                        log(f"{task} {model} seed {seed}: {record['parameters']:,} parameters, {record['steps']} "
                            f"steps, {record['train_seconds']:.0f} s ({record['process_cpu_seconds']:.0f} CPU s), "
                            f"exact match {record['test_exact_match']:.3f} ({record['stopped_because']})")
                    yield record


def _steps_by_task(values: list[str] | None, tasks) -> dict:
    """``--max-steps 300`` (every task) or ``--max-steps dates=800 translation=300``."""
    limits = {}
    for value in values or []:
        task, _, number = value.rpartition("=")
        if task and task not in TASKS:
            raise SystemExit(f"--max-steps {value}: no task {task!r} (one of {', '.join(TASKS)})")
        if not number.isdigit() or int(number) < 1:
            raise SystemExit(f"--max-steps {value}: expected a positive number of steps")
        for name in ([task] if task else tasks):
            limits[name] = int(number)
    return limits


def _key(task: str, model: str) -> str:
    return f"{task} {model}"


SHARED_SETTINGS = ("seeds", "target_accuracy", "max_cpu_seconds", "n_test", "eval_every")


def _same_settings(option: str, out, earlier: dict, settings: dict, names) -> None:
    """Stop unless the results file ``earlier`` was run with these ``settings`` (``names`` of them)."""
    for name in names:
        if earlier["settings"].get(name) != settings[name]:
            raise SystemExit(f"{option}: {name} {settings[name]} differs from {out}'s "
                             f"{earlier['settings'].get(name)}; run with the same settings")


def _kept_records(args, settings: dict, max_steps: dict) -> tuple[list[dict], dict, dict]:
    """``--update``: the records, step limits and commands of the (task, model) pairs not re-run."""
    if not args.out.exists():
        raise SystemExit(f"--update: {args.out} does not exist")
    earlier = json.loads(args.out.read_text(encoding="utf-8"))
    _same_settings("--update", args.out, earlier, settings, SHARED_SETTINGS)
    commands = earlier["commands"]
    rerun = {_key(task, model) for task in args.tasks for model in args.models}
    kept = [record for record in earlier["records"] if _key(record["task"], record["model"]) not in rerun]
    steps = {}
    for record in kept:
        task = record["task"]
        steps[task] = earlier["settings"]["max_steps"].get(task)
        if task in args.tasks and max_steps.get(task) != steps[task]:
            raise SystemExit(f"--update: {task}'s step limit {max_steps.get(task)} differs from the "
                             f"{steps[task]} of the records kept for it; run with the same limit")
    return kept, steps, {key: command for key, command in commands.items() if key not in rerun}


def _resumed(args, settings: dict) -> dict:
    """``--resume``: the file's records, settings and commands, if it was run with these settings."""
    if args.update:
        raise SystemExit("--resume and --update: choose one")
    if not args.out.exists():
        raise SystemExit(f"--resume: {args.out} does not exist")
    earlier = json.loads(args.out.read_text(encoding="utf-8"))
    _same_settings("--resume", args.out, earlier, settings, (*SHARED_SETTINGS, "transformer_recipe"))
    for task in args.tasks:
        if earlier["settings"]["max_steps"].get(task) != settings["max_steps"].get(task):
            raise SystemExit(f"--resume: {task}'s step limit {settings['max_steps'].get(task)} differs from "
                             f"{args.out}'s {earlier['settings']['max_steps'].get(task)}")
    return earlier


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--target-accuracy", type=float, default=0.99)
    parser.add_argument("--max-cpu-seconds", type=float, default=1800.0,
                        help="stop a run after this many CPU seconds of its process")
    parser.add_argument("--max-steps", nargs="+", metavar="[TASK=]STEPS",
                        help="also stop each run after this many steps (for every task, or per task)")
    parser.add_argument("--n-test", type=int, default=1000, help="test pairs (quick checks: fewer)")
    parser.add_argument("--eval-every", type=int, default=25, help="steps between evaluations")
    parser.add_argument("--out", type=Path, default=RESULTS / "transformer_vs_rnn.json")
    parser.add_argument("--resume", action="store_true",
                        help="keep every record in --out and run only the missing (task, model, seed) runs "
                             "(run with the same settings; for an experiment stopped early)")
    parser.add_argument("--update", action="store_true",
                        help="keep the records of the other tasks and models in --out (run with the same settings)")
    args = parser.parse_args(argv)
    max_steps = _steps_by_task(args.max_steps, args.tasks)
    command = command_line("tools.experiments.transformer_vs_rnn", argv)

    clock = Stopwatch()
    load = [round(x, 2) for x in os.getloadavg()]
    settings = {"tasks": args.tasks, "seeds": args.seeds, "models": list(MODELS), "track": "torch", "device": "cpu",
                "target_accuracy": args.target_accuracy, "max_cpu_seconds": args.max_cpu_seconds,
                "max_steps": {task: max_steps.get(task) for task in args.tasks}, "n_train": 20000,
                "n_test": args.n_test, "eval_every": args.eval_every, "transformer_recipe": transformer_recipe()}
    commands = {_key(task, model): command for task in args.tasks for model in args.models}
    kept, earlier_steps = [], {}
    if args.update:
        kept, earlier_steps, earlier_commands = _kept_records(args, settings, max_steps)
        commands = {**earlier_commands, **commands}
    tasks = [task for task in TASKS if any(key.split()[0] == task for key in commands)]
    settings.update(tasks=tasks, max_steps={task: max_steps.get(task, earlier_steps.get(task)) for task in tasks})
    commands = {_key(task, model): commands[_key(task, model)] for task in tasks for model in MODELS
                if _key(task, model) in commands}
    done, earlier_seconds, resumed = frozenset(), 0.0, {}
    if args.resume:
        earlier = _resumed(args, settings)
        kept, commands, command = earlier["records"], earlier["commands"], earlier["command"]
        settings = earlier["settings"]
        done = frozenset((record["task"], record["model"], record["seed"]) for record in kept)
        tasks = settings["tasks"]
        earlier_seconds = earlier["seconds"]
        resumed = {"resumed_by": [*earlier.get("resumed_by", []), command_line("tools.experiments.transformer_vs_rnn", argv)]}
    records = list(kept)
    expected = len(tasks) * len(args.seeds) * len(MODELS)
    # The file is written after every run, so that a long experiment stopped early keeps what it measured.
    for record in run(args.tasks, args.seeds, args.models, args.target_accuracy, args.max_cpu_seconds, clock.log,
                      max_steps=max_steps, n_test=args.n_test, eval_every=args.eval_every, done=done):
        records.append(record)
        path = write_results(args.out, "transformer_vs_rnn", settings, records, earlier_seconds + clock.seconds,
                             command, commands=commands, load_average_before=load, cpus=os.cpu_count(),
                             complete=len(records) == expected, **resumed)
        print(path)


if __name__ == "__main__":
    main()
