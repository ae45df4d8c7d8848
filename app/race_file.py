"""Race files: two runs of one prompt, each as the JSON-lines trace of `decoding/run/trace_file.py`,
in one JSON document with which lane is which and the settings of each.

    {"format": "specdec-race", "version": 1, "title": "...", "gallery_id": "gallery-code-1" | null,
     "recorded": {"warmup_tokens": 4, "machine": {...}, "date": "..."},
     "lanes": [{"label": "A", "role": "challenger", "settings": {...}, "trace": [<record>, ..., <summary>]},
               {"label": "B", "role": "baseline", "settings": {...}, "trace": [...]}]}

Each lane's `trace` holds the lines of a trace file as JSON objects, so
`jq -c '.lanes[0].trace[]' race.json > a.jsonl` gives a trace the Explainer opens. Lane B is the
baseline the speedup is measured against. Shipped races live in `assets/races/` (or the folder named
by SPECDEC_APP_RACES) and replay without a model. No Gradio here.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from decoding.errors import keyed
from decoding.paths import ASSETS
from decoding.trace.record import IterationRecord, RunSummary
from decoding.run.trace_file import MAX_TRACE_BYTES, load_trace_lines

FORMAT, VERSION = "specdec-race", 1
MAX_RACE_BYTES = 2 * MAX_TRACE_BYTES
SHIPPED_RACES = ASSETS / "races"


@dataclass
class RaceLane:
    label: str  # "A" or "B"
    role: str  # "challenger" (A) or "baseline" (B)
    records: list[IterationRecord]
    summary: RunSummary
    settings: dict = field(default_factory=dict)  # the app's Settings of the run, as plain data


@dataclass
class Race:
    lanes: list[RaceLane]
    title: str = ""
    gallery_id: str | None = None
    recorded: dict = field(default_factory=dict)  # warm-up tokens, machine, date

    def to_dict(self) -> dict:
        return {
            "format": FORMAT, "version": VERSION, "title": self.title, "gallery_id": self.gallery_id,
            "recorded": self.recorded,
            "lanes": [{"label": lane.label, "role": lane.role, "settings": lane.settings,
                       "trace": [r.to_dict() for r in lane.records] + [lane.summary.to_dict()]}
                      for lane in self.lanes],
        }


def write_race(path, race: Race) -> None:
    Path(path).write_text(json.dumps(race.to_dict(), ensure_ascii=False), encoding="utf-8")


def read_race(path) -> Race:
    """Parse a race file; ValueError with a message a user can act on otherwise."""
    p = Path(path)
    if p.stat().st_size > MAX_RACE_BYTES:
        raise keyed(f"the file is larger than {MAX_RACE_BYTES // (1024 * 1024)} MB", "race.too_large",
                    limit=MAX_RACE_BYTES // (1024 * 1024))
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise keyed("the file is not UTF-8 text (a race file is JSON)", "race.not_utf8") from None
    return race_from_text(text)


def race_from_text(text: str) -> Race:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        first = text.lstrip().split("\n", 1)[0]
        try:
            single = isinstance(json.loads(first), dict) and "summary" in json.loads(first)
        except json.JSONDecodeError:
            single = False
        if single:
            raise keyed("this is a single run's trace (JSON lines), not a race: open it in the Explainer tab "
                        "(Save or open a run)", "race.single_trace") from None
        raise keyed(f"it is not JSON (line {exc.lineno}: {exc.msg})", "race.not_json", number=exc.lineno) from None
    return race_from_dict(data)


def race_from_dict(data) -> Race:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise keyed(f'it is not a race file (no "format": "{FORMAT}" at its top level)', "race.format", format=FORMAT)
    if data.get("version") != VERSION:
        raise keyed(f"race file version {data.get('version')!r} is not supported (this app reads {VERSION})",
                    "race.version", version=repr(data.get("version")), supported=VERSION)
    lanes = data.get("lanes")
    if not isinstance(lanes, list) or len(lanes) != 2:
        found = len(lanes) if isinstance(lanes, list) else "no"
        raise keyed(f"a race file holds two lanes, A and B ({found} found)", "race.lanes", found=found)
    out = []
    for i, lane in enumerate(lanes):
        label = lane.get("label") if isinstance(lane, dict) else None
        name = f"lane {label or 'AB'[i]}"
        if not isinstance(lane, dict) or not isinstance(lane.get("trace"), list):
            raise keyed(f"{name} has no trace (a list of trace lines)", "race.no_trace", lane=label or "AB"[i])
        if not all(isinstance(line, dict) for line in lane["trace"]):
            raise keyed(f"{name}'s trace holds something other than trace lines (JSON objects)", "race.not_lines",
                        lane=label or "AB"[i])
        try:
            records, summary = load_trace_lines(json.dumps(line) for line in lane["trace"])
        except ValueError as exc:
            raise keyed(f"{name}: {exc}", "race.lane_detail", lane=label or "AB"[i], detail=exc) from None
        if summary is None:
            raise keyed(f"{name}'s trace has no summary line", "race.no_summary", lane=label or "AB"[i])
        settings = lane.get("settings") if isinstance(lane.get("settings"), dict) else {}
        out.append(RaceLane(str(label or "AB"[i]), str(lane.get("role") or ("challenger", "baseline")[i]),
                            records, summary, settings))
    recorded = data.get("recorded") if isinstance(data.get("recorded"), dict) else {}
    return Race(out, str(data.get("title") or ""), data.get("gallery_id"), recorded)


def races_dir() -> Path:
    """Where shipped races live: $SPECDEC_APP_RACES, else assets/races (read when called)."""
    explicit = os.environ.get("SPECDEC_APP_RACES")
    return Path(explicit) if explicit else SHIPPED_RACES


def shipped_races() -> dict[str, Path]:
    """Shipped race files by title (the file's title, else its name)."""
    out = {}
    for path in sorted(races_dir().glob("*.json")):
        try:
            title = json.loads(path.read_text(encoding="utf-8")).get("title") or path.stem
        except (OSError, ValueError, AttributeError):
            continue
        out[str(title) if str(title) not in out else f"{title} ({path.stem})"] = path
    return out
