"""An ipywidgets explorer of a trained attention model: pick an example, a decoder step and a
score function; see the weights ``alpha_ij`` over the source and the context ``c_i``.

Everything the explorer shows is computed once, in Python, when it is built: one greedy
translation per (score function, example). Each view is a plain ``HTML`` widget, and the
controls pick a view through ``Stack`` widgets whose ``selected_index`` is tied to the controls
with ``jslink``. ``jslink`` runs in the browser, so the explorer stays interactive in the static
HTML book (the notebook's saved widget state holds every view) as well as in a live kernel; a
Python observer keeps the same selection on the kernel side, which is what code and tests see.

Only core ipywidgets (``Dropdown``, ``IntSlider``, ``HTML``, ``Stack``, ``VBox``/``HBox``) are used,
so the ipywidgets html-manager can render the saved state without any custom JavaScript.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

__all__ = ["AttentionExplorer", "attention_explorer", "explorer_views"]


@dataclass
class _Translation:
    """One model's greedy translation of one example, with what the views need.

    Shapes:
        weights: (T_out, T_enc) for this example's real source characters.
        context: (T_out, H_enc).
    """

    source: list[str]      # the source's symbols (characters, or words)
    output: list[str]
    weights: np.ndarray
    context: np.ndarray


def _translate(model, sources: Sequence[str], source_vocab, target_vocab, max_length: int) -> list[_Translation]:
    """Greedy outputs, weights and contexts ``c_i = sum_j alpha_ij h_j`` for every source."""
    from ..data import encode_pairs
    from ..tracks import track_of

    track = track_of(model)
    batch = encode_pairs([(source, "") for source in sources], source_vocab, target_vocab)
    decoded = track.greedy_decode(model, batch, target_vocab, max_length)
    if decoded.attention_weights is None:
        raise ValueError("model: it has no attention weights to explore (a plain Seq2seq?); pass an AttentionSeq2seq")
    contexts = decoded.attention_weights @ track.encode(model, batch)  # (N, T_out, H_enc)
    translations = []
    for row, source in enumerate(sources):
        steps = []
        for token in decoded.ids[row]:
            steps.append("<eos>" if token == target_vocab.eos_id else target_vocab.decode([token], strip_special=False))
            if token == target_vocab.eos_id:
                break
        T, symbols = len(steps), source_vocab.split(source)
        translations.append(_Translation(symbols, steps, decoded.attention_weights[row, :T, :len(symbols)],
                                         contexts[row, :T]))
    return translations


def _colour(value: float) -> str:
    """A white-to-blue shade for a weight in [0, 1]."""
    value = min(max(float(value), 0.0), 1.0)
    r, g, b = (int(round(255 + (end - 255) * value)) for end in (8, 69, 148))
    return f"#{r:02x}{g:02x}{b:02x}"


def _diverging(value: float, scale: float) -> str:
    """Red for negative, blue for positive, white for zero (``scale`` maps to full colour)."""
    t = 0.0 if scale == 0 else min(abs(float(value)) / scale, 1.0)
    end = (8, 69, 148) if value >= 0 else (165, 15, 21)
    r, g, b = (int(round(255 + (e - 255) * t)) for e in end)
    return f"#{r:02x}{g:02x}{b:02x}"


def _colour_key() -> str:
    """The heat maps' colour scale, as a row of shaded cells from weight 0 to weight 1."""
    cells = "".join(f"<td style='background:{_colour(w)};width:14px;border:1px solid #ccc'></td>"
                    for w in np.linspace(0, 1, 6))
    return (f"weight &alpha;: <table style='display:inline-table;vertical-align:middle'><tr><td>0</td>"
            f"{cells}<td>1</td></tr></table>")


def _visible(character: str) -> str:
    return "␣" if character == " " else html.escape(character)


# One stylesheet for every view, shipped once in the explorer's caption: each view then only
# carries its numbers (height and colour inline), which keeps the saved widget state small.
_STYLE = (
    "<style>.ae{font:13px sans-serif;padding:4px}.ae table{border-collapse:collapse}"
    ".ae td{padding:0 1px;text-align:center;font:11px monospace}"
    ".ae td.b{vertical-align:bottom;height:64px}.ae td.b div{width:12px;margin:auto;border:1px solid #08458f}"
    ".ae td.v{font-size:8px;color:#555}.ae tr.c td,.ae tr.h td{padding:0;width:5px;height:14px}"
    ".ae tr.h td{width:12px;height:12px}.ae tr.h td.t{width:auto;padding-right:4px}</style>"
)


