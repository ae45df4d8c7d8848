"""Students read every word: no developer text (tests/_student_text.py lists the patterns) in the
panels rendered from the shipped example traces at every iteration, in every lesson chapter (its
widget as opened, tried and revealed), in the texts, preset notes, control help, race notes and the
gallery's tags; special tokens show as labelled markers."""

import pytest

from _student_text import dev_hits, figure_text, visible_text
from app import charts, charts_running, render, render_methods, texts
from app.lesson import tab as lesson_tab
from app.controls import method_controls
from app.gallery import gallery_tags, tag_text
from app.html_text import special_name, token_html, visible
from app.lesson.values import trace
from app.lesson.widgets import render_widget
from app.explainer.panels import method_panel
from app.race.handlers import race_settings_note, race_view
from app.race_file import read_race, shipped_races
from app.session import Session, example_traces
from decoding.trace.record import ACCEPTED, BONUS, CORRECTION, DraftToken, EmittedToken, IterationRecord, Timings


def _texts_of(out) -> str:
    """Every string and figure among a panel's outputs (gr.update dicts included)."""
    parts = []
    for value in out:
        if isinstance(value, str):
            parts.append(visible_text(value))
        elif isinstance(value, dict):
            parts.append(figure_text(value))
    return " ".join(parts)


TRACES = {path.stem: path for path in example_traces().values()}


@pytest.mark.parametrize("name", sorted(TRACES))
def test_every_panel_of_every_iteration_of_the_shipped_traces_reads_as_plain_words(name):
    records, summary = trace(name)
    session = Session(records=records, summary=summary)
    for i, record in enumerate(records):
        shown = [render.stats_html(records, i, summary if i == len(records) - 1 else None), render.caption(record),
                 render.chips_html(records, i), render.draft_row_html(record), render.tree_html(record)]
        text = " ".join(visible_text(h) for h in shown)
        text += " " + " ".join(figure_text(f) for f in (charts.pq_figure(record), charts.residual_figure(record),
                                                        charts_running.running_figure(records, i)))
        text += " " + _texts_of(method_panel(record, None, records))
        from app.explainer.view import theory_panel

        fig, words = theory_panel(session, i)
        text += " " + figure_text(fig) + " " + words
        assert dev_hits(text) == [], (name, i)


def test_special_tokens_show_as_labelled_markers():
    draft = [DraftToken(0, 1, "<|im_start|>", q=0.5, p=0.01, coin=0.9, threshold=0.02, accepted=False, overlap=0.1,
                        top=[])]
    emitted = [EmittedToken(2, "Hi", CORRECTION), EmittedToken(3, "<|im_end|>", BONUS)]
    record = IterationRecord(method="speculative", iteration=0, context_length=5, gamma=1, draft=draft,
                             accepted_length=0, emitted=emitted, residual=None, next_top=[], tree=[],
                             timings=Timings(0.001, 0.01, 0.0), target_calls=1, draft_calls=1, generated=2,
                             elapsed=0.01, energy_joules=None, energy_note="", finished=False)
    chips = render.chips_html([record])
    shown = visible_text(chips)
    assert "⟨start of a chat turn⟩" in shown and "⟨end of turn⟩" in shown
    assert "<|" not in shown and dev_hits(shown) == []
    assert "special token of the chat template" in shown  # the tooltip says what the marker is
    assert visible("<|endoftext|>") == "⟨end of text⟩" and special_name("<file_sep>") == "special: file sep"
    assert special_name("<div>") is None and special_name("a<|b") is None and visible(" x") == "·x"
    assert 'class="special"' in token_html("<|im_end|>") and "&lt;div&gt;" in token_html("<div>")


def _drafted(n: int, gamma: int, chain: dict) -> IterationRecord:
    draft = [DraftToken(i, 100 + i, f" t{i}", q=1.0, p=0.9, coin=0.5, threshold=0.9, accepted=True, overlap=0.9,
                        top=[], source="model" if i < n - (chain.get("copied") or 0) else "lookup") for i in range(n)]
    return IterationRecord(method="speculative", iteration=3, context_length=40, gamma=gamma, draft=draft,
                           accepted_length=n, emitted=[EmittedToken(100 + i, f" t{i}", ACCEPTED) for i in range(n)]
                           + [EmittedToken(7, " b", BONUS)], residual=None, next_top=[], tree=[],
                           timings=Timings(0.001, 0.01, 0.0), target_calls=4, draft_calls=4, generated=n + 1,
                           elapsed=0.1, energy_joules=None, energy_note="", finished=False, extra={"chain": chain})


