"""The Gradio Blocks: the page's tabs, each built by its package, and what joins them.

Each tab's package (`lesson/`, `explainer/`, `lab/`, `race/`) lays the tab out and wires its own
events in its `build`. What crosses tabs is wired here: Stop cancels the model events of the
Explainer and the Race tab, and a lesson chapter's "Run it live" and the teacher links reach into the
Explainer and the Race tab (`lesson.wire`, after those exist). Events that touch models share one
concurrency group whose slots `capacity.py` sizes (on a CPU, eight runs sharing batched forward
passes); cheap events (page load, the lab, opening a trace, the timeline) skip the queue; the queue
is bounded. Per-user state is a `Session` in a gr.State with a time to live.
"""

from __future__ import annotations

import gradio as gr

from decoding.paths import APP_CSS, ASSETS

from . import explainer, lab, lesson, race
from .capacity import QUEUE_SIZE, SESSION_CAPACITY
from .errors import CHEAP, on
from .i18n import gradio_i18n, t
from .i18n import ui as language
from .explainer.handlers import run_if_asked
from .projector import LOAD_JS, TOGGLE_JS, projector_css
from .race.handlers import race_if_asked
from .share import open_race_link, open_run_link
from .session import SESSION_TTL_SECONDS, delete_session
from .theme import app_theme

APP_JS = ASSETS / "app.js"


TABS = {"lesson": "common.tab.lesson", "explainer": "common.tab.explainer", "lab": "common.tab.lab",
        "race": "common.tab.race"}


def build_demo() -> gr.Blocks:
    """The page. Its language (`i18n.ui`): a session state every handler reads, the header's menu, and
    the chrome the tabs register, all re-rendered in place when the language changes."""
    with gr.Blocks(title=t("app.title", "en")) as demo:
        language.begin()
        state = gr.State(None, time_to_live=SESSION_TTL_SECONDS, delete_callback=delete_session)
        autorun = gr.State(False)  # a lesson chapter's "Run it live" asked for a run (lesson/tab.py)
        with gr.Row(elem_id="app-header", equal_height=True):
            title = gr.Markdown(f"# {t('app.title', 'en')}", elem_id="app-title")  # the page's one h1
            language.chrome(title, value=lambda lang: f"# {t('app.title', lang)}")
            language.menu(scale=0, min_width=180)
            # one projector switch for every tab (app/projector.py)
            projector = gr.Checkbox(False, label=t("export.projector", "en"), elem_id="projector-toggle", scale=0,
                                    min_width=300)
            language.chrome(projector, label="export.projector")
        # "wrap": on a phone every tab stays on the bar (a second row), none behind a "..." menu
        with gr.Tabs(elem_id="main-tabs", selected="lesson", overflow_behavior="wrap") as tabs:
            with gr.Tab(t(TABS["lesson"], "en"), id="lesson") as tab:
                language.chrome(tab, label=TABS["lesson"])
                lesson_tab = lesson.build()
            with gr.Tab(t(TABS["explainer"], "en"), id="explainer") as tab:
                language.chrome(tab, label=TABS["explainer"])
                explainer_tab = explainer.build(demo, state, autorun)
            with gr.Tab(t(TABS["lab"], "en"), id="lab") as tab:
                language.chrome(tab, label=TABS["lab"])
                lab.build(demo)
            with gr.Tab(t(TABS["race"], "en"), id="race") as tab:
                language.chrome(tab, label=TABS["race"])
                race_tab = race.build(demo, explainer_tab)
        explainer.stop_cancels(explainer_tab, [*explainer_tab.model_events, *race_tab.model_events])
        links = lesson.ExplainerLinks(preset=explainer_tab.components["preset"],
                                      custom_draft=explainer_tab.components["custom_draft"],
                                      pair_note=explainer_tab.pair_note, status=explainer_tab.status, autorun=autorun,
                                      run_inputs=explainer_tab.inputs(run_if_asked), race_outputs=race_tab.outputs,
                                      race_status=race_tab.status)
        lesson.wire(demo, lesson_tab, tabs, state, explainer_tab.view_outputs, explainer_tab.controls, links, on,
                    explainer_tab.run_events)
        wire_links(demo, explainer_tab, race_tab, tabs, autorun)
        projector.change(None, projector, None, js=TOGGLE_JS, **CHEAP)
        demo.load(None, None, projector, js=LOAD_JS, **CHEAP)
        language.finish(demo, on)
    demo.queue(max_size=QUEUE_SIZE, default_concurrency_limit=2)
    return demo


def wire_links(demo: gr.Blocks, explainer_tab, race_tab, tabs: gr.Tabs, autorun: gr.State) -> None:
    """The links that reproduce a run or a race (app/share.py), opened on page load: `?run=` fills the
    Explainer's controls and reruns the run (`run_if_asked`, in the queue); `?race=` fills the race's
    and runs it (`race_if_asked`). (`?trace=NAME` is the lesson's teacher link, `lesson.wire`.)"""
    c = explainer_tab.components
    n = len(explainer_tab.controls)
    # The link's own flag, apart from the lesson's `autorun`: every page load queues this chain's run_if_asked with
    # the controls the page had when it loaded, and a State is read when the event runs, not when it was sent. On a
    # busy server a chapter's "Run it live" clicked before that queued event ran would have its flag taken by it:
    # a run of the page's first settings, and the chapter's own run skipped.
    link_autorun = gr.State(False)
    run_inputs = [link_autorun if comp is autorun else comp for comp in explainer_tab.inputs(run_if_asked)]

    def open_run(request: gr.Request):
        return open_run_link(request, n)

    opened = on(demo.load, open_run, None, [*explainer_tab.controls, c["preset"], c["custom_target"], c["custom_draft"],
                                           link_autorun, tabs], explainer_tab.link_notice, clear=False, **CHEAP)
    on(opened.then, run_if_asked, run_inputs, [explainer_tab.state, *explainer_tab.view_outputs, link_autorun],
       explainer_tab.status, api_name=False, **explainer_tab.run_events)
    raced = on(demo.load, open_race_link, None, [*race_tab.link_outputs, tabs], race_tab.link_notice, clear=False,
               **CHEAP)
    inputs, outputs, events = race_tab.run_if_asked
    on(raced.then, race_if_asked, inputs, outputs, race_tab.status, clear=False, api_name=False, **events)


def launch_kwargs() -> dict:
    css = APP_CSS.read_text(encoding="utf-8") if APP_CSS.exists() else ""
    css += lesson.lesson_css()
    css += projector_css()
    js = APP_JS.read_text(encoding="utf-8") if APP_JS.exists() else None  # page-wide keyboard fixes
    return dict(css=css, js=js, theme=app_theme(), share=False, max_file_size="5mb", show_error=True,
                footer_links=["api", "gradio"], state_session_capacity=SESSION_CAPACITY, i18n=gradio_i18n())
