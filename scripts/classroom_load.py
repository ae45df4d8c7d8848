"""A whole class at once: N clients press Run within a few seconds against the app, in one burst or
several in a row (a soak), with the app's resident memory after each.

Against an app already running (`python app.py`, or a Space's URL):

    .venv/bin/python scripts/classroom_load.py --url http://127.0.0.1:7860/ --clients 30 --within 5

or against one it starts on its own port and stops at the end (`make class-check`, `make class-soak`,
`make class-hall`):

    .venv/bin/python scripts/classroom_load.py --start-app --port 7870 --out 'docs/bench/class-check-{precision}'

First a warm-up client loads the model pair (a short run of the pair) and measures the machine's
plain speed through the app: one autoregressive run of `--plain-tokens` greedy tokens of the pair's
target, alone (the figure every burst's waits are relative to, since a shared machine's speed varies
between days). Then each burst: `--clients` new clients (new sessions) each submit one /generate run
(its own prompt and seed, `--max-new-tokens` tokens, the app's default pair and pacing unless
`--preset`/`--pacing`), spread over `--within` seconds, while a side client calls /lab every few
seconds. The clients connect first (the students' pages are open before the teacher says "press Run
now") unless `--connect-in-burst`. Per burst it reports runs served and refused, the waits of the
served (submit to first update, submit to last), connection times, whether each client got its own
result (its prompt and seed in the returned CLI command), the /lab latencies and the app's resident
memory after the burst (when it can find the server's process). `--bursts N` runs N bursts in a row
(the sessions of earlier bursts stay on the server, as a class's do for two hours) and reports the
memory growth from the first burst's level to the last's. It ends with one line a teacher can read
before class; `--out DIR` writes result.json and summary.md there. Bounded: every client gives up
after `--timeout` seconds.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

from decoding.eval.procstat import rss_mb
from decoding.paths import display_command

ROOT = Path(__file__).resolve().parents[1]

LAB_TABLE = {"headers": ["token", "p (target)", "q (draft)"],
             "data": [["a", 0.4, 0.5], ["b", 0.3, 0.25], ["c", 0.2, 0.15], ["d", 0.1, 0.1]]}
# /generate's outputs, found by their labels in the app's own API description (`output_indices`): the
# API leaves out the layout blocks among the Explainer's outputs, so their places are not app/explainer/view.py's
STATS_LABEL = "Run statistics"  # the run's statistics panel
CLI_LABEL = "Copy as CLI command"  # the "copy as CLI command" text
PLAYBACK_LABEL = "Playback in the browser"  # the browser player's value (its "result" says the decoding speed)
GOALS = {30: (12.0, 25.0), 60: (25.0, 50.0)}  # clients -> the (median, max) waits in seconds a class check aims at
WARM_PROMPT = "Explain in two sentences why the sky is blue."


def server_pid(port: int) -> int | None:
    """The pid of the process listening on localhost:port, from /proc (Linux), or None."""
    try:
        inodes = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                parts = line.split()
                if parts[1].endswith(f":{port:04X}") and parts[3] == "0A":  # LISTEN
                    inodes.add(parts[9])
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if link.startswith("socket:[") and link[8:-1] in inodes:
                        return int(pid)
            except OSError:
                continue
    except OSError:
        return None
    return None


def connect(url: str, i: int) -> tuple:
    """Client i's connection (a student's page, open before the teacher says "press Run"), the
    seconds it took, and the error that stopped it, if any."""
    from gradio_client import Client

    t0 = time.perf_counter()
    try:
        return Client(url, verbose=False), time.perf_counter() - t0, None
    except Exception as exc:  # noqa: BLE001
        return None, time.perf_counter() - t0, re.sub(r"\s+", " ", str(exc))[:160]


_OUTPUT_INDEX: dict[str, int] = {}


def output_index(client, label: str) -> int:
    """The place of /generate's output labelled `label` among the outputs the API returns (read once
    from the app's API description; every client talks to the same app)."""
    if label not in _OUTPUT_INDEX:
        returns = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/generate"]["returns"]
        for i, output in enumerate(returns):
            _OUTPUT_INDEX.setdefault(str(output.get("label")), i)
        if label not in _OUTPUT_INDEX:
            raise RuntimeError(f"the app's /generate has no output labelled {label!r}")
    return _OUTPUT_INDEX[label]


