"""What every drafter returns: a `Proposal`, the draft tokens with q, the exact distribution each
was drawn from.

Every drafter draws its tokens after the same temperature/top-k/top-p as the target's p (one-hot
for a copied token): the ratio p(x)/q(x) is only exact when q is the distribution actually sampled
from (a pitfall users of other engines met). A proposal also says where its tokens came from.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

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


def one_hot_rows(tokens: list[int], width: int, device) -> torch.Tensor:
    """q of copied tokens: a point mass on each."""
    rows = torch.zeros(len(tokens), width, device=device)
    if tokens:
        rows[torch.arange(len(tokens)), torch.tensor(tokens)] = 1.0
    return rows
