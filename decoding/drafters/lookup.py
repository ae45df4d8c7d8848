"""Prompt lookup: copy what followed the longest earlier occurrence of the context's suffix.

No model and no parameters: q is one-hot on each copied token, and the proposal depends on the
context only, so the acceptance rule stays exact. `suffix_match` and `copy_proposal` are shared
with the hybrid drafter (which copies where the repeat is long enough) and the lookup evaluations.
"""

from __future__ import annotations

import torch

from ..rules.warp import SamplingConfig
from ..trace.source import DraftSource
from .base import Drafter, Proposal, cut_where_told, one_hot_rows

PROMPT_LOOKUP = "prompt-lookup"


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


def suffix_match(sequence: list[int], max_length: int) -> tuple[int, int] | None:
    """The longest earlier occurrence of the sequence's suffix (at most `max_length` tokens long, the
    most recent among equally long ones): (where its continuation starts, the match length), or
    None when even the last token has no earlier occurrence."""
    n = len(sequence)
    if n < 2:
        return None
    last = sequence[-1]
    best_length, best_start = 0, -1
    for i in reversed(occurrences(sequence, last, n - 1)):  # most recent first
        length = match_length(sequence, i, n - 1, max(max_length, 1))  # the last token itself always matches
        if length > best_length:
            best_length, best_start = length, i + 1
            if length >= max_length:
                break
    return (best_start, best_length) if best_length else None


def occurrences(sequence: list[int], token: int, end: int) -> list[int]:
    """The positions i < end where sequence[i] == token, ascending: found by the sequence's own search (C speed;
    a drafter asks this once per iteration and once per model-drafted token, over the whole context)."""
    found, i = [], -1
    index = sequence.index if hasattr(sequence, "index") else list(sequence).index
    while True:
        try:
            i = index(token, i + 1, end)
        except ValueError:
            return found
        found.append(i)


def match_length(sequence: list[int], i: int, j: int, max_length: int) -> int:
    """How many tokens ending at i equal those ending at j (i < j), at most `max_length`."""
    length = 0
    while length < max_length and i - length >= 0 and sequence[i - length] == sequence[j - length]:
        length += 1
    return length


class PromptLookupDrafter(Drafter):
    """Copy the continuation of the longest earlier match of the context's last n-gram.

    Parameter-free drafting from the context itself (cf. Leviathan et al., section 3.6 on trivial
    approximation models). The draft "distribution" is a point mass on the copied token, so
    q is one-hot; it proposes nothing (an empty draft) where no n-gram matches.
    """

    kind = "prompt-lookup"

    def __init__(self, vocab_width: int, device: torch.device, max_ngram: int = 3, min_ngram: int = 1):
        self._vocab_width = vocab_width
        self.device = device
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.name = PROMPT_LOOKUP

    @property
    def vocab_width(self) -> int:
        """The width of its one-hot q rows (the target's vocabulary)."""
        return self._vocab_width

    @property
    def calls(self) -> int:
        """Always 0: it has no model, so it makes no forward passes."""
        return 0

    def attach_target(self, lm) -> None:
        """Nothing to do: it copies from the context and never reads the target."""

    def find(self, sequence: list[int], gamma: int) -> list[int]:
        """The continuation (up to gamma tokens) of the longest earlier match of the suffix."""
        source = lookup_source(sequence, self.max_ngram, self.min_ngram)
        return [] if source is None else list(sequence[source.start: source.start + gamma])

    def sources(self, sequence: list[int]) -> list[DraftSource]:
        """The one way it can draft here: the copy after the longest suffix match (none: no draft)."""
        source = lookup_source(sequence, self.max_ngram, self.min_ngram)
        return [] if source is None else [source]

    def propose(self, sequence: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator,
                keep_going=None, source: DraftSource | None = None, exact: bool = False,
                stop_after=None) -> Proposal:
        """gamma copied tokens under every schedule (`exact` changes nothing); a copied span has no
        confidence, so `keep_going` is not asked; `stop_after` cuts the span (`cut_where_told`)."""
        source = source or lookup_source(sequence, self.max_ngram, self.min_ngram)
        if source is None:
            return Proposal([], one_hot_rows([], self.vocab_width, self.device), "lookup")
        return cut_where_told(copy_proposal(sequence, source, gamma, self.vocab_width, self.device), stop_after)

    def rollback(self, length: int) -> None:
        """Nothing to do: it keeps no cache; each proposal reads the context afresh."""
