"""What the browser tests share: where chromium is, how it is launched, where screenshots go, one
chromium per test module (skipped when chromium or playwright is absent, failed under CI=true), and
`settle`: waiting until a page has taken an action in (what fixed waits guessed at).
"""

import os
import shutil
import time
import weakref
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("SPECDEC_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-dev-shm-usage"]
SHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "screenshots"


# requests of a page still in flight, per page `track`ed (the app's events, a lazily loaded script)
_IN_FLIGHT = weakref.WeakKeyDictionary()
# how long nothing on the page has changed, in ms (a MutationObserver per document; `reset` starts the count now)
QUIET_MS_JS = """(reset) => {
  if (!window.__settle) {
    window.__settle = {last: performance.now()};
    new MutationObserver(() => { window.__settle.last = performance.now(); })
      .observe(document.documentElement, {subtree: true, childList: true, attributes: true, characterData: true});
  }
  if (reset) window.__settle.last = performance.now();
  return performance.now() - window.__settle.last;
}"""


# streams Gradio may keep open for as long as the page lives: its heartbeat, and the queue's event stream (a
# queued event's progress shows on the page instead, which `settle` sees change)
STREAMS = ("/gradio_api/heartbeat/", "/gradio_api/queue/data")


def track(page):
    """Note the requests `page` has in flight from now on (call it when the page is made; `settle` reads them),
    leaving out the long-lived `STREAMS`. Returns the page."""
    if page not in _IN_FLIGHT:
        pending = _IN_FLIGHT[page] = set()
        page.on("request", lambda r: None if any(s in r.url for s in STREAMS) else pending.add(r))
        page.on("requestfinished", lambda r: pending.discard(r))
        page.on("requestfailed", lambda r: pending.discard(r))
    return page


def settle(page, at_most_ms: int, quiet_ms: int = 400) -> None:
    """Wait until `page` has taken in what was just done to it: no request in flight (an event's call, a
    script a plot loads) and nothing on the page changed for `quiet_ms` since this
    call, or `at_most_ms`, whichever comes first (a page that keeps moving, a race player that plays, is
    then taken as it stands). It replaces fixed waits of `at_most_ms`: never longer, and never shorter than
    what the page needed. The page must be `track`ed from before the action."""
    if page not in _IN_FLIGHT:
        raise AssertionError("settle() needs track(page) from before the action it waits for")
    pending = _IN_FLIGHT[page]
    deadline = time.monotonic() + at_most_ms / 1000
    quiet = page.evaluate(QUIET_MS_JS, True)
    while True:
        if not pending and quiet >= quiet_ms:
            return
        left_ms = (deadline - time.monotonic()) * 1000
        if left_ms <= 0:
            return
        page.wait_for_timeout(min(50, left_ms))
        quiet = page.evaluate(QUIET_MS_JS, False)


def require_browser():
    missing = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = "the playwright package is not installed"
    if missing is None and not Path(CHROMIUM).exists():
        missing = f"chromium not found at {CHROMIUM} (apt-get install chromium)"
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {missing}", pytrace=False)
        pytest.skip(missing)


def open_tab(page, name: str) -> None:
    """Select a tab of the app by its name (the Lesson tab is the one shown first). On a narrow
    screen Gradio moves the tabs that do not fit into its "More tabs" menu."""
    page.wait_for_selector("[role='tablist']", timeout=60_000)
    tab = page.get_by_role("tab", name=name)
    if tab.count() and tab.first.is_visible():
        tab.first.click()
        return
    page.get_by_role("button", name="More tabs").click()
    page.locator(".overflow-dropdown button", has_text=name).first.click()


@pytest.fixture(scope="module")
def browser():
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()
