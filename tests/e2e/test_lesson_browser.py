"""The Lesson tab in a real headless browser (Debian chromium driven by Playwright, as the other
browser tests): walk every chapter with Next, answer each question once wrongly and once
rightly, apply "Try this" and see the widget change; open `/?lesson=6` and `/?trace=NAME`
directly; turn pages with the arrow keys; "Run it live" runs the chapter's settings in the Explainer. Screenshots of
every chapter (desktop 1280 wide: as it opens, then answered and tried) and two at phone width
(390) go to artifacts/screenshots/.

Skipped when chromium or playwright is absent, except under CI=true where that is a failure.
"""

import pytest

from _app_server import running_app
from _browser import SHOTS, browser  # noqa: F401 (browser: a fixture)

from app.lesson.content import load

CHAPTERS = load()

# What the widget shows, in a form that changes when its settings change (a race keeps animating,
# so the player counts by its title, not its moving chips).
SIGNATURE = """() => {
  const html = document.querySelector('#lesson-widget-html')?.innerHTML || '';
  const plots = [...document.querySelectorAll('#lesson-widget .js-plotly-plot')]
    .filter(p => p.offsetParent !== null).map(p => JSON.stringify(p.data || []));
  const race = document.querySelector('#lesson-player .rp-title')?.innerText || '';
  return html + '|' + plots.join('|') + '|' + race;
}"""


@pytest.fixture(scope="module")
def app_url(tiny_target_dir, tiny_draft_dir):
    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        yield url


def _title(page) -> str:
    return page.inner_text("#lesson-title")


def _wait_chapter(page, n: int) -> None:
    page.wait_for_function("(t) => document.querySelector('#lesson-title')?.innerText.includes(t)",
                           arg=f"{n}. {CHAPTERS[n - 1].title}", timeout=30_000)


def _answer(page, choice: str, expect: str) -> None:
    page.locator("#lesson-quiz").get_by_label(choice, exact=True).check()
    page.click("#lesson-check")
    page.wait_for_function("(e) => document.querySelector('#lesson-feedback')?.innerText.trim().startsWith(e)",
                           arg=expect, timeout=15_000)


def _page(browser, width=1280, height=900):
    page = browser.new_page(viewport={"width": width, "height": height})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return page, errors


def test_walk_every_chapter(browser, app_url):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page, errors = _page(browser)
    page.goto(app_url)
    _wait_chapter(page, 1)  # the Lesson is the first tab
    assert f"Chapter 1 of {len(CHAPTERS)}" in page.inner_text("#lesson-progress")
    for n, chapter in enumerate(CHAPTERS, 1):
        _wait_chapter(page, n)
        assert f"Chapter {n} of {len(CHAPTERS)}" in page.inner_text("#lesson-progress")
        q = chapter.question
        wrong = next(c for i, c in enumerate(q.choices) if i != q.answer)
        page.wait_for_timeout(300)
        page.screenshot(path=str(SHOTS / f"lesson_desktop_{n:02d}a_start.png"), full_page=True)
        hidden = page.evaluate(SIGNATURE)
        _answer(page, wrong, "Not quite")
        if chapter.reveal:  # what would give the answer away shows once an answer is checked
            page.wait_for_function(f"(b) => ({SIGNATURE})() !== b", arg=hidden, timeout=15_000)
        _answer(page, q.choices[q.answer], "Correct")
        page.wait_for_timeout(300)  # charts finish drawing
        before = page.evaluate(SIGNATURE)
        page.click("#lesson-try")
        page.wait_for_function(f"(b) => ({SIGNATURE})() !== b", arg=before, timeout=15_000)
        page.wait_for_timeout(400)
        page.screenshot(path=str(SHOTS / f"lesson_desktop_{n:02d}b_answered_tried.png"), full_page=True)
        if n < len(CHAPTERS):
            page.click("#lesson-next")
    assert page.locator("#lesson-next").is_disabled()

    # the arrow keys turn the page with the focus on the body, and not inside a field
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press("ArrowLeft")
    _wait_chapter(page, len(CHAPTERS) - 1)
    page.keyboard.press("ArrowRight")
    _wait_chapter(page, len(CHAPTERS))
    page.locator("#lesson-quiz input").first.focus()
    page.keyboard.press("ArrowLeft")
    page.wait_for_timeout(500)
    assert _title(page).startswith(f"{len(CHAPTERS)}.")

    # projector mode: larger type
    small = page.evaluate("parseFloat(getComputedStyle(document.querySelector('#lesson-text p')).fontSize)")
    page.locator("#projector-toggle input").check()  # one switch for the page (app/projector.py)
    page.wait_for_function("document.body.classList.contains('projector')", timeout=10_000)
    big = page.evaluate("parseFloat(getComputedStyle(document.querySelector('#lesson-text p')).fontSize)")
    assert big > small
    page.screenshot(path=str(SHOTS / "lesson_desktop_projector.png"), full_page=True)
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 2
    assert not errors, errors
    page.close()


def test_teacher_links_and_run_it_live(browser, app_url):
    page, errors = _page(browser)
    page.goto(app_url + "?lesson=6")
    _wait_chapter(page, 6)
    assert CHAPTERS[5].title in _title(page)

    page.goto(app_url + "?lesson=8")
    _wait_chapter(page, 8)
    page.click("#lesson-live")  # the chapter's run (the mentored trace's settings) runs live in the Explainer
    page.wait_for_function("document.querySelector('#run-status')?.innerText.includes('Done')", timeout=60_000)
    assert "mentored" in page.inner_text("#stats") and "Live run" in page.inner_text("#stats")
    assert page.get_by_role("tab", name="Explainer").get_attribute("aria-selected") == "true"
    assert page.locator("#method-plot").is_visible()

    page.goto(app_url + "?trace=06_code_mjsd_beams4_tau0.1")
    page.wait_for_function("document.querySelector('#stats')?.innerText.includes('code mjsd')", timeout=30_000)
    assert page.get_by_role("tab", name="Explainer").get_attribute("aria-selected") == "true"

    page.goto(app_url + "?trace=no-such-trace")  # a clear message on the lesson, no traceback
    page.wait_for_function("document.querySelector('#lesson-notice')?.innerText.includes('No shipped trace called')",
                           timeout=30_000)

    page.goto(app_url + "?lesson=42")
    page.wait_for_function("document.querySelector('#lesson-notice')?.innerText.includes('no chapter')", timeout=30_000)
    _wait_chapter(page, 1)
    assert not errors, errors
    page.close()


@pytest.mark.parametrize("n", [2, 6])
def test_phone_width(browser, app_url, n):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page, errors = _page(browser, 390, 844)
    page.goto(app_url + f"?lesson={n}")
    _wait_chapter(page, n)
    q = CHAPTERS[n - 1].question
    _answer(page, q.choices[q.answer], "Correct")
    page.wait_for_timeout(800)
    page.screenshot(path=str(SHOTS / f"lesson_phone_{n:02d}.png"), full_page=True)
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 2
    assert not errors, errors
    page.close()
