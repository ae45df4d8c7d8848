"""One definition of each run statistic; the runner, the CLI, the benchmark, the draft evaluation,
the gamma policy and the app all compute their figures here.

- tokens per target call: generated tokens / target forward passes (prefill included): counts the
  one correction or bonus token of every iteration (llama.cpp, vLLM and Spec-Bench call it the
  mean accepted tokens or acceptance length).
- mean accepted length: accepted *draft* tokens per iteration that had a draft (the correction or
  bonus token excluded).
- tokens per second: generated tokens / wall seconds of decoding (model loading excluded).
- alpha: the mean, over drafted positions, of sum_x min(p(x), q(x)) (Leviathan et al., section
  3.1): the chance that one draft token is accepted.
- acceptance per draft position (vLLM's `num_accepted_tokens_per_pos` over its drafts): for i = 1..gamma_max
  (the longest draft of the run, a copy longer than gamma included), the share of the iterations that
  drafted at least i tokens whose first i draft tokens were all accepted (accepted length >= i). Under
  Leviathan et al.'s i.i.d. assumption that is alpha^i (`iid_acceptance`, alpha as above); real drafts
  depart from it (a copy that starts to match goes on matching).
- acceptance length histogram: over the iterations that drafted, how many accepted 0, 1, ..., gamma_max
  draft tokens.
- mean acceptance length (vLLM's definition): 1 + accepted draft tokens / iterations that drafted,
  i.e. 1 + mean accepted length: the tokens one drafting iteration emits, its correction or bonus token
  included. It equals tokens per target call where every iteration drafts, costs one target call and
  keeps all it emits (a prefill of its own, plain target steps or a cut at the end make them differ).
  Per position and the histogram count records whose `draft` is the whole proposed chain (every
  speculative-chain method: speculative with any drafter, mentored, MJSD's chosen beam); a method whose
  record lists only the path its verification walked through a tree (PPD) has no such counts: its
  readers pass `per_position=False` (`MethodSpec.chain_draft`).
- by draft source (a drafter with several sources, the hybrid): per source, its share of the
  iterations after the prefill, tokens drafted, draft tokens accepted and tokens emitted per
  iteration, and wall time per iteration (`SourceTally`); with a draft tree the model's trees are a
  source of their own ("model-tree", its drafted tokens the tree's nodes).
- two cost ratios, never mixed up:
  `c_step`   = time of one draft step / time of one target step (Leviathan et al.'s c; the
               benchmark times the target step on its own autoregressive run);
  `c_verify` = time of one draft step / time of one verify pass (what a speculative run can time by
               itself; equal to c where a verify pass of gamma + 1 tokens costs one step).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Iterable

__all__ = ["RunCounts", "SourceTally", "PositionTally", "source_key", "tokens_per_second", "tokens_per_call",
           "mean_accepted", "mean_acceptance_length", "acceptance_per_position", "acceptance_length_histogram",
           "iid_acceptance", "alpha", "c_step", "c_verify", "position_alphas", "measured_alpha_c"]


def tokens_per_second(tokens: int, seconds: float) -> float:
    return tokens / seconds if seconds > 0 else 0.0


def tokens_per_call(tokens: int, target_calls: int) -> float:
    return tokens / target_calls if target_calls else 0.0


def mean_accepted(accepted: int, drafted_iterations: int) -> float | None:
    """Accepted draft tokens per iteration that had a draft; None when no iteration had one."""
    return accepted / drafted_iterations if drafted_iterations else None


def mean_acceptance_length(accepted: int, drafted_iterations: int) -> float | None:
    """vLLM's mean acceptance length: 1 + accepted draft tokens / iterations that drafted (the
    correction or bonus token counted); None when no iteration drafted."""
    mean = mean_accepted(accepted, drafted_iterations)
    return None if mean is None else 1.0 + mean


def iid_acceptance(alpha_value: float | None, positions: int) -> list[float]:
    """Leviathan et al.'s i.i.d. reference for acceptance per position: alpha^i for i = 1..positions,
    alpha = the run's mean overlap sum_x min(p, q) over drafted positions (`RunCounts.alpha`); [] without one."""
    if alpha_value is None:
        return []
    a = min(max(alpha_value, 0.0), 1.0)
    return [a ** i for i in range(1, positions + 1)]