def _step_html(translation: _Translation, step: int, score: str) -> str:
    """The view of one decoder step: a bar per source character, the weights, the context."""
    if step >= len(translation.output):
        return (f"<div class=ae>score <b>{html.escape(score)}</b>: the output ended after "
                f"{len(translation.output)} steps (with &lt;eos&gt;); pick an earlier step.</div>")
    weights = translation.weights[step]
    context = translation.context[step]
    produced = "".join(translation.output[:step])
    best = int(weights.argmax())
    bars = "".join(f"<td class=b><div style='height:{max(1, round(60 * w))}px;background:{_colour(w)}'></div></td>"
                   for w in weights)
    chars = "".join(f"<td>{_visible(c)}</td>" for c in translation.source)
    values = "".join(f"<td class=v>{round(100 * w)}</td>" for w in weights)
    scale = float(np.abs(context).max()) or 1.0
    strip = "".join(f"<td style='background:{_diverging(v, scale)}'></td>" for v in context)
    return (
        "<div class=ae>"
        f"<div>score <b>{html.escape(score)}</b>, step i = {step + 1}: after "
        f"<code>{html.escape(produced) or '&lt;bos&gt;'}</code> the decoder writes "
        f"<b><code>{html.escape(translation.output[step])}</code></b>; it attends most to "
        f"<code>{_visible(translation.source[best])}</code> (position j = {best + 1}, "
        f"&alpha; = {weights[best]:.2f}).</div>"
        "<div style='margin-top:4px'>attention weights &alpha;<sub>ij</sub> (in %):</div>"
        f"<table><tr>{bars}</tr><tr>{chars}</tr><tr>{values}</tr></table>"
        f"<div style='margin-top:6px'>context c<sub>i</sub> = &Sigma;<sub>j</sub> &alpha;<sub>ij</sub> "
        f"h<sub>j</sub> ({len(context)} numbers, blue &gt; 0, red &lt; 0, |c<sub>i</sub>| = "
        f"{float(np.linalg.norm(context)):.2f}):</div>"
        f"<table><tr class=c>{strip}</tr></table></div>"
    )


def explorer_views(models: Mapping[str, object], sources: Sequence[str], source_vocab, target_vocab,
                   max_length: int = 11) -> tuple[dict[str, list[_Translation]], dict[tuple[str, int, int], str]]:
    """The translations and the HTML of every view, keyed by ``(score, example, step)``."""
    translations = {score: _translate(model, sources, source_vocab, target_vocab, max_length)
                    for score, model in models.items()}
    views = {(score, example, step): _step_html(translation, step, score)
             for score, per_example in translations.items()
             for example, translation in enumerate(per_example)
             for step in range(max_length)}
    return translations, views


def _as_models(model) -> dict[str, object]:
    if isinstance(model, Mapping):
        if not model:
            raise ValueError("model: the dict of models per score function is empty")
        return {str(score): m for score, m in model.items()}
    config = getattr(model, "config", None)
    return {getattr(config, "score", "model"): model}


def _sources(examples) -> list[str]:
    if isinstance(examples, str):
        raise ValueError("examples: expected a list of source texts, got one string; wrap it in a list")
    sources = [example[0] if isinstance(example, (tuple, list)) else example for example in examples]
    if not sources:
        raise ValueError("examples: expected at least one source text, got none")
    for index, source in enumerate(sources):
        if not isinstance(source, str) or not source:
            raise ValueError(f"examples[{index}]: expected a non-empty source text, got {source!r}")
    return sources


def _stack(children):
    import ipywidgets as widgets

    return widgets.Stack(children=list(children), selected_index=0)


