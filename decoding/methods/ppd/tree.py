"""PPD sparse trees as plain data, and the one pure function that turns a tree into buffers.

A tree is drafted from the prompt-token predictions of the previous step (Chen et al., section 4):
the prompt token at distance d gives a distribution over the token d steps after the root, and a
candidate is an index path (r_1, ..., r_d) in the Medusa style: its token is the r_d-th most likely
token at distance d, its parent is the path (r_1, ..., r_{d-1}) (the root for d = 1). Every node
(the root too) carries `prompts[i]` prompt tokens, chained one after another, each with `ept`
ensemble copies (EPT, section 3.2).

Node order in the buffers (the order of the tree part of the forward pass):
    root, candidates (sorted by depth, then path), prompt tokens (by owner, distance, EPT group).

`tree_buffers(tree, prefix_length, ept)` returns
  * `mask`       bool (1, 1, n, prefix_length + n): a node sees the whole committed prefix, its
                 ancestors and itself. Prompt token (owner v, distance k, group j) sees v's path and
                 the prompt tokens (v, k' < k, j) of its own EPT group (the paper's ensemble mask).
  * `position_ids` (1, n): prefix_length + depth; prompt token k of a node at depth d has depth d + k.
  * `retrieve`   (leaves, max_depth + 1): node indices of every root-to-leaf path of the candidate
                 subtree, padded with -1 (the paths verification walks).
plus per-node lists (kind, parent, depth, owner, distance, group, path) the strategy and trace read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

Path = tuple[int, ...]


@dataclass(frozen=True)
class PPDTree:
    """Candidate index paths and the number of prompt tokens on the root and on each candidate.

    `prompts[0]` belongs to the root, `prompts[i + 1]` to `candidates[i]`. Build with `make_tree`,
    which sorts the candidates and checks the tree is closed under prefixes.
    """

    candidates: tuple[Path, ...]
    prompts: tuple[int, ...]

    @property
    def depth(self) -> int:
        return max((len(p) for p in self.candidates), default=0)

    @property
    def n_candidates(self) -> int:
        return len(self.candidates)

    @property
    def n_prompts(self) -> int:
        return sum(self.prompts)

    def size(self, ept: int = 1) -> int:
        """Tree size n: candidate tokens + prompt-token inputs (EPT copies counted), root excluded."""
        return self.n_candidates + ept * self.n_prompts

    def max_rank(self) -> int:
        return max((r for p in self.candidates for r in p), default=-1)

    def as_dict(self) -> dict:
        return {"candidates": [list(p) for p in self.candidates], "prompts": list(self.prompts)}

    @classmethod
    def from_dict(cls, data: dict) -> "PPDTree":
        return make_tree(data["candidates"], data["prompts"])


def make_tree(candidates, prompts) -> PPDTree:
    """A validated PPDTree. `candidates`: index paths; `prompts`: an int for every node (root
    first, then the candidates in the order given), or one int applied to every node."""
    paths = [tuple(int(r) for r in p) for p in candidates]
    if isinstance(prompts, int):
        prompts = [prompts] * (len(paths) + 1)
    prompts = [int(k) for k in prompts]
    if len(prompts) != len(paths) + 1:
        raise ValueError(f"prompts needs one count per node: root + {len(paths)} candidates, got {len(prompts)}")
    if any(k < 0 for k in prompts):
        raise ValueError("prompt-token counts must be >= 0")
    if len(set(paths)) != len(paths):
        raise ValueError("duplicate candidate path")
    known = set(paths)
    for p in paths:
        if not p or any(r < 0 for r in p):
            raise ValueError(f"bad candidate path {p}: a non-empty tuple of ranks >= 0")
        if len(p) > 1 and p[:-1] not in known:
            raise ValueError(f"candidate {p} has no parent {p[:-1]} in the tree")
    order = sorted(range(len(paths)), key=lambda i: (len(paths[i]), paths[i]))
    return PPDTree(tuple(paths[i] for i in order), (prompts[0],) + tuple(prompts[i + 1] for i in order))


@dataclass
class TreeBuffers:
    kind: list[str]  # "root" | "candidate" | "prompt"
    parent: list[int]  # -1 for the root
    depth: list[int]  # root 0
    owner: list[int]  # the candidate/root a prompt token hangs from (itself for root/candidates)
    distance: list[int]  # prompt distance k >= 1; 0 for root and candidates
    group: list[int]  # EPT group of a prompt token; 0 otherwise
    path: list[Path]  # candidate index path; () for the root and prompt tokens
    mask: torch.Tensor  # bool (1, 1, n, prefix_length + n)
    position_ids: torch.Tensor  # long (1, n)
    retrieve: torch.Tensor  # long (leaves, max_depth + 1), -1 padded
    prompt_index: dict[tuple[int, int, int], int] = field(default_factory=dict)  # (owner, k, j) -> node
    n_candidates: int = 0

    @property
    def size(self) -> int:
        return len(self.kind)

    def children(self, node: int) -> list[int]:
        return [i for i in range(1, 1 + self.n_candidates) if self.parent[i] == node]


def tree_buffers(tree: PPDTree, prefix_length: int = 0, ept: int = 1) -> TreeBuffers:
    """Mask, positions, retrieve indices and per-node metadata of `tree` (see the module docstring)."""
    if ept < 1:
        raise ValueError("ept must be >= 1")
    index = {(): 0}
    kind, parent, depth, owner, distance, group, path = ["root"], [-1], [0], [0], [0], [0], [()]
    for p in tree.candidates:
        index[p] = len(kind)
        kind.append("candidate")
        parent.append(index[p[:-1]])
        depth.append(len(p))
        owner.append(index[p])
        distance.append(0)
        group.append(0)
        path.append(p)
    prompt_index = {}
    for node, count in enumerate(tree.prompts):
        for k in range(1, count + 1):
            for j in range(ept):
                prompt_index[(node, k, j)] = len(kind)
                kind.append("prompt")
                parent.append(node if k == 1 else prompt_index[(node, k - 1, j)])
                depth.append(depth[node] + k)
                owner.append(node)
                distance.append(k)
                group.append(j)
                path.append(())
    n = len(kind)
    tree_mask = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        a = i
        while a >= 0:
            tree_mask[i, a] = True
            a = parent[a]
    mask = torch.cat([torch.ones(n, prefix_length, dtype=torch.bool), tree_mask], dim=1)[None, None]
    positions = torch.tensor([prefix_length + d for d in depth], dtype=torch.long)[None]

    n_cand = len(tree.candidates)
    has_child = set(parent[1 : 1 + n_cand])
    leaves = [i for i in range(1 + n_cand) if i not in has_child]
    width = 1 + tree.depth
    retrieve = torch.full((len(leaves), width), -1, dtype=torch.long)
    for row, leaf in enumerate(leaves):
        chain, a = [], leaf
        while a >= 0:
            chain.append(a)
            a = parent[a]
        retrieve[row, : len(chain)] = torch.tensor(chain[::-1])
    return TreeBuffers(kind, parent, depth, owner, distance, group, path, mask, positions, retrieve,
                       prompt_index, n_cand)


# ---- dynamic sparse trees (section 4.2, propositions 4.1-4.4) ------------------------------------

# Acceptance probability of the rank-r token at distance d (row d-1, column r), used until a
# validation table is measured (`decoding.methods.ppd.hardware.acceptance_table`). Shaped like the paper's
# Table 2 for 1 EPT (top-1 about 0.5 / 0.27 at distances 1 / 2, top-5 about 0.8 / 0.6).
PRIOR_ACCEPTANCE = (
    (0.50, 0.12, 0.06, 0.04, 0.03, 0.02, 0.02, 0.01, 0.01, 0.01),
    (0.27, 0.12, 0.08, 0.06, 0.05, 0.03, 0.03, 0.02, 0.02, 0.02),
    (0.15, 0.08, 0.06, 0.05, 0.04, 0.03, 0.02, 0.02, 0.02, 0.01),
)


def candidate_tree(acceptance, n_candidates: int, max_depth: int) -> list[Path]:
    """The n candidate paths of depth <= max_depth maximizing f (Prop. 4.1): the n paths with the
    largest product of acceptance probabilities (greedy; a path never beats its parent, so the
    result is closed under prefixes)."""
    import heapq

    max_depth = min(max_depth, len(acceptance))
    if n_candidates <= 0 or max_depth <= 0:
        return []
    heap = [(-float(acceptance[0][r]), (r,)) for r in range(len(acceptance[0]))]
    heapq.heapify(heap)
    chosen = []
    while heap and len(chosen) < n_candidates:
        neg, p = heapq.heappop(heap)
        chosen.append(p)
        if len(p) < max_depth:
            for r in range(len(acceptance[len(p)])):
                heapq.heappush(heap, (neg * float(acceptance[len(p)][r]), p + (r,)))
    return chosen


def path_probability(acceptance, p: Path) -> float:
    out = 1.0
    for d, r in enumerate(p):
        out *= float(acceptance[d][r]) if r < len(acceptance[d]) else 0.0
    return out


def expected_accepted(acceptance, candidates) -> float:
    """f(T) of Proposition 4.1: sum over candidates of the product of acceptance probabilities
    along their path = expected number of accepted candidate tokens (the bonus token not counted)."""
    return sum(path_probability(acceptance, p) for p in candidates)


def last_accepted_probability(acceptance, candidates) -> list[float]:
    """P(node is the deepest accepted node), root first: P(accepted) - sum over its children."""
    paths = [()] + list(candidates)
    prob = [path_probability(acceptance, p) for p in paths]
    out = list(prob)
    where = {p: i for i, p in enumerate(paths)}
    for i, p in enumerate(paths[1:], 1):
        out[where[p[:-1]]] -= prob[i]
    return [max(0.0, v) for v in out]


def allocate_prompts(acceptance, candidates, n_prompts: int, m: int, f_state) -> list[int]:
    """Prompt tokens per node (root first) by greedy removal (Prop. 4.3): start from m on every
    node, remove the one whose removal costs least, Delta F = p(c) (f(T_i) - f(T_{i-1})), until
    n_prompts remain. p(c) is the probability that c ends up the last accepted node (the weight of
    the transition to state i in Prop. 4.2); f_state[i] = f(T_i), f_state[0] = 0."""
    last = last_accepted_probability(acceptance, candidates)
    counts = [m] * len(last)
    excess = sum(counts) - max(0, n_prompts)
    while excess > 0:
        best, cost = None, None
        for c, i in enumerate(counts):
            if i == 0:
                continue
            delta = last[c] * (f_state[i] - f_state[i - 1])
            if cost is None or delta < cost or (delta == cost and c > best):
                best, cost = c, delta
        counts[best] -= 1
        excess -= 1
    return counts


@dataclass
class DynamicTrees:
    """One tree per state k = 0..m (k = prompt tokens on the previous step's last accepted node,
    so candidates reach depth <= k), the split chosen, and the model's expected tokens per step."""

    trees: dict[int, PPDTree]
    size: int
    ept: int
    n_candidates: int
    expected_accepted: float  # R(T), Prop. 4.4: steady-state mean accepted candidates per step
    steady_state: list[float]

    @property
    def expected_tokens_per_step(self) -> float:
        return 1.0 + self.expected_accepted

    def as_dict(self) -> dict:
        return {"size": self.size, "ept": self.ept, "n_candidates": self.n_candidates,
                "expected_accepted": self.expected_accepted, "steady_state": self.steady_state,
                "trees": {str(k): t.as_dict() for k, t in self.trees.items()}}


