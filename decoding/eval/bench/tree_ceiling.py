"""The copy-ceiling replay (`ceiling.py`) with a draft model that drafts chains or trees, measured or modelled.

Greedy speculative decoding emits the autoregressive output whatever it drafts, so a drafting rule's speed
follows from that output, how many tokens each iteration gets accepted and what each pass costs. `ceiling.replay`
does this for copying rules, handing the positions they leave to a draft model in expectation (one alpha for
every token). Here the model's iteration at position t is described by its cost in milliseconds and the
distribution of its accepted length there, as a survival list: `survival[d - 1]` = P(accepted >= d). A
measured draft gives a point mass (the accepted length `experiments/tree_diagnostic.py --positions-out`
recorded there); a modelled one gives a distribution, and `expected_replay` takes the expectation exactly,
by dynamic programming over the output's positions from its end.

Where the accepted lengths come from:

- `chain_survival`: a chain of gamma tokens keeps its leading draft tokens equal to the target's; along the
  target's path it drafts the top-1 token, so it keeps the leading depths whose rank is 0.
- `prefix_probabilities` and `tree_survival`: a static tree is a prefix-closed set of rank tuples (r1..rd):
  the node "the r-th likeliest child, at each depth" (Sequoia: Chen et al., arXiv:2402.12374). Greedy
  verification keeps the longest prefix of the position's rank vector that is a node, so P(accepted >= d) is
  the probability that the vector's d-prefix is a node. `best_static_tree` picks the N most frequent prefixes.
- A stronger draft (`miss_scale` s < 1): every miss of the top-1 at every depth is kept with probability s and
  otherwise becomes a top-1 hit, independently. Then P(rank >= k) becomes s P(rank >= k) for every k >= 1 at
  every depth: the rank distribution beyond the top-1 keeps its shape, every top-k miss rate shrinks by the same
  factor. `miss_scale_for` gives the s that lifts a top-1 hit rate to a goal.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

from .ceiling import Replay, VerifyCost

# model(t) -> None (a plain target step) or (milliseconds of the iteration, survival of its accepted length)
Model = Callable[[int], "tuple[float, list[float]] | None"]


def miss_scale_for(top1: float, goal: float) -> float:
    """The s that lifts a top-1 hit rate `top1` to `goal` (1 - goal = s (1 - top1)); 1 keeps today's draft."""
    if not 0.0 <= top1 < 1.0 or not top1 <= goal <= 1.0:
        raise ValueError(f"need 0 <= top1 ({top1}) <= goal ({goal}) <= 1 and top1 < 1")
    return (1.0 - goal) / (1.0 - top1)


def point_survival(accepted: int) -> list[float]:
    """A measured accepted length as a survival list: P(accepted >= d) = 1 for d <= accepted."""
    return [1.0] * accepted


def chain_survival(ranks: list[int], gamma: int, miss_scale: float = 1.0) -> list[float]:
    """P(a gamma-token chain keeps >= d tokens), d = 1..gamma: every depth up to d top-1 (rank 0); a depth whose
    measured rank is not 0 becomes 0 with probability 1 - miss_scale."""
    out, p = [], 1.0
    for r in ranks[:gamma]:
        p *= 1.0 if r == 0 else 1.0 - miss_scale
        if p == 0.0:
            break
        out.append(p)
    return out


def prefix_probabilities(ranks: list[int], depth: int, max_rank: int, miss_scale: float = 1.0) -> dict:
    """{rank prefix (r1..rd), d = 1..depth: P(the position's rank vector starts with it)} under the stronger-draft
    model (each rank > 0 kept with probability `miss_scale`, else 0). A rank >= `max_rank` is a miss no tree holds:
    the prefixes stop there."""
    out: dict[tuple, float] = {}
    live = {(): 1.0}
    for r in ranks[:depth]:
        grown: dict[tuple, float] = {}
        for prefix, p in live.items():
            branches = [(0, p)] if r == 0 else [(0, p * (1.0 - miss_scale)), (r, p * miss_scale)]
            for rank, q in branches:
                if q > 0.0 and rank < max_rank:
                    grown[prefix + (rank,)] = grown.get(prefix + (rank,), 0.0) + q
        out.update(grown)
        live = grown
    return out


