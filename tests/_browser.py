"""What the browser tests share: where chromium is, how it is launched, where screenshots go, and
one chromium per test module (skipped when chromium or playwright is absent, failed under CI=true).
"""

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("SPECDEC_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-dev-shm-usage"]
SHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "screenshots"


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
