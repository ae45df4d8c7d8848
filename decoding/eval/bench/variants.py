"""The benchmark's variants and what one run of a variant measures.

A `Variant` is one row of the tables: one of our methods (from the registry) with a drafter and a
gamma or gamma schedule, or one of Hugging Face's peers (`hf_peer.py`). A `RunStats` holds one run:
the metrics' additive counts plus what the cost models need.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ...methods.registry import METHODS
from ...trace.metrics import RunCounts

GAMMA_SCHEDULES = ("auto", "heuristic")


@dataclass
class Variant:
    key: str  # unique name in the tables
    engine: str  # "ours" | "hf"
    method: str  # ours: a METHODS key; hf: "generate" | "generate-compiled" | "assisted"
    gamma: int | None = None  # None: HF default settings / no drafting
    schedule: str = "fixed"  # fixed | auto | heuristic | hf-default
    draft: str | None = None  # label of the drafter (a key of the run's drafts); None: no drafter
    tree: str | None = None  # speculative's draft tree ("16,6", "auto"); None: chains

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


def tree_key(tree: str) -> str:
    """A draft-tree setting in a variant key: "16,6" -> "tree16x6", "auto" -> "tree-auto"."""
    return "tree-auto" if tree == "auto" else "tree" + tree.replace(",", "x")


def parse_trees(text: str | None) -> list[str]:
    """--draft-tree's value: draft-tree settings separated by ';' (each checked as speculative checks it)."""
    from ...methods.tree_draft import parse_draft_tree

    out = [t.strip().lower() for t in str(text or "").split(";") if t.strip()]
    for t in out:
        if parse_draft_tree(t) == "off":
            raise ValueError("--draft-tree lists trees to add (e.g. 16,6;auto); leave it out for chains only")
    return out


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
                   drafts: dict[str, bool] | None = None, no_hf_peer: set[str] | frozenset = frozenset(),
                   trees: list[str] | None = None, tree_drafts: set[str] | frozenset = frozenset(),
                   hf_compiled: bool = False) -> list[Variant]:
    """Every variant of one run. `drafts` maps each drafter's label to whether it has a model (one
    unnamed prompt-lookup drafter when None); with several drafters every key names its drafter.
    Drafters in `no_hf_peer` get no HF assisted rows (HF has no hybrid: its peer would be the
    hybrid's model alone, run again under another name). `trees` (speculative's draft-tree settings, e.g.
    "16,6" or "auto") add, next to each speculative chain row of a drafter in `tree_drafts` (a model or
    feature draft, alone or in a hybrid), the same row with that
    draft tree (key suffix "-tree16x6" / "-tree-auto"): the chain and the tree measured in one run.
    `hf_compiled` adds HF `generate()` in its fastest configuration (static cache, compiled step:
    `hf_fast.py`), with or without the other peers."""
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
                    row = Variant(f"{stem}-g{g}", "ours", m, g, draft=label)
                elif spec.adaptive_gamma:
                    row = Variant(f"{stem}-{g}", "ours", m, numeric[0] if numeric else 4, g, draft=label)
                else:
                    continue
                variants.append(row)
                if label in tree_drafts and m == "speculative":
                    variants += [dataclasses.replace(row, key=f"{row.key}-{tree_key(t)}", tree=t) for t in trees or ()]
    if "autoregressive" not in methods:
        variants.insert(0, Variant("autoregressive", "ours", "autoregressive"))
    if hf:
        variants.append(Variant("hf-generate", "hf", "generate"))
        for label in (label for label in drafts if label not in no_hf_peer):
            stem = f"hf-assisted-{label}" if named else "hf-assisted"
            variants.append(Variant(f"{stem}-default", "hf", "assisted", None, "hf-default", draft=label))
            for g in (numeric if hf_gammas is None else hf_gammas):
                variants.append(Variant(f"{stem}-g{g}", "hf", "assisted", g, draft=label))
    if hf_compiled:
        variants.append(Variant("hf-generate-compiled", "hf", "generate-compiled"))
    return variants