def best_static_tree(counts: Counter | dict, nodes: int, depth: int) -> list[tuple]:
    """The `nodes` most frequent rank prefixes of length <= `depth` (shorter first among equals, so the set is
    prefix-closed: a prefix is at least as frequent as any extension): the best static tree in hindsight."""
    kept = [(k, v) for k, v in counts.items() if len(k) <= depth and v > 0]
    ranked = sorted(kept, key=lambda kv: (-kv[1], len(kv[0]), kv[0]))
    return [k for k, _ in ranked[:nodes]]


def tree_survival(probabilities: dict, tree) -> list[float]:
    """P(accepted >= d), d = 1..depth of `tree` (a prefix-closed set of rank tuples): the sum over the tree's nodes
    of length d of the probability that the position's vector starts with them (`prefix_probabilities`)."""
    by_depth: dict[int, float] = {}
    for node in tree:
        by_depth[len(node)] = by_depth.get(len(node), 0.0) + probabilities.get(node, 0.0)
    out = [by_depth.get(d, 0.0) for d in range(1, max(by_depth, default=0) + 1)]
    while out and out[-1] == 0.0:
        out.pop()
    return out


class DraftCost:
    """A draft's time per call over a target one-token step, measured at a few cached contexts
    (`experiments/tree_diagnostic.py`'s timing: {context: {"tree6,3": ratio, "chain2": ratio, ...}}),
    linear in the context between them, clamped outside."""

    def __init__(self, tables: dict[float, dict[str, float]]):
        if not tables:
            raise ValueError("DraftCost needs at least one measured context")
        self.tables = dict(sorted(tables.items()))

    def ratio(self, name: str, context: int) -> float:
        return VerifyCost._along({c: table[name] for c, table in self.tables.items()}, context)

    def names(self) -> set[str]:
        """The drafts timed at every context."""
        return set.intersection(*(set(t) for t in self.tables.values()))


class ScaledVerify:
    """A cheaper verify: a pass over n tokens costs a one-token step plus `width_scale` times what the measured
    pass costs beyond it (0: any width at the price of one token). Same `ms` as `VerifyCost`."""

    def __init__(self, cost: VerifyCost, width_scale: float):
        self.cost, self.width_scale = cost, width_scale

    def ms(self, n_tokens: int, context: int) -> float:
        step = self.cost.ms(1, context)
        return step + self.width_scale * (self.cost.ms(n_tokens, context) - step)


def expected_replay(sequence: list[int], prompt_length: int, rule, cost, model: Model | None = None) -> Replay:
    """The expected `Replay` of the output `sequence[prompt_length:]` (the prefill emitted its first token): at
    each position t (the last committed token) the copying `rule` (`ceiling.py`'s rules: (accepted, proposed))
    runs if it proposes anything, else `model(t)` (None: a plain step), whose accepted length is random with the
    given survival. Exact expectation: E[ms from t] = iteration ms + sum_k P(k) E[ms from t + k + 1], from the end
    (the last pass emits what is left). Deterministic rules and point masses give `ceiling.replay`'s figures."""
    last = len(sequence) - 1
    ms = [0.0] * (last + 1)  # ms[t]: expected milliseconds from position t to the end
    iterations = [0.0] * (last + 1)
    for t in range(last - 1, prompt_length - 1, -1):
        room = last - t - 1  # tokens that can still be accepted
        accepted, proposed = rule(sequence, t) if rule is not None else (0, 0)
        if proposed:
            nxt = t + min(accepted, room) + 1
            ms[t] = cost.ms(proposed + 1, t) + ms[nxt]
            iterations[t] = 1.0 + iterations[nxt]
            continue
        drafted = model(t) if model is not None else None
        if drafted is None:
            ms[t], iterations[t] = cost.ms(1, t) + ms[t + 1], 1.0 + iterations[t + 1]
            continue
        iteration_ms, survival = drafted
        survival = [1.0] + list(survival)[:room] + [0.0]  # P(accepted >= k), k = 0..room + 1
        ms[t], iterations[t] = iteration_ms, 1.0
        for k in range(len(survival) - 1):
            p = survival[k] - survival[k + 1]  # P(accepted == k)
            ms[t] += p * ms[t + k + 1]
            iterations[t] += p * iterations[t + k + 1]
    out = Replay(tokens=last - prompt_length, iterations=iterations[prompt_length], rule_ms=ms[prompt_length])
    out.autoregressive_ms = sum(cost.ms(1, u) for u in range(prompt_length, last))
    return out