def run_kwargs(args, prompt: str, seed: int, max_new_tokens: int, **more) -> dict:
    """/generate's inputs for one run: the app's defaults except these (and --preset, --pacing, --set)."""
    kwargs = dict(prompt=prompt, chat=True, seed=seed, max_new_tokens=max_new_tokens, api_name="/generate")
    if args.pacing is not None:
        kwargs["pacing"] = args.pacing
    if args.preset:
        kwargs["preset"] = args.preset
    kwargs.update(args.set)
    kwargs.update(more)
    return kwargs


def one_client(client, i: int, args, out: list) -> None:
    """Client i's run; `client` None: connect first, inside the timed wait (--connect-in-burst)."""
    prompt = f"Student {i}: list three animals that start with the letter {chr(65 + i % 26)}."
    t0 = time.perf_counter()
    row = {"client": i, "prompt": prompt, "served": False, "refused": False, "first": None, "done": None,
           "own_result": False, "error": None}
    try:
        if client is None:
            client, _, error = connect(args.url, i)
            if error is not None:
                raise RuntimeError(error)
        job = client.submit(**run_kwargs(args, prompt, i, args.max_new_tokens))
        while not job.done():
            if row["first"] is None and job.outputs():
                row["first"] = time.perf_counter() - t0
            status = job.status()  # while it waits: its place in line and the estimate the page shows
            if getattr(status, "rank", None) is not None:
                row["place"] = max(row.get("place") or 0, int(status.rank) + 1)
            if getattr(status, "eta", None) is not None and row.get("place"):
                row["estimate"] = True
            if time.perf_counter() - t0 > args.timeout:
                job.cancel()
                row["error"] = "timed out"
                break
            time.sleep(0.05)
        if row["error"] is None:
            final = job.result(timeout=5)
            row["done"] = time.perf_counter() - t0
            row["first"] = row["first"] if row["first"] is not None else row["done"]
            row["served"] = True
            cli = str(final[output_index(client, CLI_LABEL)])
            row["own_result"] = prompt in cli and f"--seed {i} " in cli
    except Exception as exc:  # noqa: BLE001 - a refused or failed client is a result, not a crash
        text = str(exc)
        row["refused"] = "busy" in text.lower() or "queue is full" in text.lower()
        row["error"] = re.sub(r"\s+", " ", text)[:160]
    out.append(row)


def lab_client(url: str, stop: threading.Event, out: list, every: float) -> None:
    from gradio_client import Client

    client = Client(url, verbose=False)
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            client.predict(LAB_TABLE, 1.0, 10_000, 0, api_name="/lab")
            out.append(time.perf_counter() - t0)
        except Exception:  # noqa: BLE001
            out.append(float("inf"))
        stop.wait(every)
    client.close()


def warm_up(args) -> dict:
    """Load the pair with one short run, then measure the plain speed of its target alone: one
    autoregressive greedy run of --plain-tokens tokens through the app (its own decoding speed,
    from the player's result). Returns the pair, the precision and the speed found."""
    client, _, error = connect(args.url, -1)
    if error is not None:
        raise RuntimeError(f"cannot connect to {args.url}: {error}")
    try:
        t0 = time.perf_counter()
        final = client.predict(**run_kwargs(args, WARM_PROMPT, 0, 8))
        loaded = time.perf_counter() - t0
        found = re.search(r"target (.+?) on (\S+) in ([A-Za-z0-9]+), draft (.+?)(?:<|$)", str(final[output_index(client, STATS_LABEL)]))
        plain = client.predict(**run_kwargs(args, WARM_PROMPT, 0, args.plain_tokens, method="autoregressive",
                                            temperature=0.0, pacing=0.05))
        speed = re.search(r"\(([\d.]+) tokens/s\)", str((plain[output_index(client, PLAYBACK_LABEL)] or {}).get("result", "")))
    finally:
        client.close()
    return {"target": found.group(1) if found else None, "device": found.group(2) if found else None,
            "precision": found.group(3) if found else None, "draft": found.group(4).strip() if found else None,
            "first_run_s": round(loaded, 2),
            "plain_tokens_per_second": float(speed.group(1)) if speed else None}


