"""Benchmark: does the speed a run shows tell the truth? The same run (the Explainer's default settings
and seed on a preset pair) decoded four ways, back to back, in one process and one browser:

  engine    the app's own start/advance loop (app/live.py) with no Gradio at all
  api       the /generate endpoint through gradio_client, pacing 0 (no browser renders anything)
  browser0  Chromium at 1366x900 presses Run at pacing 0 (the panels render while it decodes)
  paced     Chromium presses Run at pacing 0.3 (decoded at full speed, then played in the browser)

For each it prints the tokens/s the run shows (the engine's decode speed: tokens over the summed
time of its iterations) and the wall time from the call (or the click) to the finished run. The
question: is the browser's pacing-0 figure the decode speed (close to the engine's and the API's),
or does rendering the panels slow the decode it measures? It also reads an app from before the
status line (the stats panel's figures), so the same script measures a change before and after.

    .venv/bin/python scripts/bench_pacing.py [--repeats 2] [--preset N] [--max-new-tokens 48]

Speeds on a shared machine are noisy: compare the four within one repeat (run back to back).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-dev-shm-usage"]
DONE = re.compile(r"Done: (\d+) tokens in ([\d.]+) s of decoding \(([\d.]+) tokens/s\)")
# the stats panel's cells (also what an app without the status line shows: compare before and after)
STAT = re.compile(r'<span class="k">(tokens/s|tokens generated)</span><span class="v">([\d.]+)</span>')
# an observer notes every text the watched panel shows after the click (the page's DOM is left alone)
OBSERVE = """(sel) => { window.__seen = []; const el = document.querySelector(sel);
  if (window.__observer) window.__observer.disconnect();
  window.__observer = new MutationObserver(() => window.__seen.push((el.querySelector('.app-status') || el).innerText));
  window.__observer.observe(el, {childList: true, subtree: true, characterData: true}); }"""


def from_stats(stats_html: str) -> tuple[float, int]:
    cells = dict(STAT.findall(stats_html))
    return float(cells["tokens/s"]), int(cells["tokens generated"])


def settings_values(preset_label: str, max_new_tokens: int) -> dict:
    """The Explainer's default run inputs (controls.DEFAULTS, the first example prompt) on a preset."""
    from app.controls import method_controls
    from app.explainer.handlers import EXAMPLE_PROMPTS

    try:
        from app.controls import DEFAULTS
    except ImportError:  # an app from before controls.DEFAULTS: the same values, as its layout set them
        DEFAULTS = {"method": "speculative", "gamma": 4, "lenience": 1.0, "temperature": 0.7, "top_k": 0,
                    "top_p": 1.0, "seed": 0, "max_new_tokens": 48, "dtype": "auto"}
    prompt, chat = next(iter(EXAMPLE_PROMPTS.values()))
    values = {"preset": preset_label, "custom_target": "", "custom_draft": "", "prompt": prompt, "chat": chat,
              **{k: v for k, v in DEFAULTS.items() if k != "pacing"}, "max_new_tokens": max_new_tokens}
    values.update({c.name: c.default for c in method_controls()})
    return values


def engine_run(values: dict) -> tuple[float, float, int]:
    """(tokens/s shown, wall seconds, tokens) of the app's own run loop, no Gradio."""
    from app.live import advance, settings_from_values, start
    from app.session import Session

    session = Session()
    t0 = time.perf_counter()
    start(session, settings_from_values(values), None)
    while session.generator is not None and advance(session) is not None:
        pass
    wall = time.perf_counter() - t0
    s = session.summary
    return s.tokens_per_second, wall, len(s.token_ids)


STREAMED: list[tuple[int, int]] = []  # (updates, bytes) the API received while a pacing-0 run decoded


def api_run(client, values: dict) -> tuple[float, float, int]:
    import json

    kwargs = {k: v for k, v in values.items() if k not in ("custom_target", "custom_draft")}
    t0 = time.perf_counter()
    job = client.submit(**kwargs, pacing=0, api_name="/generate")
    final = job.result(timeout=600)
    wall = time.perf_counter() - t0
    outputs = job.outputs()[:-1]  # what the server rendered and sent before the final view
    STREAMED.append((len(outputs), sum(len(json.dumps(o, default=str)) for o in outputs)))
    m = DONE.search(str(final[-1]))  # the status line, the last output
    if m is None:  # an app without the status line: the stats panel of the final view
        tps, n = from_stats(str(final[0]))
        return tps, wall, n
    return float(m.group(3)), wall, int(m.group(1))


