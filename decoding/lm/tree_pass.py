"""A tree pass and the compaction of its accepted branch, for any CachedLM (the target, a draft
model, the feature draft's layer): the two LM operations a draft tree needs beyond `CachedLM`'s own.

`tree_pass` appends m inputs to the cache in ONE forward pass with explicit positions and a tree
attention mask (transformers' Llama-style models take a 4D additive mask as given, as PPD's engine
uses them: 0 = attend, dtype-min = blocked). `compact` keeps the committed prefix and then the
cache slots of the accepted path, moved into place (Medusa's KV compaction: Cai et al., "Medusa:
Simple LLM Inference Acceleration Framework with Multiple Decoding Heads", arXiv:2401.10774), and
does the same for the target's kept hidden states (a feature draft reads them).

A tree pass always runs solo (the cross-run batcher shares plain passes only).
"""

from __future__ import annotations

import torch

from .cached_lm import CachedLM


@torch.inference_mode()
def tree_pass(lm: CachedLM, inputs, positions: list[int], mask: torch.Tensor, keep: int | None = None) -> torch.Tensor:
    """Append `inputs` (m token ids, or (m, d) vectors for a subclass that feeds vectors) at cache slots
    lm.length .. lm.length + m - 1 with position ids `positions` (m ints) and attention `mask`, bool
    (m, lm.length + m). Returns float32 logits (m, vocab_width) (the last `keep` rows only), or the final
    hidden states (m, hidden) for an LM that returns them."""
    m = len(positions)
    if mask.shape != (m, lm.length + m):
        raise ValueError(f"tree mask must be ({m}, {lm.length + m}), got {tuple(mask.shape)}")
    pos = torch.tensor([positions], dtype=torch.long, device=lm.device)
    hidden = lm.masked_pass(lm._inputs(inputs), pos, mask)  # the dynamic or the static cache's own pass
    if lm.features is not None:
        lm.store_features(hidden)
    lm.length += m
    lm.calls += 1
    rows = hidden[-keep:] if keep else hidden
    return rows if lm.returns_hidden else lm._logits(rows)


@torch.inference_mode()
def compact(lm: CachedLM, start: int, keep: list[int]) -> None:
    """Keep cache entries [0, start), then the entries at slots `keep` (increasing, all >= start) at
    start, start + 1, ...; drop the rest. lm.length becomes start + len(keep); kept hidden states move
    the same way."""
    if any(b <= a for a, b in zip(keep, keep[1:])) or (keep and keep[0] < start):
        raise ValueError("compaction keeps increasing slots after the committed prefix")
    m = len(keep)
    moved = [s for s in keep if s != start + keep.index(s)]
    if moved:
        lm.compact(start, keep)  # the cache's own in-place compaction (kv_cache.compact_cache, SlotCache.gather)
        if lm.features is not None:
            lm.features[start:start + m] = lm.features[torch.tensor(keep, dtype=torch.long, device=lm.device)]
    lm.rollback(start + m)
