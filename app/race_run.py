"""Recording a race: two runs of one prompt on loaded models, one after the other, as the app's
Race button and `scripts/record_races.py` both do it.

Both methods are warmed up first (a short untimed run each), then each runs once with a lean trace
(no top-k lists: the timing is the method's, not the trace's), the second after the first has
finished, so they never share the CPU. The records' `elapsed` is each run's own measured clock.
No Gradio here.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from dataclasses import dataclass
from typing import Callable

from decoding.paths import display_path

from .race_file import Race, RaceLane
from .settings import Settings

WARMUP_TOKENS = 4
ROLES = ("challenger", "baseline")


@dataclass
class LaneRun:
    """One lane to record: its settings and the models they loaded (`draft`: a pair.Draft or None)."""

    label: str
    settings: Settings
    target: object
    draft: object = None


def settings_data(s: Settings) -> dict:
    """A run's settings as plain data, with model paths relative to the repository (a file written
    here names no directory of this machine)."""
    data = dataclasses.asdict(s)
    for key in ("target", "draft"):
        spec = str(data.get(key) or "")
        kind, sep, inner = spec.partition(":")
        if sep and kind == "hybrid":  # hybrid:<draft model>
            data[key] = f"hybrid:{display_path(inner)}"
        elif spec:
            data[key] = display_path(spec)
    return data


def record_race(runs: list[LaneRun], progress: Callable[[float, str], None] | None = None,
                warmup_tokens: int = WARMUP_TOKENS, title: str = "", gallery_id: str | None = None,
                recorded: dict | None = None) -> Race:
    """Warm up every lane, then run them one after the other; ValueError from the engine as it comes."""
    from decoding.run.runner import decode, summarize

    def report(fraction: float, message: str) -> None:
        if progress is not None:
            progress(min(0.99, fraction), message)

    prompts = [run.target.encode_prompt(run.settings.prompt, run.settings.chat) for run in runs]
    for i, (run, ids) in enumerate(zip(runs, prompts)):
        report(0.05 * i / len(runs), f"{run.label}: warming up {run.settings.method}")
        config = dataclasses.replace(run.settings.config(), lean=True,
                                     max_new_tokens=min(warmup_tokens, run.settings.max_new_tokens))
        for _ in decode(run.target, run.draft, ids, config):
            pass
    lanes = []
    for i, (run, ids) in enumerate(zip(runs, prompts)):
        config = dataclasses.replace(run.settings.config(), lean=True)
        records = []
        for record in decode(run.target, run.draft, ids, config):
            records.append(record)
            done = record.generated / max(run.settings.max_new_tokens, 1)
            report(0.05 + 0.95 * (i + done) / len(runs), f"{run.label}: {run.settings.method}")
        summary = summarize(records, config, run.settings.prompt, run.target, run.draft)
        lanes.append(RaceLane(run.label, ROLES[min(i, 1)], records, summary, settings_data(run.settings)))
    meta = {"warmup_tokens": warmup_tokens, "date": _dt.datetime.now().isoformat(timespec="seconds"),
            **(recorded or {})}
    return Race(lanes, title, gallery_id, meta)