def cli_speed(tokens: int, precision: str | None) -> float | None:
    """Plain decoding of the default target by the CLI in its own process on this machine (--lean: no
    top-k lists), the issue's "plain single-run tokens/s"; None if it fails."""
    command = [sys.executable, "-m", "decoding", "generate", "--method", "autoregressive", "--prompt", WARM_PROMPT,
               "--chat", "--temperature", "0", "--max-new-tokens", str(tokens), "--ignore-eos", "--lean", "--json"]
    if precision:
        command += ["--dtype", precision]
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
        return round(json.loads(done.stdout.strip().splitlines()[-1])["tokens_per_second"], 1)
    except (OSError, subprocess.SubprocessError, ValueError, IndexError, KeyError):
        return None


def burst(args, pid: int | None) -> dict:
    """One burst of --clients new sessions; its summary (see `summary`)."""
    rows: list = []
    labs: list = []
    stop = threading.Event()
    lab = threading.Thread(target=lab_client, args=(args.url, stop, labs, args.lab_every), daemon=True)
    lab.start()
    before = rss_mb(pid)
    if args.connect_in_burst:
        connections = [(None, None, None)] * args.clients
    else:  # the class opens the page first; the burst is the Run presses
        with ThreadPoolExecutor(8) as pool:
            connections = list(pool.map(lambda i: connect(args.url, i), range(args.clients)))
    threads = []
    started = time.perf_counter()
    for i, (client, _, error) in enumerate(connections):
        if error is not None:
            rows.append({"client": i, "served": False, "refused": False, "error": error})
            continue
        t = threading.Thread(target=one_client, args=(client, i, args, rows), daemon=True)
        t.start()
        threads.append(t)
        time.sleep(args.within / max(1, args.clients))
    for t in threads:
        t.join(args.timeout + 30)
    wall = time.perf_counter() - started
    stop.set()
    lab.join(10)
    for client, _, _ in connections:
        if client is not None:
            client.close()  # the page is closed: its session stays on the server, as a class's does
    time.sleep(args.settle)  # the last runs' clean-up, then the memory the burst left
    result = summary(rows, labs, (before, rss_mb(pid)),
                     [seconds for _, seconds, _ in connections if seconds is not None])
    result["wall_s"] = round(wall, 2)
    return result


def summary(rows: list, labs: list, rss: tuple, connects: list) -> dict:
    served = [r for r in rows if r["served"]]
    waits = [r["done"] for r in served]
    firsts = [r["first"] for r in served]
    med = lambda xs: round(statistics.median(xs), 2) if xs else None  # noqa: E731
    top = lambda xs: round(max(xs), 2) if xs else None  # noqa: E731
    return {
        "clients": len(rows), "served": len(served), "refused": sum(r["refused"] for r in rows),
        "failed": sum(1 for r in rows if not r["served"] and not r["refused"]),
        "wait_done_median_s": med(waits), "wait_done_max_s": top(waits),
        "wait_first_update_median_s": med(firsts), "wait_first_update_max_s": top(firsts),
        "own_result": f"{sum(r['own_result'] for r in served)}/{len(served)}",
        "waited_in_line": sum(1 for r in rows if r.get("place")),
        "longest_line": max((r.get("place") or 0 for r in rows), default=0),
        "shown_an_estimate": sum(1 for r in rows if r.get("estimate")),
        "connect_median_s": med(connects), "connect_max_s": top(connects),
        "lab_calls": len(labs), "lab_median_s": med(labs), "lab_max_s": top(labs),
        "rss_mb_before": round(rss[0]) if rss[0] is not None else None,
        "rss_mb_after": round(rss[1]) if rss[1] is not None else None,
        "errors": sorted({r["error"] for r in rows if r["error"]}),
    }


def soak(bursts: list[dict]) -> dict | None:
    """Resident memory after each burst, and its growth from the first burst's level to the last's."""
    after = [b["rss_mb_after"] for b in bursts]
    if len(bursts) < 2 or None in after:
        return None
    return {"rss_mb_after_each_burst": after, "growth_after_first_mb": after[-1] - after[0],
            "growth_per_burst_mb": round((after[-1] - after[0]) / (len(after) - 1), 1)}


