"""The lesson in each language in a real headless browser: `/?lesson=2&lang=xx` opens chapter 2 in that
language's words (the page's lang attribute follows), its right answer is the same choice as in English
and its feedback is the language's; the language menu turns the chapter shown into another language
without leaving it. Screenshots of chapter 1 in each language (desktop 1366 and phone 390 wide) go to
artifacts/screenshots/.

Skipped when chromium or playwright is absent, except under CI=true where that is a failure.
"""

import pytest

from _app_server import running_app
from _browser import SHOTS, browser  # noqa: F401 (browser: a fixture)

from app import i18n
from app.lesson.languages import load_lesson


@pytest.fixture(scope="module")
def app_url(tiny_target_dir, tiny_draft_dir):
    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        yield url


def _wait_title(page, text: str) -> None:
    page.wait_for_function("(t) => document.querySelector('#lesson-title')?.innerText.includes(t)", arg=text,
                           timeout=30_000)


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_a_chapter_opens_in_the_links_language_and_checks_the_same_answer(browser, app_url, lang):
    chapters = load_lesson(lang)
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{app_url}?lesson=2&lang={lang}")
    ch = chapters[1]
    _wait_title(page, f"2. {ch.title}")
    assert page.evaluate("document.documentElement.lang") == lang
    assert ch.question.ask.replace("**", "")[:12] in page.inner_text("#lesson-ask")
    right = ch.question.choices[ch.question.answer]
    page.locator("#lesson-quiz").get_by_label(right, exact=True).check()
    page.click("#lesson-check")
    page.wait_for_function("(w) => document.querySelector('#lesson-feedback')?.innerText.includes(w)",
                           arg=ch.question.why[:20], timeout=15_000)
    for width, height, tag in ((1366, 900, "desktop"), (390, 844, "phone")):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{app_url}?lesson=1&lang={lang}")
        _wait_title(page, f"1. {chapters[0].title}")
        page.screenshot(path=str(SHOTS / f"lesson-ch1-{lang}-{tag}.png"))
    assert errors == []
    page.close()


def test_the_language_menu_turns_the_chapter_shown(browser, app_url):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(f"{app_url}?lesson=4&lang=en")
    _wait_title(page, f"4. {load_lesson('en')[3].title}")
    for lang in ("zh", "fr"):
        page.click("#app-language input")
        page.get_by_role("option", name=i18n.LANGUAGES[lang]).click()
        ch = load_lesson(lang)[3]
        _wait_title(page, f"4. {ch.title}")
        assert page.locator("#lesson-quiz").inner_text().count(ch.question.choices[1]) == 1
    page.close()
