"""The per-iteration trace record: the contract between the engine and all of its readers.

Every strategy yields one `IterationRecord` per iteration; the app renders it, the CLI prints it
as one JSON line, the benchmark aggregates it and the tests assert on it. Records are plain data
(dataclasses of numbers, strings and lists) so `to_dict` / `from_dict` round-trip through JSON,
which is also the format of a saved run (the CLI's `--json` output) that the app can replay.

Counting conventions (`decoding/trace/metrics.py`): `accepted_length` counts accepted *draft* tokens only;
"tokens per target call" adds the one correction/bonus token.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from .plain import ByName, MayBeInfinite, from_plain

# Kinds of emitted token, in the order the app's legend shows them.
ACCEPTED, CORRECTION, BONUS, TARGET = "accepted", "correction", "bonus", "target"


@dataclass
class Candidate:
    """One vocabulary entry at a decision position with its target and draft probabilities."""

    token_id: int
    text: str
    p: float
    q: float | None = None


@dataclass
class DraftToken:
    """One proposed token and the decision about it.

    Sampling: accepted iff coin <= threshold = min(1, p/(l q)). Greedy: coin is None and
    accepted iff p_raw(x) >= threshold = l * max p_raw (then `p` holds p_raw(x)).
    """

    position: int
    token_id: int
    text: str
    q: float
    p: float
    coin: float | None
    threshold: float | None
    accepted: bool | None  # None: not examined (after an earlier rejection)
    overlap: float  # sum_x min(p(x), q(x)) at this position: the alpha of this step
    top: list[Candidate] = field(default_factory=list)  # union of top-k of p and q
    source: str | None = None  # where the token came from: "model" | "lookup" (None: older traces, PPD, MJSD)


@dataclass
class Residual:
    """The distribution the correction token was drawn from, and that token."""

    token_id: int
    text: str
    mass: float  # sum max(0, p - q) before normalisation, i.e. 1 - overlap
    fell_back_to_p: bool  # mass was ~0 so the token came from p itself
    top: list[Candidate] = field(default_factory=list)  # p holds the residual probability


@dataclass
class EmittedToken:
    token_id: int
    text: str
    kind: str  # ACCEPTED | CORRECTION | BONUS | TARGET


@dataclass
class TreeNode:
    """A node of the draft tree (a chain for plain speculative decoding); index 0 is the root.

    `accepted` marks the accepted path. The per-node verdict fields are filled by a draft tree
    verified by recursive rejection over siblings (methods/tree_draft.py, rules/tree_acceptance.py)
    and stay None elsewhere (older traces, PPD, MJSD, chains). At a node v whose children were drawn
    from q without replacement and tried in that order: for the child of `sibling_rank` i,
    q = q_i(x_i) (q with the earlier-tried siblings removed and renormalised), p = p_i(x_i) (the
    target's p at v for the first child, then the residual after the earlier rejections),
    threshold = min(1, p/q), coin = u_i (None at temperature 0, where the child is accepted iff it is
    the target's argmax, or when untried), and after a rejection residual_mass = sum max(0, p_i - q_i)
    and residual_top = the top tokens of the updated residual norm(max(0, p_i - q_i)).
    """

    index: int
    parent: int  # -1 for the root
    token_id: int
    text: str
    depth: int
    kind: str = "draft"  # root | draft (a model's guess) | lookup (a copied token) | candidate | prompt | beam
    accepted: bool = False  # on the accepted path (the root always)
    score: float | None = None  # e.g. a joint log-likelihood; a draft tree: the path's draft log-probability
    q: float | None = None  # q_i(x): probability under the distribution it was drawn from (earlier siblings removed)
    p: float | None = None  # p_i(x): probability under the target distribution it was tested against
    coin: float | None = None  # u_i (None at greedy or untried)
    threshold: float | None = None  # min(1, p/q)
    verdict: str | None = None  # "accepted" | "rejected" | "untried"
    sibling_rank: int | None = None  # 0 = tried first
    residual_mass: float | None = None  # after this node's rejection: sum max(0, p_i - q_i)
    residual_top: list[Candidate] | None = None  # top tokens of the residual after this node's rejection (p: residual)


@dataclass
class Timings:
    draft: float = 0.0
    verify: float = 0.0
    other: float = 0.0


class StepData(ByName):
    """Base of a method's own per-iteration data, the typed form of `record.extra[KEY]`.

    Records keep the plain form (`to_dict()`), so a record stays JSON data; readers get the typed
    form with `Cls.of(record)`, which checks every field's type (PlainDataError otherwise). Every
    field has a default, so partial data (an older trace, a lean run) still reads.
    """

    KEY: ClassVar[str]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict):
        return from_plain(cls, data, where=f"extra.{cls.KEY}")

    @classmethod
    def of(cls, record: "IterationRecord | None"):
        """This method's data in `record`, typed; None when the record carries none."""
        data = (record.extra or {}).get(cls.KEY) if record is not None else None
        return None if data is None else cls.from_dict(data)


@dataclass
class IterationRecord:
    method: str
    iteration: int
    context_length: int  # prompt + generated tokens before this iteration
    gamma: int  # draft length asked for in this iteration
    draft: list[DraftToken]
    accepted_length: int
    emitted: list[EmittedToken]
    residual: Residual | None
    next_top: list[Candidate]  # top of the distribution the last emitted token came from
    tree: list[TreeNode]
    timings: Timings
    target_calls: int  # cumulative, prefill included
    draft_calls: int  # cumulative
    generated: int  # cumulative tokens emitted
    elapsed: float  # cumulative wall seconds of decoding
    energy_joules: float | None  # cumulative, None when no meter
    energy_note: str
    finished: bool
    stop_reason: str = ""  # set on the last record: "eos" | "max_new_tokens" | "context"
    extra: dict[str, Any] = field(default_factory=dict)  # method-specific data (StepData.to_dict() by KEY)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["summary"] = False
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "IterationRecord":
        """A record from its JSON form, every field's type checked (PlainDataError otherwise)."""
        return from_plain(cls, data)


@dataclass
class RunSummary:
    """The final line of a run: what the CLI, the benchmark and the app's totals report."""

    method: str
    prompt: str
    settings: dict
    token_ids: list[int]
    text: str
    iterations: int
    target_calls: int
    draft_calls: int
    mean_accepted: float | None  # accepted draft tokens / iterations that had a draft
    tokens_per_call: float
    tokens_per_second: float
    wall_seconds: float
    energy_joules: float | None
    energy_note: str
    stop_reason: str  # "eos" | "max_new_tokens" | "context" | "stopped"
    models: dict = field(default_factory=dict)
    target_perplexity: MayBeInfinite | None = None  # infinite if a token's p_raw underflowed to 0
    # acceptance per draft position (definitions: trace/metrics.py; absent from older traces, empty for a
    # run without chain drafts): rate at positions 1..gamma_max over the iterations that drafted that far
    acceptance_per_position: list[float] = field(default_factory=list)
    acceptance_length_histogram: list[int] = field(default_factory=list)  # drafting iterations by accepted 0..gamma_max
    mean_acceptance_length: float | None = None  # vLLM's: 1 + accepted draft tokens / iterations that drafted

    def to_dict(self) -> dict:
        data = asdict(self)
        data["summary"] = True
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "RunSummary":
        """A summary from its JSON form, every field's type checked (PlainDataError otherwise)."""
        return from_plain(cls, data)