def acceptance_per_position(records: Iterable) -> list[float]:
    """Per draft position i = 1..gamma_max, accepted length >= i over the iterations that drafted >= i tokens."""
    return PositionTally.from_records(records).rates


def acceptance_length_histogram(records: Iterable) -> list[int]:
    """Counts of accepted lengths 0..gamma_max over the iterations that drafted."""
    return PositionTally.from_records(records).histogram


def alpha(overlap_sum: float, positions: int) -> float | None:
    """Mean of sum_x min(p, q) over drafted positions; None without any."""
    return overlap_sum / positions if positions else None


def c_step(t_draft_step: float | None, t_target_step: float | None) -> float | None:
    """Leviathan et al.'s c: one draft step over one (single-token) target step."""
    if t_draft_step is None or not t_target_step:
        return None
    return t_draft_step / t_target_step


def c_verify(t_draft_step: float | None, t_verify_pass: float | None) -> float | None:
    """One draft step over one verify pass (of however many tokens the run fed)."""
    if t_draft_step is None or not t_verify_pass:
        return None
    return t_draft_step / t_verify_pass


def position_alphas(record) -> list[float]:
    """sum_x min(p, q) at each drafted position of one record."""
    return [d.overlap for d in record.draft]


def source_key(record) -> str | None:
    """Where an iteration's draft came from, as the gamma policy buckets it: "model", "lookup" (a
    copy after a suffix match of at least the hybrid's minimum), "lookup-short" (after a shorter
    one) or "none" (a plain target step); with a draft tree (`--draft-tree`), "model-tree" for an iteration
    that drafted the model's tree; None for a record of a method without draft sources."""
    tree = record.extra.get("tree_draft") if record.extra else None
    if tree is not None:
        if tree.get("shape") == "tree":
            return "model-tree"
        if tree.get("shape") != "chain":
            return "none"
        return tree.get("source_key") or tree.get("source") or "none"  # a trace written before source_key
    chain = record.extra.get("chain") if record.extra else None
    if chain is None:
        return None
    if not record.draft or chain.get("source") is None:
        return "none"
    if chain["source"] != "lookup":
        return chain["source"]
    from .source import DraftSource

    return DraftSource("lookup", chain.get("match_length") or 0).key


class SourceTally:
    """Additive per-source counts: source -> [iterations, drafted, accepted, emitted, seconds]."""

    def __init__(self, counts: dict | None = None):
        self.counts = {k: list(v) for k, v in (counts or {}).items()}

    def add(self, key: str, drafted: int, accepted: int, emitted: int, seconds: float, iterations: int = 1) -> None:
        row = self.counts.setdefault(key, [0, 0, 0, 0, 0.0])
        for i, value in enumerate((iterations, drafted, accepted, emitted, seconds)):
            row[i] += value

    def __add__(self, other: "SourceTally") -> "SourceTally":
        out = SourceTally(self.counts)
        for key, (n, d, a, e, t) in other.counts.items():
            out.add(key, d, a, e, t, iterations=n)
        return out

    def __bool__(self) -> bool:
        return bool(self.counts)

    def rows(self) -> dict:
        """Per source: iterations, their share, and drafted / accepted / emitted tokens and ms per iteration."""
        total = sum(row[0] for row in self.counts.values())
        return {key: {"iterations": n, "share": n / total, "drafted_per_iteration": d / n,
                      "accepted_per_iteration": a / n, "tokens_per_iteration": e / n, "ms_per_iteration": 1000 * t / n}
                for key, (n, d, a, e, t) in sorted(self.counts.items()) if n}


