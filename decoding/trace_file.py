"""Trace files: a run as JSON lines (one record per iteration, then the summary line), the format of
`python -m decoding generate --json` and of the app's download; read back for replay.
"""

from __future__ import annotations

import json
from pathlib import Path

from .trace import IterationRecord, RunSummary

MAX_TRACE_BYTES = 20 * 1024 * 1024


def write_trace(path, records: list[IterationRecord], summary: RunSummary | None) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")
        if summary is not None:
            f.write(json.dumps(summary.to_dict(), ensure_ascii=False) + "\n")


def read_trace(path) -> tuple[list[IterationRecord], RunSummary | None]:
    """Parse a trace file; ValueError with a readable message otherwise."""
    p = Path(path)
    if p.stat().st_size > MAX_TRACE_BYTES:
        raise ValueError(f"the trace file is larger than {MAX_TRACE_BYTES // (1024 * 1024)} MB")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError("the trace file is not UTF-8 text (expected the JSON lines of `--json`)") from None
    return load_trace_lines(text.splitlines())


def load_trace_lines(lines) -> tuple[list[IterationRecord], RunSummary | None]:
    """Parse a saved run (JSON lines as written by `python -m decoding generate --json`)."""
    records, summary = [], None
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {number} of the trace is not JSON: {exc.msg}") from None
        if not isinstance(data, dict) or "summary" not in data:
            raise ValueError(f"line {number} of the trace is not a trace record (no 'summary' key)")
        try:
            if data["summary"]:
                summary = RunSummary.from_dict(data)
            else:
                records.append(IterationRecord.from_dict(data))
        except TypeError as exc:
            raise ValueError(f"line {number} of the trace is missing fields: {exc}") from None
    if not records:
        raise ValueError("the trace holds no iteration records")
    return records, summary
