"""The page's language in a real browser (Debian chromium driven by Playwright), on the tiny models:
`?lang=` picks it and `<html lang>` follows; the header's menu changes it in place (the address gets
`?lang=`, the lesson's `?lesson=` kept), and the race shown and the lab's table survive the change; in
every language the visible text of the Lesson's chrome, the Race tab and the Exactness lab holds none of
the English catalog's texts of those tabs (test_i18n_ui.SAME_AS_ENGLISH: the short, justified allow
list). Screenshots: artifacts/screenshots/lang_*.png.

Skipped when chromium or playwright is absent, except under CI=true where that is a failure.
"""

import pytest

from _app_server import running_app
from _browser import SHOTS, browser  # noqa: F401 (browser: a fixture)
from _explainer import new_page, pick

from app import i18n
from decoding.rules.examples import LARGER

pytestmark = pytest.mark.slow

AREAS = {"lesson": ("common", "lesson_ui"), "lab": ("common", "lab"), "race": ("common", "race")}
# not this test's: the chapter's own words (the lesson files, `lesson.languages`) and the trace panel a chapter
# shows (the Explainer's renderer); the chrome around them is. Nor the plots' own words (app/charts.py).
OTHERS = {"lesson": ["lesson-title", "lesson-text", "lesson-ask", "lesson-quiz", "lesson-widget", "lesson-menu",
                     "lesson-feedback"]}


@pytest.fixture(scope="module")
def app_url(tiny_target_dir, tiny_draft_dir):
    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        yield url


def html_lang(page) -> str:
    return page.evaluate("document.documentElement.lang")


def open_tab_by_id(page, tab: str) -> None:
    """Select a tab by its place (its name changes with the language)."""
    index = ["lesson", "explainer", "lab", "race"].index(tab)
    page.locator("#main-tabs [role='tab']").nth(index).click()
    page.wait_for_timeout(800)


def english_texts(lang: str, areas) -> set[str]:
    """The English texts of `areas` (no placeholder, two words or more) that `lang` must not show."""
    import yaml

    from _i18n import SAME_AS_ENGLISH

    allowed = SAME_AS_ENGLISH["*"] | SAME_AS_ENGLISH[lang]
    texts = set()
    for area in areas:
        data = yaml.safe_load((i18n.CATALOGS / "en" / f"{area}.yaml").read_text(encoding="utf-8"))
        texts |= {v for k, v in data.items() if k not in allowed and "{" not in v and len(v.split()) >= 2
                  and "\n" not in v}
    return texts


def visible_text(page, tab: str) -> str:
    """The visible text of a tab's panel, with the header and its inputs' values (the `OTHERS` parts left out)."""
    return page.evaluate("""(skip) => {
        const panel = [...document.querySelectorAll('[role=tabpanel]')].find(p => p.offsetParent !== null);
        const copy = panel ? panel.cloneNode(true) : document.createElement('div');
        for (const id of skip) copy.querySelector('#' + id)?.remove();
        for (const plot of copy.querySelectorAll('.js-plotly-plot')) plot.remove();  // charts.py's words
        document.body.appendChild(copy);  // innerText needs a rendered node
        const parts = [document.getElementById('app-header')?.innerText || '', copy.innerText];
        copy.remove();
        for (const el of (panel || document).querySelectorAll('input, textarea'))
            if (el.offsetParent !== null && el.type !== 'file' && !skip.some(id => el.closest('#' + id)))
                parts.push(el.value || el.placeholder || '');
        return parts.join('\\n');
    }""", OTHERS.get(tab, []))


def wait_lang(page, lang: str) -> None:
    page.wait_for_function("(l) => document.documentElement.lang === l", arg=lang, timeout=30_000)


