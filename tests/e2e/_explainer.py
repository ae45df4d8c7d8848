"""What the browser tests do in the Explainer: open a page at a size, press Run and wait for the run to
end, set a number or pick a dropdown option, and read what the player and the timeline show and
whether any "Error" badge has no message (shared by test_explainer_flow.py and test_class_journey.py)."""

from __future__ import annotations

from _browser import settle, track

SIZES = {"desktop": (1366, 900), "phone": (390, 844)}
# what the player and the timeline show (the player's status names its iteration, counted from 1)
SHOWN = """() => {
  const st = document.querySelector('#explainer-player .rp-status')?.innerText || '';
  const m = /Iteration (\\d+) of/.exec(st);
  return [m ? Number(m[1]) : null, Number(document.querySelector('#timeline input[type=number]').value),
          document.querySelector('#explainer-player .rp')?.dataset.state || ''];
}"""
# the panels show a live run of the method in the Method box (and of the chapter's method, where it names one)
LIVE_RUN_SHOWN = """(m) => { const stats = document.querySelector('#stats')?.innerText || '';
  const box = document.querySelector('#method input')?.value || '';
  return stats.includes('Live run') && box !== '' && stats.includes(box) && (!m || box === m); }"""
ERROR_BADGE = """() => [...document.querySelectorAll('.error, [class*="error"]')]
  .filter(e => e.offsetParent !== null && /^\\s*Error\\s*$/.test(e.innerText)).length"""


def new_page(browser, size: str):
    width, height = SIZES[size]
    page = track(browser.new_page(viewport={"width": width, "height": height}))
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return page, errors


def selected_tab(page) -> str:
    return page.evaluate("() => [...document.querySelectorAll('[role=tab]')]"
                         ".filter(t => t.getAttribute('aria-selected') === 'true').map(t => t.innerText).join()")


def run_bar_in_view(page) -> bool:
    return page.evaluate("() => { const r = document.getElementById('run-bar').getBoundingClientRect(); "
                         "return r.top >= -1 && r.bottom <= window.innerHeight + 1 && r.height > 0; }")


def wait_done(page, before: str = "", timeout=90_000):
    """Wait for the status line to say a run is done (or failed), other than `before` (an older run's)."""
    page.wait_for_function("(b) => { const t = document.querySelector('#run-status .app-status')?.innerText || ''; "
                           "return t !== b && /Done: |⚠/.test(t); }", arg=before, timeout=timeout)
    status = page.inner_text("#run-status .app-status")
    assert "Done:" in status, status


def click_run(page) -> None:
    """Press Run and wait for that run to end: the status line shows the run under way (queued,
    processing or decoding, in its progress or its text), then Done with no progress left beside it (an
    observer notes every text the line shows, so a quick run is not missed, and an older Done is not
    taken)."""
    page.evaluate("""() => { window.__status = []; const el = document.querySelector('#run-status');
        new MutationObserver(() => window.__status.push([el.innerText, el.querySelector('.app-status')?.innerText || '']))
          .observe(el, {childList: true, subtree: true, characterData: true}); }""")
    page.click("#run-btn")
    page.wait_for_function("(() => { const s = window.__status;"
                           " const i = s.findIndex(([all]) => /Decoding|processing|queue:/.test(all));"
                           " return i >= 0 && s.slice(i).some(([all, t]) => /Done: |⚠/.test(t) && all.trim() === t.trim()); })()",
                           timeout=90_000)
    status = page.inner_text("#run-status .app-status")
    assert "Done:" in status, status


def set_number(page, label: str, value) -> None:
    box = page.locator(f"input[aria-label^='number input for {label}']")
    box.fill(str(value))
    box.press("Enter")


def pick(page, elem_id: str, option: str) -> None:
    page.locator(f"#{elem_id} input").click()
    page.get_by_role("option", name=option, exact=True).first.click()
    settle(page, 600)
