"""Soft visual attention for image captioning: does each object word look at its object?

The data (``attention_course.data.captions``): 64x64 images of one to three coloured shapes on a
4x4 grid, captioned ("a red circle above a blue square"), with every object's pixels known.
The model (the track's ``"captioner"``) attends over a grid of features at every word. What it
reads is the track's choice (its ``TASK_DEFAULTS["caption"]["inputs"]``):

* ``"features"`` (the NumPy track's ``CaptionDecoder``): a *given* grid, ``patch_features``, each
  cell of the objects' 4x4 grid as its pixels averaged down to 4x4x3 values, and the cell's row
  and column (one-hot);
* ``"images"`` (the torch track's ``CNNCaptioner``): the pixels, through a small CNN (four 2x2
  convolutions of stride 2, a 4x4 grid of 16 features) trained with the decoder end to end.

``--model static`` trains the baseline without attention instead: every word reads the same
vector, the mean of the grid's features (``CaptionerConfig.context = "static"``).

Measured on held-out images: exact match and BLEU (sacrebleu) of the greedy captions, and for
every object word of the test captions (a colour or a shape; teacher forcing) whether the grid
cell with the largest weight lies on that object (``object_hit_rate``), from the generator's
object masks (``None`` for the static baseline, which has no weights to look with).
"""

from __future__ import annotations

import numpy as np

from ..core.configs import CaptionerConfig
from ..data.captions import (CAPTION_VOCABULARY, COLOUR_NAMES, NO_OBJECT, SHAPE_NAMES, CaptionData, encode_captions,
                             generate_captions)
from ..tracks import get_track
from ..training import TrainConfig, result_summary
from .common import (TASK_OPTIONS, TaskRun, check_task_command, finish_command, log_to_stderr, stopping_rules,
                     track_settings)

__all__ = ["DEFAULTS", "STOPPING", "settings", "stopping_defaults", "patch_features", "make_data", "build_model",
           "model_inputs", "bleu", "measure", "object_hits", "train", "train_command"]

VOCAB = CAPTION_VOCABULARY
# The given grid ("features"): the objects' own 4x4 grid, each cell pooled to 4x4 pixels.
PATCH_GRID, PATCH_POOL = 4, 4
# What a track does differently (what its captioner reads; the torch track's CNN, its rate and its
# epochs) is in the track's TASK_DEFAULTS["caption"].
DEFAULTS = {"hidden_size": 64, "lr": 0.01, "batch_size": 64, "grid_size": PATCH_GRID, "cnn_channels": (),
            "epochs": 20}
STOPPING = {"epochs": 20, "target_accuracy": 1.0}


def settings(track: str) -> dict:
    """The defaults of captioning on ``track``: ``DEFAULTS`` and the track's own."""
    return track_settings(get_track(track), "caption", DEFAULTS)


def stopping_defaults(track: str) -> dict:
    """The stopping rules of ``track`` when none is given: its epochs, or every validation caption right."""
    return {**STOPPING, "epochs": settings(track)["epochs"]}


def patch_features(images: np.ndarray, grid_size: int = PATCH_GRID, pool: int = PATCH_POOL) -> np.ndarray:
    """A given grid of features: each cell's pixels averaged down to ``pool x pool``, and its place.

    Cell ``(i, j)`` of a ``grid_size x grid_size`` grid over the image becomes the vector of its
    ``pool x pool x 3`` block averages, then ``grid_size`` values one-hot in its row and
    ``grid_size`` one-hot in its column (where it is: the captions say "above", "left of").

    Shapes:
        images: (N, S, S, 3).  returns: (N, grid_size**2, pool*pool*3 + 2*grid_size) float32.
    """
    N, S, _, C = images.shape
    g = grid_size
    if S % (g * pool):
        raise ValueError(f"grid_size * pool = {g * pool} must divide the image size {S}")
    block = S // (g * pool)
    pooled = images.reshape(N, g, pool, block, g, pool, block, C).mean(axis=(3, 6))  # (N, g, p, g, p, C)
    cells = pooled.transpose(0, 1, 3, 2, 4, 5).reshape(N, g * g, pool * pool * C)  # (N, L, p*p*C)
    rows, columns = np.divmod(np.arange(g * g), g)
    place = np.concatenate([np.eye(g)[rows], np.eye(g)[columns]], axis=1)  # (L, 2g)
    return np.concatenate([cells, np.broadcast_to(place, (N, g * g, 2 * g))], axis=2).astype(np.float32)


