"""What every drafter is and returns: the `Drafter` interface the decoding loop drafts through, and
a `Proposal`, the draft tokens with q, the exact distribution each was drawn from.

Every drafter draws its tokens after the same temperature/top-k/top-p as the target's p (one-hot
for a copied token): the ratio p(x)/q(x) is only exact when q is the distribution actually sampled
from (a pitfall users of other engines met). A proposal also says where its tokens came from.
"""

from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch

from ..rules.warp import SamplingConfig
from ..trace.source import DraftSource

if TYPE_CHECKING:
    from ..lm.cached_lm import CachedLM

KeepGoing = Callable[[int, float], bool]  # keep_going(i, confidence): False ends the draft after token i
StopAfter = Callable[[list[int]], bool]  # stop_after(tokens so far): True ends the draft there

# A draft model's first pass over more new tokens than this is a prefill (the prompt) or a catch-up
# (after copied spans), not a draft step: its time is reported apart, so the per-token draft cost the
# automatic gamma learns is that of steps (as the target's prefill is left out of its verify fit).
CATCH_UP_TOKENS = 8


@dataclass
class Proposal:
    tokens: list[int]
    q_rows: torch.Tensor  # (len(tokens), V): q_rows[i] is the distribution tokens[i] was drawn from
    source: str = "model"  # "model" | "lookup" | "corpus": where the tokens came from
    match_length: int | None = None  # for a copy: how many tokens of the context's suffix matched
    catch_up_seconds: float = 0.0  # a model's first pass when it was a prefill or catch-up (see CATCH_UP_TOKENS)
    copied: int = 0  # a model draft continued by a copy (HybridDrafter): how many of its last tokens were copied

    def source_of(self, i: int) -> str:
        """Where draft token i came from: the copied tail of a continued model draft is "lookup"."""
        return "lookup" if i >= len(self.tokens) - self.copied else self.source

    def truncated(self, keep: int) -> "Proposal":
        """The first `keep` tokens (the copied tail shrinks first)."""
        if keep >= len(self.tokens):
            return self
        copied = max(0, self.copied - (len(self.tokens) - keep))
        return dataclasses.replace(self, tokens=self.tokens[:keep], q_rows=self.q_rows[:keep], copied=copied)


def one_hot_rows(tokens: list[int], width: int, device, ids: torch.Tensor | None = None) -> torch.Tensor:
    """q of copied (or greedily drafted) tokens: a point mass on each, (len(tokens), width). `ids`: the same
    tokens as a (len(tokens),) long tensor already on the device (a greedy chain's argmaxes), saving a copy."""
    rows = torch.zeros(len(tokens), width, device=device)
    if tokens:  # one index tensor made on the device (an advanced index from the host would copy two)
        index = ids.to(rows.device) if ids is not None else torch.tensor(tokens, device=rows.device)
        rows.scatter_(1, index.view(-1, 1), 1.0)
    return rows


# Whether greedy fixed-gamma drafts run as chains read back once (None: by device, `greedy_chain`)
GREEDY_CHAIN: bool | None = None


def greedy_chain(device) -> bool:
    """Whether a greedy fixed-gamma draft on `device` runs as a chain read back once (drafters' `_greedy_chain`)
    rather than step by step: on an asynchronous device (a GPU), where each step's host read would make the host
    wait for the device; not on the CPU, where a read costs no wait but a chain cut by a `stop_after` (the hybrid's
    repeat check) has run its passes past the cut at full compute (measured with experiments/host_overhead.py and
    the benchmark: no gain there). `GREEDY_CHAIN` (True/False) overrides the device's choice (the tests run the
    chain on the CPU)."""
    if GREEDY_CHAIN is not None:
        return GREEDY_CHAIN
    return torch.device(device).type != "cpu"


def stop_point(tokens: list[int], stop_after: StopAfter | None) -> int:
    """How many of `tokens` a draft keeps under `stop_after`: asked with the first 1, 2, ... tokens (never
    after the last), the draft ends at the first prefix it is told to stop after (that token stays in)."""
    if stop_after is not None:
        for keep in range(1, len(tokens)):
            if stop_after(tokens[:keep]):
                return keep
    return len(tokens)


def cut_where_told(proposal: Proposal, stop_after: StopAfter | None) -> Proposal:
    """`stop_after` applied to a span drafted all at once (a copy): asked with the first 1, 2, ...
    tokens (never after the last, as a model draft never asks after its gamma-th), the span ends at
    the first prefix it is told to stop after (that token stays in)."""
    return proposal.truncated(stop_point(proposal.tokens, stop_after))


