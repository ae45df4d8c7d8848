"""A real headless browser (Debian chromium driven by Playwright, never `playwright install`)
loads the app on the tiny models, shows the example trace, clicks Run and then Step, and checks
that chips, bars and charts appear. Screenshots go to artifacts/screenshots/ (desktop and phone).

Skipped when chromium or playwright is absent, except under CI=true where that is a failure.
"""

import time

import pytest

from app.explainer import handlers
from _app_server import running_app
from _browser import SHOTS, browser, open_tab  # noqa: F401 (browser: a fixture)


@pytest.fixture(scope="module")
def app_url(tiny_target_dir, tiny_draft_dir):
    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        yield url


def _plot_ready(page, elem_id: str):
    page.wait_for_selector(f"#{elem_id} .main-svg", timeout=30_000)


@pytest.mark.parametrize("name, width, height", [("desktop", 1366, 900), ("phone", 390, 844)])
def test_run_then_step_shows_chips_bars_and_charts(browser, app_url, name, width, height, monkeypatch):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": width, "height": height})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(app_url)
    open_tab(page, "Explainer")  # the Lesson tab comes first
    # the example trace renders before any model has loaded
    page.wait_for_selector("#chips .chip", timeout=60_000)
    assert "Replay" in page.inner_text("#stats")
    _plot_ready(page, "pq-plot")
    page.screenshot(path=str(SHOTS / f"{name}_0_example.png"), full_page=True)

    page.get_by_label("Prompt", exact=True).fill("the cat sat")
    page.click("#run-btn")
    page.wait_for_function("document.querySelector('#run-status')?.innerText.includes('Done')"
                           " && document.querySelector('#stats').innerText.includes('Live run')", timeout=90_000)
    assert page.locator("#chips .chip").count() > 0
    _plot_ready(page, "running-plot")
    page.screenshot(path=str(SHOTS / f"{name}_1_run.png"), full_page=True)

    if name == "desktop":
        # a paced run decodes at full speed and plays in the browser, one iteration every 0.5 s
        for label, value in (("Pacing", "0.5"), ("Temperature", "0")):  # greedy: 16 iterations, no early eos
            _set_number(page, label, value)
        page.click("#run-btn")
        # this run's playback (the first run's, at the default pace, may still be playing)
        page.wait_for_function("document.querySelector('#explainer-player .rp-title') && document.querySelector("
                               "'#explainer-player .rp-title').innerText.includes('0.5 s each') && document"
                               ".querySelector('#explainer-player .rp').dataset.state === 'playing'", timeout=60_000)
        shown = page.locator("#explainer-player .rp-chips .chip").count()
        page.wait_for_function("(n) => document.querySelectorAll('#explainer-player .rp-chips .chip').length > n",
                               arg=shown, timeout=10_000)
        page.wait_for_function("document.querySelector('#explainer-player .rp-status').innerText"
                               ".includes('Playing at the chosen pace')", timeout=10_000)
        page.screenshot(path=str(SHOTS / f"{name}_1b_playback.png"), full_page=False)
        # Stop cancels a streaming run (pacing 0, each iteration slowed down here); its iterations stay
        real_advance = handlers.advance
        monkeypatch.setattr(handlers, "advance", lambda session: (time.sleep(0.15), real_advance(session))[1])
        _set_number(page, "Pacing", 0)
        seed = page.get_by_label("Seed", exact=True)  # other settings: a new run
        seed.fill("1")
        seed.press("Enter")
        page.click("#run-btn")
        page.wait_for_function("(() => { const m = /(\\d+) of \\d+/.exec(document.querySelector('#stats').innerText);"
                               " return m && Number(m[1]) >= 2 && document.querySelector('#stats').innerText"
                               ".includes('Live run') && !document.querySelector('#run-status').innerText"
                               ".includes('Done'); })()", timeout=60_000)
        page.click("#stop-btn")
        page.wait_for_function("document.querySelector('#stats').innerText.includes('Stopped')", timeout=30_000)
        monkeypatch.setattr(handlers, "advance", real_advance)
        assert page.locator("#chips .chip").count() > 0

    # Step: continues the stopped run (desktop) or starts a new one after a finished run (phone)
    before = page.inner_text("#stats")
    page.click("#step-btn")
    page.wait_for_function("(b) => document.querySelector('#stats').innerText !== b", arg=before, timeout=60_000)
    if name == "phone":  # a finished run: Step starts a new one at its first iteration
        page.wait_for_function("document.querySelector('#stats').innerText.includes('1 of 1')", timeout=60_000)
    assert page.locator("#chips .chip").count() > 0
    assert page.locator("#draft-row table, #draft-row p").count() > 0
    _plot_ready(page, "pq-plot")
    assert page.locator("#pq-plot .main-svg .point, #pq-plot .main-svg .bars path").count() > 0  # bars drawn
    _plot_ready(page, "running-plot")
    page.screenshot(path=str(SHOTS / f"{name}_2_step.png"), full_page=True)
    # a chip's tooltip carries p, q, the coin and the threshold
    tip = page.locator("#chips .chip").first.get_attribute("data-tip")
    assert "p(x)" in tip and "q(x)" in tip and "coin u" in tip and "threshold" in tip

    # the timeline revisits an earlier iteration
    box = page.locator("input[aria-label^='number input for Timeline']")
    box.fill("1")  # iterations are counted from 1
    box.press("Enter")
    page.wait_for_function("document.querySelector('#draft-row').innerText.includes('Iteration 1 ')", timeout=30_000)

    open_tab(page, "Exactness lab")
    _plot_ready(page, "lab-plot")
    page.screenshot(path=str(SHOTS / f"{name}_3_lab.png"), full_page=True)
    # no horizontal overflow of the page on a phone
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 2
    assert not errors, errors
    page.close()


