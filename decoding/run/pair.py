"""A run's models: the target and what drafts for it, loaded and checked in one place.

`Draft` is one small value for "what proposes the draft tokens": a draft model (optionally with a
restricted output head), a weight-free drafter (prompt lookup), or the hybrid of a draft model and
lookup. It knows its name, kind, weight bytes and how to make a fresh drafter for a run (drafters
hold per-run KV caches). `load_pair` is the one "load the target, load the draft, check that they
share a vocabulary" path of the CLI, the benchmark and the app.

Draft specs: a hub id, a directory or a .gguf file (a model); "prompt-lookup"; "distilled" (the
shipped draft); "feature" (the shipped feature draft, which drafts from the target's own hidden
states: drafters/feature.py) or the directory of another; "hybrid" (lookup + the target's default
draft model) or "hybrid:<model spec>", e.g. "hybrid:feature"; "hybrid+corpus[:<model spec>]" adds a
lookup in the default target's shipped corpus of its own answers (corpus.py), "hybrid+corpus=<dir>:..."
in a corpus built for another target (scripts/build_corpus.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from ..drafters.corpus import TextCorpus, load_corpus
from ..drafters.hybrid import HYBRID, HybridDrafter
from ..drafters.lookup import PROMPT_LOOKUP, PromptLookupDrafter
from ..drafters.model import ModelDrafter
from ..errors import ModelLoadError
from ..drafters.feature import FeatureDraftModel, FeatureDrafter, is_feature_draft, load_feature_draft
from ..lm.models import DEFAULT_TARGET, LoadedModel, check_same_vocabulary, load_draft, load_model, load_model_cached
from ..drafters.output_head import OutputHead, load_head
from ..paths import SHIPPED_CORPUS, SHIPPED_DRAFT, SHIPPED_FEATURE_DRAFT, display_path

__all__ = ["Draft", "as_draft", "default_draft_spec", "default_drafter_spec", "load_pair", "PROMPT_LOOKUP", "HYBRID",
           "HYBRID_CORPUS", "DISTILLED", "FEATURE"]

DRAFT_KINDS = ("model", PROMPT_LOOKUP, HYBRID)
DISTILLED = "distilled"  # the shipped draft of the default target, by name
FEATURE = "feature"  # the shipped feature draft of the default target, by name
HYBRID_CORPUS = HYBRID + "+corpus"  # the hybrid with a lookup in the target's own earlier answers


@dataclass(frozen=True, eq=False)
class Draft:
    """What proposes draft tokens: `kind` "model" (with its LoadedModel) or "prompt-lookup"."""

    kind: str
    name: str  # what tables and the app show
    spec: str  # as the user gave it: a path, a hub id, "prompt-lookup", "hybrid"
    model: LoadedModel | None = None
    head: OutputHead | None = None  # a restricted output head of the model (output_head.py)
    feature: FeatureDraftModel | None = None  # a feature draft instead of `model` (drafters/feature.py)
    corpus: TextCorpus | None = None  # a hybrid's corpus of the target's own answers (corpus.py)

    def __post_init__(self) -> None:
        if self.kind not in DRAFT_KINDS:
            raise ValueError(f"unknown kind of draft {self.kind!r}")
        if (self.kind == PROMPT_LOOKUP) != (self.model is None and self.feature is None):
            raise ValueError("a model or hybrid draft needs its model, prompt lookup has none")
        if self.feature is not None and (self.model is not None or self.head is None):
            raise ValueError("a feature draft has its layer and head and no model of its own")

    @staticmethod
    def of_feature(feature: FeatureDraftModel, head: OutputHead, spec: str) -> "Draft":
        return Draft("model", f"feature draft {Path(spec).name}", spec, None, head, feature)

    @staticmethod
    def prompt_lookup() -> "Draft":
        return Draft(PROMPT_LOOKUP, PROMPT_LOOKUP, PROMPT_LOOKUP)

    @staticmethod
    def of_model(model: LoadedModel, head: OutputHead | None = None) -> "Draft":
        return Draft("model", model.name, model.spec, model, head)

    def hybrid(self, corpus: TextCorpus | None = None) -> "Draft":
        """Lookup where the context repeats, this draft's model elsewhere (and, with a `corpus`, a
        lookup in the target's own earlier answers)."""
        if self.model is None and self.feature is None:
            raise ValueError("the hybrid drafter needs a draft model beside lookup")
        if corpus is None:
            return Draft(HYBRID, f"{HYBRID} ({self.name} + lookup)", f"{HYBRID}:{self.spec}", self.model, self.head,
                         self.feature)
        kind = HYBRID_CORPUS if corpus.path in (None, str(SHIPPED_CORPUS)) else f"{HYBRID_CORPUS}={corpus.path}"
        return Draft(HYBRID, f"{HYBRID} ({self.name} + lookup + corpus)", f"{kind}:{self.spec}", self.model,
                     self.head, self.feature, corpus)

    @property
    def weight_bytes(self) -> int:
        """Bytes of weights one model draft step reads (0 without a model; a restricted head reads
        its own rows instead of the full output head, tied to the input embedding or not: a step
        looks up one embedding row, it does not read the matrix)."""
        if self.feature is not None:  # its layer, plus the target's head rows it scores
            layer = sum(p.numel() * p.element_size() for p in self.feature.parameters())
            return layer + self.head.weight_bytes
        if self.model is None:
            return 0
        if self.head is None:
            return self.model.weight_bytes
        full = self.model.model.get_output_embeddings().weight
        return self.model.weight_bytes - full.numel() * full.element_size() + self.head.weight_bytes

    @property
    def dtype(self):
        if self.feature is not None:
            return self.feature.fc.weight.dtype
        return self.model.dtype if self.model is not None else None

    @property
    def n_params(self) -> int:
        """Parameters of the draft's own weights (0 for prompt lookup)."""
        if self.feature is not None:
            return sum(p.numel() for p in self.feature.parameters())
        return self.model.n_params if self.model is not None else 0

    def drafter(self, target: LoadedModel):
        """A fresh drafter for one run against `target`."""
        if self.feature is not None:
            model = FeatureDrafter(self.feature, self.head, target.model.get_input_embeddings(), target.device,
                                   target.vocab_size, self.name)
            if self.kind != HYBRID:
                return model
            return HybridDrafter(model, target.vocab_size, target.device, corpus=self.corpus)
        if self.model is None:
            return PromptLookupDrafter(target.vocab_size, target.device)
        check_same_vocabulary(target, self.model)
        width = min(target.vocab_size, self.model.vocab_size)
        model = ModelDrafter(self.model.model, self.model.device, width, self.model.name, self.head)
        if self.kind == HYBRID:
            return HybridDrafter(model, width, target.device, corpus=self.corpus)
        return model


