"""The settings of one app run: checked on the server with the app's limits, turned into the
engine's RunConfig, and written out as the CLI command that reproduces the run.

A method's own settings (KL bound, beams, tree size, ...) come from its settings dataclass in the
method registry (`decoding.methods.registry`): their ranges are checked there and their CLI flags come
from there. No Gradio here: the handlers turn the ValueErrors into visible messages.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from decoding.methods.registry import METHODS, MethodSpec, method_spec
from decoding.run.pair import PROMPT_LOOKUP
from decoding.errors import keyed
from decoding.methods.base import RunConfig
from decoding.trace.record import RunSummary
from decoding.rules.warp import SamplingConfig

# A coarse bound on the prompt's characters; the exact limit is in tokens, checked once the model is
# loaded: the prompt and max new tokens must fit the model's context (`live.start`).
MAX_PROMPT_CHARS = int(os.environ.get("SPECDEC_APP_MAX_PROMPT_CHARS", 32000))
PRECISIONS = ("auto", "bfloat16", "float16", "float32")
MAX_NEW_TOKENS = int(os.environ.get("SPECDEC_APP_MAX_NEW_TOKENS", 256))
MAX_GAMMA = int(os.environ.get("SPECDEC_APP_MAX_GAMMA", 16))


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
    extra: dict = field(default_factory=dict)  # the method's own settings, by field name
    dtype: str = "auto"  # the target's precision: auto (the device's default) or a dtype name

    def key(self) -> tuple:
        return (self.prompt, self.chat, self.method, self.gamma, self.temperature, self.top_k, self.top_p,
                self.lenience, self.seed, self.max_new_tokens, self.target, self.draft,
                tuple(sorted(self.extra.items())), self.dtype)

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
        raise keyed(f"{name} must be a whole number (got {value!r})", "settings.whole", what=name,
                    value=repr(value)) from None
    if f != f or int(f) != f:
        raise keyed(f"{name} must be a whole number (got {value!r})", "settings.whole", what=name, value=repr(value))
    return int(f)


def _number(value, name: str) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise keyed(f"{name} must be a number (got {value!r})", "settings.number", what=name,
                    value=repr(value)) from None
    if f != f or f in (float("inf"), float("-inf")):
        raise keyed(f"{name} must be a finite number (got {value!r})", "settings.finite", what=name, value=repr(value))
    return f


def app_knobs(spec: MethodSpec) -> list:
    """(field, knob) of the method's settings that the app shows as controls."""
    return [(f, k) for f, k in spec.settings.knobs() if k.app]


def method_values(spec: MethodSpec, extra: dict | None) -> dict:
    """The method's app settings from raw control values (keyed by control or field name), checked
    by its settings dataclass; keyed by field name."""
    extra = extra or {}
    values = {}
    for f, k in app_knobs(spec):
        for name in spec.settings.names(f):
            if name in extra and extra[name] is not None:
                values[f.name] = extra[name]
                break
    checked = spec.settings.from_dict(values)  # ValueError with the setting's own message
    return {name: getattr(checked, name) for name in values}


def make_settings(prompt, chat, method, gamma, temperature, top_k, top_p, lenience, seed, max_new_tokens,
                  target, draft, extra: dict | None = None, methods: dict | None = None, dtype="auto") -> Settings:
    """Validate raw UI values with server-side limits; raise ValueError with a readable message."""
    prompt = prompt if isinstance(prompt, str) else ""
    if not prompt.strip():
        raise keyed("The prompt is empty: type a prompt or pick an example.", "settings.prompt_empty")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise keyed(f"The prompt is {len(prompt)} characters long; this app allows at most {MAX_PROMPT_CHARS}.",
                    "settings.prompt_long", length=len(prompt), limit=MAX_PROMPT_CHARS)
    methods = METHODS if methods is None else methods
    if method not in methods:
        raise keyed(f"Unknown method {method!r}; choose one of: {', '.join(methods)}.", "settings.method",
                    method=repr(method), choices=", ".join(methods))
    spec = methods[method]
    gamma = _whole(gamma, "gamma")
    if spec.uses_gamma and not (1 <= gamma <= MAX_GAMMA):
        raise keyed(f"gamma (draft length) must be from 1 to {MAX_GAMMA} (got {gamma}).", "settings.gamma",
                    limit=MAX_GAMMA, value=gamma)
    gamma = min(max(gamma, 1), MAX_GAMMA)
    max_new = _whole(max_new_tokens, "max new tokens")
    if not (1 <= max_new <= MAX_NEW_TOKENS):
        raise keyed(f"max new tokens must be from 1 to {MAX_NEW_TOKENS} (got {max_new}).", "settings.max_new",
                    limit=MAX_NEW_TOKENS, value=max_new)
    temperature = _number(temperature, "temperature")
    top_k = _whole(top_k, "top-k")
    top_p = _number(top_p, "top-p")
    lenience = _number(lenience, "lenience") if spec.uses_lenience else 1.0
    if not (0 < lenience <= 1):
        raise keyed(f"lenience must be in (0, 1] (got {lenience}).", "settings.lenience", value=lenience)
    seed = _whole(seed, "seed")
    dtype = str(dtype or "auto")
    if dtype not in PRECISIONS:
        raise keyed(f"precision must be one of {', '.join(PRECISIONS)} (got {dtype!r}).", "settings.precision",
                    choices=", ".join(PRECISIONS), value=repr(dtype))
    kept = method_values(spec, extra)
    settings = Settings(prompt, bool(chat), method, gamma, temperature, top_k, top_p, lenience, seed, max_new,
                        target, draft, kept, dtype)
    settings.config()  # the engine's own checks (temperature, top-k, top-p, lenience)
    return settings


def _flag_value(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def cli_command(s: Settings, methods: dict | None = None) -> str:
    """The headless command that reproduces a run (and writes the same trace file)."""
    spec = method_spec(s.method, methods)
    parts = ["python", "-m", "decoding", "generate", "--prompt", s.prompt]
    if s.chat:
        parts.append("--chat")
    parts += ["--method", s.method]
    if spec.uses_gamma:
        parts += ["--gamma", str(s.gamma)]
    parts += ["--temperature", f"{s.temperature:g}", "--top-k", str(s.top_k), "--top-p", f"{s.top_p:g}"]
    if s.lenience != 1.0:
        parts += ["--lenience", f"{s.lenience:g}"]
    for f, k in spec.settings.knobs():
        value = next((s.extra[n] for n in spec.settings.names(f) if n in s.extra), None)
        if value is None or value == k.auto or value is False:
            continue  # unset, automatic, or a switch that is off
        parts += [k.flag] if value is True else [k.flag, _flag_value(value)]
    parts += ["--seed", str(s.seed), "--max-new-tokens", str(s.max_new_tokens), "--target", s.target]
    if s.dtype != "auto":
        parts += ["--dtype", s.dtype]
    if spec.uses_drafter:
        parts += ["--draft", s.draft]
    return " ".join(shlex.quote(p) for p in parts) + " --json > run.jsonl"


def settings_from_summary(summary: RunSummary | None) -> Settings | None:
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
            dtype=models.get("dtype") if models.get("dtype") in PRECISIONS else "auto",
        )
    except (TypeError, ValueError):
        return None
