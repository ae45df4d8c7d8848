"""The Explainer in the class's language in a real browser (Debian chromium driven by Playwright), on the
tiny models: `?lang=es` opens it in Spanish (its controls, explanations, the shipped example's panels and
charts' words), a bad input's message comes in Spanish, and the language menu re-renders the panels of
the iteration shown in place (the timeline stays where it was). Screenshots:
artifacts/screenshots/explainer_lang_*.png.

Skipped when chromium or playwright is absent, except under CI=true where that is a failure.
"""

import pytest

from _app_server import running_app
from _browser import SHOTS, browser  # noqa: F401 (browser: a fixture)
from _explainer import new_page, pick

from app import i18n

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def app_url(tiny_target_dir, tiny_draft_dir):
    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        yield url


def open_explainer(page) -> None:
    page.locator("#main-tabs [role='tab']").nth(1).click()
    page.wait_for_selector("#stats .stat", timeout=60_000)


def wait_text(page, selector: str, text: str) -> None:
    page.wait_for_function("([s, w]) => document.querySelector(s)?.innerText.includes(w)", arg=[selector, text],
                           timeout=30_000)


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_explainer_opens_in_spanish_and_says_a_bad_input_in_spanish(browser, app_url, size):
    page, errors = new_page(browser, size)
    page.goto(app_url + "?lang=es")
    page.wait_for_function("() => document.documentElement.lang === 'es'", timeout=30_000)
    open_explainer(page)
    t = lambda key, **kw: i18n.t(key, "es", **kw)  # noqa: E731
    wait_text(page, "#stats", t("explainer.stats.tokens_per_call"))
    assert t("explainer.button.run") in page.inner_text("#run-btn")
    assert t("explainer.draft.caption") in page.inner_text("#draft-row")
    chips = page.inner_text("#explainer-player") + page.inner_text("#chips")
    assert chips  # the example's tokens shown
    legend = page.locator(".legend").first.inner_text()
    assert t("explainer.chip.accepted.label") in legend and "accepted draft" not in legend
    assert t("explainer.chart.p_target") in page.inner_text("#pq-plot")
    body = page.inner_text(".panels")
    for english in ("tokens per target call", "This iteration's draft", "Draft tokens of this iteration"):
        assert english not in body, english
    # a bad input: an empty prompt, then Run
    page.locator(".controls textarea").first.fill("")
    page.click("#run-btn")
    page.wait_for_function("document.querySelector('#run-status [role=alert]')", timeout=30_000)
    status = page.inner_text("#run-status")
    assert t("engine.settings.prompt_empty") in status and t("engine.title.settings") in status
    page.screenshot(path=str(SHOTS / f"explainer_lang_es_{size}_bad_input.png"))
    assert not errors, errors
    page.close()


def test_the_menu_rerenders_the_shown_iteration_in_the_new_language(browser, app_url):
    page, errors = new_page(browser, "desktop")
    page.goto(app_url + "?lang=en")
    open_explainer(page)
    wait_text(page, "#stats", "tokens per target call")
    iteration = page.inner_text("#draft-row").split("·")[0]  # "Iteration N "
    pick(page, "app-language", i18n.LANGUAGES["zh"])
    page.wait_for_function("() => document.documentElement.lang === 'zh'", timeout=30_000)
    wait_text(page, "#stats", i18n.t("explainer.stats.tokens_per_call", "zh"))
    number = "".join(ch for ch in iteration if ch.isdigit())
    assert i18n.t("explainer.draft.head", "zh", iteration=number, context="", gamma="").split(" ·")[0] \
        in page.inner_text("#draft-row")  # the same iteration, in the new words
    assert i18n.t("explainer.label.prompt", "zh") in page.inner_text(".controls")
    page.screenshot(path=str(SHOTS / "explainer_lang_zh_menu.png"))
    assert not page.query_selector("[role=alert]") and not errors, errors
    page.close()
