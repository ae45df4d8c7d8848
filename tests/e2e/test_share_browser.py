"""Figures, links and projector mode in a real browser (Debian chromium driven by Playwright), on the tiny
models in float32: a copied link to a greedy run, opened in a fresh browser context, reruns it and gives
the same tokens; a shipped trace's link replays the same records; a garbled link says so and changes
nothing; the export menu downloads an SVG that holds the chips' tokens and a PNG at least 1600 px wide;
projector mode gives at least 24 px body text at 1366 px wide on every tab and holds across tabs.
Screenshots go to artifacts/screenshots/share_*.png.

Skipped when chromium or playwright is absent, except under CI=true where that is a failure.
"""

import contextlib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from _app_server import running_app
from _browser import SHOTS, browser, open_tab, settle  # noqa: F401 (browser: a fixture)
from _explainer import click_run, new_page, selected_tab, set_number

from app.export.scene import MIN_PNG_WIDTH, png_size

pytestmark = pytest.mark.slow
TABS = ["Lesson", "Explainer", "Exactness lab", "Race"]
PLOT_FONTS = """() => [...document.querySelectorAll('.js-plotly-plot')].filter(g => g.offsetParent !== null && g.layout)
  .map(g => g.layout.font.size)"""
BODY_TEXT = """() => [...document.querySelectorAll('.prose p, .prose li')].filter(e => e.offsetParent !== null)
  .map(e => parseFloat(getComputedStyle(e).fontSize))"""


@pytest.fixture(scope="module")
def app_url(tiny_target_dir, tiny_draft_dir):
    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        yield url


def _generated(page) -> str:
    return page.input_value("#generated-text textarea")


def _trace_tokens(page, path: Path) -> list[int]:
    """The token ids of the run shown, from its downloaded trace file."""
    from app.session import read_trace

    page.get_by_text("Save or open a run").click()
    button = page.get_by_role("button", name="Download this run (.jsonl trace)")
    page.wait_for_function("(b) => !b.disabled", arg=button.element_handle(), timeout=30_000)
    with page.expect_download() as info:
        button.click()
    info.value.save_as(path)
    records, summary = read_trace(path)
    return list(summary.token_ids)


def _copy_link(page) -> str:
    page.locator("#explainer-share").get_by_text("Figures for slides and links").click()
    page.click("#explainer-link-btn")
    page.wait_for_function("document.querySelector('#explainer-link textarea, #explainer-link input')?.value"
                           ".startsWith('http')", timeout=20_000)
    return page.locator("#explainer-link textarea, #explainer-link input").first.input_value()


def test_a_copied_link_reruns_the_same_greedy_run_in_a_fresh_browser(browser, app_url, tmp_path):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page, errors = new_page(browser, "desktop")
    page.goto(app_url + "?lang=en")
    open_tab(page, "Explainer")
    set_number(page, "Temperature", 0)
    set_number(page, "Max new tokens", 10)
    seed = page.get_by_label("Seed", exact=True)
    seed.fill("5")
    seed.press("Enter")
    set_number(page, "Pacing", 0)
    click_run(page)
    first = _generated(page)
    tokens = _trace_tokens(page, tmp_path / "first.jsonl")
    assert first and tokens
    link = _copy_link(page)
    assert "?run=" in link and "lang=en" in link
    page.close()

    context = browser.new_context(viewport={"width": 1366, "height": 900})  # a fresh browser: no storage, no state
    fresh = context.new_page()
    fresh.goto(link)
    fresh.wait_for_function("document.querySelector('#explainer-link-notice')?.innerText.includes('Opened from a link')",
                            timeout=60_000)
    assert selected_tab(fresh) == "Explainer"
    fresh.wait_for_function("/Done: /.test(document.querySelector('#run-status')?.innerText || '')", timeout=90_000)
    assert _trace_tokens(fresh, tmp_path / "again.jsonl") == tokens
    assert fresh.input_value("#method input") == "speculative"
    assert "may differ" not in fresh.inner_text("#explainer-link-notice")  # same device kind and precision
    fresh.screenshot(path=str(SHOTS / "share_desktop_opened_link.png"))
    context.close()
    assert not errors, errors


def test_a_shipped_traces_link_replays_the_same_records(browser, app_url):
    page, errors = new_page(browser, "phone")
    page.goto(app_url)
    open_tab(page, "Explainer")
    page.wait_for_function("document.querySelector('#chips .chip')", timeout=60_000)
    chips = page.inner_text("#chips")
    link = _copy_link(page)
    assert "?trace=" in link
    context = browser.new_context(viewport={"width": 390, "height": 844})
    fresh = context.new_page()
    fresh.goto(link)
    fresh.wait_for_function("document.querySelector('#chips .chip')", timeout=60_000)
    assert selected_tab(fresh) == "Explainer"
    assert fresh.inner_text("#chips") == chips
    fresh.screenshot(path=str(SHOTS / "share_phone_trace_link.png"))
    context.close()
    page.close()
    assert not errors, errors


