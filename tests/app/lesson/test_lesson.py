"""The guided lesson without a browser: the shipped lesson file is valid (every chapter complete,
every placeholder resolves, every answer computed by the engine and exactly one of its choices);
the validator rejects a bad copy (a literal number in an answer or its feedback, a missing part,
a wrong answer); the widgets and their try-this render and differ; the handlers give "Correct" /
"Not quite" feedback and move a chapter's settings to the Explainer."""

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from decoding.rules import theory
from decoding.rules.acceptance import acceptance_threshold
from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q

from app.lesson import content as lesson, values as lesson_values
from app.controls import control_order
from app.lesson.content import LESSON_FILE, MAX_WORDS, PLACEHOLDER, literal_numbers, resolve, validate
from app.lesson.widgets import render_widget

ROOT = Path(__file__).resolve().parents[3]
RAW = yaml.safe_load(LESSON_FILE.read_text(encoding="utf-8"))
CHAPTERS = lesson.load(live_keys=control_order())


def _errors(data) -> list[str]:
    return validate(data, control_order())[1]


def test_the_shipped_lesson_has_thirteen_complete_chapters():
    assert _errors(RAW) == []
    assert len(CHAPTERS) == 13
    for ch in CHAPTERS:
        assert ch.title and ch.text and ch.widget["kind"] in lesson.WIDGETS and ch.try_label and ch.try_set
        assert len(ch.text.split()) <= MAX_WORDS
        q = ch.question
        assert q.ask and q.why and len(q.choices) >= 2 and len(set(q.choices)) == len(q.choices)
        assert 0 <= q.answer < len(q.choices)
    kinds = [ch.widget.get("name", ch.widget["kind"]) for ch in CHAPTERS]
    assert kinds[0] == "04_list_copy_autoregressive" and kinds[1] == "coin" and kinds[4] == "theory"
    assert kinds[7:] == ["lab", "06_code_mjsd_beams4_tau0.1", "07_list_ppd_tree16", "lab", "01_list_copy_speculative",
                         "tree"]


def test_every_placeholder_in_the_file_resolves():
    found = PLACEHOLDER.findall(LESSON_FILE.read_text(encoding="utf-8"))
    assert len(found) > 30
    for ch in RAW["chapters"]:
        q = ch["question"]
        for text in (ch["title"], ch["text"], ch["try"]["label"], q["ask"], q["why"], q["answer"], *q["choices"]):
            assert "{" not in resolve(text), text


def test_answers_come_from_the_engine():
    by_title = {ch.title: ch for ch in CHAPTERS}

    def right(title):
        q = by_title[title].question
        return q.choices[q.answer]

    p, q = EXAMPLE_P[0], EXAMPLE_Q[0]  # "is"
    import torch
    assert float(right("Guess and verify")) == pytest.approx(
        1 - float(acceptance_threshold(torch.tensor(p), torch.tensor(q))), abs=1e-3)
    assert right("Tokens per target call") == f"{theory.expected_tokens_per_call(0.8, 4):.3g}"
    assert right("Where a rejection goes: the residual") == "stock, girl"
    races = ("gallery-summarize-1", "gallery-writing-1")
    faster = max(races, key=lesson_values.race_speedup)
    assert right("Does it pay here?") == lesson_values.race_title(faster)
    # the question compares prompts: the two races draft alike, so the prompt is all that differs
    assert len({(lesson_values.race_drafter(r), lesson_values.race_gamma(r)) for r in races}) == 1
    lanes = [lesson_values.race(r)[1].lanes for r in races]
    assert len({(a.summary.settings["sampling"]["temperature"], a.summary.models["dtype"]) for a, _ in lanes}) == 1
    records, summary = lesson_values.trace("04_list_copy_autoregressive")
    assert right("One token per pass") == str(summary.target_calls) == str(len(summary.token_ids))


