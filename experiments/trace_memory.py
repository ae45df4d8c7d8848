"""Trace files at the upload limit: how long one takes to open, and what ten of them leave behind.

Builds a valid trace just under the app's upload limit (the records of a shipped example repeated,
with full top-k lists), opens it ten times through the Explainer's open-trace handler (what an
upload runs), each into its own session, then releases the sessions the way Gradio does when they
expire (`delete_session`). Prints the parse time at the limit and this process's resident memory
before, with ten sessions open, and after they were released.

    .venv/bin/python experiments/trace_memory.py [--opens 10]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


COUNTERS = ("target_calls", "draft_calls", "generated", "elapsed")


def trace_at_limit(folder: Path, limit: int) -> Path:
    """A valid trace of shipped records (iteration numbers and counters continued) just under `limit` bytes."""
    from decoding.paths import EXAMPLES

    lines = [json.loads(x) for x in next(iter(sorted(EXAMPLES.glob("*.jsonl")))).read_text().splitlines() if x]
    records = [x for x in lines if not x["summary"]]
    out, size, n, offset = [], 0, 0, {key: 0 for key in COUNTERS}
    while True:
        for r in records:
            r = dict(r, iteration=n, finished=False)
            for key in COUNTERS:  # counters only grow: each repetition continues from the last
                r[key] = r[key] + offset[key]
            line = json.dumps(r, ensure_ascii=False) + "\n"
            if size + len(line) > limit - 2048:
                path = folder / "at-limit.jsonl"
                out[-1] = json.dumps(dict(json.loads(out[-1]), finished=True), ensure_ascii=False) + "\n"
                path.write_text("".join(out), encoding="utf-8")
                return path
            out.append(line)
            size += len(line)
            n += 1
        offset = {key: r[key] for key in COUNTERS}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opens", type=int, default=10)
    args = ap.parse_args(argv)
    from app.explainer.handlers import open_trace_file
    from decoding.eval.procstat import rss_mb
    from app.session import Session, delete_session
    from decoding.run.trace_file import MAX_TRACE_BYTES, read_trace

    folder = Path(tempfile.mkdtemp(prefix="specdec-mem-"))
    path = trace_at_limit(folder, MAX_TRACE_BYTES)
    t0 = time.perf_counter()
    records, _ = read_trace(path)
    parse = time.perf_counter() - t0
    del records
    gc.collect()
    before = rss_mb()
    sessions = []
    t0 = time.perf_counter()
    for i in range(args.opens):
        session = Session()
        open_trace_file(session, str(path), f"upload {i}", "trace", 0)
        sessions.append(session)
    opened = (time.perf_counter() - t0) / args.opens
    held = rss_mb()
    for session in sessions:
        delete_session(session)
    sessions.clear()
    gc.collect()
    after = rss_mb()
    print(f"trace file            {path.stat().st_size / 2**20:.2f} MB, {len(read_trace(path)[0])} records")
    print(f"parse (read_trace)    {parse:.2f} s")
    print(f"open with the panels  {opened:.2f} s each")
    print(f"resident memory       {before:.0f} MB before, {held:.0f} MB with {args.opens} sessions open, "
          f"{after:.0f} MB after they were released")
    return 0


if __name__ == "__main__":
    sys.exit(main())
