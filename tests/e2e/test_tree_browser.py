"""A verified draft tree in a real headless browser, at 1366 and 390 px: a saved tree run (hand-built
records: siblings kept, rejected and untried, a residual after each rejection, the correction; and the
same tree at temperature 0) opened in the Explainer, and the lesson's chapter 13 with its worked tree.
Nothing may widen the page (a deep tree scrolls in its own box) and no developer text may show.
Screenshots go to artifacts/screenshots/.

Skipped when chromium or playwright is absent, except under CI=true where that is a failure.
"""

import pytest

from _app_server import running_app
from _browser import SHOTS, browser, open_tab  # noqa: F401 (browser: a fixture)
from _student_text import dev_hits, visible_text
from _trees import greedy_tree, sampled_tree, with_chain
from _explainer import SIZES

from app.lesson.content import load
from decoding.run.trace_file import write_trace

OVERFLOW = "document.documentElement.scrollWidth - document.documentElement.clientWidth"
CHAPTER = next(n for n, ch in enumerate(load(), 1) if ch.widget["kind"] == "tree")


@pytest.fixture(scope="module")
def app_url(tiny_target_dir, tiny_draft_dir):
    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        yield url


@pytest.fixture(scope="module")
def tree_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("trees") / "tree_run.jsonl"
    write_trace(path, [with_chain(sampled_tree(), 0), with_chain(greedy_tree(), 1)], None)
    return path


def _page(browser, size):
    width, height = SIZES[size]
    page = browser.new_page(viewport={"width": width, "height": height})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return page, errors


def _check(page, where: str) -> str:
    """The tree's HTML, after checking that the page does not scroll sideways and no developer text shows."""
    assert page.evaluate(OVERFLOW) <= 1, where
    tree = page.inner_html(where)
    assert dev_hits(visible_text(tree)) == [], where
    return tree


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_a_tree_iteration_in_the_explainer(browser, app_url, tree_trace, size):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page, errors = _page(browser, size)
    page.goto(app_url)
    open_tab(page, "Explainer")
    page.get_by_text("Save or open a run", exact=True).first.click()
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Open a trace file (.jsonl)").click()
    chooser.value.set_files(str(tree_trace))
    page.wait_for_selector("#tree .vtree", timeout=30_000)
    tree = _check(page, "#tree")
    # the run rests on its last iteration: the tree at temperature 0
    assert "matches the target's top token" in tree and "coinbar" not in tree
    page.locator("#tree").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"tree_explainer_{size}.png"), full_page=True)
    # the sampled iteration: the timeline's first stop
    box = page.locator("#timeline input[type=number]")
    box.fill("1")
    box.press("Enter")
    page.wait_for_function("() => /u = 0\\.930/.test(document.querySelector('#tree')?.innerText || '')",
                           timeout=30_000)
    tree = _check(page, "#tree")
    assert "2nd try" in tree and "— not tried" in tree and "after this rejection" in tree
    page.locator("#tree").screenshot(path=str(SHOTS / f"tree_explainer_sampled_{size}.png"))
    page.close()  # an open page keeps its connection, which the server's close waits on
    assert errors == []


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_lessons_worked_tree(browser, app_url, size):
    page, errors = _page(browser, size)
    page.goto(app_url + f"?lesson={CHAPTER}")
    page.wait_for_selector("#lesson-widget-html .vtree", timeout=30_000)
    tree = _check(page, "#lesson-widget-html")
    assert "2nd try" in tree and "residual" in tree
    page.screenshot(path=str(SHOTS / f"tree_lesson_{size}.png"), full_page=True)
    page.close()
    assert errors == []


@pytest.mark.parametrize("lang", ["es", "zh"])
def test_a_tree_iteration_in_another_language(browser, app_url, tree_trace, lang):
    """The same saved tree run with ?lang=: the verified tree's words are the language's (no English
    fallback shows), on a phone."""
    from app import i18n

    page, errors = _page(browser, "phone")
    page.goto(app_url + f"?lang={lang}")
    page.get_by_role("tab", name=i18n.t("common.tab.lesson", lang)).first.wait_for(timeout=60_000)
    open_tab(page, i18n.t("common.tab.explainer", lang))
    page.get_by_text(i18n.t("explainer.label.save_open", lang), exact=True).first.click()
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name=i18n.t("explainer.button.upload", lang)).click()
    chooser.value.set_files(str(tree_trace))
    page.wait_for_selector("#tree .vtree", timeout=30_000)
    box = page.locator("#timeline input[type=number]")
    box.fill("1")
    box.press("Enter")
    page.wait_for_function("() => /u = 0\\.930/.test(document.querySelector('#tree')?.innerText || '')",
                           timeout=30_000)
    tree = visible_text(_check(page, "#tree"))
    for key in ("vtree.mark_kept", "vtree.mark_rejected", "vtree.mark_untried", "vtree.root"):
        assert i18n.t("explainer." + key, lang) in tree, key
    assert "try" not in tree and "kept" not in tree and "residual" not in tree
    caption = visible_text(page.inner_html("#draft-row"))
    assert i18n.t("explainer.draft.summary_tree", lang, accepted=2, n=6, emitted=3) in caption
    page.close()
    assert errors == []
