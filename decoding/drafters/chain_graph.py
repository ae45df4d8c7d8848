"""The bodies of the drafters' greedy chains as captured by lm/chain_graphs.py: one CUDA graph replay per chain
instead of gamma - 1 eager steps (switch SPECDEC_DRAFT_CHAIN_GRAPH=1, off by default; see that module for the
capture, what stays on the host and why).

Each body is the drafter's eager chain (`FeatureDrafter._greedy_chain`, `ModelDrafter._greedy_chain`) with the
same ops in the same order, every pass going through the chain's `step` (the LM's own short pass at a position
held on the device, lm/chain_graphs.py `_Chain.step`) instead of `forward`:

- the feature draft (EAGLE), from the predicted feature f (1, hidden) at the LM's length L: for k < gamma - 1,
  x_k = the head's token ids[argmax of the head's own K scores of f], then f = g([f ; e(x_k)]) at position L + k;
  finally x_{gamma-1} from the last f. Outputs: the gamma ids (gamma,) and the last f.
- the draft model, from its first pick x_0 (the argmax of the catch-up pass's logits, taken eagerly) as (1, 1):
  for k < gamma - 1, x_{k+1} = argmax of the logits of the pass of x_k at position L + k (its restricted head's or
  its own output layer's, `_logits`). Outputs: x_1 .. x_{gamma-1} (gamma - 1,) and the last pass's hidden states.

A chain of gamma 1 has no pass and stays eager; so does a feature draft whose head ids are not ascending inside
the vocabulary (its eager chain warps full rows for q), and a draft model whose restricted head has ids past the
shared vocabulary (`OutputHead.logits` places them through a boolean mask, which reads back to the host).
"""

from __future__ import annotations

import torch

from ..lm.chain_graphs import run_chain

Chained = tuple[torch.Tensor, torch.Tensor | None] | None  # run_chain's answer


def feature_chain(drafter, feature: torch.Tensor, gamma: int, keep_hidden: bool = False) -> Chained:
    """(the gamma greedy ids (gamma,) long on the device, the last predicted feature (1, hidden) where
    `keep_hidden`) of a FeatureDrafter's chain from `feature` (1, hidden), its LM moved as gamma - 1 passes would
    move it; None: run the eager chain (lm/chain_graphs.run_chain)."""
    lm, head, embedding = drafter.lm, drafter.head, drafter.embedding
    dtype = drafter.model.fc.weight.dtype

    def pick(f: torch.Tensor) -> torch.Tensor:
        """(1,) id: the head's own column of most score, named by its id (as the eager chain's index_select)."""
        return head.token_ids.index_select(0, head.sub_logits(f)[-1].argmax().view(1))

    def body(f: torch.Tensor, position: torch.Tensor, step):
        ids = []
        for k in range(gamma - 1):
            ids.append(pick(f))
            pairs = torch.cat([f.to(dtype), embedding(ids[-1]).to(dtype)], dim=-1)  # (1, 2 hidden)
            f = step(pairs.unsqueeze(0), position + k)[-1:]
        ids.append(pick(f))
        return torch.cat(ids), f

    reads = (head.token_ids, head.weight, embedding.weight)
    return run_chain(lm, "feature", gamma - 1, feature, body, reads, keep_hidden)


def model_chain(lm, first: torch.Tensor, gamma: int, keep_hidden: bool = False) -> Chained:
    """(the greedy ids after `first` (a 0-d long argmax on the device), (gamma - 1,) long, the last pass's hidden
    states (1, hidden) where `keep_hidden`) of a ModelDrafter's chain on its LM `lm`, moved as gamma - 1 forwards
    would move it; None: run the eager chain (also for a restricted head with ids past the shared vocabulary,
    whose logits are placed through a boolean mask: a host sync, which a capture refuses)."""
    if lm.head is not None and lm.head.max_id >= lm.vocab_width:
        return None

    def body(x: torch.Tensor, position: torch.Tensor, step):
        ids, hidden = [], None
        for k in range(gamma - 1):
            hidden = step(x, position + k)
            x = lm._logits(hidden)[-1].argmax().view(1, 1)
            ids.append(x.view(1))
        return torch.cat(ids), hidden

    reads = () if lm.head is None else (lm.head.token_ids, lm.head.weight)
    return run_chain(lm, "model", gamma - 1, first.view(1, 1), body, reads, keep_hidden)