def teacher_line(args, machine: dict, bursts: list[dict]) -> str:
    """One line a teacher can read before class."""
    last = bursts[-1]
    waits = [b["wait_done_median_s"] for b in bursts if b["wait_done_median_s"] is not None]
    longest = max((b["wait_done_max_s"] for b in bursts if b["wait_done_max_s"] is not None), default=None)
    served = sum(b["served"] for b in bursts)
    total = sum(b["clients"] for b in bursts)
    refused = sum(b["refused"] for b in bursts)
    lab = max((b["lab_max_s"] for b in bursts if b["lab_max_s"] is not None), default=None)
    speed = machine.get("plain_tokens_per_second")
    times = f"{len(bursts)} bursts of " if len(bursts) > 1 else ""
    precision = machine.get("precision") or "the app's default precision"
    line = (f"{times}{args.clients} students pressing Run within {args.within:g} s ({args.max_new_tokens} tokens, "
            f"{machine.get('draft') or args.preset or 'the default pair'}, {precision}): "
            f"{served} of {total} served, {refused} refused")
    if waits:
        goal = GOALS.get(args.clients)
        line += (f"; a typical student waits {statistics.median(waits):.0f} s, the last {longest:.0f} s"
                 + (f" (goal {goal[0]:g} s and {goal[1]:g} s)" if goal else ""))
    if lab is not None:
        line += f"; the lab answered within {lab:.1f} s"
    if last["rss_mb_after"] is not None:
        line += f"; the app holds {last['rss_mb_after']:,} MB"
        grown = soak(bursts)
        if grown:
            line += f" ({grown['growth_after_first_mb']:+,} MB since the first burst)"
    if speed:
        line += f"; this machine decodes {speed:.1f} tokens/s for one student alone"
    return line + "."


def markdown(args, result: dict) -> str:
    """summary.md: the teacher's line, the command, the machine and a table of the bursts."""
    m = result["machine"]
    machine = f"Machine: {m['cpus']} CPUs ({m['cpu']}, load average {m.get('load_average_before')} before the run)"
    if m.get("target"):
        machine += (f"; target {m['target']} on {m.get('device')} in {m.get('precision')}, draft {m.get('draft')}; "
                    f"plain decoding alone {m.get('plain_tokens_per_second')} tokens/s ({args.plain_tokens} greedy "
                    "tokens through the app, measured right before the bursts)")
        if m.get("cli_plain_tokens_per_second"):
            machine += (f", {m['cli_plain_tokens_per_second']} tokens/s by the CLI (`python -m decoding generate "
                        f"--method autoregressive --temperature 0 --max-new-tokens {args.plain_tokens} --ignore-eos "
                        "--lean`, in its own process, without the app's top-k lists and trace)")
        machine += "."
    else:
        machine += ("; no warm-up run (--no-warm-up): the first clients loaded the models, and no plain speed "
                    "was measured.")
    lines = [f"# Class check, {result['date']}", "", result["summary"], "", "```", result["command"], "```", "",
             machine, "",
             "| burst | served | refused | wait median | wait max | first update median | /lab max | RSS after |",
             "|---|---|---|---|---|---|---|---|"]
    for i, b in enumerate(result["bursts"], 1):
        lines.append(f"| {i} | {b['served']}/{b['clients']} | {b['refused']} | {b['wait_done_median_s']} s | "
                     f"{b['wait_done_max_s']} s | {b['wait_first_update_median_s']} s | {b['lab_max_s']} s | "
                     f"{b['rss_mb_after']} MB |")
    if result.get("soak"):
        s = result["soak"]
        lines += ["", f"Resident memory after the first burst {s['rss_mb_after_each_burst'][0]} MB, after the last "
                      f"{s['rss_mb_after_each_burst'][-1]} MB ({s['growth_after_first_mb']:+} MB)."]
    return "\n".join(lines) + "\n"


def cpu_name() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def start_app(port: int, env: dict) -> subprocess.Popen:
    """`python app.py` on localhost:port in its own process group; returns once it answers."""
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"class-check-app-{port}.log", "w")
    proc = subprocess.Popen([sys.executable, str(ROOT / "app.py")], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port),
                                 "GRADIO_ANALYTICS_ENABLED": "False", **env}, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the app exited with code {proc.returncode} (log: {log.name})")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
                if response.status == 200:
                    return proc
        except OSError:
            time.sleep(1)
    stop_app(proc)
    raise RuntimeError(f"the app did not answer on port {port} within 180 s (log: {log.name})")


