"""Verifying a draft TREE exactly: recursive rejection sampling over each node's siblings.

Sources: Jeon, Gagrani, Goel, Park, Lee, Lott, "Recursive Speculative Decoding: Accelerating LLM
Inference via Sampling Without Replacement", arXiv:2402.14160 (the rule below, RSD with siblings drawn
without replacement); Miao et al., "SpecInfer: Accelerating Generative Large Language Model Serving with
Tree-based Speculative Inference and Verification", arXiv:2305.09781 (multi-draft verification with a
residual updated after each rejected sibling).

The rule, at a node v with target distribution p (v's row of p_rows) and draft distribution q (v's
row of q_rows), whose children x_1..x_k were drawn from q WITHOUT replacement in that order
(x_i ~ q_i = q with x_1..x_{i-1} removed and renormalised; Gumbel-top-k gives this order in one shot):
    p_1 = p, q_1 = q
    for i = 1..k:  accept x_i iff u_i <= min(1, p_i(x_i) / q_i(x_i))
                   on rejection  p_{i+1} = norm(max(0, p_i - q_i)),  q_{i+1} = q_i without x_i, renormalised
    on acceptance of x_i: descend into x_i's children with the target's p at x_i (x_i's row)
    all k rejected: the correction token is drawn from p_{k+1}, the last residual
    an accepted leaf: the bonus token is drawn from the target's p at that leaf.
At temperature 0 (coins None) a child is accepted iff it is the target's argmax at v (tried in order;
the children of v carry distinct tokens, so at most one passes) and the next token is that argmax.

Proof sketch (each emitted token has the target's distribution given the prefix). Claim: the token
emitted at v from sibling i on (x_i accepted, or a later sibling, or the correction) is distributed as
p_i, for ANY q_i from which x_i was actually drawn. By induction from i = k + 1, where the correction is
drawn from p_{k+1} itself. Step i: x_i ~ q_i is emitted with probability
    q_i(y) min(1, p_i(y)/q_i(y)) = min(q_i(y), p_i(y));
otherwise (probability 1 - sum_y min(q_i, p_i) = sum_y max(0, p_i - q_i) =: m_i) the later siblings
take over and, by the induction hypothesis, emit y with probability p_{i+1}(y) = max(0, p_i(y) - q_i(y)) / m_i,
whatever x_i was: p_{i+1} does not depend on the rejected value (only q_{i+1} does, and the hypothesis
holds for any q_{i+1}). Total: min(q_i, p_i)(y) + max(0, p_i - q_i)(y) = p_i(y). At i = 1 this is p.
The accepted child's subtree then repeats the argument one level down with the target's p at x_i, and
an accepted leaf draws its bonus from that p, so a whole iteration emits the target's joint distribution.
What the proof needs of the tree (the engine's duty, methods/tree_draft.py): v's number of children is
fixed before they are drawn (it may depend on v's path, q and the budget, never on a child's own value:
keeping a child because of its own probability would bias what was drawn), and the children tried are a
prefix of the without-replacement order; a subtree may be shaped by anything drawn outside it.
A wrong step (testing siblings independently against p, not removing tried siblings from q, or not
updating the residual) breaks the induction; tests/decoding/methods/test_tree_draft.py shows the
chi-square test catching each.

Lenience (Leviathan et al., appendix A.5) does not carry over: p_i / (l q_i) with a residual update
that stays a distribution is not what the proof above covers, so trees refuse lenience != 1
(`validate_tree_lenience`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from .acceptance import RESIDUAL_FLOOR
from .warp import argmax_index

ACCEPTED, REJECTED, UNTRIED = "accepted", "rejected", "untried"
LENIENCE_MESSAGE = ("a draft tree is verified exactly (recursive rejection over siblings); lenience below 1 is "
                    "defined for a chain only: set lenience to 1 or draw a chain")


def validate_tree_lenience(lenience: float) -> None:
    if lenience != 1.0:
        from ..errors import keyed

        raise keyed(f"{LENIENCE_MESSAGE} (got lenience {lenience})", "tree.lenience", value=lenience)


@dataclass
class SiblingStep:
    """One sibling's test: accepted or not, its threshold min(1, p_i(x)/q_i(x)) and, after a rejection,
    p_{i+1} (V,), q_{i+1} (V,) and the residual mass m_i = sum max(0, p_i - q_i)."""

    accepted: bool
    threshold: float
    p_next: torch.Tensor | None = None
    q_next: torch.Tensor | None = None
    mass: float | None = None


def remove_token(q: torch.Tensor, x: int) -> torch.Tensor:
    """q (V,) without token x, renormalised: the distribution the next sibling is drawn from."""
    out = q.clone()
    out[x] = 0.0
    total = float(out.sum())
    return out / total if total > 0 else out


def recursive_rejection_step(p: torch.Tensor, q: torch.Tensor, x: int, u: float) -> SiblingStep:
    """The correct sibling step (Jeon et al., arXiv:2402.14160): p (V,) = p_i, q (V,) = q_i, x ~ q_i, u ~ U(0,1).
    Accept iff u <= min(1, p(x)/q(x)); else p_{i+1} = norm(max(0, p - q)) (p itself where the mass
    underflows: p == q up to round-off) and q_{i+1} = q without x."""
    threshold = min(1.0, float(p[x]) / float(q[x])) if float(q[x]) > 0 else 1.0
    if u <= threshold:
        return SiblingStep(True, threshold)
    diff = torch.clamp(p - q, min=0.0)
    mass = float(diff.sum())
    p_next = diff / mass if mass >= RESIDUAL_FLOOR else p
    return SiblingStep(False, threshold, p_next, remove_token(q, x), mass)


StepRule = Callable[[torch.Tensor, torch.Tensor, int, float], SiblingStep]


@dataclass
class NodeVerdict:
    """How one draft node fared (per TreeNode's verdict fields in trace/record.py)."""

    verdict: str = UNTRIED  # accepted | rejected | untried
    rank: int = 0  # 0 = tried first among its siblings
    q: float | None = None  # q_i(x): the probability it was drawn with
    p: float | None = None  # p_i(x) (greedy: p_raw(x))
    coin: float | None = None
    threshold: float | None = None  # min(1, p_i/q_i) (greedy: max p_raw, the bar p_raw(x) must reach)
    residual_mass: float | None = None  # after its rejection
    residual: torch.Tensor | None = None  # (V,) p_{i+1} after its rejection


@dataclass
class TreeVerdict:
    """The accepted path (node indices, root excluded, root to leaf), each node's verdict, and the
    distribution the next token comes from: the residual after the last rejection under the path's
    end, or the target's p there (the bonus) when that node has no children."""

    path: list[int]
    nodes: list[NodeVerdict]  # one per node; the root's is a placeholder
    next_distribution: torch.Tensor
    next_is_bonus: bool
    residual_mass: float | None = None
    residual_fell_back_to_p: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def last(self) -> int:
        """The node the next token is drawn at: the path's end (the root when nothing was accepted)."""
        return self.path[-1] if self.path else 0


def children_lists(parents: list[int]) -> list[list[int]]:
    """children[v]: v's children in index order (the order they were drawn and are tried in)."""
    out: list[list[int]] = [[] for _ in parents]
    for c, v in enumerate(parents):
        if v >= 0:
            out[v].append(c)
    return out


def verify_tree(parents: list[int], tokens: list[int], p_rows: torch.Tensor, q_rows: torch.Tensor | None,
                coins: torch.Tensor | None, p_raw_rows: torch.Tensor | None = None,
                step: StepRule = recursive_rejection_step) -> TreeVerdict:
    """Verify a draft tree of n nodes (node 0 the root, the last committed token).

    parents    n ints, parents[0] = -1, parents[c] < c; the children of v in index order are the order
               they were drawn from q_rows[v] without replacement (and are tried in)
    tokens     n token ids (tokens[0] is the root's; siblings distinct)
    p_rows     (n, V) the target's (warped) distribution after each node's path (read by node: p_rows[v]; rows
               made on demand, methods/tree_draft.NodeRows, serve as well)
    q_rows     (n, V) the draft distribution each node's children were drawn from (a leaf's row unused);
               None at temperature 0
    coins      (n,) uniforms, coins[c] the coin of node c (coins[0] unused); None: the greedy rule
    p_raw_rows (n, V) the target's unwarped probabilities (the greedy rule reads them; by node, as p_rows)
    step       the sibling rule (the tests pass wrong ones to show the distribution test catches them)
    """
    children = children_lists(parents)
    nodes = [NodeVerdict() for _ in parents]
    for kids in children:
        for rank, c in enumerate(kids):
            nodes[c].rank = rank
    path: list[int] = []
    v = 0
    while True:
        kids = children[v]
        if not kids:
            return TreeVerdict(path, nodes, p_rows[v], True)
        if coins is None:
            raw = p_raw_rows[v]
            want, top = argmax_index(raw), float(raw.max())
            nxt = None
            for rank, c in enumerate(kids):
                x = tokens[c]
                ok = nxt is None and x == want
                tried = nxt is None
                q = float(q_rows[v, x]) if q_rows is not None else None
                nodes[c] = NodeVerdict(ACCEPTED if ok else REJECTED if tried else UNTRIED, rank, q,
                                       float(raw[x]), None, top)
                if ok:
                    nxt = c
            if nxt is None:
                return TreeVerdict(path, nodes, p_rows[v], False)
            path.append(nxt)
            v = nxt
            continue
        p, q = p_rows[v], q_rows[v]
        nxt, mass = None, None
        for rank, c in enumerate(kids):
            x = tokens[c]
            if nxt is not None:
                nodes[c] = NodeVerdict(UNTRIED, rank)
                continue
            u = float(coins[c])
            out = step(p, q, x, u)
            nodes[c] = NodeVerdict(ACCEPTED if out.accepted else REJECTED, rank, float(q[x]), float(p[x]), u,
                                   out.threshold)
            if out.accepted:
                nxt = c
            else:
                nodes[c].residual_mass, nodes[c].residual = out.mass, out.p_next
                p, q, mass = out.p_next, out.q_next, out.mass
        if nxt is None:
            return TreeVerdict(path, nodes, p, False, mass, mass is not None and mass < RESIDUAL_FLOOR)
        path.append(nxt)
        v = nxt
