"""Per-session state: everything one browser session owns, held in a gr.State with a time to live.

No Gradio here. Models are memoized for the process by `decoding.lm.models.load_model_cached`
(read-only, shared by all users); a session holds its run's records, summary and settings. A live
run also holds its decode generator (its KV caches, the target's kept hidden states, the drafter);
once it has finished, `release_run` drops all of that and packs the records (`packed.py`), so an
idle session holds little more than the compressed trace of the run it shows (`footprint.py`
measures it).
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from decoding.methods.registry import METHODS
from decoding.paths import EXAMPLES
from decoding.trace.record import IterationRecord, RunSummary
from decoding.run.trace_file import read_trace, write_trace

from .packed import PackedRecords, pack
from .settings import Settings

SESSION_TTL_SECONDS = 2 * 3600

__all__ = ["Session", "delete_session", "example_traces", "find_named", "find_trace", "name_key", "read_trace", "write_trace", "SESSION_TTL_SECONDS"]


@dataclass
class Session:
    """Everything one browser session owns. Held in gr.State (with a time to live)."""

    records: list[IterationRecord] | PackedRecords = field(default_factory=list)  # packed once finished
    summary: RunSummary | None = None
    settings: Settings | None = None
    source: str = "none"  # none | live | trace | example
    title: str = ""
    generator: object = None  # the live decode() generator, for Step / continue
    target: object = None  # LoadedModel of the live run
    draft: object = None  # the live run's pair.Draft (None when its method has no drafter)
    target_bytes: int | None = None
    draft_bytes: int | None = None
    baselines: dict = field(default_factory=dict)  # target spec -> autoregressive tokens/s measured here
    created: float = field(default_factory=time.time)
    tmpdir: str | None = None
    meter: object = None
    stop_requested: bool = False
    playback_id: float = 0.0  # the nonce of the player's value: the panels follow only that player
    run_token: int = 0  # changes whenever the run is replaced: a handler still decoding the old one stops

    @property
    def live(self) -> bool:
        return self.generator is not None and not (self.records and self.records[-1].finished)

    def reset_run(self) -> None:
        self.records = []
        self.summary = None
        self.run_token += 1
        self.release_run()

    def release_run(self) -> None:
        """Drop the live run's generator (closing it frees its KV caches, kept hidden states and
        drafter) and its energy meter, and pack its records: what a finished run leaves behind."""
        if self.generator is not None:
            try:
                self.generator.close()
            except Exception:  # noqa: BLE001 - a generator still executing elsewhere
                pass
        self.generator = None
        self.meter = None
        self.records = pack(self.records)

    def models_label(self, lang: str | None = None) -> str:
        """What the run statistics say the run is: a saved trace's replay or a live run, with its models
        (in `lang`; None: the event's language)."""
        from .i18n import t
        from .race_result import drafter_words  # the drafter in words, not by its folder's name

        if self.source in ("trace", "example"):
            base = (t("explainer.models.replay_titled", lang, title=self.title) if self.title
                    else t("explainer.models.replay", lang))
            if self.summary and self.summary.models:
                m = self.summary.models
                base += t("explainer.models.pair", lang, target=m.get("target"),
                          draft=drafter_words(m.get("draft") or "none"))
            return base + t("explainer.models.no_model", lang)
        if self.target is not None:
            uses = self.settings is not None and self.settings.method in METHODS and \
                METHODS[self.settings.method].uses_drafter
            draft = (drafter_words(self.draft.name) if uses and self.draft is not None
                     else t("explainer.models.none", lang))
            precision = str(self.target.dtype).removeprefix("torch.")
            return t("explainer.models.live", lang, target=self.target.name, device=self.target.device,
                     precision=precision, draft=draft)
        return ""

    def baseline_tps(self) -> float | None:
        if self.settings is None:
            return None
        return self.baselines.get(self.settings.target)

    def trace_path(self) -> str | None:
        """Write the run as a trace file (the CLI's --json format) and return its path."""
        if not self.records:
            return None
        if self.tmpdir is None:
            self.tmpdir = tempfile.mkdtemp(prefix="specdec-")
        name = "specdec-run"
        if self.settings is not None:
            name += f"-{self.settings.method}-seed{self.settings.seed}"
        path = Path(self.tmpdir) / f"{name}.jsonl"
        write_trace(path, self.records, self.summary)
        return str(path)


def delete_session(session: "Session | None") -> None:
    """gr.State delete callback: drop the run and its temporary files."""
    if session is None:
        return
    session.reset_run()
    if session.tmpdir:
        shutil.rmtree(session.tmpdir, ignore_errors=True)


def name_key(text: str) -> str:
    """A name compared forgivingly: lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]+", "", str(text).lower())


def find_named(name: str, named: dict[str, Path], suffix: str) -> tuple[str, Path] | None:
    """(title, path) of the shipped file `name` means, among `named` (title -> path): by its title, its
    file stem, its file name (ending in `suffix`), or the stem without its number prefix ("01_");
    None if none matches."""
    wanted = name_key(Path(str(name)).name.removesuffix(suffix))
    if not wanted:
        return None
    for title, path in named.items():
        if wanted in {name_key(title), name_key(path.stem), name_key(path.stem.split("_", 1)[-1])}:
            return title, path
    return None


def find_trace(name: str) -> tuple[str, Path] | None:
    """A shipped example trace by a forgiving name (`find_named`), e.g. "list copy speculative",
    "01_list_copy_speculative" or "01_list_copy_speculative.jsonl"."""
    return find_named(name, example_traces(), ".jsonl")


def example_traces() -> dict[str, Path]:
    """Shipped example traces, by a readable title."""
    out = {}
    for path in sorted(EXAMPLES.glob("*.jsonl")):
        title = path.stem.split("_", 1)[-1].replace("_", " ")
        out[title] = path
    return out