def as_draft(value) -> Draft:
    """A Draft from what callers hold: a Draft, a LoadedModel, "prompt-lookup", or None (prompt lookup)."""
    if isinstance(value, Draft):
        return value
    if value is None or value == PROMPT_LOOKUP:
        return Draft.prompt_lookup()
    if isinstance(value, LoadedModel):
        return Draft.of_model(value)
    raise ValueError(f"unknown draft {value!r}: load it with decoding.run.pair.load_pair first")


def default_draft_spec(target_spec: str) -> str:
    """The shipped distilled draft for the embedded default target; prompt lookup for any other."""
    if target_spec == DEFAULT_TARGET and (SHIPPED_DRAFT / "config.json").is_file():
        return str(SHIPPED_DRAFT)
    return PROMPT_LOOKUP


def default_drafter_spec(target_spec: str, needs_draft_model: bool = False) -> str:
    """What `generate` drafts with when no draft is named. For the embedded default target: the hybrid
    with the feature draft, the fastest configuration measured on Spec-Bench (docs/performance.md) and
    the app's default preset; a method that beam-searches a draft model (MJSD) gets the distilled
    draft. Any other target: `default_draft_spec` (prompt lookup). The benchmark keeps
    `default_draft_spec`, a draft model, so that HF's assisted generation has the same assistant."""
    if (not needs_draft_model and target_spec == DEFAULT_TARGET and default_draft_spec(target_spec) != PROMPT_LOOKUP
            and (SHIPPED_FEATURE_DRAFT / "config.json").is_file()):
        return f"{HYBRID}:{FEATURE}"
    return default_draft_spec(target_spec)


def load_target_corpus(directory: str, target: LoadedModel, target_spec: str) -> TextCorpus:
    """The corpus of the target's own answers in `directory` (scripts/build_corpus.py), or the
    shipped one of the default target when `directory` is empty."""
    if not directory and target_spec != DEFAULT_TARGET:
        raise ModelLoadError(f"{HYBRID_CORPUS} needs a corpus of the target's own answers; the playground ships one "
                             f"for its default target only: build one with scripts/build_corpus.py --target "
                             f"<target> --out <dir> and pass {HYBRID_CORPUS}=<dir>:<draft model>")
    path = Path(directory).expanduser() if directory else SHIPPED_CORPUS
    try:
        corpus = load_corpus(str(path))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the corpus '{display_path(path)}': {exc}") from None
    if corpus.tokens and max(corpus.tokens) >= target.vocab_size:
        raise ModelLoadError(f"the corpus '{display_path(path)}' holds token ids beyond this target's vocabulary "
                             f"({target.vocab_size}): it was made with another tokenizer")
    return corpus