def test_mjsd_kept_at_the_runs_own_tau_is_what_the_run_kept():
    name = "06_code_mjsd_beams4_tau0.1"
    checked = 0
    for i in range(lesson_values.trace_iterations(name)):
        if lesson_values.trace_drafted(name, i):  # an iteration with drafts (the last one has none)
            assert lesson_values.mjsd_kept(name, i, 0.1) == lesson_values.trace_accepted_length(name, i)
            checked += 1
    assert checked >= 10
    assert lesson_values.mjsd_kept(name, 2, 1.0) == 0


@pytest.mark.parametrize("where, bad", [
    ("answer", "0.2"),
    ("why", "It is rejected with chance 0.2."),
    ("choice", "0.2"),
])
def test_a_literal_number_in_an_answer_or_its_feedback_fails(where, bad):
    data = copy.deepcopy(RAW)
    q = data["chapters"][1]["question"]
    if where == "answer":
        q["answer"] = bad
    elif where == "why":
        q["why"] = bad
    else:
        q["choices"][0] = bad
    errors = _errors(data)
    assert any("chapter 2" in e and "literal number" in e for e in errors), errors
    assert literal_numbers("{lab.reject_chance(token=is)} and 0.2") == ["0", "2"]


def test_the_validator_names_each_problem():
    data = copy.deepcopy(RAW)
    chs = data["chapters"]
    del chs[0]["title"]
    chs[1]["text"] = "word " * (MAX_WORDS + 1)
    chs[2]["question"]["answer"] = "{lab.alpha}"  # 0.9: not one of the choices
    chs[3]["question"]["choices"].append("{nothing.here}")
    del chs[4]["try"]
    chs[5]["widget"] = {"kind": "video"}
    chs[6]["try"]["set"] = {"lenience": 1.0}  # the widget's own setting: changes nothing
    chs[7]["live"] = {"rocket": 1}
    chs[8]["question"]["choices"] = [chs[8]["question"]["answer"]] * 2
    del chs[9]["question"]
    errors = "\n".join(_errors(data))
    for needle in ("chapter 1 has no title", "chapter 2 (Guess and verify): the text has",
                   "must be exactly one of the choices", "unknown value {nothing.here}",
                   "chapter 5 (Tokens per target call) has no try-this", "widget needs a kind",
                   "try-this changes nothing", "live sets rocket", "two choices read the same",
                   "chapter 10 (PPD, the target guesses ahead) has no question"):
        assert needle in errors, (needle, errors)
    with pytest.raises(lesson.LessonError, match="not valid YAML"):
        lesson.parse("chapters: [")
    assert validate({"chapters": []})[1] == ["the lesson file needs a list of chapters (chapters: - title: ...)"]


def test_a_try_this_that_the_reveal_would_undo_and_bad_new_settings_are_named():
    data = copy.deepcopy(RAW)
    chs = data["chapters"]
    chs[10]["reveal"] = {"implementation": "exact-match"}  # the try-this sets the implementation too
    chs[11]["widget"]["show"] = "everything"
    chs[2]["widget"]["implementation"] = "no-such-rule"
    errors = "\n".join(_errors(data))
    for needle in ("try-this and reveal both set implementation", "show is all", "implementation is one of correct"):
        assert needle in errors, (needle, errors)


def test_a_placeholder_with_bad_arguments_says_why():
    with pytest.raises(ValueError, match="no shipped trace called 'nope'"):
        resolve("{trace.tokens(name=nope)}")
    with pytest.raises(ValueError, match="not in the worked example"):
        resolve("{lab.p(token=dog)}")
    assert resolve("{theory.tokens_per_call(alpha=0.8, gamma=4):.4f}") == "3.3616"


def test_shipped_traces_are_found_by_a_forgiving_name():
    for name in ("list copy speculative", "01_list_copy_speculative", "01_list_copy_speculative.jsonl",
                 "List-Copy-Speculative", "list_copy_speculative"):
        assert lesson_values.find_trace(name)[1].name == "01_list_copy_speculative.jsonl", name
    assert lesson_values.find_trace("no such trace") is None
    assert lesson_values.find_trace("") is None