class AttentionExplorer:
    """The explorer's widgets and its precomputed views; ``widget`` is what a notebook displays.

    Controls: ``example`` (Dropdown over the sources), ``step`` (IntSlider over decoder steps,
    1-based) and ``score`` (Dropdown over the models' score functions).
    """

    def __init__(self, models: Mapping[str, object], sources: Sequence[str], source_vocab, target_vocab,
                 max_length: int = 11, title: str | None = None) -> None:
        import ipywidgets as widgets
        from ipywidgets.widgets.widget_string import HTMLStyle

        if max_length < 1:
            raise ValueError(f"max_length: expected >= 1, got {max_length}")
        self.sources = list(sources)
        self.scores = list(models)
        self.max_length = max_length
        self.translations, self.views = explorer_views(models, self.sources, source_vocab, target_vocab, max_length)

        self.example = widgets.Dropdown(options=[(s, i) for i, s in enumerate(self.sources)], value=0,
                                        description="example")
        self.score = widgets.Dropdown(options=[(s, i) for i, s in enumerate(self.scores)], value=0,
                                      description="score", disabled=len(self.scores) == 1)
        self.step = widgets.IntSlider(value=1, min=1, max=max_length, description="decoder step i",
                                      style={"description_width": "initial"}, continuous_update=True)
        # One Layout and one style shared by every view: each widget would otherwise bring its
        # own two models into the saved state, more bytes than the views themselves.
        layout, style = widgets.Layout(), HTMLStyle()

        def view(value: str):
            return widgets.HTML(value, layout=layout, style=style)

        self.step_stacks = {}
        example_stacks, heatmap_stacks = [], []
        for s, score in enumerate(self.scores):
            per_example = []
            for e in range(len(self.sources)):
                # The step slider counts from 1 and a link copies its value as it is, so the
                # stack starts with an empty placeholder at index 0: selected_index == step.
                stack = _stack([view("")] + [view(self.views[(score, e, i)]) for i in range(max_length)])
                stack.selected_index = 1
                self.step_stacks[(s, e)] = stack
                per_example.append(stack)
            example_stacks.append(_stack(per_example))
            heatmap_stacks.append(_stack(view(self._heatmap_html(score, e)) for e in range(len(self.sources))))
        self.view = _stack(example_stacks)
        self.heatmaps = _stack(heatmap_stacks)

        # In the browser (live or static HTML): controls -> stacks.
        self.links = [widgets.jslink((self.score, "index"), (self.view, "selected_index")),
                       widgets.jslink((self.score, "index"), (self.heatmaps, "selected_index"))]
        for example_stack, heatmap_stack in zip(example_stacks, heatmap_stacks):
            self.links.append(widgets.jslink((self.example, "index"), (example_stack, "selected_index")))
            self.links.append(widgets.jslink((self.example, "index"), (heatmap_stack, "selected_index")))
        for stack in self.step_stacks.values():
            self.links.append(widgets.jslink((self.step, "value"), (stack, "selected_index")))
        # In the kernel: the same selection, so code (and tests) see what the browser shows.
        for control in (self.score, self.example, self.step):
            control.observe(self._sync, names="value")

        caption = widgets.HTML(_STYLE + (f"<b>{html.escape(title)}</b>" if title else ""))
        self.widget = widgets.VBox([caption, widgets.HBox([self.example, self.score]), self.step, self.view,
                                    widgets.HTML("<div class=ae>the whole alignment of this example "
                                                 "(rows: output, columns: source), " + _colour_key()
                                                 + "</div>"),
                                    self.heatmaps])

    def _heatmap_html(self, score: str, example: int) -> str:
        translation = self.translations[score][example]
        head = "".join(f"<td>{_visible(c)}</td>" for c in translation.source)
        rows = "".join(
            f"<tr class=h><td class=t>{html.escape(token)}</td>"
            + "".join(f"<td style='background:{_colour(w)}'></td>" for w in translation.weights[i]) + "</tr>"
            for i, token in enumerate(translation.output))
        return f"<div class=ae><table><tr><td></td>{head}</tr>{rows}</table></div>"

    def _sync(self, change=None) -> None:
        self.view.selected_index = self.score.value
        self.heatmaps.selected_index = self.score.value
        for s in range(len(self.scores)):
            self.view.children[s].selected_index = self.example.value
            self.heatmaps.children[s].selected_index = self.example.value
            for e in range(len(self.sources)):
                self.step_stacks[(s, e)].selected_index = self.step.value

    @property
    def current_score(self) -> str:
        return self.scores[self.score.value]

    @property
    def current_translation(self) -> _Translation:
        return self.translations[self.current_score][self.example.value]

    @property
    def current_weights(self) -> np.ndarray | None:
        """The weights ``alpha_ij`` over the source at the chosen step, shape (T_enc,); None past the end."""
        translation = self.current_translation
        step = self.step.value - 1
        return translation.weights[step] if step < len(translation.output) else None

    @property
    def current_context(self) -> np.ndarray | None:
        """The context ``c_i`` at the chosen step, shape (H_enc,); None past the end."""
        translation = self.current_translation
        step = self.step.value - 1
        return translation.context[step] if step < len(translation.output) else None

    @property
    def displayed_html(self) -> str:
        """The HTML of the view the stacks select now (what the page shows)."""
        example_stack = self.view.children[self.view.selected_index]
        step_stack = example_stack.children[example_stack.selected_index]
        return step_stack.children[step_stack.selected_index].value

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)


def attention_explorer(model, examples, source_vocab, target_vocab,
                       max_length: int = 11,
                       title: str | None = None) -> AttentionExplorer:
    """Build the explorer for ``model`` (an ``AttentionSeq2seq`` of either track, or a
    dict ``{score name: model}`` of models trained with different score functions) on
    ``examples`` (source texts, or ``(source, target)`` pairs).

    Display the result (or its ``widget``) in a notebook. ``max_length`` is the number
    of decoder steps offered (11 for ISO dates: 10 characters and ``<eos>``).

    Raises:
        ValueError: no examples, an empty source, an empty dict of models, a model
            without attention, ``max_length < 1``.
        UnknownCharacterError: a source holds a character the source vocabulary lacks.
    """
    return AttentionExplorer(_as_models(model), _sources(examples), source_vocab,
                             target_vocab, max_length, title)