class PositionTally:
    """Additive per-position counts of chain drafts: `drafted[i-1]` iterations drafted at least i tokens,
    `reached[i-1]` of them accepted at least i, `lengths[n]` drafting iterations accepted exactly n.
    Lists of different lengths add position by position (a missing position counts 0)."""

    def __init__(self, drafted=None, reached=None, lengths=None):
        self.drafted, self.reached, self.lengths = list(drafted or []), list(reached or []), list(lengths or [])

    @classmethod
    def from_records(cls, records: Iterable) -> "PositionTally":
        out = cls()
        for r in records:
            if r.draft:
                out.add(len(r.draft), r.accepted_length)
        return out

    def add(self, drafted: int, accepted: int) -> None:
        """One iteration that drafted `drafted` tokens and accepted the first `accepted` of them."""
        accepted = max(0, min(accepted, drafted))
        for name, n in (("drafted", drafted), ("reached", drafted), ("lengths", drafted + 1)):
            row = getattr(self, name)
            row.extend([0] * (n - len(row)))
        for i in range(drafted):
            self.drafted[i] += 1
            self.reached[i] += int(i < accepted)
        self.lengths[accepted] += 1

    def __add__(self, other: "PositionTally") -> "PositionTally":
        def plus(a, b):
            n = max(len(a), len(b))
            return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]
        return PositionTally(plus(self.drafted, other.drafted), plus(self.reached, other.reached),
                             plus(self.lengths, other.lengths))

    def __bool__(self) -> bool:
        return bool(self.drafted)

    def __eq__(self, other) -> bool:
        return isinstance(other, PositionTally) and (self.drafted, self.reached, self.lengths) == (
            other.drafted, other.reached, other.lengths)

    def __repr__(self) -> str:
        return f"PositionTally(drafted={self.drafted}, reached={self.reached}, lengths={self.lengths})"

    @property
    def rates(self) -> list[float]:
        """Acceptance per position i = 1..gamma_max: reached / drafted (every drafted count is >= 1)."""
        return [r / d for r, d in zip(self.reached, self.drafted)]

    @property
    def histogram(self) -> list[int]:
        """Drafting iterations by accepted length 0..gamma_max."""
        return list(self.lengths)

    @property
    def gamma_max(self) -> int:
        return len(self.drafted)