_drafts: dict[tuple, tuple[LoadedModel, Draft]] = {}  # load_draft_value(cached=True): key -> (target, draft)
_draft_locks: dict[tuple, threading.Lock] = {}
_drafts_guard = threading.Lock()


def load_draft_value(spec: str, target: LoadedModel, dtype=None, draft_dtype=None, cached: bool = False,
                     progress=None, target_spec: str = DEFAULT_TARGET) -> Draft:
    """Load the draft `spec` for `target` (on its device) and check that they share a vocabulary.
    `cached`: memoized for the process per (spec, target, precisions), like `load_model_cached`,
    so that concurrent runs share one draft: one copy of its weights (a feature draft's layer and
    head rows would otherwise be loaded again by every run, and kept by every session that ran
    one), and one model object whose forward passes the cross-run batcher can share (batching.py)."""
    if not cached:
        return _load_draft_value(spec, target, dtype, draft_dtype, False, progress, target_spec)
    key = (spec, id(target), str(dtype), str(draft_dtype), target_spec)
    with _drafts_guard:
        lock = _draft_locks.setdefault(key, threading.Lock())
    with lock:  # a class pressing Run at once loads it once
        hit = _drafts.get(key)
        if hit is not None and hit[0] is target:
            if progress is not None:
                progress(1.0, "ready")
            return hit[1]
        draft = _load_draft_value(spec, target, dtype, draft_dtype, True, progress, target_spec)
        _drafts[key] = (target, draft)  # the target kept with it: its id is not reused while the entry lives
        return draft


def clear_draft_cache() -> None:
    """Forget every draft memoized by `load_draft_value(cached=True)`."""
    with _drafts_guard:
        _drafts.clear()


def _load_draft_value(spec: str, target: LoadedModel, dtype, draft_dtype, cached: bool, progress,
                      target_spec: str) -> Draft:
    if spec == PROMPT_LOOKUP:
        return Draft.prompt_lookup()
    kind, _, inner = spec.partition(":")
    with_corpus = kind == HYBRID_CORPUS or kind.startswith(HYBRID_CORPUS + "=")
    if with_corpus or kind == HYBRID:
        inner = inner or default_draft_spec(target_spec)
        if inner.partition(":")[0].partition("=")[0] in (PROMPT_LOOKUP, HYBRID, HYBRID_CORPUS):
            raise ModelLoadError(f"the hybrid drafter needs a draft model: pass {kind}:<draft model> for this target")
        corpus = load_target_corpus(kind.partition("=")[2], target, target_spec) if with_corpus else None
        return _load_draft_value(inner, target, dtype, draft_dtype, cached, progress, DEFAULT_TARGET).hybrid(corpus)
    if spec == DISTILLED:
        spec = str(SHIPPED_DRAFT)
    if spec == FEATURE:
        spec = str(SHIPPED_FEATURE_DRAFT)
    if is_feature_draft(spec):
        from ..lm.devices import resolve_draft_dtype

        try:
            layer, head = load_feature_draft(spec, target.model, resolve_draft_dtype(draft_dtype, dtype, target.device),
                                             target.device)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot load the feature draft '{display_path(spec)}': {exc}") from None
        return Draft.of_feature(layer, head, spec)
    model = load_draft(spec, target.device, dtype, draft_dtype, progress=progress, cached=cached)
    check_same_vocabulary(target, model)
    head = None
    if Path(spec).expanduser().is_dir():
        try:
            head = load_head(Path(spec).expanduser(), model.dtype, model.device, model.model)
        except ValueError as exc:
            raise ModelLoadError(f"cannot load '{spec}': {exc}") from None
    return Draft.of_model(model, head)


def load_pair(target_spec: str = DEFAULT_TARGET, draft_spec: str | None = None, *, device=None, dtype=None,
              draft_dtype=None, need_draft: bool = True, cached: bool = False, needs_draft_model: bool = False,
              target_progress=None, draft_progress=None) -> tuple[LoadedModel, Draft | None]:
    """(target, draft) ready to decode. `draft_spec` None: the target's default drafter
    (`default_drafter_spec`; `needs_draft_model` for a method that beam-searches a draft model);
    `need_draft` False (a method without a drafter) loads no draft. Raises ModelLoadError with one
    clear line."""
    loader = load_model_cached if cached else load_model
    target = loader(target_spec, device=device, dtype=dtype, progress=target_progress)
    if not need_draft:
        return target, None
    spec = draft_spec or default_drafter_spec(target_spec, needs_draft_model)
    return target, load_draft_value(spec, target, dtype, draft_dtype, cached, draft_progress, target_spec)