def make_data(n_train: int = 3000, n_validation: int = 300, n_test: int = 500, seed: int = 0):
    """``(train, validation, test)`` ``CaptionData``, drawn one after another from ``seed``."""
    rng = np.random.default_rng(seed)
    return tuple(generate_captions(n, rng) for n in (n_train, n_validation, n_test))


# What a captioner reads -> the array its ``forward`` takes, from the data.
INPUTS = {"features": lambda data: patch_features(data.images), "images": lambda data: data.images}


def model_inputs(track: str, data: CaptionData) -> np.ndarray:
    """What the captioner of ``track`` reads: patch features (NumPy) or the images themselves (torch)."""
    return INPUTS[settings(track)["inputs"]](data)


def build_model(track: str, config: CaptionerConfig, seed: int = 0):
    """NumPy: a ``CaptionDecoder`` over given features; torch: a ``CNNCaptioner`` from pixels."""
    return get_track(track).build_model("captioner", config, seed)


def bleu(hypotheses: list[str], references: list[str]) -> float:
    """Corpus BLEU (0 to 100) of the hypotheses against one reference each, by sacrebleu."""
    import sacrebleu

    return float(sacrebleu.corpus_bleu(hypotheses, [references]).score)


def object_hits(attention: np.ndarray, data: CaptionData, grid_size: int) -> np.ndarray:
    """For every object word of the captions, whether its step's largest weight lies on its object.

    ``attention[n, t]`` are the weights of the step that predicts caption word t (teacher
    forcing). A hit: the cell with the largest weight covers some pixel of the object the word
    names (``CaptionData.word_regions``).

    Shapes:
        attention: (N, T, L), L = grid_size**2, T >= the longest caption.
        returns: (M,) bool, one entry per object word.
    """
    regions = data.word_regions(grid_size)  # (N, L_cap, g, g)
    N, L_cap = data.word_objects.shape
    rows, steps = np.nonzero(data.word_objects != NO_OBJECT)
    looked_at = attention[rows, steps].argmax(axis=-1)  # (M,)
    return regions.reshape(N, L_cap, -1)[rows, steps, looked_at] > 0


def measure(model, track: str, data: CaptionData, inputs: np.ndarray | None = None) -> dict:
    """Greedy captions, exact match, BLEU, and the object words' hit rate (teacher forcing).

    Returns a dict: ``exact_match``, ``bleu``, ``object_hit_rate`` (and ``object_hit_rate_by_word``,
    for colour and shape words apart; ``None`` for the static baseline), ``captions`` (the greedy
    ones), ``generated_attention`` (N, T_out, L, while generating) and ``attention`` (N, T, L,
    teacher forcing).
    """
    call = get_track(track).call
    inputs = model_inputs(track, data) if inputs is None else inputs
    length = max(len(caption.split(" ")) for caption in data.captions) + 1
    ids, generated_attention = call(model, "generate", inputs, VOCAB.bos_id, length, None, batch_size=256)
    captions = [VOCAB.decode(row) for row in ids]
    decoder_input, _, _ = encode_captions(data.captions, VOCAB)
    attention = call(model, "attend", inputs, decoder_input, batch_size=256)
    measured = {
        "exact_match": float(np.mean([c == r for c, r in zip(captions, data.captions)])),
        "bleu": bleu(captions, data.captions),
        "object_hit_rate": None,
        "object_hit_rate_by_word": None,
        "captions": captions,
        "generated_attention": generated_attention,
        "attention": attention,
    }
    if model.config.context == "attention":  # the static baseline's weights are 1/L everywhere
        hits = object_hits(attention, data, model.config.grid_size)
        rows, steps = np.nonzero(data.word_objects != NO_OBJECT)
        words = np.array([data.captions[row].split(" ")[step] for row, step in zip(rows, steps)])
        measured["object_hit_rate"] = float(hits.mean())
        measured["object_hit_rate_by_word"] = {"colour": float(hits[np.isin(words, COLOUR_NAMES)].mean()),
                                               "shape": float(hits[np.isin(words, SHAPE_NAMES)].mean())}
    return measured