def _states(acceptance, nc: int, np_: int, m: int, rounds: int = 4):
    f_state = [0.0] + [expected_accepted(acceptance, candidate_tree(acceptance, nc, k)) for k in range(1, m + 1)]
    trees = {}
    for _ in range(rounds):
        trees = {}
        for k in range(m + 1):
            cands = candidate_tree(acceptance, nc, k)
            trees[k] = make_tree(cands, allocate_prompts(acceptance, cands, np_, m, f_state))
        f_state = [expected_accepted(acceptance, trees[k].candidates) for k in range(m + 1)]
    # transition matrix P[k][i] = P(last accepted node of T_k carries i prompt tokens)
    P = [[0.0] * (m + 1) for _ in range(m + 1)]
    for k, t in trees.items():
        for c, w in enumerate(last_accepted_probability(acceptance, t.candidates)):
            P[k][t.prompts[c]] += w
    pi = [1.0 / (m + 1)] * (m + 1)
    for _ in range(200):
        pi = [sum(pi[k] * P[k][i] for k in range(m + 1)) for i in range(m + 1)]
        s = sum(pi) or 1.0
        pi = [v / s for v in pi]
    return trees, sum(pi[k] * f_state[k] for k in range(m + 1)), pi


def dynamic_trees(size: int, m: int = 3, ept: int = 1, acceptance=None) -> DynamicTrees:
    """The dynamic sparse tree of total size `size` (candidates + EPT * prompt tokens, root
    excluded): for every split nc + ept * np = size build the per-state trees (Prop. 4.1 candidate
    trees, Prop. 4.3 prompt allocation, iterated to agree on f(T_i)) and keep the split with the
    largest steady-state expected tokens R(T) (Prop. 4.4). The root always keeps >= 1 prompt token
    when size allows, so a step can always draft the next one."""
    acceptance = [list(row) for row in (acceptance or PRIOR_ACCEPTANCE)][:m]
    if not acceptance:
        raise ValueError("empty acceptance table")
    while len(acceptance) < m:  # farther distances than the table holds: decay its last row
        acceptance.append([0.6 * v for v in acceptance[-1]])
    if size < ept:
        raise ValueError(f"tree size {size} is smaller than one prompt token ({ept} EPT inputs)")
    best = None
    for np_ in range(1, size // ept + 1):
        nc = size - ept * np_
        trees, r, pi = _states(acceptance, nc, np_, m)
        if best is None or r > best[1] + 1e-12:
            best = (nc, r, pi, trees)
    nc, r, pi, trees = best
    return DynamicTrees(trees, size, ept, nc, r, pi)
