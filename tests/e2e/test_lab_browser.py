"""The Exactness lab's implementation switch in a real browser (Debian chromium driven by Playwright), on
the tiny models, at 1366x900 and 390x844: the larger example fills the table, each implementation's
sentence shows under the menu and its run says "fast but wrong" or "exact but slower" with its figures,
in plain words. Screenshots go to artifacts/screenshots/lab_*.png.

Skipped when chromium or playwright is absent, except under CI=true where that is a failure.
"""

import pytest

from _app_server import running_app
from _browser import SHOTS, browser, open_tab  # noqa: F401 (browser: a fixture)
from _explainer import new_page, pick
from _student_text import dev_hits

from decoding.rules.examples import LARGER
from decoding.rules.implementations import IMPLEMENTATIONS


@pytest.fixture(scope="module")
def app_url(tiny_target_dir, tiny_draft_dir):
    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        yield url


def wait_for(page, selector: str, text: str) -> None:
    page.wait_for_function("([s, t]) => document.querySelector(s)?.innerText.includes(t)", arg=[selector, text],
                           timeout=30_000)


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_implementation_switch_tells_exact_but_slower_from_fast_but_wrong(browser, app_url, size):
    page, errors = new_page(browser, size)
    page.goto(app_url)
    open_tab(page, "Exactness lab")
    page.wait_for_selector("#lab-plot .main-svg", timeout=30_000)
    pick(page, "lab-example", LARGER.title)
    wait_for(page, "#lab-table", LARGER.vocab[0])
    for name, words in (("top20-target", "fast but wrong"), ("exact-match", "exact but slower")):
        impl = IMPLEMENTATIONS[name]
        pick(page, "lab-implementation", impl.label)
        wait_for(page, "#lab-implementation-words", impl.where)
        wait_for(page, "body", f"{impl.label}: {words}")
        body = page.inner_text("body")
        assert "TV(empirical, p)" in body and "acceptance rate" in body
        assert not dev_hits(page.inner_text("#lab-implementation-words"))
        page.screenshot(path=str(SHOTS / f"lab_{size}_{name}.png"), full_page=True)
    assert "TV(expected, p) = 0.1893" not in page.inner_text("body")  # the exact rule's run replaced it
    assert not page.query_selector("#lab-status [role=alert]") and not errors, errors
    page.close()