def train(track: str = "numpy", seed: int = 0, n_train: int = 3000, n_validation: int = 300, n_test: int = 500,
          model: str = "attention", embed_dim: int = 32, hidden_size: int | None = None, attention_size: int = 32,
          coverage_weight: float = 0.0, lr: float | None = None, batch_size: int | None = None,
          eval_every: int = 50, device: str = "cpu", progress: bool = False, log=None, **stopping) -> TaskRun:
    """Generate images and captions, train a captioner on ``track`` (``model``: ``"attention"``, or
    ``"static"``, the baseline without attention), and measure it on the test images.

    ``stopping``: ``epochs``, ``max_steps``, ``max_seconds``, ``target_accuracy`` (validation
    exact match); by default the track's epochs (20 NumPy, 30 torch), or every validation caption right.
    """
    implementation = get_track(track)
    defaults = settings(track)
    train_data, validation, test = make_data(n_train, n_validation, n_test, seed)
    train_inputs = model_inputs(track, train_data)
    validation_inputs = model_inputs(track, validation)
    # Given features are as wide as they are; a CNN's last layer is as wide as the track says.
    feature_size = defaults.get("feature_size", train_inputs.shape[-1])
    config = CaptionerConfig(len(VOCAB), feature_size, embed_dim=embed_dim,
                             hidden_size=hidden_size or defaults["hidden_size"], attention_size=attention_size,
                             coverage_weight=coverage_weight, reset_after=defaults["reset_after"],
                             grid_size=defaults["grid_size"], cnn_channels=defaults["cnn_channels"], context=model)
    captioner = implementation.build_model("captioner", config, seed)
    decoder_input, decoder_target, target_mask = encode_captions(train_data.captions, VOCAB)
    length = decoder_input.shape[1]
    rules = {name: value for name, value in stopping.items() if value is not None} or stopping_defaults(track)
    train_config = TrainConfig(batch_size=batch_size or defaults["batch_size"], lr=lr or defaults["lr"],
                               eval_every=eval_every, seed=seed, **rules)

    def evaluate() -> float:
        ids, _ = implementation.call(captioner, "generate", validation_inputs, VOCAB.bos_id, length, None, batch_size=256)
        return float(np.mean([VOCAB.decode(row) == caption for row, caption in zip(ids, validation.captions)]))

    arrays = {defaults["inputs"]: train_inputs, "decoder_input": decoder_input, "decoder_target": decoder_target,
              "target_mask": target_mask}
    result = implementation.fit(captioner, arrays, train_config, evaluate, progress=progress, log=log, device=device)
    measured = measure(captioner, track, test)
    summary = {
        "test_exact_match": measured["exact_match"],
        "test_bleu": round(measured["bleu"], 2),
        "object_hit_rate": measured["object_hit_rate"],
        "object_hit_rate_by_word": measured["object_hit_rate_by_word"],
        "coverage_weight": coverage_weight,
        "validation_exact_match": result.test_exact_match,
        **result_summary(result),
        "n_parameters": implementation.num_parameters(captioner),
        "track": track,
        "device": device,
        "model": model,
        "task": "caption",
        "seed": seed,
        "n_train": n_train,
    }
    return TaskRun(model=captioner, summary=summary, result=result, test=test, extra={"measured": measured})


# Options of ``attention-course train`` that this task reads.
OPTIONS = TASK_OPTIONS


def train_command(args, task) -> dict:
    """``attention-course train --task caption``: train, write ``history.json``, return the summary."""
    check_task_command(args, task, OPTIONS, "trains attention or static (the baseline without attention)")

    run = train(track=args.track, seed=args.seed, model=args.model, n_train=args.n_train or 3000,
                n_test=args.n_test or 500, embed_dim=args.embed_dim, hidden_size=args.hidden_size, lr=args.lr, batch_size=args.batch_size,
                eval_every=args.eval_every, device=args.device or "cpu", progress=not args.no_progress,
                log=log_to_stderr, **stopping_rules(args, stopping_defaults(args.track)))
    return finish_command(args, run)
