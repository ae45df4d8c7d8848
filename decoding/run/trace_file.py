"""Trace files: a run as JSON lines (one record per iteration, then the summary line), the format of
`python -m decoding generate --json` and of the app's download; read back for replay.

A file is checked whole before anything uses it: its size and number of records, every field's
type (`plain.from_plain`: numbers are finite except where infinity means something, such as a KL
divergence), each method's own data through its StepData class, probabilities in [0, 1], counts
that only grow, and lengths that agree. The first problem is reported with its line number.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import Keyed, keyed
from ..trace.record import IterationRecord, RunSummary

# A 256-token run with full top-k lists is a few hundred kB; a long CLI run with lean records less.
MAX_TRACE_BYTES = 5 * 1024 * 1024
MAX_RECORDS = 4096  # iterations in one file (a run of 4096 tokens without any draft)


class TraceFileError(Keyed, ValueError):
    """A file that is not a trace this app can replay; the message says where and why (and its key,
    `decoding.errors.Keyed`, names it for other languages)."""


def write_trace(path, records: list[IterationRecord], summary: RunSummary | None) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")
        if summary is not None:
            f.write(json.dumps(summary.to_dict(), ensure_ascii=False) + "\n")


def read_trace(path) -> tuple[list[IterationRecord], RunSummary | None]:
    """Parse and check a trace file; TraceFileError (a ValueError) with a readable message otherwise."""
    p = Path(path)
    size = p.stat().st_size
    if size > MAX_TRACE_BYTES:
        raise TraceFileError(f"the file is {size / 2**20:.1f} MB; trace files open up to {MAX_TRACE_BYTES // 2**20} MB "
                             "(a 256-token run with full top-k lists is a few hundred kB)", "trace.too_large",
                             size=f"{size / 2**20:.1f}", limit=MAX_TRACE_BYTES // 2**20)
    raw = p.read_bytes()
    if b"\x00" in raw[:4096]:
        raise TraceFileError("the file is binary, not a trace (a trace is the text file of JSON lines that the app's "
                             "Download button or the command line's JSON output writes)", "trace.binary")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TraceFileError("the file is not UTF-8 text (a trace is the text file of JSON lines that the app's "
                             "Download button or the command line's JSON output writes)", "trace.not_utf8") from None
    return load_trace_lines(text.splitlines())


def load_trace_lines(lines) -> tuple[list[IterationRecord], RunSummary | None]:
    """Parse and check a saved run (JSON lines as written by `python -m decoding generate --json`)."""
    records, summary = [], None
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceFileError(f"line {number} of the trace is not JSON: {exc.msg}", "trace.not_json",
                                 number=number) from None
        if not isinstance(data, dict) or "summary" not in data:
            raise TraceFileError(f"line {number} of the file is not a trace record (each line of a trace is one "
                                  "iteration of a decoding run, and the last one its summary)",
                                 "trace.not_record", number=number)
        if summary is not None:
            raise TraceFileError(f"line {number}: a record after the summary line", "trace.after_summary",
                                 number=number)
        if not data["summary"] and len(records) >= MAX_RECORDS:
            raise TraceFileError(f"the trace has more than {MAX_RECORDS} iteration records", "trace.too_many",
                                 limit=MAX_RECORDS)
        try:
            if data["summary"]:
                summary = RunSummary.from_dict(data)
                check_summary(summary)
            else:
                record = IterationRecord.from_dict(data)
                check_record(record, records[-1] if records else None)
                records.append(record)
        except (TypeError, ValueError) as exc:  # PlainDataError is a ValueError naming the field
            raise TraceFileError(f"line {number}: {exc}", "trace.line", number=number, detail=exc) from None
    if not records:
        raise TraceFileError("the trace holds no iteration records", "trace.empty")
    return records, summary


def _probability(value, where: str) -> None:
    if value is not None and not (-1e-6 <= value <= 1.0 + 1e-3):  # float32 sums may pass 1 by a little
        raise keyed(f"{where}: a probability must be in [0, 1] (got {value})", "trace.probability", where=where,
                    value=value)


def _at_least(value, low, where: str) -> None:
    if value is not None and value < low:
        raise keyed(f"{where}: must be >= {low} (got {value})", "trace.at_least", where=where, low=low, value=value)


def check_record(r: IterationRecord, previous: IterationRecord | None) -> None:
    """Ranges and consistency of one record (types were checked while reading it)."""
    from ..methods.registry import STEP_DATA

    for name in ("iteration", "context_length", "gamma", "accepted_length", "target_calls", "draft_calls",
                 "generated"):
        _at_least(getattr(r, name), 0, name)
    for name in ("draft", "verify", "other"):
        _at_least(getattr(r.timings, name), 0.0, f"timings.{name}")
    _at_least(r.elapsed, 0.0, "elapsed")
    _at_least(r.energy_joules, 0.0, "energy_joules")
    if r.accepted_length > len(r.draft):
        raise keyed(f"accepted_length {r.accepted_length} is more than the {len(r.draft)} draft tokens",
                    "trace.accepted_length", accepted=r.accepted_length, drafted=len(r.draft))
    for i, d in enumerate(r.draft):
        for name in ("q", "p", "coin", "threshold", "overlap"):
            _probability(getattr(d, name), f"draft[{i}].{name}")
        for j, c in enumerate(d.top):
            _probability(c.p, f"draft[{i}].top[{j}].p")
            _probability(c.q, f"draft[{i}].top[{j}].q")
    for j, c in enumerate(r.next_top):
        _probability(c.p, f"next_top[{j}].p")
        _probability(c.q, f"next_top[{j}].q")
    if r.residual is not None:
        _probability(r.residual.mass, "residual.mass")
        for j, c in enumerate(r.residual.top):
            _probability(c.p, f"residual.top[{j}].p")
    indices = {n.index for n in r.tree}
    for n in r.tree:
        if n.parent != -1 and n.parent not in indices:
            raise keyed(f"tree node {n.index} has a parent {n.parent} that is not in the tree", "trace.tree_parent",
                        node=n.index, parent=n.parent)
    for key, cls in STEP_DATA.items():
        if key in r.extra:
            cls.from_dict(r.extra[key])  # PlainDataError names the field
    logprobs = r.extra.get("target_logprobs")
    if logprobs is not None:
        if not isinstance(logprobs, list) or len(logprobs) != len(r.emitted):
            raise ValueError("extra.target_logprobs: one log-probability per emitted token expected")
        for v in logprobs:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v > 1e-6:
                raise ValueError(f"extra.target_logprobs: a log-probability must be a number <= 0 (got {v!r})")
    if previous is not None:
        for name in ("target_calls", "draft_calls", "generated", "elapsed"):
            if getattr(r, name) < getattr(previous, name):
                raise keyed(f"{name} went down from {getattr(previous, name)} to {getattr(r, name)} "
                            "(the counters of a run only grow)", "trace.counter_down", name=name,
                            before=getattr(previous, name), after=getattr(r, name))


def check_summary(s: RunSummary) -> None:
    for name in ("iterations", "target_calls", "draft_calls"):
        _at_least(getattr(s, name), 0, name)
    for name in ("tokens_per_call", "tokens_per_second", "wall_seconds"):
        _at_least(getattr(s, name), 0.0, name)
    _at_least(s.mean_accepted, 0.0, "mean_accepted")
    _at_least(s.mean_acceptance_length, 1.0, "mean_acceptance_length")
    for i, rate in enumerate(s.acceptance_per_position):
        _probability(rate, f"acceptance_per_position[{i}]")
    for n, count in enumerate(s.acceptance_length_histogram):
        _at_least(count, 0, f"acceptance_length_histogram[{n}]")
    if s.acceptance_per_position and len(s.acceptance_length_histogram) != len(s.acceptance_per_position) + 1:
        raise ValueError(f"acceptance_length_histogram: {len(s.acceptance_per_position) + 1} counts expected (accepted "
                         f"lengths 0 to {len(s.acceptance_per_position)}), got {len(s.acceptance_length_histogram)}")
    if any(t < 0 for t in s.token_ids):
        raise ValueError("token_ids: token ids are >= 0")
