"""On a phone (390 x 844) every tab is on the tab bar and nothing is wider than the screen; at both
widths no developer text (tests/_student_text.py) reaches the page, on any tab, in any lesson
chapter (opened, then after Check and Try this) or method panel. Screenshots go to
artifacts/screenshots/."""

from __future__ import annotations

import pytest

from _browser import SHOTS, browser, settle  # noqa: F401 (the fixture)
from _pages import TABS, VISIBLE_TEXT_JS, WIDER_THAN_VIEWPORT_JS, app_url, goto, show_tab  # noqa: F401
from _student_text import dev_hits

pytestmark = pytest.mark.slow
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1366, "height": 900}


def _check(page, where: str, width: int) -> list[str]:
    problems = [f"{where}: wider than the screen: {w}" for w in page.evaluate(WIDER_THAN_VIEWPORT_JS, width)]
    problems += [f"{where}: {hit}" for hit in dev_hits(page.evaluate(VISIBLE_TEXT_JS))]
    return problems


@pytest.mark.parametrize("size", [PHONE, DESKTOP], ids=["390px", "1366px"])
def test_every_tab_is_on_the_bar_fits_the_screen_and_reads_as_plain_words(browser, app_url, size):  # noqa: F811
    page = browser.new_page(viewport=size)
    problems = []
    try:
        goto(page, app_url)
        assert page.get_by_role("button", name="More tabs").count() == 0  # no tab behind a "..." menu
        for name in TABS:
            assert page.get_by_role("tab", name=name).is_visible(), name
            show_tab(page, name)
            problems += _check(page, name, size["width"])
            page.screenshot(path=str(SHOTS / f"tab-{name.split()[0].lower()}-{size['width']}.png"), full_page=True)
    finally:
        page.close()
    assert problems == []


def test_every_lesson_chapter_fits_a_phone_and_reads_as_plain_words(browser, app_url):  # noqa: F811
    page = browser.new_page(viewport=PHONE)
    problems = []
    try:
        goto(page, app_url)
        chapters = int(page.locator("#lesson-progress [role=progressbar]").get_attribute("aria-valuemax"))
        for n in range(1, chapters + 1):
            problems += _check(page, f"chapter {n}", PHONE["width"])
            page.locator("#lesson-quiz label").first.click()
            page.click("#lesson-check")
            page.click("#lesson-try")
            settle(page, 1500)
            problems += _check(page, f"chapter {n} after Check and Try this", PHONE["width"])
            page.screenshot(path=str(SHOTS / f"lesson-{n}-tried-390.png"), full_page=True)
            if n < chapters:
                page.click("#lesson-next")
                page.wait_for_function("(n) => document.querySelector('#lesson-title h2')?.textContent"
                                       ".startsWith(n + '.')", arg=n + 1)
                settle(page, 800)
    finally:
        page.close()
    assert problems == []


@pytest.mark.parametrize("name", ["05_question_mentored_kl0.3", "06_code_mjsd_beams4_tau0.1", "07_list_ppd_tree16"])
def test_the_method_panels_fit_a_phone_and_read_as_plain_words(browser, app_url, name):  # noqa: F811
    page = browser.new_page(viewport=PHONE)
    try:
        goto(page, app_url + f"?trace={name}", "#stats .stats")
        page.wait_for_selector("#method-panel", timeout=30_000)
        settle(page, 1500)
        problems = _check(page, name, PHONE["width"])
        page.screenshot(path=str(SHOTS / f"explainer-{name}-390.png"), full_page=True)
    finally:
        page.close()
    assert problems == []
