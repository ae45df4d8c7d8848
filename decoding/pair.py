"""A run's models: the target and what drafts for it, loaded and checked in one place.

`Draft` is one small value for "what proposes the draft tokens": a draft model, or a weight-free
drafter (prompt lookup). It knows its name, kind, weight bytes and how to make a fresh drafter for
a run (drafters hold per-run KV caches). `load_pair` is the one "load the target, load the draft,
check that they share a vocabulary" path of the CLI, the benchmark and the app.
"""

from __future__ import annotations

from dataclasses import dataclass

from .drafters import PROMPT_LOOKUP, ModelDrafter, PromptLookupDrafter
from .models import DEFAULT_TARGET, LoadedModel, check_same_vocabulary, load_draft, load_model, load_model_cached
from .paths import SHIPPED_DRAFT

__all__ = ["Draft", "as_draft", "default_draft_spec", "load_pair", "PROMPT_LOOKUP"]

DRAFT_KINDS = ("model", PROMPT_LOOKUP)


@dataclass(frozen=True, eq=False)
class Draft:
    """What proposes draft tokens: `kind` "model" (with its LoadedModel) or "prompt-lookup"."""

    kind: str
    name: str  # what tables and the app show
    spec: str  # as the user gave it: a path, a hub id, "prompt-lookup"
    model: LoadedModel | None = None

    def __post_init__(self) -> None:
        if self.kind not in DRAFT_KINDS:
            raise ValueError(f"unknown kind of draft {self.kind!r}")
        if (self.kind == "model") != (self.model is not None):
            raise ValueError("a model draft needs its model, a weight-free drafter has none")

    @staticmethod
    def prompt_lookup() -> "Draft":
        return Draft(PROMPT_LOOKUP, PROMPT_LOOKUP, PROMPT_LOOKUP)

    @staticmethod
    def of_model(model: LoadedModel) -> "Draft":
        return Draft("model", model.name, model.spec, model)

    @property
    def weight_bytes(self) -> int:
        """Bytes of weights one draft step reads (0 without a model)."""
        return self.model.weight_bytes if self.model is not None else 0

    @property
    def dtype(self):
        return self.model.dtype if self.model is not None else None

    def drafter(self, target: LoadedModel):
        """A fresh drafter for one run against `target`."""
        if self.model is None:
            return PromptLookupDrafter(target.vocab_size, target.device)
        check_same_vocabulary(target, self.model)
        width = min(target.vocab_size, self.model.vocab_size)
        return ModelDrafter(self.model.model, self.model.device, width, self.model.name)


def as_draft(value) -> Draft:
    """A Draft from what callers hold: a Draft, a LoadedModel, "prompt-lookup", or None (prompt lookup)."""
    if isinstance(value, Draft):
        return value
    if value is None or value == PROMPT_LOOKUP:
        return Draft.prompt_lookup()
    if isinstance(value, LoadedModel):
        return Draft.of_model(value)
    raise ValueError(f"unknown draft {value!r}: load it with decoding.pair.load_pair first")


def default_draft_spec(target_spec: str) -> str:
    """The shipped distilled draft for the embedded default target; prompt lookup for any other."""
    if target_spec == DEFAULT_TARGET and (SHIPPED_DRAFT / "config.json").is_file():
        return str(SHIPPED_DRAFT)
    return PROMPT_LOOKUP


def load_draft_value(spec: str, target: LoadedModel, dtype=None, draft_dtype=None, cached: bool = False,
                     progress=None) -> Draft:
    """Load the draft `spec` for `target` (on its device) and check that they share a vocabulary."""
    if spec == PROMPT_LOOKUP:
        return Draft.prompt_lookup()
    model = load_draft(spec, target.device, dtype, draft_dtype, progress=progress, cached=cached)
    check_same_vocabulary(target, model)
    return Draft.of_model(model)


def load_pair(target_spec: str = DEFAULT_TARGET, draft_spec: str | None = None, *, device=None, dtype=None,
              draft_dtype=None, need_draft: bool = True, cached: bool = False,
              target_progress=None, draft_progress=None) -> tuple[LoadedModel, Draft | None]:
    """(target, draft) ready to decode. `draft_spec` None: the target's default draft; `need_draft`
    False (a method without a drafter) loads no draft. Raises ModelLoadError with one clear line."""
    loader = load_model_cached if cached else load_model
    target = loader(target_spec, device=device, dtype=dtype, progress=target_progress)
    if not need_draft:
        return target, None
    spec = draft_spec or default_draft_spec(target_spec)
    return target, load_draft_value(spec, target, dtype, draft_dtype, cached, draft_progress)
