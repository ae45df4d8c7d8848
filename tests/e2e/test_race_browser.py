"""The race in a real headless browser (Debian chromium driven by Playwright, as
test_app_browser.py does): a race recorded from the tiny models into a temporary folder is shipped
to the app, opened from the "Shipped races" dropdown and replayed in slow motion. Both lanes'
token counts grow over time and end equal to the traces, and the faster lane finishes first.
Screenshots (desktop 1366x900, phone 390x844) go to artifacts/screenshots/.

Skipped when chromium or playwright is absent, except under CI=true where that is a failure.
"""

import os

import pytest

from _app_server import running_app
from _browser import SHOTS, browser, open_tab  # noqa: F401 (browser: a fixture)

TITLE = "tiny: the cat sat"

# In the page: sample both lanes' token counts and finish places every frame until the race is done.
SAMPLER = """() => new Promise(resolve => {
  const root = document.querySelector('#race-player .rp');
  const samples = [], t0 = performance.now();
  function tick() {
    const lanes = [...root.querySelectorAll('.rp-lane')];
    samples.push({t: performance.now() - t0, counts: lanes.map(l => Number(l.dataset.count)),
                  places: lanes.map(l => l.dataset.place || null)});
    if (root.dataset.state === 'done' || performance.now() - t0 > 60000) resolve(samples);
    else requestAnimationFrame(tick);
  }
  tick();
})"""


@pytest.fixture(scope="module")
def shipped(tmp_path_factory, tiny_target_dir, tiny_draft_dir):
    """A race of the tiny models (greedy, float32), written where the app looks for shipped races."""
    from decoding.run.pair import load_pair

    from app.race_file import write_race
    from app.race_run import LaneRun, record_race
    from app.settings import make_settings

    runs = []
    for label, method in (("A", "speculative"), ("B", "autoregressive")):
        s = make_settings("the cat sat", False, method, 4, 0.0, 0, 1.0, 1.0, 0, 96, str(tiny_target_dir),
                          str(tiny_draft_dir), dtype="float32")
        target, draft = load_pair(s.target, s.draft, need_draft=method == "speculative", cached=True, dtype="float32")
        runs.append(LaneRun(label, s, target, draft))
    race = record_race(runs, title=TITLE)
    folder = tmp_path_factory.mktemp("races")
    write_race(folder / "tiny.json", race)
    race.title = "tiny: opened on load"  # listed first: the page shows it before anyone picks a race
    write_race(folder / "a-first.json", race)
    race.title = TITLE
    return folder, race


@pytest.fixture(scope="module")
def app_url(shipped, tiny_target_dir, tiny_draft_dir):
    old = os.environ.get("SPECDEC_APP_RACES")
    os.environ["SPECDEC_APP_RACES"] = str(shipped[0])
    try:
        with running_app(tiny_target_dir, tiny_draft_dir) as url:
            yield url
    finally:
        if old is None:
            os.environ.pop("SPECDEC_APP_RACES", None)
        else:
            os.environ["SPECDEC_APP_RACES"] = old


