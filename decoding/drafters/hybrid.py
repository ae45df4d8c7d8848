"""Draft proposers: a small LM with its own KV cache, parameter-free prompt lookup, and the hybrid
of the two (lookup where the context repeats a long enough span, the model elsewhere; optionally a
lookup in a corpus of the target's earlier answers too, `corpus.py`).

Every proposer returns the draft tokens together with q, the exact distribution each token was
drawn from (after the same temperature/top-k/top-p as the target's p; one-hot for a copied
token): the ratio p(x)/q(x) is only exact when q is the distribution actually sampled from (a
pitfall users of other engines met). A proposal also says where its tokens came from.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import torch

from ..lm.cached_lm import CachedLM
from ..trace.source import HYBRID_MIN_MATCH, MODEL_SOURCE, DraftSource
from ..rules.warp import SamplingConfig, warp_logits

PROMPT_LOOKUP = "prompt-lookup"
HYBRID = "hybrid"
HYBRID_LOOKUP_TOKENS = 8  # a copied span is proposed up to this long (a 9-token pass costs ~1.2 steps in bf16)
HYBRID_MAX_MATCH = 32  # suffix matches are measured up to this length
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


def lookup_source(sequence: list[int], max_length: int, min_length: int = 1) -> DraftSource | None:
    """The lookup source of the context's longest suffix match, or None below `min_length`."""
    found = suffix_match(sequence, max_length)
    if found is None or found[1] < min_length:
        return None
    start, length = found
    return DraftSource("lookup", length, start, len(sequence) - start)


def copy_proposal(sequence: list[int], source: DraftSource, n: int, width: int, device) -> Proposal:
    """Up to n tokens copied from the source's continuation; q is one-hot on each."""
    tokens = list(sequence[source.start: source.start + n])
    return Proposal(tokens, one_hot_rows(tokens, width, device), "lookup", source.match_length)


def corpus_source(corpus, sequence: list[int]) -> DraftSource | None:
    """The corpus source of the context's longest suffix the corpus holds (`corpus.TextCorpus`)."""
    found = corpus.find(sequence) if corpus is not None else None
    if found is None or found.available < 1:
        return None
    return DraftSource("corpus", found.length, found.start, found.available)


def corpus_proposal(corpus, source: DraftSource, n: int, width: int, device) -> Proposal:
    """Up to n tokens of what followed the match in the corpus; q is one-hot on each."""
    tokens = corpus.continuation(source, n)
    return Proposal(tokens, one_hot_rows(tokens, width, device), "corpus", source.match_length)


def suffix_match(sequence: list[int], max_length: int) -> tuple[int, int] | None:
    """The longest earlier occurrence of the sequence's suffix (at most `max_length` tokens long, the
    most recent among equally long ones): (where its continuation starts, the match length), or
    None when even the last token has no earlier occurrence."""
    n = len(sequence)
    if n < 2:
        return None
    last = sequence[-1]
    best_length, best_start = 0, -1
    for i in range(n - 2, -1, -1):  # most recent first
        if sequence[i] != last:
            continue
        length = match_length(sequence, i, n - 1, max(max_length, 1))  # the last token itself always matches
        if length > best_length:
            best_length, best_start = length, i + 1
            if length >= max_length:
                break
    return (best_start, best_length) if best_length else None


def match_length(sequence: list[int], i: int, j: int, max_length: int) -> int:
    """How many tokens ending at i equal those ending at j (i < j), at most `max_length`."""
    length = 0
    while length < max_length and i - length >= 0 and sequence[i - length] == sequence[j - length]:
        length += 1
    return length


def one_hot_rows(tokens: list[int], width: int, device) -> torch.Tensor:
    """q of copied tokens: a point mass on each."""
    rows = torch.zeros(len(tokens), width, device=device)
    if tokens:
        rows[torch.arange(len(tokens)), torch.tensor(tokens)] = 1.0
    return rows


