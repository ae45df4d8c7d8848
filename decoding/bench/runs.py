"""The benchmark's variants and our engine's runs.

A `Variant` is one row of the tables: one of our methods (from the registry) with a drafter and a
gamma or gamma schedule, or one of Hugging Face's peers (`hf_peer.py`). `run_ours` decodes one
prompt with the lean trace and reduces it to `RunStats` (the metrics' additive counts plus what
the cost models need).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..methods import METHODS
from ..metrics import RunCounts

GAMMA_SCHEDULES = ("auto", "heuristic")


@dataclass
class Variant:
    key: str  # unique name in the tables
    engine: str  # "ours" | "hf"
    method: str  # ours: a METHODS key; hf: "generate" | "assisted"
    gamma: int | None = None  # None: HF default settings / no drafting
    schedule: str = "fixed"  # fixed | auto | heuristic | hf-default
    draft: str | None = None  # label of the drafter (a key of the run's drafts); None: no drafter

    @property
    def drafts(self) -> bool:
        return self.draft is not None


@dataclass
class RunStats:
    """One timing or quality run of one variant on one prompt."""

    counts: RunCounts = field(default_factory=RunCounts)  # seconds: the bench's own clock around the run
    token_ids: list = field(default_factory=list)
    full_drafts: int = 0  # iterations whose draft had the asked gamma tokens
    gammas: list = field(default_factory=list)
    verify_by_size: dict = field(default_factory=dict)  # fed tokens -> [seconds] (prefill excluded)
    trace_sizes: list = field(default_factory=list)  # per non-prefill iteration: k, the tokens drafted
    prefill_seconds: float = 0.0
    joules: float | None = None
    logprob_sum: float | None = None
    logprob_n: int = 0

    @property
    def tokens(self) -> int:
        return self.counts.tokens

    @property
    def seconds(self) -> float:
        return self.counts.seconds


def parse_gammas(text: str) -> list:
    out = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if part in GAMMA_SCHEDULES:
            out.append(part)
            continue
        try:
            g = int(part)
        except ValueError:
            raise ValueError(f"--gamma entries are whole numbers, 'auto' or 'heuristic' (got {part!r})") from None
        if not 1 <= g <= 64:
            raise ValueError(f"gamma must be from 1 to 64 (got {g})")
        out.append(g)
    if not out:
        raise ValueError("--gamma is empty")
    return out


def build_variants(methods: list[str], gammas: list, hf: bool, hf_gammas: list | None = None,
                   drafts: dict[str, bool] | None = None) -> list[Variant]:
    """Every variant of one run. `drafts` maps each drafter's label to whether it has a model (one
    unnamed prompt-lookup drafter when None); with several drafters every key names its drafter."""
    drafts = {"prompt-lookup": False} if drafts is None else drafts
    named = len(drafts) > 1
    variants: list[Variant] = []
    numeric = [g for g in gammas if isinstance(g, int)]
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"unknown method {m!r}; choose from: {', '.join(METHODS)}")
        spec = METHODS[m]
        if not spec.uses_drafter:
            variants.append(Variant(m, "ours", m))
            continue
        for label, has_model in drafts.items():
            if spec.needs_draft_model and not has_model:
                continue
            stem = f"{m}-{label}" if named else m
            for g in gammas:
                if isinstance(g, int):
                    variants.append(Variant(f"{stem}-g{g}", "ours", m, g, draft=label))
                elif spec.adaptive_gamma:
                    variants.append(Variant(f"{stem}-{g}", "ours", m, numeric[0] if numeric else 4, g, draft=label))
    if "autoregressive" not in methods:
        variants.insert(0, Variant("autoregressive", "ours", "autoregressive"))
    if hf:
        variants.append(Variant("hf-generate", "hf", "generate"))
        for label in drafts:
            stem = f"hf-assisted-{label}" if named else "hf-assisted"
            variants.append(Variant(f"{stem}-default", "hf", "assisted", None, "hf-default", draft=label))
            for g in (numeric if hf_gammas is None else hf_gammas):
                variants.append(Variant(f"{stem}-g{g}", "hf", "assisted", g, draft=label))
    return variants


def run_ours(variant: Variant, target, draft, prompt_ids: list[int], args, timing: bool, meter=None) -> RunStats:
    """One run of our engine; timing runs ignore end-of-sequence (fixed token counts)."""
    from ..runner import decode
    from ..strategies import RunConfig

    extra = {"gamma_schedule": variant.schedule} if variant.schedule in GAMMA_SCHEDULES else {}
    config = RunConfig(method=variant.method, max_new_tokens=args.max_new_tokens, sampling=args.sampling,
                       gamma=variant.gamma or 4, seed=args.seed, chat=args.chat, stop_at_eos=not timing, lean=True,
                       extra=extra)
    gen = decode(target, draft, prompt_ids, config, meter if timing else None)
    t0 = time.perf_counter()
    records = list(gen)
    seconds = time.perf_counter() - t0
    stats = RunStats(counts=RunCounts.from_records(records))
    stats.counts.seconds = seconds
    stats.token_ids = [t.token_id for r in records for t in r.emitted]
    stats.joules = records[-1].energy_joules
    lp_sum, lp_n = 0.0, 0
    for i, r in enumerate(records):
        lps = r.extra.get("target_logprobs")
        if lps is not None and lp_sum is not None:
            lp_sum += sum(lps)
            lp_n += len(lps)
        elif r.emitted:
            lp_sum = None
        k = len(r.draft)
        if variant.method != "autoregressive":
            stats.gammas.append(r.gamma)
            stats.full_drafts += int(bool(k) and k == r.gamma)
        if i == 0:
            stats.prefill_seconds = r.timings.verify + r.timings.draft
            continue
        stats.verify_by_size.setdefault(k + 1, []).append(r.timings.verify)
        if variant.method != "autoregressive":
            stats.trace_sizes.append(k)
    if lp_sum is not None and lp_n:
        stats.logprob_sum, stats.logprob_n = lp_sum, lp_n
    return stats


def run_variant(variant: Variant, target, draft, prompt_ids, args, timing: bool, meter=None) -> RunStats:
    """`draft`: the variant's pair.Draft (None for variants without a drafter)."""
    if variant.engine == "hf":
        from .hf_peer import run_hf

        return run_hf(variant, target, draft, prompt_ids, args, timing, meter)
    return run_ours(variant, target, draft, prompt_ids, args, timing, meter)