def test_the_query_picks_the_language_and_html_lang_follows(browser, app_url):
    page, errors = new_page(browser, "desktop")
    page.goto(app_url + "?lang=fr")
    wait_lang(page, "fr")
    page.wait_for_function("() => document.querySelector('#main-tabs [role=tab]')?.innerText.includes('Leçon')",
                           timeout=30_000)
    assert i18n.t("app.title", "fr") in page.inner_text("#app-title")
    page.goto(app_url + "?lang=xx")  # a language the app lacks: the browser's (English here)
    wait_lang(page, "en")
    assert not errors, errors
    page.close()


def test_the_menu_changes_the_language_in_place_keeping_the_race_the_lab_and_the_link(browser, app_url):
    page, errors = new_page(browser, "desktop")
    page.goto(app_url + "?lesson=2")
    page.wait_for_selector("#lesson-title h2", timeout=60_000)
    open_tab_by_id(page, "lab")
    pick(page, "lab-example", i18n.t("lab.example.larger", "en"))
    page.wait_for_function("(w) => document.querySelector('#lab-table')?.innerText.includes(w)",
                           arg=LARGER.vocab[0], timeout=30_000)
    open_tab_by_id(page, "race")
    page.wait_for_selector("#race-player .rp[data-lanes='2']", timeout=30_000)
    title = page.inner_text("#race-player .rp-title")
    pick(page, "app-language", i18n.LANGUAGES["zh"])
    wait_lang(page, "zh")
    assert "lang=zh" in page.url and "lesson=2" in page.url  # a copied link keeps both
    page.wait_for_function("(w) => document.querySelector('#race-player .rp-replay')?.innerText === w",
                           arg=i18n.t("player.replay", "zh"), timeout=30_000)
    assert page.inner_text("#race-player .rp-title") == title  # the same race, in the new words
    assert page.locator("#race-player .rp[data-lanes='2']").count() == 1
    open_tab_by_id(page, "lab")
    page.wait_for_function("(h) => document.querySelector('#lab-table')?.innerText.includes(h)",
                           arg=i18n.t("lab.col.p", "zh"), timeout=30_000)
    assert LARGER.vocab[0] in page.inner_text("#lab-table")  # the larger example's rows kept
    pick(page, "lab-example", i18n.t("lab.example.worked", "zh"))  # new rows keep the language's headers
    page.wait_for_function("() => !document.querySelector('#lab-table')?.innerText.includes('park')", timeout=30_000)
    assert i18n.t("lab.col.q", "zh") in page.inner_text("#lab-table")
    open_tab_by_id(page, "lesson")
    page.wait_for_function("(w) => document.querySelector('#lesson-progress')?.innerText.includes(w)",
                           arg=i18n.t("lesson.ui.progress", "zh", i=2, n=12).split("，")[0], timeout=30_000)
    assert not page.query_selector("[role=alert]") and not errors, errors
    page.close()


@pytest.mark.parametrize("lang", [c for c in i18n.LANGUAGES if c != i18n.DEFAULT])
def test_no_english_text_of_these_tabs_shows_in_another_language(browser, app_url, lang):
    page, errors = new_page(browser, "desktop")
    page.goto(f"{app_url}?lang={lang}")
    wait_lang(page, lang)
    page.wait_for_function("(w) => document.querySelector('#lesson-check')?.innerText.includes(w)",
                           arg=i18n.t("lesson.ui.check", lang), timeout=30_000)
    for tab, areas in AREAS.items():
        open_tab_by_id(page, tab)
        if tab == "lab":
            page.wait_for_function("(h) => document.querySelector('#lab-table')?.innerText.includes(h)",
                                   arg=i18n.t("lab.col.p", lang), timeout=30_000)
        if tab == "race":
            page.wait_for_selector("#race-player .rp[data-lanes='2']", timeout=30_000)
        text = visible_text(page, tab)
        found = sorted(s for s in english_texts(lang, areas) if s in text)
        assert found == [], f"{tab} in {lang} shows English: {found}"
        page.screenshot(path=str(SHOTS / f"lang_{lang}_{tab}.png"))
    assert not errors, errors
    page.close()
