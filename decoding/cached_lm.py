"""A causal LM with a KV cache that can be extended by any number of tokens and rolled back.

Speculative decoding appends draft tokens to both caches and, after a rejection, drops the
rejected tail (DynamicCache.crop). The cache always covers a prefix of the committed sequence;
`extend(sequence)` feeds whatever part of `sequence` the cache lacks plus `extra` tokens in one
forward pass, so prefill, single steps and gamma+1-token verification are the same call.
A draft with a restricted output head (`output_head.py`) computes its logits with that head.
When cross-run batching is on (`batching.py`, the app's classes), concurrent runs' calls on one
model share a forward pass; each run still sees exactly its own cache.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from . import batching


class CachedLM:
    def __init__(self, model: torch.nn.Module, device: torch.device, vocab_width: int, head=None):
        self.model = model
        self.device = device
        self.vocab_width = vocab_width  # logits are cut to the vocabulary shared with the other model
        self.head = head  # an OutputHead: logits over its tokens only (-inf elsewhere)
        self.cache = DynamicCache(config=model.config)
        self.length = 0  # tokens whose keys/values are in the cache
        self.calls = 0  # forward passes so far (a batched pass counts once)

    def forward(self, tokens: list[int], keep: int | None = None) -> torch.Tensor:
        """Append `tokens` to the cache; return float32 logits of shape (len(tokens), vocab_width),
        or of the last `keep` tokens only (the LM head then runs on those rows alone: a prefill
        that needs one row skips a (prompt x vocab) matmul)."""
        if not tokens:
            raise ValueError("forward needs at least one token")
        batcher = batching.batcher()
        if batcher is not None:
            return batcher.forward(self, tokens, keep)
        return self.forward_alone(tokens, keep)

    @torch.inference_mode()
    def forward_alone(self, tokens: list[int], keep: int | None = None) -> torch.Tensor:
        """`forward` as one pass of this run alone."""
        ids = torch.tensor([tokens], dtype=torch.long, device=self.device)
        positions = torch.arange(self.length, self.length + len(tokens), device=self.device)
        if self.head is not None:
            out = self.model.get_decoder()(input_ids=ids, past_key_values=self.cache, use_cache=True,
                                           position_ids=positions.unsqueeze(0))
            self.cache = out.past_key_values
            self.length += len(tokens)
            self.calls += 1
            hidden = out.last_hidden_state[0]
            return self.head.logits(hidden[-keep:] if keep else hidden, self.vocab_width)
        out = self.model(
            input_ids=ids,
            past_key_values=self.cache,
            use_cache=True,
            position_ids=positions.unsqueeze(0),
            **({"logits_to_keep": keep} if keep is not None and keep < len(tokens) else {}),
        )
        self.cache = out.past_key_values
        self.length += len(tokens)
        self.calls += 1
        return out.logits[0, :, : self.vocab_width].float()

    def extend(self, sequence: list[int], extra: list[int] = (), keep: int | None = None) -> torch.Tensor:
        """Feed sequence[self.length:] + extra; logits for every fed token (the last `keep` only)."""
        if self.length > len(sequence):
            raise RuntimeError("cache is ahead of the sequence: roll back first")
        return self.forward(list(sequence[self.length :]) + list(extra), keep)

    def rollback(self, length: int) -> None:
        """Drop cached tokens beyond `length` (no-op when the cache is not longer)."""
        remove = self.length - length
        if remove > 0:
            self.cache.crop(-remove)
            self.length = length
