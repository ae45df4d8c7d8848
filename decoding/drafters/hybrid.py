"""The hybrid drafter: a copy where the context repeats a long enough span (`lookup.py`), the draft
model elsewhere (`model.py`, or a feature draft), optionally a copy from a corpus of the target's
earlier answers (`corpus.py`). The source is chosen from the context alone, before anything is
sampled, so each token's q is still the distribution it was drawn from and the rule stays exact.
"""

from __future__ import annotations

import dataclasses

import torch

from ..rules.warp import SamplingConfig
from ..trace.source import HYBRID_MIN_MATCH, MODEL_SOURCE, DraftSource
from .base import Drafter, Proposal, cut_where_told
from .corpus import corpus_proposal, corpus_source
from .lookup import copy_proposal, lookup_source

HYBRID = "hybrid"
HYBRID_LOOKUP_TOKENS = 8  # a copied span is proposed up to this long (its verify pass costs about one step in bf16)
HYBRID_MAX_MATCH = 32  # suffix matches are measured up to this length


class HybridDrafter(Drafter):
    """Lookup where the context's suffix repeats for at least `min_match` tokens, the draft model
    elsewhere. The source is chosen from the context alone, before anything is sampled, so each
    token's q is still the distribution it was drawn from (one-hot for a copied token) and the
    acceptance rule stays exact. A copied span may be longer than gamma (`lookup_tokens`): where the
    output copies, long proposals are accepted and a verify pass of 9 tokens costs little more than
    one; the model drafts gamma tokens as usual.

    A model draft is continued by a copy (`continue_with_copy`): once the context and the model's
    tokens so far end in a suffix that repeats for at least `continue_min_match` tokens (default
    `min_match`), the model stops and up to `lookup_tokens` tokens of what followed the earlier
    occurrence are appended. The model often starts a span that the context then holds ("... said
    the [model] Prime Minister [copy]"); experiments/hybrid_continuation.py measures tokens per target
    call with and without the continuation. Each copied token's q is one-hot and depends only on the
    tokens drafted before it, so the rule stays exact (q_i may depend on x_<i, as any draft's does).

    With a `corpus` (a `corpus.TextCorpus`: the target's own earlier answers) a third source copies
    what followed the context's last 3-6 tokens there. The fixed rule uses it where the context has
    no long enough repeat; the automatic gamma weighs it like the others."""

    kind = HYBRID

    def __init__(self, model: Drafter, vocab_width: int, device: torch.device,
                 min_match: int = HYBRID_MIN_MATCH, lookup_tokens: int = HYBRID_LOOKUP_TOKENS,
                 max_match: int = HYBRID_MAX_MATCH, continue_with_copy: bool = True,
                 continue_min_match: int | None = None, corpus=None):
        self.model = model
        self.corpus = corpus
        self.continue_with_copy = continue_with_copy
        self.continue_min_match = continue_min_match or min_match  # the repeat that continues a model draft
        self._vocab_width = vocab_width
        self.device = device
        self.min_match = min_match
        self.lookup_tokens = lookup_tokens
        self.max_match = max(max_match, min_match)
        self.name = f"{HYBRID} ({model.name} + lookup" + (" + corpus)" if corpus is not None else ")")

    @property
    def vocab_width(self) -> int:
        """The width of its q rows (the model's and the copies' alike)."""
        return self._vocab_width

    @property
    def calls(self) -> int:
        """Its model's forward passes (a copy makes none)."""
        return self.model.calls

    def attach_target(self, lm) -> None:
        """Hand the run's target CachedLM to its model drafter (a feature draft reads it; a draft
        model's own attach_target does nothing). The copies never read the target."""
        self.model.attach_target(lm)

    def sources(self, sequence: list[int]) -> list[DraftSource]:
        """Every way it can draft here: the model (whenever it can: a feature draft needs the
        target to have read the context), a copy wherever the suffix matches at all (the automatic
        gamma schedule weighs them by their measured acceptance and cost)."""
        copy = lookup_source(sequence, self.max_match)
        known = corpus_source(self.corpus, sequence)
        return [s for s in (copy, known) if s is not None] + self.model.sources(sequence)

    def propose(self, sequence: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator,
                keep_going=None, source: DraftSource | None = None, exact: bool = False,
                stop_after=None) -> Proposal:
        """From `source`, one of `sources(sequence)` (default: the first). `exact` (the automatic
        gamma chose it): exactly gamma tokens from that source. Otherwise the fixed rule
        (`_fixed_rule`) picks the source, and a copy from the context runs up to
        max(gamma, lookup_tokens) tokens. A model draft may be continued by a copy
        (`_model_then_copy`). `stop_after` cuts a copy and stops the model as the protocol says."""
        source = source or self.sources(sequence)[0]
        if not exact:
            source = self._fixed_rule(sequence, source)
        if source.kind == "model":
            return self._model_draft(sequence, gamma, sampling, generator, keep_going, stop_after)
        return cut_where_told(self._copy(sequence, source, self._copy_length(source, gamma, exact)), stop_after)

    def fixed_source(self, sequence: list[int], source: DraftSource) -> DraftSource:
        """The source its fixed rule drafts from (`_fixed_rule`): a copy where the match is long enough,
        else the model (a draft tree drafts a model source its own way: methods/tree_draft.py)."""
        return self._fixed_rule(sequence, source)

    def _fixed_rule(self, sequence: list[int], source: DraftSource) -> DraftSource:
        """The source the fixed rule drafts from, given the preferred `source`: a copy from the context
        where its suffix matches for at least min_match tokens, else the corpus's continuation where
        it holds the context's suffix, else the model."""
        if source.kind == "corpus" or (source.kind == "lookup" and source.match_length >= self.min_match):
            return source
        return corpus_source(self.corpus, sequence) or MODEL_SOURCE

    def _copy_length(self, source: DraftSource, gamma: int, exact: bool) -> int:
        """How many tokens a copy proposes: gamma, or up to lookup_tokens for the fixed rule's copy
        from the context (where the output copies, long proposals are accepted)."""
        return max(gamma, self.lookup_tokens) if source.kind == "lookup" and not exact else gamma

    def _copy(self, sequence: list[int], source: DraftSource, n: int) -> Proposal:
        """Up to n tokens copied from the context (a lookup source) or the corpus (q one-hot)."""
        if source.kind == "corpus":
            return corpus_proposal(self.corpus, source, n, self.vocab_width, self.device)
        return copy_proposal(sequence, source, n, self.vocab_width, self.device)

    def _model_draft(self, sequence, gamma, sampling, generator, keep_going, stop_after) -> Proposal:
        """The model's gamma tokens, continued by a copy where they make the context repeat."""
        if not self.continue_with_copy:
            return self.model.propose(sequence, gamma, sampling, generator, keep_going, stop_after=stop_after)
        return self._model_then_copy(sequence, gamma, sampling, generator, keep_going, stop_after)

    def _model_then_copy(self, sequence, gamma, sampling, generator, keep_going, stop_after) -> Proposal:
        """The model's tokens until the context and they end in a repeated span, then its copy.
        The caller's `stop_after` is asked once per prefix (through `told`): where it stops the
        model, no copy follows; the copy itself is cut where it says."""
        found: dict[int, DraftSource | None] = {}  # tokens drafted -> the repeat they end in
        answers: dict[int, bool] = {}  # tokens drafted -> the caller's stop_after

        def repeat(tokens: list[int]) -> DraftSource | None:
            if len(tokens) not in found:
                found[len(tokens)] = lookup_source(sequence + tokens, self.max_match, self.continue_min_match)
            return found[len(tokens)]

        def told(tokens: list[int]) -> bool:
            if stop_after is None:
                return False
            if len(tokens) not in answers:
                answers[len(tokens)] = bool(stop_after(tokens))
            return answers[len(tokens)]

        proposal = self.model.propose(sequence, gamma, sampling, generator, keep_going,
                                      stop_after=lambda tokens: told(tokens) or repeat(tokens) is not None)
        extended = sequence + proposal.tokens
        source = repeat(proposal.tokens) if proposal.tokens else None
        if source is None or told(proposal.tokens):
            return proposal
        copy = copy_proposal(extended, source, self.lookup_tokens, self.vocab_width, self.device)
        if not copy.tokens:
            return proposal
        continued = dataclasses.replace(proposal, tokens=proposal.tokens + copy.tokens,
                                        q_rows=torch.cat([proposal.q_rows, copy.q_rows.to(proposal.q_rows)]),
                                        match_length=source.match_length, copied=len(copy.tokens))
        return cut_where_told(continued, told if stop_after is not None else None)

    @property
    def supports_tree(self) -> bool:
        """Its model's positions can become trees (its copies stay chains)."""
        return self.model.supports_tree

    def propose_tree(self, sequence, nodes, depth, sampling, generator, keep_growing=None):
        """Its model's draft tree (drafters/tree.py); the caller drafts copies as chains (`propose`)."""
        return self.model.propose_tree(sequence, nodes, depth, sampling, generator, keep_growing)

    def rollback(self, length: int) -> None:
        """Roll its model back (a copy keeps no state)."""
        self.model.rollback(length)