def test_an_iteration_that_drafted_more_than_gamma_says_why():
    """The hybrid continues a model draft by a copy, and copies up to 8 tokens whatever γ is: "drafted
    10" next to "γ = 4" is explained where it shows (the caption and the draft row)."""
    continued = _drafted(10, 4, {"source": "model", "match_length": 3, "copied": 6})
    for shown in (render.caption(continued), visible_text(render.draft_row_html(continued))):
        assert "Drafted 10 with γ = 4: the draft model's 4 tokens, then 6 copied from an earlier span" in shown
    copied = _drafted(8, 4, {"source": "lookup", "match_length": 5})
    assert all("a copy may run past γ" in shown for shown in (render.caption(copied), render.draft_row_html(copied)))
    within = _drafted(4, 4, {"source": "model"})
    assert "with γ =" not in render.caption(within) and "with γ =" not in render.draft_row_html(within)
    records, _ = trace("01_list_copy_speculative")
    assert all("with γ =" not in render.caption(r) for r in records if len(r.draft) <= r.gamma)


def test_a_draft_row_without_a_recorded_match_length_names_no_number():
    records, _ = trace("03_story_sampled_speculative")  # an older trace: its lookups carry no match length
    row = render.draft_row_html(records[0])
    assert "the last tokens repeat an earlier span" in row and dev_hits(visible_text(row)) == []


def _widget_settings(ch):
    yield dict(ch.widget)
    yield {**ch.widget, **ch.try_set}
    yield {**ch.widget, **ch.try_set, **ch.reveal}
    yield {**ch.widget, **ch.reveal}


@pytest.mark.parametrize("n", range(len(lesson_tab.load_chapters()[0])))
def test_every_lesson_chapter_reads_as_plain_words(n):
    ch = lesson_tab.load_chapters()[0][n]
    q = ch.question
    text = " ".join([ch.title, ch.text, q.ask, *q.choices, q.why, ch.try_label])
    for settings in _widget_settings(ch):
        view = render_widget(settings)
        text += " " + visible_text(view.html) + " " + figure_text(view.plot) + " " + figure_text(view.plot2)
        if view.player is not None:
            text += " " + " ".join(str(view.player.get(k, "")) for k in ("title", "result"))
            text += " " + " ".join(str(lane.get("name", "")) for lane in view.player["lanes"])
    assert dev_hits(text) == [], ch.title


def test_texts_notes_help_and_tags_read_as_plain_words(monkeypatch):
    from app import presets

    for var in ("SPECDEC_APP_TARGET", "SPECDEC_APP_DRAFT"):
        monkeypatch.delenv(var, raising=False)
    words = [getattr(texts, name) for name in dir(texts) if name.isupper() and isinstance(getattr(texts, name), str)]
    words += [p.note for p in presets.presets()]
    words += [c.knob.label for c in method_controls()] + [c.knob.info for c in method_controls()]
    words += [tag_text(tag) for tag in gallery_tags().values()] + [tag_text(None)]
    for path in shipped_races().values():
        race = read_race(path)
        value, figures = race_view(race)
        words += [race_settings_note(race), figures["result"], value["title"]]
        words += [lane["name"] for lane in value["lanes"]]
    for text in words:
        assert dev_hits(visible_text(text)) == [], text
    assert all(p.note.endswith(".") and p.note[0].isupper() for p in presets.presets())  # whole sentences


@pytest.mark.parametrize("note", [
    "no NVIDIA GPU in use and RAPL not readable (/sys/class/powercap absent): energy not measured",
    "pynvml (nvidia-ml-py) not installed: GPU energy not measured",
    "RAPL not readable under /sys/class/powercap (Permission denied): energy not measured",
    "energy metering turned off: energy not measured",
    "no energy meter for device type 'mps': energy not measured",
    None,
])
def test_energy_reasons_are_plain_sentences(note):
    reason = charts.energy_reason(note)
    assert reason.endswith(".") and dev_hits(reason) == [] and "RAPL" not in reason


def test_ppd_status_without_tuning_or_trained_embeddings_names_no_command_or_path():
    records, _ = trace("07_list_ppd_tree16")
    status = render_methods.ppd_status_html(records[0], False, None)
    assert "does not include the tuning measurements" in status and dev_hits(visible_text(status)) == []
    status = render_methods.ppd_status_html(records[0], True, None)
    assert "not measured on this computer yet" in status and dev_hits(visible_text(status)) == []
    assert render_methods.device_words("cpu:x86_64:x86_64:2threads:bfloat16") == "a CPU, 2 threads"
    assert render_methods.device_words("cuda:NVIDIA L4:float16") == "the GPU NVIDIA L4"
