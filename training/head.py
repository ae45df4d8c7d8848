"""Training a draft whose output head covers only the tokens the target writes most (FR-Spec:
Zhao et al., 2025, arXiv:2502.14856; `decoding/drafters/output_head.py` uses the result).

The head's tokens S are the `head_tokens` most frequent ids of the target's generated tokens in
the training shards (plus its end-of-sequence ids). Its weights start as S's rows of the tied
embedding and are trained on their own (untied). The distillation loss is the lumped-tail KD of
`train.kd_loss` over the partition {each soft-label token in S, everything else}: a soft-label
token outside S adds its target mass to the "everything else" part, which the draft can only
match by its own leftover mass, so the loss stays finite and q stays a distribution over S.
"""

from __future__ import annotations

import torch

from decoding.drafters.output_head import frequent_tokens


def choose_tokens(examples, k: int, eos_ids) -> list[int]:
    """The k most frequent generated tokens of the training examples (and the eos ids), sorted."""
    return frequent_tokens((e[1] for e in examples), k, always=list(eos_ids))


def covered_mass(examples, tokens: list[int]) -> float:
    """The share of the target's top-k probability mass (soft labels) that falls on `tokens`."""
    keep = torch.zeros(max(max(tokens), 1) + 1, dtype=torch.bool)
    keep[torch.tensor(tokens)] = True
    inside = total = 0.0
    for e in examples:
        sid, sp = e[2].long(), e[3].float()
        ok = (sid < keep.numel()) & keep[sid.clamp(max=keep.numel() - 1)]
        inside += float((sp * ok).sum())
        total += float(sp.sum())
    return inside / total if total else 0.0


def kd_loss_subset(hidden, head_weight, subset, hard, sid, sp, hard_weight: float):
    """Mean lumped-tail KD (+ hard-label CE where the hard label is in the subset) with q a softmax
    over the subset's logits only. `subset` is sorted; labels outside it join the tail."""
    logq = torch.log_softmax((hidden @ head_weight.T).float(), dim=-1)  # (n, |S|)
    pos = torch.searchsorted(subset, sid).clamp(max=len(subset) - 1)
    inside = subset[pos] == sid
    lq_s = logq.gather(1, pos).masked_fill(~inside, float("-inf"))
    p_in = sp * inside
    rest_p = (1 - p_in.sum(1)).clamp(min=0)
    rest_q = torch.log1p(-lq_s.exp().sum(1).clamp(max=1 - 1e-6))
    kd = -(p_in * lq_s.masked_fill(~inside, 0.0)).sum(1) - rest_p * rest_q
    hpos = torch.searchsorted(subset, hard).clamp(max=len(subset) - 1)
    hin = subset[hpos] == hard
    ce = -(logq.gather(1, hpos[:, None]).squeeze(1) * hin)
    return (kd + hard_weight * ce).mean()


@torch.no_grad()
def subset_q(hidden, head_weight, subset, vocab: int) -> torch.Tensor:
    """q over the full vocabulary (zeros outside the subset), for the holdout figures."""
    q = torch.zeros(hidden.shape[0], vocab)
    q[:, subset.cpu()] = torch.softmax((hidden @ head_weight.T).float(), -1).cpu()
    return q
