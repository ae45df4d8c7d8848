"""What the browser tests read off a page of the app: the visible tab's text (plotly's included), the
elements wider than the viewport, and the app served on the tiny models for a whole test module."""

from __future__ import annotations

import pytest

from _browser import settle, track

TABS = ("Lesson", "Explainer", "Exactness lab", "Race")

# Elements that reach past the viewport's right edge, outermost first, leaving out those inside a
# horizontally scrolling box that itself fits (a wide table that scrolls within the page is fine).
WIDER_THAN_VIEWPORT_JS = """(vw) => {
  const out = [];
  const scrolls = (e) => {
    for (let a = e.parentElement; a; a = a.parentElement) {
      const s = getComputedStyle(a);
      const fits = a.getBoundingClientRect().right <= vw + 1;
      if ((s.overflowX === 'auto' || s.overflowX === 'scroll') && fits) return true;
    }
    return false;
  };
  for (const e of document.querySelectorAll('body *')) {
    if (e.offsetParent === null && getComputedStyle(e).position !== 'fixed') continue;
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || r.right <= vw + 1) continue;
    if (e.closest('.modebar-container, [aria-hidden="true"], .visually-hidden')) continue;
    if (scrolls(e) || out.some((o) => o.contains(e))) continue;
    out.push(e);
  }
  return out.map((e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
    + (typeof e.className === 'string' && e.className
       ? '.' + e.className.trim().split(/\\s+/).slice(0, 2).join('.') : '')
    + ' reaches ' + Math.round(e.getBoundingClientRect().right) + ' px: '
    + (e.innerText || e.textContent || '').trim().slice(0, 50));
}"""

# The visible tab's text, tooltips and plot labels, leaving out the one part labelled for researchers
# (the run as a command line, app/explainer/tab.py: `.for-researchers`), which shows a command on purpose.
VISIBLE_TEXT_JS = """() => {
  const panel = [...document.querySelectorAll('[role=tabpanel]')].find((e) => e.offsetParent !== null) || document.body;
  const aside = (e) => e.closest('.for-researchers');
  const tips = [...panel.querySelectorAll('[data-tip], [title], [aria-label]')].filter((e) => !aside(e))
    .map((e) => [e.getAttribute('data-tip'), e.getAttribute('title'), e.getAttribute('aria-label')].join(' '));
  const plots = [...panel.querySelectorAll('.js-plotly-plot text')].map((e) => e.textContent);
  let text = panel.innerText;
  for (const e of panel.querySelectorAll('.for-researchers')) text = text.replace(e.innerText, '');
  return [text, ...tips, ...plots].join('\\n');
}"""


@pytest.fixture(scope="module")
def app_url(tiny_target_dir, tiny_draft_dir):
    from _app_server import running_app

    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        yield url


def goto(page, url: str, ready: str = "#lesson-title h2") -> None:
    """Open `url` and wait for `ready` to show (Gradio renders a tab's content once it is selected) and the
    page's load events to end (`settle`)."""
    track(page)
    page.goto(url)
    page.wait_for_selector("[role='tablist']", timeout=60_000)
    page.wait_for_selector(ready, timeout=60_000)
    settle(page, 1000)


def show_tab(page, name: str) -> None:
    """Select a tab by its name on the tab bar (every tab is on it, at any width) and let it render."""
    page.get_by_role("tab", name=name).click()
    settle(page, 1200)