def test_every_widget_and_its_try_this_render_and_differ():
    for ch in CHAPTERS:
        before = render_widget(ch.widget)
        after = render_widget({**ch.widget, **ch.try_set})
        assert before.html or before.plot is not None or before.player is not None
        shown = (before.html, str(before.plot), str(before.plot2), str((before.player or {}).get("title")))
        tried = (after.html, str(after.plot), str(after.plot2), str((after.player or {}).get("title")))
        assert shown != tried, ch.title
        if ch.reveal:  # Check shows what was held back (a chart, or the figures of a sentence)
            revealed = render_widget({**ch.widget, **ch.reveal})
            assert (revealed.plot2 is not None and before.plot2 is None) or revealed.html != before.html, ch.title


def test_feedback_try_this_and_run_it_live():
    from app.lesson import tab as lesson_tab

    chapters = CHAPTERS
    q = chapters[1].question
    wrong = next(c for i, c in enumerate(q.choices) if i != q.answer)
    assert lesson_tab.feedback_text(chapters, 1, q.choices[q.answer]).startswith("**Correct.**")
    assert lesson_tab.feedback_text(chapters, 1, wrong).startswith("**Not quite.**")
    assert lesson_tab.feedback_text(chapters, 1, None).startswith("Pick an answer")
    view = lesson_tab.chapter_view(chapters, 99)  # clamped to the last chapter
    assert view[0] == 12 and "Chapter 13 of 13" in view[3] and view[5].startswith("## 13.")
    tried, label, *_ = lesson_tab.try_this(chapters, 0, False)
    assert tried is True and "Undo" in label["value"]  # it undoes the panel's change only

    from app.lesson.values import race
    from app.presets import pair_problem, preset_by_label, presets
    from app.session import Session
    from app.explainer.view import view as explainer_view

    names = control_order()
    n = len(explainer_view(Session()))  # the Explainer's view outputs
    k = len(names)
    hybrid = presets()[0].label  # the default pair: the hybrid, which cannot beam-search for MJSD
    shown = Session(records=["an older run"])
    out = lesson_tab.to_explainer(chapters, 8, shown, n, False, hybrid, "")  # MJSD: its trace's settings, live
    session, controls, (preset, note, autorun), tabs, status = (out[0], out[n + 1:n + 1 + k], out[n + 1 + k:n + 4 + k],
                                                                out[-2], out[-1])
    assert session.records == [] and session.settings is None  # the stale run is cleared at once
    assert controls[names.index("method")] == "mjsd" and autorun is True and tabs.selected == "explainer"
    assert pair_problem("mjsd", preset_by_label(preset["value"]).draft) == ""  # a pair that can run MJSD
    assert "draft" in note and "Running chapter 9" in status
    out = lesson_tab.to_explainer(chapters, 4, None, n, False, hybrid, "")  # theory: defaults and its live: ones
    controls = out[n + 1:n + 1 + k]
    assert controls[names.index("method")] == "speculative" and controls[names.index("gamma")] == 4
    assert controls[names.index("lenience")] == 1.0 and out[n + 3 + k] is True
    out = lesson_tab.to_explainer(chapters, 5, None, n, False, hybrid, "")  # a race: the Race tab plays it
    assert out[-2].selected == "race" and out[n + 3 + k] is False
    assert out[n + 4 + k] == race("gallery-summarize-1")[0] and out[n + 5 + k]["lanes"]
    assert lesson_tab.live_label(chapters[5]).startswith("Open this race")


def test_the_lesson_text_modules_do_not_import_gradio():
    code = "import sys, app.lesson.content, app.lesson.values; print('gradio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_method_panels_and_a_bad_widget():
    from app.lesson import tab as lesson_tab

    mentored = render_widget({"kind": "trace", "name": "05_question_mentored_kl0.3", "upto": 1, "panel": "mentored"})
    assert mentored.plot is not None and mentored.html
    ppd = render_widget({"kind": "trace", "name": "07_list_ppd_tree16", "upto": 2, "panel": "ppd"})
    assert 'class="tree ppdtree"' in ppd.html
    drafts = render_widget({"kind": "trace", "name": "03_story_sampled_speculative", "upto": 0, "show": "drafts"})
    assert "not checked yet" in drafts.html and "reject" not in drafts.html
    shown = lesson_tab.widget_updates({"kind": "trace", "name": "nope"})
    assert shown[0].startswith('<div class="lesson-error">This widget cannot be shown: no shipped trace called')


