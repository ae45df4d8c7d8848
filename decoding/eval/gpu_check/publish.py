"""Writing what a gpu-check has so far: docs/gpu.md, the GPU Space's choice, the results JSON, and
their copies in `$GPU_CHECK_COPY_TO`.

Called after each part and after each benchmark job, so that a run cut short (a timeout) still leaves
the report and the figures of what finished. The results JSON (`<runs dir>/gpu-check.json`) holds
every figure of the report (the merged parts); it is kept under `MAX_JSON_BYTES` by dropping the
per-prompt tables first. `GPU_CHECK_COPY_TO=<dir>` copies the report, assets/gpu-choice.json (when a
choice was made) and that JSON into `<dir>`, for fetching them back from a machine that is lent.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

from .choice import CHOICE_FILE, choice_from_bench, write_choice
from .report import write_report

RESULTS_JSON = "gpu-check.json"
MAX_JSON_BYTES = 2_000_000


def compact_json(data: dict, limit: int = MAX_JSON_BYTES) -> str:
    """The merged results as JSON under `limit` bytes: tracebacks and per-prompt tables go first."""
    text = json.dumps(data, indent=1, default=str)
    if len(text.encode()) <= limit:
        return text
    slim = copy.deepcopy(data)
    for part in slim.get("parts", {}).values():
        part.pop("traceback", None)
        for job in (part.get("jobs") or {}).values():
            job.pop("per_prompt", None)
            job.pop("traceback", None)
    text = json.dumps(slim, indent=1, default=str)
    if len(text.encode()) <= limit:
        return text
    return json.dumps({"device": data.get("device"), "note": f"results over {limit} bytes: see the runs folder"})


def publish(info: dict, results: dict, report: Path, runs_dir: Path, app_dtype: str | None,
            copy_to: Path | None = None, choice_file: Path = CHOICE_FILE) -> dict:
    """Write the report, the choice (from the bench part's fastest drafter in `app_dtype`), the
    results JSON, and copy them to `copy_to`. Returns what was written, as paths."""
    written = {"report": write_report(info, results, report, runs_dir)}
    choice = choice_from_bench(info, results.get("bench") or {}, app_dtype) if app_dtype else None
    if choice is not None:
        written["choice"] = write_choice(choice, choice_file)
    merged = json.loads((runs_dir / "results.json").read_text())
    results_json = runs_dir / RESULTS_JSON
    results_json.write_text(compact_json(merged))
    written["json"] = str(results_json)
    if copy_to is not None:
        copy_to.mkdir(parents=True, exist_ok=True)
        files = [report, results_json] + ([choice_file] if choice is not None and choice_file.is_file() else [])
        for f in files:
            shutil.copyfile(f, copy_to / f.name)
        written["copied"] = [str(copy_to / f.name) for f in files]
    return written
