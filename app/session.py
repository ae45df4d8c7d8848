"""Per-session state, model-pair presets, server-side limits, trace files and the CLI command.

No Gradio here: `layout.py` turns the ValueErrors raised below into visible gr.Error messages.
Models are memoized for the process by `decoding.models.load_model_cached` (read-only, shared by
all users); everything that belongs to one user lives in a `Session` held in a gr.State.
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from decoding.strategies import METHODS, USES_DRAFTER, RunConfig
from decoding.trace import IterationRecord, RunSummary, load_trace_lines
from decoding.warp import SamplingConfig

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = ROOT / "assets" / "examples"

# ----------------------------------------------------------------------------- limits (server side)
MAX_PROMPT_CHARS = int(os.environ.get("SPECDEC_APP_MAX_PROMPT_CHARS", 2000))
MAX_NEW_TOKENS = int(os.environ.get("SPECDEC_APP_MAX_NEW_TOKENS", 256))
MAX_GAMMA = int(os.environ.get("SPECDEC_APP_MAX_GAMMA", 16))
MAX_BEAMS = 8
MAX_TRACE_BYTES = 20 * 1024 * 1024
MAX_PARAMS = float(os.environ.get("SPECDEC_APP_MAX_PARAMS", 2.0e9))  # custom models above this are refused
SESSION_TTL_SECONDS = 2 * 3600
PROMPT_LOOKUP = "prompt-lookup"
SHIPPED_DRAFT = Path(__file__).resolve().parents[1] / "assets" / "draft-smollm2-135m"

# ----------------------------------------------------------------------------- presets
@dataclass(frozen=True)
class Preset:
    key: str
    label: str
    target: str
    draft: str
    chat: bool
    note: str = ""


def _presets() -> list[Preset]:
    env_target = os.environ.get("SPECDEC_APP_TARGET")
    env_draft = os.environ.get("SPECDEC_APP_DRAFT")
    if env_target:
        first = Preset("default", f"Configured pair: {Path(env_target).name} + {Path(env_draft).name if env_draft else PROMPT_LOOKUP}",
                       env_target, env_draft or PROMPT_LOOKUP, False, "set by SPECDEC_APP_TARGET / SPECDEC_APP_DRAFT")
    else:
        first = Preset("default", "Offline default: SmolLM2-135M-Instruct, drafted by the distilled 16.8M draft",
                       "default", str(SHIPPED_DRAFT), True,
                       "runs with no network; first load converts the GGUF (~20 s)")
    lookup = Preset("default-lookup", "Offline: SmolLM2-135M-Instruct, drafted by prompt lookup (no draft model)",
                    "default", PROMPT_LOOKUP, True, "copies n-grams from the context: drafts only where text repeats")
    return [
        first,
        lookup,
        Preset("smollm2-360m", "SmolLM2-135M-Instruct → SmolLM2-360M-Instruct (hub)",
               "HuggingFaceTB/SmolLM2-360M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct", True, "needs the hub"),
        Preset("smollm2-1.7b", "SmolLM2-135M-Instruct → SmolLM2-1.7B-Instruct (hub)",
               "HuggingFaceTB/SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct", True, "needs the hub"),
        Preset("qwen2.5", "Qwen2.5-0.5B-Instruct → Qwen2.5-1.5B-Instruct (hub)",
               "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct", True, "needs the hub"),
        Preset("gpt2", "distilgpt2 → gpt2-large (hub)", "openai-community/gpt2-large", "distilbert/distilgpt2", False,
               "needs the hub; no chat template"),
        Preset("custom", "Custom: type a target and a draft below", "", "", False,
               "a hub id (owner/name); 'prompt-lookup' as draft needs no model"),
    ]


def presets() -> list[Preset]:
    """The model-pair presets, read when called (tests set SPECDEC_APP_TARGET before building)."""
    return _presets()


def preset_by_label(label: str) -> Preset | None:
    return next((p for p in presets() if p.label == label), None)


def resolve_pair(preset_label: str, custom_target: str, custom_draft: str) -> tuple[str, str]:
    """(target spec, draft spec) for a preset, or the custom fields, checked for safety."""
    preset = preset_by_label(preset_label)
    if preset is None:
        raise ValueError(f"unknown model pair {preset_label!r}")
    if preset.key != "custom":
        return preset.target, preset.draft
    target = (custom_target or "").strip()
    draft = (custom_draft or "").strip() or PROMPT_LOOKUP
    if not target:
        raise ValueError("type a target model (a hub id such as HuggingFaceTB/SmolLM2-360M-Instruct)")
    for spec in (target, draft):
        check_custom_spec(spec)
    return target, draft


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$|^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def check_custom_spec(spec: str) -> None:
    """A public demo loads hub ids only; local paths need SPECDEC_APP_ALLOW_LOCAL=1."""
    if spec in (PROMPT_LOOKUP, "default"):
        return
    if os.environ.get("SPECDEC_APP_ALLOW_LOCAL") == "1":
        return
    if not _HUB_ID.match(spec) or ".." in spec:
        raise ValueError(f"{spec!r} is not a hub id (owner/name); local paths are disabled in this app")


# ----------------------------------------------------------------------------- methods and knobs
# Which controls each method uses; methods not listed here get gamma (drafting is the norm).
METHOD_KNOBS: dict[str, set[str]] = {
    "autoregressive": set(),
    "speculative": {"gamma", "lenience"},
    "mentored": {"gamma", "kl_bound"},
    "mjsd": {"gamma", "beams", "tau"},
    "ppd": {"tree_budget"},
}
EXTRA_KNOBS = ("kl_bound", "beams", "tau", "tree_budget")


def knobs_for(method: str) -> set[str]:
    return METHOD_KNOBS.get(method, {"gamma"})


def method_choices() -> list[str]:
    return list(METHODS)


def uses_drafter(method: str) -> bool:
    return method in USES_DRAFTER


# ----------------------------------------------------------------------------- settings
@dataclass
class Settings:
    prompt: str
    chat: bool
    method: str
    gamma: int
    temperature: float
    top_k: int
    top_p: float
    lenience: float
    seed: int
    max_new_tokens: int
    target: str
    draft: str
    extra: dict = field(default_factory=dict)

    def key(self) -> tuple:
        return (self.prompt, self.chat, self.method, self.gamma, self.temperature, self.top_k, self.top_p,
                self.lenience, self.seed, self.max_new_tokens, self.target, self.draft, tuple(sorted(self.extra.items())))

    def config(self) -> RunConfig:
        return RunConfig(
            method=self.method,
            max_new_tokens=self.max_new_tokens,
            sampling=SamplingConfig(self.temperature, self.top_k, self.top_p),
            gamma=self.gamma,
            lenience=self.lenience,
            seed=self.seed,
            chat=self.chat,
            extra=dict(self.extra),
        )


def _whole(value, name: str) -> int:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a whole number (got {value!r})") from None
    if f != f or int(f) != f:
        raise ValueError(f"{name} must be a whole number (got {value!r})")
    return int(f)


def _number(value, name: str) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number (got {value!r})") from None
    if f != f or f in (float("inf"), float("-inf")):
        raise ValueError(f"{name} must be a finite number (got {value!r})")
    return f


def make_settings(prompt, chat, method, gamma, temperature, top_k, top_p, lenience, seed, max_new_tokens,
                  target, draft, extra: dict | None = None) -> Settings:
    """Validate raw UI values with server-side limits; raise ValueError with a readable message."""
    prompt = prompt if isinstance(prompt, str) else ""
    if not prompt.strip():
        raise ValueError("The prompt is empty: type a prompt or pick an example.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(f"The prompt is {len(prompt)} characters long; this app allows at most {MAX_PROMPT_CHARS}.")
    if method not in METHODS:
        raise ValueError(f"Unknown method {method!r}; choose one of: {', '.join(METHODS)}.")
    knobs = knobs_for(method)
    gamma = _whole(gamma, "gamma")
    if "gamma" in knobs and not (1 <= gamma <= MAX_GAMMA):
        raise ValueError(f"gamma (draft length) must be from 1 to {MAX_GAMMA} (got {gamma}).")
    gamma = min(max(gamma, 1), MAX_GAMMA)
    max_new = _whole(max_new_tokens, "max new tokens")
    if not (1 <= max_new <= MAX_NEW_TOKENS):
        raise ValueError(f"max new tokens must be from 1 to {MAX_NEW_TOKENS} (got {max_new}).")
    temperature = _number(temperature, "temperature")
    top_k = _whole(top_k, "top-k")
    top_p = _number(top_p, "top-p")
    lenience = _number(lenience, "lenience") if "lenience" in knobs else 1.0
    if not (0 < lenience <= 1):
        raise ValueError(f"lenience must be in (0, 1] (got {lenience}).")
    seed = _whole(seed, "seed")
    kept = {}
    for name, value in (extra or {}).items():
        if name in knobs and value is not None:
            kept[name] = _whole(value, name) if name in ("beams", "tree_budget") else _number(value, name)
    if "tree_budget" in kept and not (0 <= kept["tree_budget"] <= 512):
        raise ValueError(f"tree size must be from 0 (automatic) to 512 (got {kept['tree_budget']}).")
    if "beams" in kept and not (1 <= kept["beams"] <= MAX_BEAMS):
        raise ValueError(f"beams must be from 1 to {MAX_BEAMS} (got {kept['beams']}).")
    settings = Settings(prompt, bool(chat), method, gamma, temperature, top_k, top_p, lenience, seed, max_new,
                        target, draft, kept)
    settings.config()  # the engine's own checks (temperature, top-k, top-p, lenience)
    return settings


def cli_command(s: Settings) -> str:
    """The headless command that reproduces a run (and writes the same trace file)."""
    parts = ["python", "-m", "decoding", "generate", "--prompt", s.prompt]
    if s.chat:
        parts.append("--chat")
    parts += ["--method", s.method]
    if "gamma" in knobs_for(s.method):
        parts += ["--gamma", str(s.gamma)]
    parts += ["--temperature", f"{s.temperature:g}", "--top-k", str(s.top_k), "--top-p", f"{s.top_p:g}"]
    if s.lenience != 1.0:
        parts += ["--lenience", f"{s.lenience:g}"]
    for name, value in sorted(s.extra.items()):
        if name == "tree_budget" and not value:  # 0: PPD's automatic (hardware-aware) tree size
            continue
        if isinstance(value, bool):  # a switch such as --beam-sample (a replayed MJSD trace carries it)
            parts += [f"--{name.replace('_', '-')}"] if value else []
            continue
        parts += [f"--{name.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
    parts += ["--seed", str(s.seed), "--max-new-tokens", str(s.max_new_tokens), "--target", s.target]
    if uses_drafter(s.method) or s.method not in METHOD_KNOBS:
        parts += ["--draft", s.draft]
    return " ".join(shlex.quote(p) for p in parts) + " --json > run.jsonl"


# ----------------------------------------------------------------------------- session
@dataclass
class Session:
    """Everything one browser session owns. Held in gr.State (with a time to live)."""

    records: list[IterationRecord] = field(default_factory=list)
    summary: RunSummary | None = None
    settings: Settings | None = None
    source: str = "none"  # none | live | trace | example
    title: str = ""
    generator: object = None  # the live decode() generator, for Step / continue
    target: object = None  # LoadedModel of the live run
    draft_name: str = ""
    draft: object = None  # LoadedModel of the live run's draft, or the name of a weight-free drafter
    target_bytes: int | None = None
    draft_bytes: int | None = None
    baselines: dict = field(default_factory=dict)  # target spec -> autoregressive tokens/s measured here
    created: float = field(default_factory=time.time)
    tmpdir: str | None = None
    meter: object = None
    stop_requested: bool = False

    @property
    def live(self) -> bool:
        return self.generator is not None and not (self.records and self.records[-1].finished)

    def reset_run(self) -> None:
        if self.generator is not None:
            try:
                self.generator.close()
            except Exception:  # noqa: BLE001 - a generator still executing elsewhere
                pass
        self.generator = None
        self.records = []
        self.summary = None

    def models_label(self) -> str:
        if self.source in ("trace", "example"):
            base = f"Replay of a saved trace: {self.title}" if self.title else "Replay of a saved trace"
            if self.summary and self.summary.models:
                m = self.summary.models
                base += f" — target {m.get('target')}, draft {m.get('draft') or 'none'}"
            return base + " (no model needed)"
        if self.target is not None:
            draft = self.draft_name if self.settings and uses_drafter(self.settings.method) else "none"
            return f"Live run — target {self.target.name} on {self.target.device}, draft {draft}"
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
        import shutil

        shutil.rmtree(session.tmpdir, ignore_errors=True)


def write_trace(path, records: list[IterationRecord], summary: RunSummary | None) -> None:
    import json

    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")
        if summary is not None:
            f.write(json.dumps(summary.to_dict(), ensure_ascii=False) + "\n")


def read_trace(path) -> tuple[list[IterationRecord], RunSummary | None]:
    """Parse an uploaded trace file; ValueError with a readable message otherwise."""
    p = Path(path)
    if p.stat().st_size > MAX_TRACE_BYTES:
        raise ValueError(f"the trace file is larger than {MAX_TRACE_BYTES // (1024 * 1024)} MB")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError("the trace file is not UTF-8 text (expected the JSON lines of `--json`)") from None
    return load_trace_lines(text.splitlines())


def example_traces() -> dict[str, Path]:
    """Shipped example traces, by a readable title."""
    out = {}
    for path in sorted(EXAMPLES_DIR.glob("*.jsonl")):
        title = path.stem.split("_", 1)[-1].replace("_", " ")
        out[title] = path
    return out


def settings_from_summary(summary: RunSummary | None, records: list[IterationRecord]) -> Settings | None:
    """The settings of a saved run (for 'copy as CLI command' and the controls after a replay)."""
    if summary is None:
        return None
    s = summary.settings or {}
    sampling = s.get("sampling") or {}
    models = summary.models or {}
    try:
        return Settings(
            prompt=summary.prompt, chat=bool(s.get("chat")), method=summary.method, gamma=int(s.get("gamma", 4)),
            temperature=float(sampling.get("temperature", 1.0)), top_k=int(sampling.get("top_k", 0)),
            top_p=float(sampling.get("top_p", 1.0)), lenience=float(s.get("lenience", 1.0)), seed=int(s.get("seed", 0)),
            max_new_tokens=int(s.get("max_new_tokens", 64)), target=models.get("target") or "default",
            draft=models.get("draft") or PROMPT_LOOKUP, extra=dict(s.get("extra") or {}),
        )
    except (TypeError, ValueError):
        return None


# ----------------------------------------------------------------------------- measurements
def measured_alpha_c(records: list[IterationRecord]) -> tuple[float | None, float | None, str]:
    """alpha = mean of the records' per-position overlap sum min(p, q); c = draft time per draft
    call / verify time per target call, from the timings (the prefill iteration left out)."""
    overlaps = [d.overlap for r in records for d in r.draft]
    alpha = sum(overlaps) / len(overlaps) if overlaps else None
    timed = records[1:] if len(records) > 1 else records
    prev_t = records[0].target_calls if len(records) > 1 else 0
    prev_d = records[0].draft_calls if len(records) > 1 else 0
    t_calls = (timed[-1].target_calls - prev_t) if timed else 0
    d_calls = (timed[-1].draft_calls - prev_d) if timed else 0
    verify = sum(r.timings.verify for r in timed)
    draft = sum(r.timings.draft for r in timed)
    drafted = sum(len(r.draft) for r in timed)
    if t_calls <= 0 or verify <= 0:
        return alpha, None, "not enough iterations to time"
    t_verify = verify / t_calls
    if d_calls > 0:
        t_draft, how = draft / d_calls, "draft time per draft call"
    elif drafted > 0:
        t_draft, how = draft / drafted, "draft time per drafted token (no draft model: prompt lookup)"
    else:
        return alpha, None, "no drafts to time"
    return alpha, t_draft / t_verify, f"c = {how} / verify time per target call"