def test_a_garbled_link_says_so_and_changes_nothing(browser, app_url):
    page, errors = new_page(browser, "desktop")
    page.goto(app_url + "?run=1thisIsNotALink")
    page.wait_for_function("document.querySelector('#explainer-link-notice')?.innerText.includes('could not be opened')",
                           timeout=60_000)
    notice = page.inner_text("#explainer-link-notice")
    assert "cut or garbled" in notice and "Nothing was changed" in notice
    assert page.input_value("#method input") == "speculative"  # the controls as they were
    page.screenshot(path=str(SHOTS / "share_desktop_garbled_link.png"))
    page.goto(app_url + "?race=1AAAA")
    page.wait_for_function("document.querySelector('#race-link-notice')?.innerText.includes('could not be opened')",
                           timeout=60_000)
    assert selected_tab(page) == "Race"
    page.close()
    assert not errors, errors


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_the_export_menu_downloads_a_figure(browser, app_url, fmt, tmp_path):
    page, errors = new_page(browser, "desktop")
    page.goto(app_url)
    open_tab(page, "Explainer")
    page.wait_for_function("document.querySelector('#chips .chip')", timeout=60_000)
    tokens = [c.strip() for c in page.locator("#chips .chip").all_inner_texts()]
    page.locator("#explainer-share").get_by_text("Figures for slides and links").click()
    page.locator("#explainer-export-format").get_by_text(fmt.upper(), exact=True).click()
    page.click("#explainer-export-btn")
    page.wait_for_selector("#explainer-export-file a", timeout=30_000)
    page.screenshot(path=str(SHOTS / f"share_desktop_export_{fmt}.png"))
    with page.expect_download() as info:
        page.locator("#explainer-export-file a").first.click()
    path = Path(tmp_path) / f"figure.{fmt}"
    info.value.save_as(path)
    if fmt == "svg":
        root = ET.fromstring(path.read_text(encoding="utf-8"))
        texts = [el.text or "" for el in root.iter("{http://www.w3.org/2000/svg}text")]
        assert all(tok in texts for tok in tokens if tok), "the SVG lacks tokens the chips show"
        assert any("seed" in t for t in texts)
    else:
        assert png_size(path.read_bytes())[0] >= MIN_PNG_WIDTH
    page.close()
    assert not errors, errors


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_projector_mode_grows_every_tab_and_holds_across_tabs(browser, app_url, size):
    page, errors = new_page(browser, size)
    page.goto(app_url)
    page.wait_for_selector("#projector-toggle input", timeout=60_000)
    settle(page, 1500)
    small = min(page.evaluate(BODY_TEXT))
    page.locator("#projector-toggle input").check()
    page.wait_for_function("document.body.classList.contains('projector')", timeout=10_000)
    assert "projector=1" in page.url
    for tab in TABS:
        open_tab(page, tab)
        settle(page, 1500)
        sizes = page.evaluate(BODY_TEXT)
        assert sizes and min(sizes) >= 24, (tab, sizes)
        chips = page.evaluate("() => [...document.querySelectorAll('.chips')].filter(e => e.offsetParent !== null)"
                              ".map(e => parseFloat(getComputedStyle(e).fontSize))")
        assert all(s >= 24 for s in chips), (tab, chips)
        with contextlib.suppress(PlaywrightTimeout):  # the page enlarges its plots once a second (app/projector.py)
            page.wait_for_function(f"() => ({PLOT_FONTS})().every(s => s >= 18)", timeout=1200)
        plots = page.evaluate(PLOT_FONTS)
        assert all(s >= 18 for s in plots), (tab, plots)
        page.screenshot(path=str(SHOTS / f"share_{size}_projector_{tab.split()[0].lower()}.png"))
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 2
    # a link with ?projector=1 opens in projector mode; unticking it restores the type
    page.goto(app_url + "?projector=1")
    page.wait_for_function("document.body.classList.contains('projector')", timeout=30_000)
    page.locator("#projector-toggle input").uncheck()
    page.wait_for_function("!document.body.classList.contains('projector')", timeout=10_000)
    settle(page, 500)
    assert min(page.evaluate(BODY_TEXT)) == small
    page.close()  # an open page keeps its connection, which the server's close waits on
    assert not errors, errors


LANES = """() => [...document.querySelectorAll('#race-player .rp-lane')].map(l =>
  [...l.querySelectorAll('.rp-chips .chip, .rp-chips span')].map(c => c.innerText).join('|'))"""


def test_a_race_link_runs_the_same_race_in_a_fresh_browser(browser, app_url):
    page, errors = new_page(browser, "desktop")
    page.goto(app_url)
    open_tab(page, "Explainer")
    set_number(page, "Temperature", 0)
    set_number(page, "Max new tokens", 8)
    open_tab(page, "Race")
    page.wait_for_selector("#race-player .rp-lane", timeout=60_000)  # the shipped race shown on load
    page.fill("#race-prompt textarea", "the cat sat on the mat. the cat sat on the")
    shipped = page.inner_text("#race-player .rp-title")
    page.click("#race-btn")
    page.wait_for_function("(t) => document.querySelector('#race-player .rp-title')?.innerText !== t && "
                           "document.querySelectorAll('#race-player .rp-lane').length === 2 && "
                           "document.querySelector('#race-player .rp')?.dataset.state === 'done'", arg=shipped,
                           timeout=120_000)
    assert "against" in page.inner_text("#race-player .rp-title")
    lanes = page.evaluate(LANES)
    assert all(lanes)
    page.locator("#race-share").get_by_text("Figures for slides and links").click()
    page.click("#race-link-btn")
    page.wait_for_function("document.querySelector('#race-link textarea, #race-link input')?.value.startsWith('http')",
                           timeout=20_000)
    link = page.locator("#race-link textarea, #race-link input").first.input_value()
    assert "?race=" in link
    title = page.inner_text("#race-player .rp-title")
    page.close()
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    fresh = context.new_page()
    fresh.goto(link)
    fresh.wait_for_function("document.querySelectorAll('#race-player .rp-lane').length === 2 && "
                            "document.querySelector('#race-player .rp')?.dataset.state === 'done'", timeout=120_000)
    assert selected_tab(fresh) == "Race"
    assert "Opened a race from a link" in fresh.inner_text("#race-link-notice")
    assert fresh.inner_text("#race-player .rp-title") == title
    assert fresh.evaluate(LANES) == lanes
    fresh.screenshot(path=str(SHOTS / "share_desktop_race_link.png"))
    context.close()
    assert not errors, errors
