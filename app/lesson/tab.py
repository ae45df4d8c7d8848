"""The Lesson tab: short chapters from assets/lesson.yaml, each with one idea, one live widget,
a question checked before its answer is shown, a "Try this" that changes one setting, and a
"Run it live" that moves the same settings to the Explainer.

Everything here is cheap (shipped traces and races, the lab, the closed forms): every event runs
outside the queue and nothing loads a model. `build` lays the tab out (call it inside the Tabs);
`wire` connects it once the Explainer's components exist. Teacher links: `/?lesson=N` opens
chapter N, `/?trace=NAME` opens a shipped trace in the Explainer.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import gradio as gr

from decoding.paths import ASSETS

from decoding.methods.registry import METHODS

from ..controls import control_order, controls_from_settings, default_values
from ..errors import status_html
from ..i18n import DEFAULT, current, t
from ..i18n.ui import chrome, listen, on_change
from ..explainer.handlers import run_if_asked, trace_controls
from ..explainer.playback import idle_playback
from ..presets import fitting_preset, preset_for_models
from ..race.handlers import SHIPPED_RACE_OUTPUTS, open_shipped_race
from .content import Chapter, LessonError
from .languages import load_lesson
from .values import find_trace, race, trace
from .widgets import WidgetView, render_widget
from ..player import empty_data, player
from ..session import Session, example_traces
from ..settings import settings_from_summary
from ..explainer.view import view

LESSON_CSS = ASSETS / "lesson.css"
CHEAP = dict(queue=False, api_name=False, show_progress="hidden")

# Left and right arrows turn the page while the lesson is shown and focus is not in a field.
KEYS_JS = """() => {
  if (window.__lessonKeys) return;
  window.__lessonKeys = true;
  const fields = 'input, textarea, select, [contenteditable=""], [contenteditable="true"], [role="slider"], '
    + '[role="listbox"], [role="combobox"], [role="radiogroup"], [role="tab"], [role="textbox"]';
  document.addEventListener('keydown', (e) => {
    if ((e.key !== 'ArrowLeft' && e.key !== 'ArrowRight') || e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
    if (e.target && e.target.closest && e.target.closest(fields)) return;
    const root = document.getElementById('lesson-root');
    if (!root || root.offsetParent === null) return;
    const button = document.getElementById(e.key === 'ArrowLeft' ? 'lesson-prev' : 'lesson-next');
    if (button && !button.disabled) { e.preventDefault(); button.click(); }
  });
}"""
# after "Run it live" switched tabs: the player and the panels in view, below the sticky run bar (app.css);
# on a phone they sit below the controls
SHOW_RUN_BAR_JS = ("() => { const to = document.getElementById('explainer-player'); "
                   "if (to && to.offsetParent !== null) to.scrollIntoView({block: 'start'}); }")


def lesson_css() -> str:
    return LESSON_CSS.read_text(encoding="utf-8") if LESSON_CSS.exists() else ""


def load_chapters(lang: str | None = None) -> tuple[list[Chapter], str]:
    """The chapters in `lang` (None: the current language) and, when the lesson file cannot be shown, the
    reason (the app still starts). `languages.load_lesson` reads each language once; a field the language
    lacks shows in English and is recorded in `app.i18n.missing` on every call, so a test that renders
    a language sees its fallbacks. `chapter_view(load_chapters(lang)[0], i)` is everything the tab shows
    for chapter i in that language."""
    lang = lang or current()
    try:
        return load_lesson(lang, live_keys=control_order()), ""
    except (OSError, LessonError) as exc:
        return [], t("lesson.ui.load_failed", lang, reason=exc)


def chapters_now() -> list[Chapter]:
    """The chapters in the current language (`i18n.current`: the session's, inside an event)."""
    return load_chapters()[0]


def menu_choices(lang: str | None = None) -> list[tuple[str, int]]:
    return [(f"{n}. {c.title}", n - 1) for n, c in enumerate(load_chapters(lang)[0], 1)]


@dataclass
class LessonTab:
    chapters: list[Chapter]
    index: gr.State
    tried: gr.State
    menu: gr.Dropdown
    progress: gr.HTML
    notice: gr.Markdown
    title: gr.Markdown
    text: gr.Markdown
    ask: gr.Markdown
    quiz: gr.Radio
    check: gr.Button
    feedback: gr.Markdown
    try_btn: gr.Button
    live_btn: gr.Button
    widget: list  # html, plot column, plot, plot2 column, plot2, player column, player
    prev: gr.Button
    next: gr.Button

    def chapter_outputs(self) -> list:
        return [self.index, self.tried, self.menu, self.progress, self.notice, self.title, self.text, self.ask,
                self.quiz, self.feedback, self.try_btn, self.prev, self.next, *self.widget, self.live_btn]


# --------------------------------------------------------------------------- rendering a chapter
def progress_html(i: int, n: int) -> str:
    pct = 100 * (i + 1) / max(n, 1)
    label = html.escape(t("lesson.ui.progress", i=i + 1, n=n))
    return (f'<div class="lesson-progress" role="progressbar" aria-valuemin="1" aria-valuemax="{n}" '
            f'aria-valuenow="{i + 1}" aria-label="{label}"><span class="lesson-progress-label">{label}</span>'
            f'<span class="lesson-progress-track"><span class="lesson-progress-fill" style="width:{pct:.0f}%">'
            "</span></span></div>")


def widget_updates(widget: dict) -> tuple:
    """The widget components' updates for a widget's settings (an error shows in place of it)."""
    try:
        view = render_widget(widget)
    except (KeyError, ValueError, OSError) as exc:
        view = WidgetView(f'<div class="lesson-error">{html.escape(t("lesson.ui.widget_failed", reason=exc))}</div>')
    return (view.html,
            gr.update(visible=view.plot is not None), view.plot,
            gr.update(visible=view.plot2 is not None), view.plot2,
            gr.update(visible=view.player is not None), view.player if view.player is not None else gr.skip())


def _clamp(chapters, i) -> int:
    try:
        i = int(i)
    except (TypeError, ValueError):
        i = 0
    return max(0, min(i, len(chapters) - 1))


def chapter_view(chapters: list[Chapter], i, notice: str = "") -> tuple:
    """Every output of `LessonTab.chapter_outputs` for chapter i (0-based)."""
    if not chapters:
        return (0, False, gr.skip(), "", notice, f"## {t('lesson.ui.heading')}", "", "", gr.update(choices=[], value=None), "",
                gr.update(interactive=False), gr.update(interactive=False), gr.update(interactive=False),
                "", gr.update(visible=False), None, gr.update(visible=False), None, gr.update(visible=False), gr.skip(),
                gr.update(interactive=False))
    i = _clamp(chapters, i)
    ch = chapters[i]
    return (i, False, gr.update(value=i), progress_html(i, len(chapters)), notice, f"## {i + 1}. {ch.title}", ch.text,
            t("lesson.ui.question", ask=ch.question.ask), gr.update(choices=ch.question.choices, value=None), "",
            gr.update(value=t("lesson.ui.try", label=ch.try_label), interactive=False),  # after an answer
            gr.update(interactive=i > 0), gr.update(interactive=i < len(chapters) - 1),
            *widget_updates(ch.widget), gr.update(value=live_label(ch), interactive=True))


def feedback_text(chapters: list[Chapter], i, choice) -> str:
    """The feedback on an answer: "Correct." or "Not quite." and why."""
    if not chapters:
        return ""
    q = chapters[_clamp(chapters, i)].question
    if choice is None or choice not in q.choices:
        return t("lesson.ui.pick_first")
    right = q.choices[q.answer]
    if choice == right:
        return t("lesson.ui.correct", why=q.why)
    return t("lesson.ui.not_quite", choice=choice, right=right, why=q.why)


def check_answer(chapters: list[Chapter], i, choice, tried) -> tuple:
    """(the feedback, the Try this button, the widget with the chapter's reveal: settings applied).
    Try this opens once an answer is checked: predict first, then play with the widget."""
    text = feedback_text(chapters, i, choice)
    ch = chapters[_clamp(chapters, i)] if chapters else None
    if ch is None or text == t("lesson.ui.pick_first"):
        return (text, gr.skip(), *(gr.skip(),) * 7)
    opened = gr.update(interactive=True)
    if not ch.reveal:
        return (text, opened, *(gr.skip(),) * 7)
    return (text, opened, *widget_updates({**ch.widget, **(ch.try_set if tried else {}), **ch.reveal}))


def try_this(chapters: list[Chapter], i, tried, revealed: bool = False) -> tuple:
    """Apply the chapter's try-this (or, pressed again, go back to the chapter's own settings)."""
    if not chapters:
        return (False, gr.skip(), *(gr.skip(),) * 7)
    ch = chapters[_clamp(chapters, i)]
    tried = not tried
    widget = {**ch.widget, **ch.try_set} if tried else dict(ch.widget)
    widget.update(ch.reveal if revealed else {})
    label = t("lesson.ui.undo") if tried else t("lesson.ui.try", label=ch.try_label)
    return (tried, gr.update(value=label), *widget_updates(widget))


# --------------------------------------------------------------------------- to the Explainer
def _run_of(ch: Chapter):
    """(title, path) of the shipped trace whose settings a chapter's "Run it live" runs, or None."""
    name = ch.live.get("trace") or (ch.widget.get("name") if ch.widget.get("kind") == "trace" else None)
    return find_trace(name) if name else None


def live_kind(ch: Chapter) -> str:
    """What a chapter's "Run it live" does: "race" (a race chapter opens its race in the Race tab)
    or "run" (the Explainer runs the chapter's settings live)."""
    return "race" if ch.widget.get("kind") == "race" and "trace" not in ch.live else "run"


def live_label(ch: Chapter | None) -> str:
    return t("lesson.ui.open_race") if ch is not None and live_kind(ch) == "race" else t("lesson.ui.run_live")


def live_settings(ch: Chapter):
    """The Settings of the run a chapter's "Run it live" repeats (its trace's), or None."""
    found = _run_of(ch)
    if found is not None:
        return settings_from_summary(trace(found[1].stem)[1])
    return None


def control_values(ch: Chapter) -> tuple:
    """The Explainer controls' values (in `control_order`): the settings of the chapter's trace, or
    the Explainer's defaults (the prompt kept), then the chapter's live: ones on top."""
    settings = live_settings(ch)
    values = list(controls_from_settings(settings) if settings is not None else default_values())
    for n, name in enumerate(control_order()):
        if name in ch.live:
            values[n] = ch.live[name]
    return tuple(values)


def _race_name(ch: Chapter, tried) -> str:
    return str((ch.try_set if tried else {}).get("name") or ch.widget.get("name"))


def to_explainer(chapters: list[Chapter], i, session, n_view: int, tried=False, preset_label: str = "",
                 custom_draft: str = "") -> tuple:
    """What a chapter's "Run it live" changes, as (session, *the Explainer's view, *its controls,
    preset, pair note, autorun, *the race's outputs (shipped pick, player, figures, download, controls),
    race status, the Tabs, the Explainer's status line).

    A race chapter opens its race (the one its panel shows) in the Race tab. Any other chapter
    selects the Explainer, moves the controls to the chapter's settings (its trace's, or the
    defaults with its live: ones) and the pair to one that can run them, clears the previous run
    (panels and player) and sets autorun, so that the run starts at once (`handlers.run_if_asked`,
    chained after this event). Nothing here loads a model."""
    ch = chapters[_clamp(chapters, i)] if chapters else None
    n_controls = len(control_order())
    skip = gr.skip()
    if ch is None:
        return (skip,) * (1 + n_view + n_controls + 3 + 1 + SHIPPED_RACE_OUTPUTS + 1 + 1 + 1)
    if live_kind(ch) == "race":
        title, _ = race(_race_name(ch, tried))
        race_out = open_shipped_race(title)
        note = status_html(t("lesson.ui.race_note", n=_clamp(chapters, i) + 1), "info")
        return ((skip,) * (1 + n_view + n_controls + 2) + (False, title, *race_out, note, gr.Tabs(selected="race"),
                                                            skip))
    session = session if isinstance(session, Session) else Session()
    controls = control_values(ch)
    method = controls[control_order().index("method")]
    method = method if isinstance(method, str) else "speculative"
    settings = live_settings(ch)
    label, pair_note = preset_label, ""
    if settings is not None and METHODS.get(method) is not None and METHODS[method].uses_drafter:
        models = trace(_run_of(ch)[1].stem)[1].models or {}
        used = preset_for_models(models.get("target"), models.get("draft"))
        if used is not None and used.label != preset_label:
            label, pair_note = used.label, t("lesson.ui.pair_switched", label=used.label)
    near, why = fitting_preset(method, label, custom_draft or "")
    if near is not None:
        label, pair_note = near.label, why
    session.reset_run()
    session.settings, session.source, session.title = None, "none", ""
    n = _clamp(chapters, i) + 1
    shown = list(view(session, None, None, note=t("lesson.ui.starting", n=n),
                      playback=idle_playback(session, t("lesson.ui.plays_here", n=n))))
    preset_out = gr.update(value=label) if label and label != preset_label else skip
    status = status_html(t("lesson.ui.running", n=n), "info")
    return (session, *shown, *controls, preset_out, pair_note or skip, True, *(skip,) * (1 + SHIPPED_RACE_OUTPUTS),
            skip,
            gr.Tabs(selected="explainer"), status)


# --------------------------------------------------------------------------- layout and wiring
def build() -> LessonTab:
    """The tab's components (call inside the Lesson's gr.Tab), built in English; the page's language
    re-renders them (`i18n.ui`: the chrome here, the chapter by `wire`)."""
    chapters, problem = load_chapters(DEFAULT)
    first = chapter_view(chapters, 0, problem)
    with gr.Column(elem_id="lesson-root"):
        # projector mode: one switch for the page, in its header (app/projector.py)
        menu = chrome(gr.Dropdown(menu_choices(DEFAULT), value=0 if chapters else None,
                                  label=t("lesson.ui.chapter"), elem_id="lesson-menu"),
                      label="lesson.ui.chapter", choices=menu_choices)
        progress = gr.HTML(first[3], elem_id="lesson-progress", padding=False)
        notice = gr.Markdown(first[4], elem_id="lesson-notice")
        title = gr.Markdown(first[5], elem_id="lesson-title")
        with gr.Row(equal_height=False, elem_classes="lesson-main"):
            with gr.Column(scale=2, min_width=300, elem_classes="lesson-words"):
                text = gr.Markdown(first[6], elem_id="lesson-text")
                ask = gr.Markdown(first[7], elem_id="lesson-ask")
                quiz = chrome(gr.Radio(first[8]["choices"], value=None, label=t("lesson.ui.answer"),
                                       elem_id="lesson-quiz"), label="lesson.ui.answer")
                check = chrome(gr.Button(t("lesson.ui.check"), variant="primary", elem_id="lesson-check"),
                               value="lesson.ui.check")
                feedback = gr.Markdown("", elem_id="lesson-feedback")
                try_btn = gr.Button(first[10].get("value", ""), elem_id="lesson-try")
                live_btn = gr.Button(first[20].get("value", t("lesson.ui.run_live")), elem_id="lesson-live",
                                     size="sm")
            with gr.Column(scale=3, min_width=320, elem_id="lesson-widget"):
                w = first[13:20]
                widget_html = gr.HTML(w[0], elem_id="lesson-widget-html", padding=False)
                with gr.Column(visible=w[1]["visible"], elem_id="lesson-plot-col") as plot_col:
                    plot = gr.Plot(w[2], label=t("lesson.ui.chart"), elem_id="lesson-plot", show_label=False)
                with gr.Column(visible=w[3]["visible"], elem_id="lesson-plot2-col") as plot2_col:
                    plot2 = gr.Plot(w[4], label=t("lesson.ui.chart2"), elem_id="lesson-plot2", show_label=False)
                with gr.Column(visible=w[5]["visible"], elem_id="lesson-player-col") as player_col:
                    value = w[6] if isinstance(w[6], dict) and "lanes" in w[6] else empty_data("")
                    lesson_player = player(value, elem_id="lesson-player", label=t("lesson.ui.race"))
        with gr.Row(elem_classes="lesson-nav"):
            prev = chrome(gr.Button(t("lesson.ui.prev"), elem_id="lesson-prev", interactive=False),
                          value="lesson.ui.prev")
            nxt = chrome(gr.Button(t("lesson.ui.next"), elem_id="lesson-next", variant="primary",
                                   interactive=len(chapters) > 1), value="lesson.ui.next")
        chrome(gr.Markdown(t("lesson.ui.keys"), elem_classes="note"), value="lesson.ui.keys")
    return LessonTab(chapters, gr.State(0), gr.State(False), menu, progress, notice, title, text, ask, quiz,
                     check, feedback, try_btn, live_btn,
                     [widget_html, plot_col, plot, plot2_col, plot2, player_col, lesson_player], prev, nxt)


@dataclass
class ExplainerLinks:
    """What "Run it live" and the teacher links reach outside the tab: the Explainer's pair controls,
    status line, autorun flag and run inputs (`handlers.run_if_asked`), and the Race tab's outputs."""

    preset: gr.Dropdown
    custom_draft: gr.Textbox
    pair_note: gr.Markdown
    status: gr.HTML
    autorun: gr.State
    run_inputs: list
    race_outputs: list  # the shipped race pick, then what open_shipped_race shows (the race and its controls)
    race_status: gr.HTML


def wire(demo: gr.Blocks, tab: LessonTab, tabs: gr.Tabs, state: gr.State, view_outputs: list, controls: list,
         links: ExplainerLinks, on, model_events: dict) -> None:
    """Connect the tab's events (all cheap, outside the queue, but the live run "Run it live"
    starts), the teacher links and the keys. `on` wires a handler through the app's error boundary
    (errors.guard) with a status line; `model_events` are the settings of a run event (its model slot,
    its progress in the status line)."""
    shown = tab.chapter_outputs()
    # every handler reads the chapters in the session's language (`listen` and `on` run it in that language)
    listen(tab.prev.click, lambda i: chapter_view(chapters_now(), _clamp(chapters_now(), i) - 1), tab.index, shown,
           **CHEAP)
    listen(tab.next.click, lambda i: chapter_view(chapters_now(), _clamp(chapters_now(), i) + 1), tab.index, shown,
           **CHEAP)
    listen(tab.menu.input, lambda i: chapter_view(chapters_now(), i), tab.menu, shown, **CHEAP)
    listen(tab.check.click, lambda i, c, tried: check_answer(chapters_now(), i, c, tried),
           [tab.index, tab.quiz, tab.tried], [tab.feedback, tab.try_btn, *tab.widget], **CHEAP)
    tab.quiz.input(lambda: "", None, tab.feedback, **CHEAP)

    def answered(feedback) -> bool:  # the feedback shown is a verdict, not the "pick an answer first" hint
        return bool(str(feedback or "").strip()) and feedback != t("lesson.ui.pick_first")

    listen(tab.try_btn.click, lambda i, tried, f: try_this(chapters_now(), i, tried, answered(f)),
           [tab.index, tab.tried, tab.feedback], [tab.tried, tab.try_btn, *tab.widget], **CHEAP)
    # a new language: the same chapter in its words (the quiz's answer is asked again)
    on_change(lambda i: chapter_view(chapters_now(), i), tab.index, shown)
    n_view = len(view_outputs)
    live_out = [state, *view_outputs, *controls, links.preset, links.pair_note, links.autorun, *links.race_outputs,
                links.race_status, tabs]
    opened = on(tab.live_btn.click, lambda i, tried, s, p, d: to_explainer(chapters_now(), i, s, n_view, tried, p, d),
                [tab.index, tab.tried, state, links.preset, links.custom_draft], live_out, links.status, **CHEAP)
    # the Explainer's run bar in view, then the chapter's run (when it asked for one), in the queue
    opened.then(None, None, None, js=SHOW_RUN_BAR_JS, **CHEAP)
    on(opened.then, run_if_asked, links.run_inputs, [state, *view_outputs, links.autorun], links.status,
       api_name=False, **model_events)

    def open_chapter(request: gr.Request):
        """/?lesson=N: chapter N (1-based); a bad N says so and shows chapter 1 (also `&lang=xx`)."""
        wanted = (dict(request.query_params) if request is not None else {}).get("lesson")
        chapters = chapters_now()
        if wanted is None:  # chapter 1, shown in English at build: in the page's language
            return tuple(gr.skip() for _ in shown) if current() == DEFAULT else chapter_view(chapters, 0)
        try:
            n = int(wanted)
            if not 1 <= n <= len(chapters):
                raise ValueError
        except ValueError:
            return chapter_view(chapters, 0, t("lesson.ui.no_chapter", wanted=html.escape(repr(str(wanted))),
                                               n=len(chapters)))
        return chapter_view(chapters, n - 1)

    def open_trace_link(preset_label, custom_draft, request: gr.Request):
        """/?trace=NAME: the Explainer (which opened that trace on load, `handlers.on_load`) with
        the trace's settings in the controls and a pair that can run it; an unknown name says
        which traces are shipped."""
        wanted = (dict(request.query_params) if request is not None else {}).get("trace")
        skip = tuple(gr.skip() for _ in range(len(controls) + 4))
        if not wanted:
            return skip
        found = find_trace(wanted)
        if found is None:
            names = ", ".join(p.stem for p in example_traces().values())
            return (*skip[:-1], t("lesson.ui.no_trace", wanted=html.escape(repr(wanted)), names=names))
        records, summary = trace(found[1].stem)
        opened = Session(records=list(records), summary=summary, settings=settings_from_summary(summary))
        return (*trace_controls(opened, preset_label, custom_draft), gr.Tabs(selected="explainer"), gr.skip())

    listen(demo.load, open_chapter, None, shown, **CHEAP)
    on(demo.load, open_trace_link, [links.preset, links.custom_draft],
       [*controls, links.preset, links.pair_note, tabs, tab.notice], links.status, clear=False, **CHEAP)
    demo.load(None, None, None, js=KEYS_JS, **CHEAP)