def _set_number(page, label: str, value) -> None:
    box = page.locator(f"input[aria-label^='number input for {label}']")
    box.fill(str(value))
    box.press("Enter")


def test_method_panels_show_only_for_their_method(browser, app_url):
    """Mentored and MJSD runs show their own panel (charts, table, explanation); the speculative
    example trace does not. Screenshots: desktop_4_mentored.png, desktop_5_mjsd.png."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(app_url)
    open_tab(page, "Explainer")
    page.wait_for_selector("#chips .chip", timeout=60_000)
    assert not page.locator("#method-panel").is_visible()  # the example trace is speculative
    page.get_by_label("Prompt", exact=True).fill("the cat sat")
    for i, (method, knobs, needle) in enumerate((("mentored", {"KL bound D": 0.3}, "KL(p‖output)"),
                                                 ("mjsd", {"Beams B": 3, "τ": 0.1}, "log q(x₁..ⱼ)"))):
        dropdown = page.get_by_label("Method", exact=True)
        dropdown.click()
        dropdown.fill(method)
        page.keyboard.press("Enter")
        page.wait_for_timeout(500)
        for label, value in {"Pacing": 0, "Temperature": 1, "Top-k": 20, "Top-p": 0.9, **knobs}.items():
            _set_number(page, label, value)
        before = page.inner_text("#stats")
        page.click("#run-btn")
        page.wait_for_function("(b) => { const s = document.querySelector('#stats').innerText;"
                               " return s !== b && s.includes('Live run') &&"
                               " document.querySelector('#run-status').innerText.includes('Done'); }",
                               arg=before, timeout=90_000)
        _set_number(page, "Timeline", 1)  # the first iteration always has a draft
        page.wait_for_function("(n) => document.querySelector('#method-html') &&"
                               " document.querySelector('#method-html').innerText.includes(n)", arg=needle, timeout=30_000)
        assert page.locator("#method-panel").is_visible()
        _plot_ready(page, "method-plot")
        assert page.locator("#method-plot2").is_visible() == (method == "mentored")
        page.locator("#method-panel").screenshot(path=str(SHOTS / f"desktop_{4 + i}_{method}.png"))
    assert not errors, errors
    page.close()
