"""A whole class at once: N clients press Run within a few seconds against a running app.

Starts nothing itself: point it at an app already running on localhost (`python app.py`), e.g.

    .venv/bin/python scripts/classroom_load.py --url http://127.0.0.1:7860/ --clients 30 --within 5

Each client submits one /generate run (its own prompt and seed, `--max-new-tokens` tokens, the
app's default pacing unless `--pacing`), and a side client calls /lab every few seconds during the
burst. The clients connect first (the students' pages are open before the teacher says "press Run
now"); the burst is their submits. It prints how many runs were served and refused, the waits of
the served (submit to the first update, and submit to the last), the connection times, whether each client got its own result (its prompt in the
returned CLI command), the /lab latencies, and the app's resident memory before and after (when it
can find the server's process). Bounded: every client gives up after `--timeout` seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decoding.procstat import rss_mb  # noqa: E402 (the repository on the path first)

LAB_TABLE = {"headers": ["token", "p (target)", "q (draft)"],
             "data": [["a", 0.4, 0.5], ["b", 0.3, 0.25], ["c", 0.2, 0.15], ["d", 0.1, 0.1]]}
CLI_OUTPUT = 12  # /generate's output holding the "copy as CLI command" text (app/view.py)


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
        kwargs = dict(prompt=prompt, chat=True, seed=i, max_new_tokens=args.max_new_tokens, api_name="/generate")
        if args.pacing is not None:
            kwargs["pacing"] = args.pacing
        if args.preset:
            kwargs["preset"] = args.preset
        kwargs.update(args.set)
        job = client.submit(**kwargs)
        while not job.done():
            if row["first"] is None and job.outputs():
                row["first"] = time.perf_counter() - t0
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
            row["own_result"] = prompt in str(final[CLI_OUTPUT]) and f"--seed {i} " in str(final[CLI_OUTPUT])
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


def summary(rows: list, labs: list, rss: tuple, connects: list) -> dict:
    served = [r for r in rows if r["served"]]
    waits = [r["done"] for r in served]
    firsts = [r["first"] for r in served]
    med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
    return {
        "clients": len(rows), "served": len(served), "refused": sum(r["refused"] for r in rows),
        "failed": sum(1 for r in rows if not r["served"] and not r["refused"]),
        "wait_done_median_s": med(waits), "wait_done_max_s": max(waits) if waits else None,
        "wait_first_update_median_s": med(firsts), "wait_first_update_max_s": max(firsts) if firsts else None,
        "own_result": f"{sum(r['own_result'] for r in served)}/{len(served)}",
        "connect_median_s": med(connects), "connect_max_s": max(connects) if connects else None,
        "lab_calls": len(labs), "lab_median_s": med(labs), "lab_max_s": max(labs) if labs else None,
        "rss_mb_before": rss[0], "rss_mb_after": rss[1],
        "errors": sorted({r["error"] for r in rows if r["error"]}),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:7860/")
    ap.add_argument("--clients", type=int, default=30)
    ap.add_argument("--within", type=float, default=5.0, help="seconds over which the clients start")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--pacing", type=float, default=None, help="seconds per iteration (default: the app's)")
    ap.add_argument("--preset", default=None, help="the model pair's label in the app (default: the app's first)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="another /generate input, e.g. --set gamma_schedule=auto (repeatable)")
    ap.add_argument("--timeout", type=float, default=300.0, help="a client gives up after this many seconds")
    ap.add_argument("--lab-every", type=float, default=2.0, help="seconds between the side client's /lab calls")
    ap.add_argument("--connect-in-burst", action="store_true",
                    help="connect each client inside the burst, its connection counted in its wait (the pages "
                         "open and Run is pressed at once)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.clients < 1 or args.within < 0:
        print("error: --clients must be >= 1 and --within >= 0", file=sys.stderr)
        return 2
    pairs = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or not name:
            print(f"error: --set takes NAME=VALUE (got {item!r})", file=sys.stderr)
            return 2
        try:
            pairs[name] = json.loads(value)  # numbers and true/false as such
        except json.JSONDecodeError:
            pairs[name] = value
    args.set = pairs
    pid = server_pid(urlparse(args.url).port or 80)
    before = rss_mb(pid)
    rows: list = []
    labs: list = []
    stop = threading.Event()
    lab = threading.Thread(target=lab_client, args=(args.url, stop, labs, args.lab_every), daemon=True)
    lab.start()
    from concurrent.futures import ThreadPoolExecutor

    if args.connect_in_burst:
        connections = [(None, None, None)] * args.clients
    else:  # the class opens the page first; the burst is the Run presses
        with ThreadPoolExecutor(8) as pool:
            connections = list(pool.map(lambda i: connect(args.url, i), range(args.clients)))
    threads = []
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
    stop.set()
    lab.join(10)
    result = summary(rows, labs, (before, rss_mb(pid)), [seconds for _, seconds, _ in connections if seconds is not None])
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:28s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
