"""Tests of attention_course/viz/explorer.py: the widget builds, its controls change what it
shows, the shapes of what it computes, and clear errors for bad input."""

import numpy as np
import pytest

ipywidgets = pytest.importorskip("ipywidgets")
from ipywidgets.embed import dependency_state  # noqa: E402
from ipywidgets.widgets.widget_link import Link  # noqa: E402

from attention_course.data import UnknownCharacterError, build_vocabularies  # noqa: E402
from attention_course.numpy_track.seq2seq import AttentionSeq2seq, Seq2seq, Seq2seqConfig  # noqa: E402
from attention_course.viz import attention_explorer  # noqa: E402

PAIRS = [("sep 27, 1994", "1994-09-27"), ("27.09.1994", "1994-09-27"), ("3 mar 2020", "2020-03-03")]
SOURCES = [source for source, _ in PAIRS]


@pytest.fixture(scope="module")
def vocabularies():
    return build_vocabularies(PAIRS)


def make_model(vocabularies, score="general", seed=0, kind=AttentionSeq2seq):
    source_vocab, target_vocab = vocabularies
    config = Seq2seqConfig(len(source_vocab), len(target_vocab), embed_dim=4, hidden_size=6, score=score,
                           bidirectional=kind is AttentionSeq2seq, dtype="float64")
    return kind(config, rng=np.random.default_rng(seed))


@pytest.fixture(scope="module")
def explorer(vocabularies):
    models = {score: make_model(vocabularies, score, seed) for seed, score in enumerate(["general", "additive"])}
    return attention_explorer(models, SOURCES, *vocabularies, max_length=5)


def test_the_widget_builds_from_core_widgets_only(explorer):
    assert isinstance(explorer.widget, ipywidgets.VBox)
    state = dependency_state(explorer.widget)
    modules = {model["model_module"] for model in state.values()}
    assert modules <= {"@jupyter-widgets/controls", "@jupyter-widgets/base"}, modules
    views = [model for model in state.values() if model["model_name"] == "HTMLModel"]
    assert len(views) > len(SOURCES) * 2 * 5  # every view is in the state a static page embeds


def test_shapes_of_weights_and_context(explorer):
    for score, per_example in explorer.translations.items():
        for source, translation in zip(SOURCES, per_example):
            T_out = len(translation.output)
            assert 1 <= T_out <= 5
            assert translation.weights.shape == (T_out, len(source))
            assert translation.context.shape == (T_out, 2 * 6)  # bidirectional: 2 x hidden_size
            np.testing.assert_allclose(translation.weights.sum(axis=1), 1.0, rtol=1e-6)
    assert explorer.current_weights.shape == (len(SOURCES[0]),)


def test_context_is_the_weighted_sum_of_encoder_states(vocabularies):
    model = make_model(vocabularies)
    explorer = attention_explorer(model, SOURCES[:1], *vocabularies, max_length=3)
    from attention_course.data import encode_pairs
    batch = encode_pairs([(SOURCES[0], "")], *vocabularies)
    encoder_states = model.encoder.forward(batch.source, batch.source_mask)[0]  # (T_enc, H)
    translation = explorer.translations["general"][0]
    np.testing.assert_allclose(translation.context, translation.weights @ encoder_states, rtol=1e-10)


def test_changing_each_control_changes_the_displayed_weights(explorer):
    explorer.score.value, explorer.example.value, explorer.step.value = 0, 0, 1
    first_html, first_weights = explorer.displayed_html, explorer.current_weights.copy()
    assert "general" in first_html

    explorer.step.value = 2
    assert explorer.displayed_html != first_html
    assert not np.array_equal(explorer.current_weights, first_weights)

    explorer.step.value = 1
    explorer.example.value = 2
    assert explorer.displayed_html != first_html
    assert explorer.current_weights.shape == (len(SOURCES[2]),)

    explorer.example.value = 0
    explorer.score.value = 1
    assert "additive" in explorer.displayed_html
    assert not np.allclose(explorer.current_weights, first_weights)

    explorer.score.value = 0
    assert explorer.displayed_html == first_html


def test_static_page_links_every_control_in_the_browser(explorer):
    links = explorer.links
    assert all(isinstance(link, Link) for link in links)
    linked_sources = {(id(link.source[0]), link.source[1]) for link in links}
    assert (id(explorer.step), "value") in linked_sources
    assert (id(explorer.example), "index") in linked_sources
    assert (id(explorer.score), "index") in linked_sources


def test_the_view_shows_the_chosen_weights(explorer):
    explorer.score.value, explorer.example.value, explorer.step.value = 0, 1, 1
    weights = explorer.current_weights
    best = int(weights.argmax())
    assert f"position j = {best + 1}" in explorer.displayed_html


def test_a_single_model_and_pairs_as_examples(vocabularies):
    explorer = attention_explorer(make_model(vocabularies, "dot"), PAIRS, *vocabularies, max_length=4)
    assert explorer.scores == ["dot"]
    assert explorer.sources == SOURCES
    assert explorer.score.disabled


def test_torch_models_work_too(vocabularies):
    torch = pytest.importorskip("torch")
    from attention_course.torch_track.seq2seq import AttentionSeq2seq as TorchAttentionSeq2seq
    source_vocab, target_vocab = vocabularies
    torch.manual_seed(0)
    model = TorchAttentionSeq2seq(Seq2seqConfig(len(source_vocab), len(target_vocab), embed_dim=4, hidden_size=6),
                                  rng=np.random.default_rng(0))
    explorer = attention_explorer({"general": model}, SOURCES, source_vocab, target_vocab, max_length=3)
    assert explorer.current_context.shape == (12,)
    assert model.training  # the explorer put the model back in the mode it found it in


@pytest.mark.parametrize("examples, message", [([], "at least one"), ("sep 27, 1994", "one string"),
                                               ([""], "examples\\[0\\]")])
def test_bad_examples_raise(vocabularies, examples, message):
    with pytest.raises(ValueError, match=message):
        attention_explorer(make_model(vocabularies), examples, *vocabularies)


def test_other_bad_input_raises(vocabularies):
    with pytest.raises(ValueError, match="empty"):
        attention_explorer({}, SOURCES, *vocabularies)
    with pytest.raises(ValueError, match="max_length"):
        attention_explorer(make_model(vocabularies), SOURCES, *vocabularies, max_length=0)
    with pytest.raises(ValueError, match="no attention"):
        attention_explorer(make_model(vocabularies, kind=Seq2seq), SOURCES, *vocabularies)
    with pytest.raises(UnknownCharacterError):
        attention_explorer(make_model(vocabularies), ["Zebra"], *vocabularies)