class Drafter(abc.ABC):
    """What proposes the draft tokens of one run: the interface the decoding loop
    (methods/speculative.py's `chain_loop`, for speculative and mentored decoding) drafts through,
    as transformers' `CandidateGenerator` and vLLM's speculative proposers name theirs.

    One drafter serves one run (`pair.Draft.drafter` makes a fresh one) and may keep state across
    its iterations (a KV cache, the target it reads). Per iteration the loop asks `sources` what
    it could draft from here, lets the gamma policy pick a source and a length, calls `propose`,
    verifies the tokens with the target, then calls `rollback` to the committed length; before the
    first iteration it calls `attach_target` once. Between iterations the committed sequence only
    grows by what the loop accepted, so a drafter's cache is always a prefix of what it is shown.

    An abstract base class rather than a `typing.Protocol`: every drafter is ours and names the
    contract in its class line, and a drafter that leaves a member out fails when it is made, not in
    the middle of a run. There are no default bodies: a drafter with nothing to do for a member
    (prompt lookup has no cache to roll back and reads no target) says so in its own no-op.

    Members (tensors on the drafter's device; V is `vocab_width`):
    - `name`: the drafter in words (an attribute; the hybrid names itself after its model's).
    - `vocab_width`: V, the width of every q row it proposes (the vocabulary it shares with the
      target); the loop scores the target over min(target vocabulary, V) columns.
    - `calls`: forward passes its own model(s) made so far in this run (0 without a model); the
      run summary's draft_calls.
    - `attach_target(lm)`: called once before the first iteration with the run's target CachedLM.
    - `sources(sequence)`: the ways it can draft after `sequence`, for the gamma policy.
    - `propose(...)`: the draft of one iteration, a `Proposal`.
    - `rollback(length)`: after verification, forget everything past the first `length` tokens.
    - `supports_tree`, `propose_tree(...)`, `fixed_source(...)`: for draft trees (`--draft-tree`), with
      defaults (no tree; the preferred source as it is), overridden by the drafters that draw trees.
    """

    name: str
    # draws a tree of guesses (`propose_tree`), for `--draft-tree`; a copier does not
    supports_tree: bool = False

    @property
    @abc.abstractmethod
    def vocab_width(self) -> int:
        """V: the width of every q row this drafter proposes (<= the target's vocabulary)."""

    @property
    @abc.abstractmethod
    def calls(self) -> int:
        """Forward passes of this drafter's own model(s) in this run so far (0 if it has none)."""

    @abc.abstractmethod
    def attach_target(self, lm: CachedLM) -> None:
        """Called by the loop once, before the first iteration, with the run's target CachedLM; a
        drafter that reads the target (a feature draft reads its hidden states) keeps it, every
        other drafter does nothing."""

    @abc.abstractmethod
    def sources(self, sequence: list[int]) -> list[DraftSource]:
        """Every way this drafter can draft after `sequence` (token ids, the committed context),
        best first; empty where it cannot draft at all. Called at the start of every iteration;
        depends on the context only (and the target's state), never on a sample, so choosing among
        them keeps the rule exact."""

    @abc.abstractmethod
    def propose(self, sequence: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator | None,
                keep_going: KeepGoing | None = None, source: DraftSource | None = None, exact: bool = False,
                stop_after: StopAfter | None = None) -> Proposal:
        """The draft after `sequence` (token ids, the committed context), at most `gamma` tokens
        unless a copy runs on (the loop passes gamma >= 1): a Proposal
        with k tokens and q_rows (k, V), q_rows[i] the distribution tokens[i] was drawn from (after
        `sampling`'s warp; one-hot for a copied token); k may be 0 (nothing to propose), and a copy
        may be longer than gamma (the loop cuts it to the room left).

        `source`: one of `sources(sequence)` (None: the drafter's first). `exact`: the automatic
        gamma chose the source and length, so draft exactly `gamma` tokens from it; otherwise the
        drafter's own fixed rule. `generator`: the run's sampler (None only when sampling is greedy).
        `keep_going(i, confidence)`: asked after token i (but the last) of a model-drawn draft with
        the draft's unwarped probability of it; False ends the draft there (the token stays in). A
        copy has no confidence and does not ask it. `stop_after(tokens)`: asked after each token
        but the last with the tokens drafted so far; True ends the draft there (the token stays in);
        the hybrid stops its model where the context starts to repeat. Both depend on the draft
        side only, so stopping early leaves the rule exact."""

    # --- for draft trees (methods/tree_draft.py): the only members with default bodies, since only the
    # model drafters (and the hybrid, through its model) draw trees --------------------------------------
    def propose_tree(self, sequence: list[int], nodes: int, depth: int, sampling: SamplingConfig,
                     generator: torch.Generator | None, keep_growing=None):
        """A drafters.tree.DraftTree of at most `nodes` draft nodes and `depth` levels after `sequence`
        (None where it cannot draft now); only where `supports_tree`. `keep_growing(level, best_score)`
        (drafters/tree.py's `grow_tree`): False ends the tree after that level."""
        raise ValueError(f"{self.name} does not draw draft trees")

    def fixed_source(self, sequence: list[int], source: DraftSource) -> DraftSource:
        """The source its own fixed rule drafts from when `source` is preferred (the hybrid: a copy only
        where the match is long enough, else its model); by default `source` itself."""
        return source

    @abc.abstractmethod
    def rollback(self, length: int) -> None:
        """Forget everything past the first `length` tokens of the sequence (the committed prefix
        after verification); called once per iteration after `propose`."""
