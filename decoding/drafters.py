"""Draft proposers: a small LM with its own KV cache, parameter-free prompt lookup, and the hybrid
of the two (lookup where the context repeats a long enough span, the model elsewhere).

Every proposer returns the draft tokens together with q, the exact distribution each token was
drawn from (after the same temperature/top-k/top-p as the target's p; one-hot for a copied
token): the ratio p(x)/q(x) is only exact when q is the distribution actually sampled from (a
pitfall users of other engines met). A proposal also says where its tokens came from.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .cached_lm import CachedLM
from .warp import SamplingConfig, warp_logits

PROMPT_LOOKUP = "prompt-lookup"
HYBRID = "hybrid"
# The hybrid drafter copies a span only where the context's suffix repeats for at least this many
# tokens: below it, a copied token is right less often than the distilled draft's guess. Measured
# over the target's greedy continuations of 128 training prompts (11,823 positions): a copied token
# after a 1-token match is right 0.18 of the time (the draft 0.34), after 2 tokens 0.49 (0.36),
# after 3 0.64 (0.38) (`lookup_eval.py`; `python -m decoding eval-draft --match-lengths`).
HYBRID_MIN_MATCH = 2
HYBRID_LOOKUP_TOKENS = 8  # a copied span is proposed up to this long (a 9-token pass costs ~1.2 steps in bf16)
HYBRID_MAX_MATCH = 32  # suffix matches are measured up to this length


@dataclass
class Proposal:
    tokens: list[int]
    q_rows: torch.Tensor  # (len(tokens), V): q_rows[i] is the distribution tokens[i] was drawn from
    source: str = "model"  # "model" | "lookup": where the tokens came from
    match_length: int | None = None  # for a lookup: how many tokens of the context's suffix matched


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
        length = 1
        while length < max_length and i - length >= 0 and sequence[i - length] == sequence[n - 1 - length]:
            length += 1
        if length > best_length:
            best_length, best_start = length, i + 1
            if length >= max_length:
                break
    return (best_start, best_length) if best_length else None


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

    def propose(self, sequence: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator,
                keep_going=None) -> Proposal:
        """Up to `gamma` tokens. `keep_going(i, confidence)`, when given, is asked after token i
        with the draft's unwarped probability of it and ends the draft early on False (the token
        stays in): stopping depends on the draft side only, so exactness is untouched."""
        tokens: list[int] = []
        rows = []
        logits = self.lm.extend(sequence, keep=1)[-1]
        for i in range(gamma):
            q = warp_logits(logits, sampling)
            x = int(torch.multinomial(q, 1, generator=generator)) if not sampling.greedy else int(q.argmax())
            tokens.append(x)
            rows.append(q)
            if i + 1 < gamma:
                if keep_going is not None and not keep_going(i, float(torch.softmax(logits, -1)[x])):
                    break
                logits = self.lm.forward([x])[-1]
        return Proposal(tokens, torch.stack(rows) if rows else torch.empty(0, self.lm.vocab_width))

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
        found = suffix_match(sequence, self.max_ngram)
        if found is None or found[1] < self.min_ngram:
            return []
        return list(sequence[found[0]: found[0] + gamma])

    def propose(self, sequence: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator,
                keep_going=None) -> Proposal:
        tokens = self.find(sequence, gamma)  # a copied span has no confidence: keep_going is unused
        return Proposal(tokens, one_hot_rows(tokens, self.vocab_width, self.device), "lookup")

    def rollback(self, length: int) -> None:
        pass


class HybridDrafter:
    """Lookup where the context's suffix repeats for at least `min_match` tokens, the draft model
    elsewhere. The source is chosen from the context alone, before anything is sampled, so each
    token's q is still the distribution it was drawn from (one-hot for a copied token) and the
    acceptance rule stays exact. A copied span may be longer than gamma (`lookup_tokens`): where the
    output copies, long proposals are accepted and a verify pass of 9 tokens costs little more than
    one; the model drafts gamma tokens as usual."""

    kind = HYBRID

    def __init__(self, model: ModelDrafter, vocab_width: int, device: torch.device,
                 min_match: int = HYBRID_MIN_MATCH, lookup_tokens: int = HYBRID_LOOKUP_TOKENS,
                 max_match: int = HYBRID_MAX_MATCH):
        self.model = model
        self.vocab_width = vocab_width
        self.device = device
        self.min_match = min_match
        self.lookup_tokens = lookup_tokens
        self.max_match = max(max_match, min_match)
        self.name = f"{HYBRID} ({model.name} + lookup)"

    @property
    def calls(self) -> int:
        return self.model.calls

    def propose(self, sequence: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator,
                keep_going=None) -> Proposal:
        found = suffix_match(sequence, self.max_match)
        if found is not None and found[1] >= self.min_match:
            start, length = found
            tokens = list(sequence[start: start + max(gamma, self.lookup_tokens)])
            return Proposal(tokens, one_hot_rows(tokens, self.vocab_width, self.device), "lookup", length)
        return self.model.propose(sequence, gamma, sampling, generator, keep_going)

    def rollback(self, length: int) -> None:
        self.model.rollback(length)