@dataclass
class RunCounts:
    """Additive counts of one run (or of several: `a + b`), from which every figure follows."""

    tokens: int = 0
    seconds: float = 0.0
    iterations: int = 0
    target_calls: int = 0
    draft_calls: int = 0
    drafted_iterations: int = 0
    accepted: int = 0
    drafted_tokens: int = 0
    overlap_sum: float = 0.0
    draft_seconds: float = 0.0  # drafting time, prefill iteration excluded
    drafted_tokens_timed: int = 0  # drafted tokens of those iterations
    verify_seconds: float = 0.0  # verify passes, prefill iteration excluded
    verify_calls: int = 0  # target calls of those passes
    # the run's first target pass (the prompt's prefill, with its own tokens): a prefill weighs the
    # same in every variant, so the speed after it shows what drafting does on long prompts
    first_pass_seconds: float = 0.0  # from the start until the first pass's tokens were out
    first_pass_tokens: int = 0
    by_source: SourceTally = field(default_factory=SourceTally)  # iterations after the prefill
    positions: PositionTally = field(default_factory=PositionTally)  # chain drafts only (per_position)

    @classmethod
    def from_records(cls, records: Iterable, per_position: bool = True) -> "RunCounts":
        """Counts of a run's records (cumulative counters are read off the last record). `per_position`:
        the records' drafts are chains (`MethodSpec.chain_draft`), so the per-position counts apply."""
        records = list(records)
        out = cls()
        if not records:
            return out
        last = records[-1]
        out.tokens, out.seconds, out.iterations = last.generated, last.elapsed, len(records)
        out.target_calls, out.draft_calls = last.target_calls, last.draft_calls
        for r in records:
            if r.draft:
                out.drafted_iterations += 1
                out.accepted += r.accepted_length
                out.drafted_tokens += len(r.draft)
                out.overlap_sum += sum(position_alphas(r))
                if per_position:
                    out.positions.add(len(r.draft), r.accepted_length)
        # timings: the first iteration also prefills the prompt, so it is left out of per-step costs
        timed = records[1:]
        if timed:
            out.draft_seconds = sum(r.timings.draft for r in timed)
            out.drafted_tokens_timed = sum(len(r.draft) for r in timed)
            out.verify_seconds = sum(r.timings.verify for r in timed)
            out.verify_calls = last.target_calls - records[0].target_calls
        for r in timed:
            key = source_key(r)
            if key is not None:
                tree = r.extra.get("tree_draft")  # a tree's `draft` is its accepted path: count its nodes
                drafted = tree["drafted"] if tree is not None and tree.get("drafted") is not None else len(r.draft)
                out.by_source.add(key, drafted, r.accepted_length, len(r.emitted),
                                  r.timings.draft + r.timings.verify + r.timings.other)
        return out

    def __add__(self, other: "RunCounts") -> "RunCounts":
        return RunCounts(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    # --- figures -----------------------------------------------------------------------------
    @property
    def tokens_per_second(self) -> float:
        return tokens_per_second(self.tokens, self.seconds)

    @property
    def first_pass_share(self) -> float | None:
        """The first pass's share of the run's time (None for a run that took no time)."""
        return self.first_pass_seconds / self.seconds if self.seconds else None

    @property
    def tokens_per_second_after_first_pass(self) -> float | None:
        """Tokens per second once the prompt's prefill pass is done (None where it was not timed)."""
        if self.first_pass_seconds <= 0 or self.seconds <= self.first_pass_seconds:
            return None
        return tokens_per_second(self.tokens - self.first_pass_tokens, self.seconds - self.first_pass_seconds)

    @property
    def tokens_per_call(self) -> float:
        return tokens_per_call(self.tokens, self.target_calls)

    @property
    def mean_accepted(self) -> float | None:
        return mean_accepted(self.accepted, self.drafted_iterations)

    @property
    def mean_acceptance_length(self) -> float | None:
        return mean_acceptance_length(self.accepted, self.drafted_iterations)

    @property
    def acceptance_per_position(self) -> list[float]:
        return self.positions.rates

    @property
    def acceptance_length_histogram(self) -> list[int]:
        return self.positions.histogram

    @property
    def iid_acceptance(self) -> list[float]:
        """alpha^i at positions 1..gamma_max, alpha = `self.alpha`."""
        return iid_acceptance(self.alpha, self.positions.gamma_max)

    @property
    def alpha(self) -> float | None:
        return alpha(self.overlap_sum, self.drafted_tokens)

    @property
    def draft_step_seconds(self) -> float | None:
        """Drafting time per drafted token (one draft step; prompt lookup: one lookup)."""
        return self.draft_seconds / self.drafted_tokens_timed if self.drafted_tokens_timed else None

    @property
    def verify_pass_seconds(self) -> float | None:
        return self.verify_seconds / self.verify_calls if self.verify_calls else None

    @property
    def c_verify(self) -> float | None:
        return c_verify(self.draft_step_seconds, self.verify_pass_seconds)


def measured_alpha_c(records: list) -> tuple[float | None, float | None, str]:
    """A run's alpha and c_verify from its own records, with a line saying how c was timed (or why
    it could not be): what the app's theory panel plots."""
    counts = RunCounts.from_records(records)
    if counts.verify_calls <= 0 or counts.verify_seconds <= 0:
        return counts.alpha, None, "not enough iterations to time"
    if not counts.drafted_tokens_timed:
        return counts.alpha, None, "no drafts to time"
    return counts.alpha, counts.c_verify, "c = draft time per drafted token / verify time per target call"
