"""One PPD forward pass over [uncached committed tokens, candidate tree, prompt tokens], tree
verification (exact match / typical acceptance) and KV compaction of the accepted branch.

transformers (5.x) Llama-style models take a 4D attention mask as-is (`masking_utils` returns a
4D tensor unchanged) together with explicit `position_ids` and a `DynamicCache`; we pass an
additive float mask (0 = attend, dtype-min = blocked), which both the sdpa and the eager
attention read correctly (eager adds it to the scores; sdpa passes it as `attn_mask`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...lm.hf_cache import cache_kwargs
from ...lm.kv_cache import compact_cache  # noqa: F401  (PPD's compaction; its home was here)
from .prompts import PromptTokens
from .tree import TreeBuffers

# Typical acceptance (Medusa's rule, the paper's sampling mode): accept x when
# p(x) > min(epsilon, delta * exp(-H(p))). Defaults are Medusa's posterior_threshold / posterior_alpha.
TYPICAL_EPSILON = 0.09
TYPICAL_DELTA = 0.3


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    out = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return out.masked_fill(~allowed, torch.finfo(dtype).min)


def step_mask(cached: int, pre: int, buffers: TreeBuffers) -> torch.Tensor:
    """Bool (1, 1, pre + n, cached + pre + n): `pre` uncached committed tokens before the root
    (only at prefill) attend causally; tree rows come from `buffers` (built with
    prefix_length = cached + pre)."""
    n = buffers.size
    total = cached + pre + n
    rows = []
    if pre:
        causal = torch.ones(pre, total, dtype=torch.bool).tril(cached)
        causal[:, cached + pre :] = False
        rows.append(causal)
    rows.append(buffers.mask[0, 0])
    return torch.cat(rows, dim=0)[None, None]


def tree_inputs(model, cached: int, pre_ids: list[int], tree_ids: list[int], buffers: TreeBuffers,
                prompts: PromptTokens, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The inputs of one PPD pass over `pre_ids` (uncached committed tokens before the root), then the
    tree: `tree_ids` are the token ids of root and candidates (node order), prompt nodes get their
    embeddings. Returns input vectors (1, m, hidden), rotary positions (1, m) and the bool mask
    (1, 1, m, cached + m), m = len(pre_ids) + buffers.size."""
    n_tok = 1 + buffers.n_candidates
    if len(tree_ids) != n_tok:
        raise ValueError(f"need {n_tok} token ids for root + candidates, got {len(tree_ids)}")
    embed = model.get_input_embeddings()
    dtype = embed.weight.dtype
    ids = torch.tensor([list(pre_ids) + list(tree_ids)], dtype=torch.long, device=device)
    parts = [embed(ids)[0]]
    if buffers.size > n_tok:
        parts.append(prompts.embeddings(buffers.distance[n_tok:], buffers.group[n_tok:]).to(dtype))
    inputs = torch.cat(parts, dim=0)[None]
    pre = len(pre_ids)
    positions = torch.cat([torch.arange(cached, cached + pre, dtype=torch.long),
                           buffers.position_ids[0]])[None].to(device)
    return inputs, positions, step_mask(cached, pre, buffers).to(device)


def tree_forward(model, cache, cached: int, pre_ids: list[int], tree_ids: list[int], buffers: TreeBuffers,
                 prompts: PromptTokens, device, vocab_width: int, keep_tree_only: bool = True) -> torch.Tensor:
    """Run the target on `pre_ids`, then the tree (`tree_inputs`), on a DynamicCache `cache` holding
    `cached` entries. Returns float32 logits of the tree nodes (n, vocab_width) (all fed rows when
    keep_tree_only is False). The cache grows by len(pre_ids) + n entries."""
    n = buffers.size
    inputs, positions, allowed = tree_inputs(model, cached, pre_ids, tree_ids, buffers, prompts, device)
    mask = additive_mask(allowed, inputs.dtype)
    out = model(inputs_embeds=inputs, attention_mask=mask, position_ids=positions,
                **cache_kwargs(model, cache), use_cache=True, **({"logits_to_keep": n} if keep_tree_only else {}))
    return out.logits[0, :, :vocab_width].float()


def lm_tree_forward(lm, pre_ids: list[int], tree_ids: list[int], buffers: TreeBuffers, prompts: PromptTokens,
                    keep_tree_only: bool = True) -> torch.Tensor:
    """`tree_forward` as one pass of `lm` (a CachedLM or a static_lm.StaticLM: `lm.tree_pass`), whose
    cache holds lm.length tokens; lm.length grows by len(pre_ids) + buffers.size, lm.calls by one.
    Float32 logits (n, lm.vocab_width) of the tree nodes (all fed rows when keep_tree_only is False)."""
    inputs, positions, allowed = tree_inputs(lm.model, lm.length, pre_ids, tree_ids, buffers, prompts, lm.device)
    return lm.tree_pass(inputs, positions, allowed, buffers.size if keep_tree_only else None)


@dataclass
class TreeVerdict:
    accepted: list[int]  # accepted candidate node indices, root excluded, root-to-leaf order
    last: int  # node whose logits give the next (bonus) token: the last accepted, or 0 (root)
    thresholds: dict[int, float]  # node -> acceptance threshold used at its children (typical mode)


def verify_greedy(buffers: TreeBuffers, tree_ids: list[int], logits: torch.Tensor) -> TreeVerdict:
    """Exact match: from the root, follow the child whose token is the target's argmax."""
    node, accepted = 0, []
    while True:
        want = int(logits[node].argmax())
        nxt = next((c for c in buffers.children(node) if tree_ids[c] == want), None)
        if nxt is None:
            return TreeVerdict(accepted, node, {})
        accepted.append(nxt)
        node = nxt


def typical_threshold(p: torch.Tensor, epsilon: float, delta: float) -> float:
    entropy = float(-(p * torch.log(p.clamp_min(1e-30))).sum())
    return min(epsilon, delta * float(torch.exp(torch.tensor(-entropy))))


def verify_typical(buffers: TreeBuffers, tree_ids: list[int], probs: torch.Tensor, epsilon: float,
                   delta: float) -> TreeVerdict:
    """Typical acceptance (lossy): a child x of node v passes when p_v(x) > min(eps, delta exp(-H(p_v)));
    the longest passing root path wins (ties: the first in node order)."""
    thresholds: dict[int, float] = {}

    def best(node: int) -> list[int]:
        kids = buffers.children(node)
        if not kids:
            return []
        thresholds[node] = typical_threshold(probs[node], epsilon, delta)
        out: list[int] = []
        for c in kids:
            if float(probs[node, tree_ids[c]]) > thresholds[node]:
                chain = [c] + best(c)
                if len(chain) > len(out):
                    out = chain
        return out

    accepted = best(0)
    return TreeVerdict(accepted, accepted[-1] if accepted else 0, thresholds)


def prompt_predictions(buffers: TreeBuffers, logits: torch.Tensor, node: int, ept: int) -> list[torch.Tensor]:
    """Ensemble-averaged logits of `node`'s prompt tokens, distance 1..k (k = its prompt count)."""
    out = []
    k = 1
    while (node, k, 0) in buffers.prompt_index:
        rows = [buffers.prompt_index[(node, k, j)] for j in range(ept)]
        out.append(logits[rows].mean(dim=0))
        k += 1
    return out