def test_no_lesson_event_loads_a_model(monkeypatch):
    import decoding.lm.models as models
    from app.lesson import tab as lesson_tab

    def refuse(*args, **kwargs):
        raise AssertionError("the lesson loaded a model")

    for name in ("load_model", "load_model_cached", "load_draft"):
        monkeypatch.setattr(models, name, refuse)
    for i, ch in enumerate(CHAPTERS):
        lesson_tab.chapter_view(CHAPTERS, i)
        lesson_tab.try_this(CHAPTERS, i, False, True)
        lesson_tab.check_answer(CHAPTERS, i, ch.question.choices[0], False)
        lesson_tab.to_explainer(CHAPTERS, i, None, 20)


def test_a_broken_lesson_file_still_builds_the_app_and_says_why(monkeypatch, tmp_path):
    from app.lesson import tab as lesson_tab
    from app.layout import build_demo

    bad = tmp_path / "lesson.yaml"
    bad.write_text("chapters:\n  - title: Only a title\n", encoding="utf-8")
    chapters, problem = [], ""
    try:
        lesson.load(bad)
    except lesson.LessonError as exc:
        problem = str(exc)
    assert "chapter 1 (Only a title) has no text" in problem
    monkeypatch.setattr(lesson_tab, "load_chapters", lambda lang=None: (chapters, f"The lesson could not be loaded: {problem}"))
    build_demo()  # no exception: the other tabs work, the Lesson tab shows the reason
    view = lesson_tab.chapter_view([], 0, "why")
    assert len(view) == 21 and view[4] == "why"
    assert lesson_tab.feedback_text([], 0, "x") == ""


def test_try_this_opens_once_an_answer_is_checked():
    """Predict, then play: the Try this button is closed on a new chapter and opens with Check."""
    from app.lesson import tab as lesson_tab

    for i, ch in enumerate(CHAPTERS):
        view = lesson_tab.chapter_view(CHAPTERS, i)
        assert view[10]["interactive"] is False and view[10]["value"].startswith("Try this")
        assert "interactive" not in lesson_tab.check_answer(CHAPTERS, i, None, False)[1]  # no answer: stays closed
        feedback, button, *_ = lesson_tab.check_answer(CHAPTERS, i, ch.question.choices[0], False)
        assert button["interactive"] is True and feedback.startswith(("**Correct", "**Not quite"))


def test_the_colours_a_chapter_names_are_on_screen():
    """Chapter 10 names the tree's colours: each one is drawn in its panel, as opened and as tried; the
    lab's caps (chapter 7) are drawn black, as the chapter and the lab say."""
    import re

    from app.lesson.widgets import render_widget

    ch = next(c for c in CHAPTERS if c.widget.get("panel") == "ppd")
    drawn = {"black": r'class="node [a-z ]*kind-root', "green": r'class="node acc kind-candidate',
             "orange": r'class="node rej kind-candidate', "purple": r'kind-prompt',
             "blue": r'class="node skip kind-candidate'}
    named = [colour for colour in drawn if re.search(rf"\b{colour}\b", ch.text)]
    assert named
    for settings in (ch.widget, {**ch.widget, **ch.try_set}):
        html = render_widget(settings).html
        assert all(re.search(drawn[colour], html) for colour in named), (settings, named)
    real = next(c for c in CHAPTERS if c.title == "A real iteration")  # names the chip colours: the legend shows all
    shown = render_widget({**real.widget, **real.try_set}).html
    assert all(f"chip-{kind}" in shown for kind in ("accepted", "rejected", "correction", "bonus"))
    lenient = next(c for c in CHAPTERS if c.title == "Lenience")
    assert "black caps" in lenient.text
    lab = render_widget({**lenient.widget, **lenient.try_set}).plot
    caps = next(t for t in lab.data if t["name"].startswith("cap"))
    assert caps["marker"]["color"] == "#000000" and caps["marker"]["line"]["color"] == "#000000"