@pytest.mark.parametrize("name, width, height", [("desktop", 1366, 900), ("phone", 390, 844)])
def test_a_shipped_race_replays_on_one_clock(browser, app_url, shipped, name, width, height):
    SHOTS.mkdir(parents=True, exist_ok=True)
    race = shipped[1]
    totals = [len(lane.summary.token_ids) for lane in race.lanes]
    faster = min(range(2), key=lambda i: race.lanes[i].summary.wall_seconds)
    page = browser.new_page(viewport={"width": width, "height": height})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(app_url)
    page.wait_for_selector("#lesson-title", timeout=60_000)  # the app has loaded (the Lesson tab comes first)
    open_tab(page, "Race")
    page.wait_for_function("() => document.querySelector('#race-player .rp-title')?.innerText === 'tiny: opened on load'",
                           timeout=60_000)
    page.get_by_label("Shipped races (replay at once, no model needed)").click()
    page.get_by_role("option", name=TITLE).click()
    page.wait_for_function("(t) => document.querySelector('#race-player .rp-title')?.innerText === t", arg=TITLE,
                           timeout=60_000)
    page.wait_for_selector("#race-player .rp[data-state='done']", timeout=60_000)
    assert page.locator("#race-player .rp-lane").count() == 2

    # slow motion, Replay: the counts grow frame by frame, in the browser alone
    page.select_option("#race-player .rp-speed", "0.25")
    page.click("#race-player .rp-replay")
    samples = page.evaluate(SAMPLER)
    for lane in range(2):
        counts = [s["counts"][lane] for s in samples]
        assert counts == sorted(counts), "a lane's token count never shrinks"
        assert counts[-1] == totals[lane], (counts[-1], totals)
        assert len(set(counts)) >= 3, f"lane {lane} jumped straight to the end: {sorted(set(counts))}"
    first_done = [next(i for i, s in enumerate(samples) if s["places"][lane]) for lane in range(2)]
    assert first_done[faster] <= first_done[1 - faster], "the faster lane crosses the line first"
    assert samples[-1]["places"][faster] == "1"
    assert page.locator("#race-player .rp-lane.winner").get_attribute("data-lane") == str(faster)
    result = page.inner_text("#race-player .rp-result")
    assert ("faster" in result) == (race.lanes[0].summary.tokens_per_second > race.lanes[1].summary.tokens_per_second)
    page.locator("#race-player").screenshot(path=str(SHOTS / f"{name}_race_player.png"))
    page.screenshot(path=str(SHOTS / f"{name}_race.png"), full_page=True)

    # a screenshot mid-race, and Large text for a projector
    page.click("#race-player .rp-bigbtn")
    page.click("#race-player .rp-replay")
    page.wait_for_function("() => { const c = [...document.querySelectorAll('#race-player .rp-lane')]"
                           ".map(l => Number(l.dataset.count)); return c.some(n => n > 3); }", timeout=30_000)
    page.locator("#race-player").screenshot(path=str(SHOTS / f"{name}_race_playing_large.png"))
    page.wait_for_selector("#race-player .rp[data-state='done']", timeout=60_000)

    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 2
    assert not errors, errors
    page.close()


def test_a_bad_race_file_shows_a_clear_error(browser, app_url, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"summary": false}\n{"summary": true}\n')
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(app_url)
    page.wait_for_selector("#lesson-title", timeout=60_000)
    open_tab(page, "Race")
    page.get_by_text("Save or open a race").click()
    with page.expect_file_chooser() as chooser:
        page.click("#race-upload")
    chooser.value.set_files(str(bad))
    # the message shows in the race's status line, beside its controls (app/errors.py), not in a toast
    alert = page.locator("#race-status [role=alert]")
    alert.wait_for(timeout=30_000)
    assert "Could not open the race: this is a single run's trace" in alert.inner_text()
    assert "Traceback" not in alert.inner_text()
    page.screenshot(path=str(SHOTS / "desktop_race_bad_file.png"))
    page.close()


def test_an_opened_race_file_takes_the_shipped_race_name_out_of_the_dropdown(browser, app_url, shipped):
    """The page opens on the first shipped race; a race opened from a file (or raced live) replaces
    it in the player, and the dropdown no longer names the race that left."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(app_url)
    page.wait_for_selector("#lesson-title", timeout=60_000)
    open_tab(page, "Race")
    shipped_dropdown = page.get_by_label("Shipped races (replay at once, no model needed)")
    page.wait_for_function("() => document.querySelector('#race-player .rp-title')?.innerText === 'tiny: opened on load'",
                           timeout=60_000)
    assert shipped_dropdown.input_value() == "tiny: opened on load"
    page.get_by_text("Save or open a race").click()
    with page.expect_file_chooser() as chooser:
        page.click("#race-upload")
    chooser.value.set_files(str(shipped[0] / "tiny.json"))
    page.wait_for_function("(t) => document.querySelector('#race-player .rp-title')?.innerText === t", arg=TITLE,
                           timeout=60_000)
    page.wait_for_function("() => !document.querySelector('#shipped-races input')?.value", timeout=10_000)
    assert shipped_dropdown.input_value() == ""
    page.close()