class ModelDrafter:
    """Autoregressive drafting with a small causal LM (Algorithm 1, step 1 of Leviathan et al.)."""

    kind = "model"

    def __init__(self, model: torch.nn.Module, device: torch.device, vocab_width: int, name: str, head=None):
        self.lm = CachedLM(model, device, vocab_width, head)
        self.name = name

    @property
    def calls(self) -> int:
        return self.lm.calls

    def sources(self, sequence: list[int]) -> list[DraftSource]:
        return [MODEL_SOURCE]

    def propose(self, sequence: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator,
                keep_going=None, source: DraftSource | None = None, exact: bool = False,
                stop_after=None) -> Proposal:
        """Up to `gamma` tokens (`source` is always the model's, `exact` changes nothing here).
        `keep_going(i, confidence)`, when given, is asked after token i with the draft's unwarped
        probability of it and ends the draft early on False (the token stays in); `stop_after(tokens)`
        likewise with the tokens drafted so far. Stopping depends on the draft side only, so
        exactness is untouched."""
        tokens: list[int] = []
        rows = []
        new_tokens, started = len(sequence) - self.lm.length, time.perf_counter()
        logits = self.lm.extend(sequence, keep=1)[-1]
        catch_up = time.perf_counter() - started if new_tokens > CATCH_UP_TOKENS else 0.0
        for i in range(gamma):
            q = warp_logits(logits, sampling)
            x = int(torch.multinomial(q, 1, generator=generator)) if not sampling.greedy else int(q.argmax())
            tokens.append(x)
            rows.append(q)
            if i + 1 < gamma:
                if keep_going is not None and not keep_going(i, float(torch.softmax(logits, -1)[x])):
                    break
                if stop_after is not None and stop_after(tokens):
                    break
                logits = self.lm.forward([x])[-1]
        return Proposal(tokens, torch.stack(rows) if rows else torch.empty(0, self.lm.vocab_width),
                        catch_up_seconds=catch_up)

    def rollback(self, length: int) -> None:
        self.lm.rollback(length)


class PromptLookupDrafter:
    """Copy the continuation of the longest earlier match of the context's last n-gram.

    Parameter-free drafting from the context itself (cf. Leviathan et al., section 3.6 on trivial
    approximation models). The draft "distribution" is a point mass on the copied token, so
    q is one-hot; it proposes nothing (an empty draft) where no n-gram matches.
    """

    kind = "prompt-lookup"
    calls = 0  # no model: no forward passes

    def __init__(self, vocab_width: int, device: torch.device, max_ngram: int = 3, min_ngram: int = 1):
        self.vocab_width = vocab_width
        self.device = device
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.name = PROMPT_LOOKUP

    def find(self, sequence: list[int], gamma: int) -> list[int]:
        """The continuation (up to gamma tokens) of the longest earlier match of the suffix."""
        source = lookup_source(sequence, self.max_ngram, self.min_ngram)
        return [] if source is None else list(sequence[source.start: source.start + gamma])

    def sources(self, sequence: list[int]) -> list[DraftSource]:
        """The one way it can draft here: the copy after the longest suffix match (none: no draft)."""
        source = lookup_source(sequence, self.max_ngram, self.min_ngram)
        return [] if source is None else [source]

    def propose(self, sequence: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator,
                keep_going=None, source: DraftSource | None = None, exact: bool = False) -> Proposal:
        # gamma copied tokens under every schedule; a copied span has no confidence: keep_going is unused
        source = source or lookup_source(sequence, self.max_ngram, self.min_ngram)
        if source is None:
            return Proposal([], one_hot_rows([], self.vocab_width, self.device), "lookup")
        return copy_proposal(sequence, source, gamma, self.vocab_width, self.device)

    def rollback(self, length: int) -> None:
        pass


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
    the [model] Prime Minister [copy]"); on Spec-Bench's 48 prompts it made 1.83 tokens per target
    call against 1.80 without it
    (scripts/hybrid_continuation.py). Each copied token's q is one-hot and depends only on the
    tokens drafted before it, so the rule stays exact (q_i may depend on x_<i, as any draft's does).

    With a `corpus` (`corpus.TextCorpus`: the target's own earlier answers) a third source copies
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