def set_number(page, label: str, value) -> None:
    box = page.locator(f"input[aria-label^='number input for {label}']")
    box.fill(str(value))
    box.press("Enter")


def browser_run(page, pacing: float) -> tuple[float, float, int]:
    """Press Run in the Explainer at `pacing`; (tokens/s shown, seconds from the click to the end, tokens)."""
    set_number(page, "Pacing", pacing)
    page.wait_for_timeout(300)
    status = page.locator("#run-status").count() > 0
    page.evaluate(OBSERVE, "#run-status" if status else "#stats")
    t0 = time.perf_counter()
    page.click("#run-btn")
    # the status line says "Decoding…", then "Done: ..." when the run has ended; an app without it: its
    # stats lose "stopped by" (or show the progress bar's "Decoding") while the new run decodes, and show
    # "stopped by" without the progress bar at the end
    started, done = (("/Decoding/", "/Done: |⚠/") if status else
                     ("/Decoding|^((?!stopped by)[\\s\\S])*$/", "/^(?![\\s\\S]*Decoding)[\\s\\S]*stopped by/"))
    page.wait_for_function(f"(() => {{ const i = window.__seen.findIndex(t => {started}.test(t)); "
                           f"return i >= 0 && window.__seen.slice(i).some(t => {done}.test(t)); }})()",
                           timeout=600_000)
    wall = time.perf_counter() - t0
    m = DONE.search(page.inner_text("#run-status")) if status else None
    if m is None:
        shown = from_stats(page.inner_html("#stats"))
    else:
        shown = (float(m.group(3)), int(m.group(1)))
    if pacing > 0:  # let the playback finish before the next run (it renders the panels as it plays)
        page.wait_for_function("document.querySelector('#explainer-player .rp').dataset.state === 'done'",
                               timeout=600_000)
    return shown[0], wall, shown[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--preset", type=int, default=0, help="index of the model-pair preset (default: the first)")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--pace", type=float, default=0.3, help="the paced run's seconds per iteration")
    ap.add_argument("--chromium", default=os.environ.get("SPECDEC_CHROMIUM", "/usr/bin/chromium"))
    args = ap.parse_args(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

    from gradio_client import Client
    from playwright.sync_api import sync_playwright

    from app.capacity import configure, model_slots
    from app.layout import build_demo, launch_kwargs
    from app.presets import presets

    configure(model_slots())  # as app.py: the threads and the cross-run batching of the served app
    preset = presets()[args.preset]
    values = settings_values(preset.label, args.max_new_tokens)
    demo = build_demo()
    demo.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True, **launch_kwargs())
    client = Client(demo.local_url, verbose=False)
    print(f"pair: {preset.label}; method {values['method']}, gamma {values['gamma']}, temperature "
          f"{values['temperature']}, seed {values['seed']}, {args.max_new_tokens} new tokens")
    rows = {name: [] for name in ("engine", "api", "browser0", "paced")}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.goto(demo.local_url)
        page.get_by_role("tab", name="Explainer").first.click()
        page.wait_for_selector("#chips .chip", timeout=120_000)
        set_number(page, "Max new tokens", args.max_new_tokens)  # the other settings are the defaults
        engine_run(values)  # warm-up: loads the pair
        for r in range(args.repeats):
            for name, run in (("engine", lambda: engine_run(values)), ("api", lambda: api_run(client, values)),
                              ("browser0", lambda: browser_run(page, 0)),
                              ("paced", lambda: browser_run(page, args.pace))):
                tps, wall, n = run()
                rows[name].append((tps, wall, n))
                sent = (f", {STREAMED[-1][0]} updates ({STREAMED[-1][1] / 1e3:.0f} kB) before the end"
                        if name == "api" else "")
                print(f"repeat {r + 1} {name:9s} {tps:6.1f} tokens/s shown, {n} tokens, {wall:6.2f} s wall{sent}",
                      flush=True)
        browser.close()
    demo.close()
    print("median tokens/s shown: " + ", ".join(
        f"{name} {statistics.median(t for t, _, _ in got):.1f}" for name, got in rows.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
