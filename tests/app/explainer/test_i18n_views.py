"""The Explainer in every language (assets/i18n/<lang>/explainer.yaml): every panel of every iteration
of the shipped example traces (each method's records: speculative, greedy, autoregressive, mentored,
MJSD, PPD), the tab's static texts and the status lines render with no English fallback (strict
mode) and no developer text, and what they show is in the language asked for."""

from __future__ import annotations

import pytest

from _student_text import dev_hits, figure_text, visible_text
from app import charts, charts_running, i18n, render
from app.explainer import handlers
from app.explainer.playback import idle_playback, playback_data
from app.explainer.view import theory_panel, view
from app.session import Session, example_traces, read_trace


def _texts_of(out) -> str:
    return " ".join(visible_text(v) if isinstance(v, str) else figure_text(v)
                    for v in out if isinstance(v, (str, dict)))

LANGS = list(i18n.LANGUAGES)
TRACES = example_traces()


@pytest.fixture
def strict():
    i18n.reset_missing()
    i18n.strict(True)
    yield
    i18n.strict(False)
    assert i18n.missing() == set()


def _session(title: str) -> Session:
    records, summary = read_trace(TRACES[title])
    return Session(records=records, summary=summary, source="example", title=title)


def _shown(out) -> str:
    """The words of a `View` a student reads: HTML, Markdown, figures and gr.update labels."""
    text = _texts_of(out)
    labels = [v.get("label", "") for v in out if isinstance(v, dict) and isinstance(v.get("label"), str)]
    return text + " " + " ".join(labels)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("title", sorted(TRACES))
def test_every_panel_of_every_iteration_renders_in_the_language(strict, lang, title):
    session = _session(title)
    with i18n.using(lang):  # as the app runs a handler: what reads the event's language (the method charts)
        for i in range(len(session.records)):
            shown = _shown(view(session, i, 0, final=True, lang=lang))
            assert dev_hits(shown) == [], (title, lang, i)
    fig, words = theory_panel(session, None, lang)
    assert dev_hits(figure_text(fig) + " " + words) == []


@pytest.mark.parametrize("lang", [code for code in LANGS if code != "en"])
def test_the_panels_are_in_that_language_not_english(lang):
    session = _session(next(iter(TRACES)))
    record = session.records[1]
    english, other = (render.stats_html(session.records, 1, lang=code) for code in ("en", lang))
    assert english != other and "tokens per target call" not in other
    assert i18n.t("explainer.stats.tokens_per_call", lang) in visible_text(other)
    assert i18n.t("explainer.chip.accepted.label", lang) in render.legend_html(lang)
    assert figure_text(charts.pq_figure(record, None, lang)) != figure_text(charts.pq_figure(record, None, "en"))
    running = figure_text(charts_running.running_figure(session.records, 1, lang=lang))
    assert i18n.t("explainer.chart.tps_row", lang) in running
    assert render.caption(record, lang) != render.caption(record, "en")


@pytest.mark.parametrize("lang", LANGS)
def test_the_tabs_texts_and_status_lines_render(strict, lang):
    english = i18n.catalog("en")
    for key in english:
        if key.startswith("explainer.") and not i18n.placeholders(english[key]):
            text = i18n.t(key, lang)
            assert text and dev_hits(visible_text(text)) == [], key
    session = _session(next(iter(TRACES)))
    with i18n.using(lang):  # what the handlers say, in the event's language (i18n.ui runs them so)
        assert handlers._finished_status(session, False)
        assert playback_data(session)
        assert idle_playback(session)
        out = handlers.reset(session, 0)
        assert i18n.t("explainer.status.cleared", lang) in out[-1]


def test_the_tabs_labels_and_texts_follow_the_language_menu(strict):
    """The tab's components are built in English and registered with the page's Language
    (`i18n.ui.chrome`), whose load and menu set them in the session's language."""
    import gradio as gr

    from app import explainer
    from app.errors import on
    from app.i18n import ui

    with gr.Blocks() as demo:
        language = ui.begin()
        ui.menu()
        explainer.build(demo, gr.State(None), gr.State(False))
        updates = {lang: language.chrome_updates(lang) for lang in LANGS}
        ui.finish(demo, on)
    for lang, shown in updates.items():
        values = [str(v) for update in shown for v in update.values() if isinstance(v, str)]
        assert i18n.t("explainer.label.prompt", lang) in values
        assert i18n.t("explainer.button.run", lang) in values
        assert i18n.t("explainer.text.intro", lang) in values
        assert any(i18n.t("explainer.chip.accepted.label", lang) in v for v in values)  # the legend


def _tree_records():
    """The hand-built verified trees (tests/_trees.py): sampled, as the engine writes its draft rows, one
    copied chain, and greedy; each as an iteration of a run."""
    from _trees import greedy_tree, node, record, sampled_tree, with_chain
    from decoding.trace.record import BONUS, EmittedToken

    copied = record([node(0, -1, "a", 0, "root"), node(1, 0, " b", 1, "lookup", q=1.0, p=0.9, coin=0.4,
                                                       threshold=0.9, verdict="accepted", sibling_rank=0)],
                    [EmittedToken(101, " b", "accepted"), EmittedToken(9, " c", BONUS)],
                    extra={"tree_draft": {"nodes": 16, "depth": 6, "chosen": "set", "source": "lookup",
                                          "shape": "chain", "drafted": 1}})
    return [with_chain(sampled_tree(), 0), with_chain(copied, 1), with_chain(greedy_tree(), 2)]


@pytest.mark.parametrize("lang", LANGS)
def test_a_verified_tree_renders_in_every_language(strict, lang):
    """Every panel of the tree iterations (caption, draft row, the verified tree with its legend, residuals
    and the token at the end, the chips) in `lang` with no English fallback and no developer text; in
    a language other than English, the tree's own words are that language's."""
    from app import render_tree

    records = _tree_records()
    session = Session(records=records, summary=None, source="example", title="tree")
    with i18n.using(lang):
        for i in range(len(records)):
            shown = _shown(view(session, i, 0, final=True, lang=lang))
            assert dev_hits(shown) == [], (lang, i)
        tree = render_tree.tree_panel_html(records[0], lang)
    for key in ("vtree.mark_kept", "vtree.mark_rejected", "vtree.rej.label", "vtree.chosen.tuned"):
        assert i18n.t("explainer." + key, lang) in tree, key
    assert i18n.t("explainer.caption.head_tree", lang, i=1, n=6, accepted=2) in render.caption(records[0], lang)
    if lang != "en":
        for english in ("kept", "rejected", "not tried", "residual", "Iteration"):
            assert english not in visible_text(tree), english
