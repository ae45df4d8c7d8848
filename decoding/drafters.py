"""Draft proposers: a small LM with its own KV cache, or parameter-free prompt lookup.

Every proposer returns the draft tokens together with q, the exact distribution each token was
drawn from (after the same temperature/top-k/top-p as the target's p): the ratio p(x)/q(x) is only
exact when q is the distribution actually sampled from (a pitfall users of other engines met).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .cached_lm import CachedLM
from .warp import SamplingConfig, warp_logits

PROMPT_LOOKUP = "prompt-lookup"


@dataclass
class Proposal:
    tokens: list[int]
    q_rows: torch.Tensor  # (len(tokens), V): q_rows[i] is the distribution tokens[i] was drawn from


class ModelDrafter:
    """Autoregressive drafting with a small causal LM (Algorithm 1, step 1 of Leviathan et al.)."""

    kind = "model"

    def __init__(self, model: torch.nn.Module, device: torch.device, vocab_width: int, name: str):
        self.lm = CachedLM(model, device, vocab_width)
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
        n_tokens = len(sequence)
        for n in range(min(self.max_ngram, n_tokens - 1), self.min_ngram - 1, -1):
            suffix = sequence[n_tokens - n :]
            # most recent earlier occurrence first: recent context predicts best
            for start in range(n_tokens - n - 1, -1, -1):
                if sequence[start : start + n] == suffix:
                    continuation = sequence[start + n : start + n + gamma]
                    if continuation:
                        return list(continuation)
        return []

    def propose(self, sequence: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator,
                keep_going=None) -> Proposal:
        tokens = self.find(sequence, gamma)  # a copied span has no confidence: keep_going is unused
        q_rows = torch.zeros(len(tokens), self.vocab_width, device=self.device)
        for i, x in enumerate(tokens):
            q_rows[i, x] = 1.0
        return Proposal(tokens, q_rows)

    def rollback(self, length: int) -> None:
        pass
