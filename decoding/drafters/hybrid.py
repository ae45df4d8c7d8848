"""The hybrid drafter: a copy where the context repeats a long enough span (`lookup.py`), the draft
model elsewhere (`model.py`, or a feature draft), optionally a copy from a corpus of the target's
earlier answers (`corpus.py`). The source is chosen from the context alone, before anything is
sampled, so each token's q is still the distribution it was drawn from and the rule stays exact.
"""

from __future__ import annotations

import dataclasses

import torch

from ..rules.warp import SamplingConfig
from ..trace.source import HYBRID_MIN_MATCH, DraftSource
from .base import Proposal
from .corpus import corpus_proposal, corpus_source
from .lookup import copy_proposal, lookup_source
from .model import ModelDrafter

HYBRID = "hybrid"
HYBRID_LOOKUP_TOKENS = 8  # a copied span is proposed up to this long (its verify pass costs about one step in bf16)
HYBRID_MAX_MATCH = 32  # suffix matches are measured up to this length


class HybridDrafter:
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

    def __init__(self, model: ModelDrafter, vocab_width: int, device: torch.device,
                 min_match: int = HYBRID_MIN_MATCH, lookup_tokens: int = HYBRID_LOOKUP_TOKENS,
                 max_match: int = HYBRID_MAX_MATCH, continue_with_copy: bool = True,
                 continue_min_match: int | None = None, corpus=None):
        self.model = model
        self.corpus = corpus
        self.continue_with_copy = continue_with_copy
        self.continue_min_match = continue_min_match or min_match  # the repeat that continues a model draft
        self.vocab_width = vocab_width
        self.device = device
        self.min_match = min_match
        self.lookup_tokens = lookup_tokens
        self.max_match = max(max_match, min_match)
        self.name = f"{HYBRID} ({model.name} + lookup" + (" + corpus)" if corpus is not None else ")")

    @property
    def calls(self) -> int:
        return self.model.calls

    def attach_target(self, lm) -> None:
        """Hand the run's target CachedLM to a model drafter that reads it (a feature draft)."""
        if hasattr(self.model, "attach_target"):
            self.model.attach_target(lm)

    def sources(self, sequence: list[int]) -> list[DraftSource]:
        """Every way it can draft here: the model (whenever it can: a feature draft needs the
        target to have read the context), a copy wherever the suffix matches at all (the automatic
        gamma schedule weighs them by their measured acceptance and cost)."""
        copy = lookup_source(sequence, self.max_match)
        known = corpus_source(self.corpus, sequence)
        return [s for s in (copy, known) if s is not None] + self.model.sources(sequence)

    def propose(self, sequence: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator,
                keep_going=None, source: DraftSource | None = None, exact: bool = False) -> Proposal:
        """From `source`, one of `sources(sequence)` (default: the first). `exact` (the automatic
        gamma chose it): exactly gamma tokens from that source. Otherwise the fixed rule: a copy of
        up to max(gamma, lookup_tokens) tokens where the suffix matches for at least min_match
        tokens, else gamma tokens of the corpus's continuation where it holds the context's suffix, the
        model's gamma tokens elsewhere."""
        source = source or self.sources(sequence)[0]
        if source.kind == "lookup" and exact:
            return copy_proposal(sequence, source, gamma, self.vocab_width, self.device)
        if source.kind == "corpus":
            return corpus_proposal(self.corpus, source, gamma, self.vocab_width, self.device)
        if source.kind == "lookup" and source.match_length >= self.min_match:
            return copy_proposal(sequence, source, max(gamma, self.lookup_tokens), self.vocab_width, self.device)
        known = None if exact else corpus_source(self.corpus, sequence)
        if known is not None:
            return corpus_proposal(self.corpus, known, gamma, self.vocab_width, self.device)
        if not self.continue_with_copy:
            return self.model.propose(sequence, gamma, sampling, generator, keep_going)
        return self._model_then_copy(sequence, gamma, sampling, generator, keep_going)

    def _model_then_copy(self, sequence, gamma, sampling, generator, keep_going) -> Proposal:
        """The model's tokens until the context and they end in a repeated span, then its copy."""
        found: dict[int, DraftSource | None] = {}  # tokens drafted -> the repeat they end in

        def repeat(tokens: list[int]) -> DraftSource | None:
            if len(tokens) not in found:
                found[len(tokens)] = lookup_source(sequence + tokens, self.max_match, self.continue_min_match)
            return found[len(tokens)]

        proposal = self.model.propose(sequence, gamma, sampling, generator, keep_going,
                                      stop_after=lambda tokens: repeat(tokens) is not None)
        extended = sequence + proposal.tokens
        source = repeat(proposal.tokens) if proposal.tokens else None
        if source is None:
            return proposal
        copy = copy_proposal(extended, source, self.lookup_tokens, self.vocab_width, self.device)
        if not copy.tokens:
            return proposal
        return dataclasses.replace(proposal, tokens=proposal.tokens + copy.tokens,
                                   q_rows=torch.cat([proposal.q_rows, copy.q_rows.to(proposal.q_rows)]),
                                   match_length=source.match_length, copied=len(copy.tokens))

    def rollback(self, length: int) -> None:
        self.model.rollback(length)