def stop_app(proc: subprocess.Popen) -> None:
    """Stop the app this script started (and only it)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def parse_pairs(items: list[str], what: str) -> dict:
    pairs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"{what} takes NAME=VALUE (got {item!r})")
        try:
            pairs[name] = json.loads(value)  # numbers and true/false as such
        except json.JSONDecodeError:
            pairs[name] = value
    return pairs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=None, help="the app's address (default http://127.0.0.1:7860/, or the "
                                                "app --start-app starts)")
    ap.add_argument("--start-app", action="store_true",
                    help="start `python app.py` on --port first, stop it at the end")
    ap.add_argument("--port", type=int, default=7870, help="--start-app's port")
    ap.add_argument("--app-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment variable of the app --start-app starts, e.g. SPECDEC_DTYPE=float32")
    ap.add_argument("--clients", type=int, default=30)
    ap.add_argument("--within", type=float, default=5.0, help="seconds over which the clients start")
    ap.add_argument("--bursts", type=int, default=1, help="bursts of new sessions in a row (a soak), memory after each")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds after a burst before its memory is read")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--pacing", type=float, default=None, help="seconds per iteration (default: the app's)")
    ap.add_argument("--preset", default=None, help="the model pair: its key in app/presets.py (e.g. default-hybrid, "
                                                   "the hybrid with the distilled draft) or its label in the app "
                                                   "(default: the app's first, its default pair)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="another /generate input, e.g. --set gamma_schedule=auto (repeatable)")
    ap.add_argument("--plain-tokens", type=int, default=64, help="tokens of the warm-up's plain-speed run")
    ap.add_argument("--no-warm-up", action="store_true", help="no warm-up run (the first clients then load the models)")
    ap.add_argument("--timeout", type=float, default=300.0, help="a client gives up after this many seconds")
    ap.add_argument("--lab-every", type=float, default=2.0, help="seconds between the side client's /lab calls")
    ap.add_argument("--connect-in-burst", action="store_true",
                    help="connect each client inside the burst, its connection counted in its wait (the pages "
                         "open and Run is pressed at once)")
    ap.add_argument("--out", default=None, help="write result.json and summary.md into this folder ({precision} "
                                                "is replaced by the app's precision)")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = ap.parse_args(argv)
    if args.clients < 1 or args.within < 0 or args.bursts < 1 or args.plain_tokens < 1:
        print("error: --clients, --bursts and --plain-tokens must be >= 1 and --within >= 0", file=sys.stderr)
        return 2
    if args.start_app and args.url:
        print("error: --start-app starts its own app: leave out --url", file=sys.stderr)
        return 2
    try:
        args.set = parse_pairs(args.set, "--set")
        app_env = {k: str(v) for k, v in parse_pairs(args.app_env, "--app-env").items()}
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.preset:
        from app.presets import presets

        found = [p.label for p in presets() if args.preset in (p.key, p.label)]
        if not found:
            print(f"error: no preset {args.preset!r}; the app's presets: {', '.join(p.key for p in presets())}",
                  file=sys.stderr)
            return 2
        args.preset = found[0]
    command = display_command("python scripts/classroom_load.py", argv if argv is not None else sys.argv[1:])
    proc = None
    try:
        if args.start_app:
            proc = start_app(args.port, app_env)
            args.url, pid = f"http://127.0.0.1:{args.port}/", proc.pid
        else:
            args.url = args.url or "http://127.0.0.1:7860/"
            pid = server_pid(urlparse(args.url).port or 80)
        machine = {"cpus": os.cpu_count(), "cpu": cpu_name(), "load_average_before": round(os.getloadavg()[0], 2)
                   if hasattr(os, "getloadavg") else None}
        if not args.no_warm_up:
            machine.update(warm_up(args))
        if args.start_app and not args.no_warm_up and not args.preset:  # the app on this machine: its target
            machine["cli_plain_tokens_per_second"] = cli_speed(args.plain_tokens, machine.get("precision"))
        bursts = []
        for _ in range(args.bursts):
            bursts.append(burst(args, pid))
            if not args.json:
                print(json.dumps(bursts[-1]), flush=True)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if proc is not None:
            stop_app(proc)
    result = {"date": datetime.date.today().isoformat(), "command": command, "machine": machine,
              "settings": {"clients": args.clients, "within_s": args.within, "max_new_tokens": args.max_new_tokens,
                           "pacing": args.pacing, "preset": args.preset, "set": args.set,
                           "connect_in_burst": args.connect_in_burst, "bursts": args.bursts},
              "bursts": bursts, "soak": soak(bursts), "summary": teacher_line(args, machine, bursts)}
    if args.out:
        folder = Path(args.out.replace("{precision}", machine.get("precision") or "default"))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "result.json").write_text(json.dumps(result, indent=1) + "\n")
        (folder / "summary.md").write_text(markdown(args, result))
    if args.json:
        print(json.dumps(result))
    else:
        print(result["summary"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
