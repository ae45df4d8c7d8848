"""Draft trees grown from a draft model, as plain data, and the pure functions around them.

A tree is grown level by level from the last committed token (the root), as EAGLE-2 does (Li, Wei,
Zhang, Zhang, "EAGLE-2: Faster Inference of Language Models with Dynamic Draft Trees",
arXiv:2406.16858): each frontier node's q is known from the draft's last pass; every node gets a
number of children from what is known BEFORE they are drawn, namely the slots (v, j) valued
score(v) * (j-th largest q_v value) (score = the product of draft probabilities along v's path; the
j-th largest value is the shape of q_v, not a sample), the best slots within the node budget N win
(a node's slots are a prefix 1..k_v since the values fall with j); then v's k_v children are drawn
from q_v WITHOUT replacement (Gumbel-top-k: the k largest log q + Gumbel noise, in order, are k
draws without replacement in their draw order), or at temperature 0 its k_v most likely tokens.
This keeps the exactness condition of rules/tree_acceptance.py: a child's presence never depends on
its own value. At temperature 0 (where any selection is exact) the tree is grown as EAGLE-2 grows it:
each fed node gets its likeliest tokens and the N best nodes by path score are kept (`best_subtree`).
One draft forward per level feeds the level's best new nodes with a tree mask (`tree_mask`), depth up to D.

Node order: the root (0), then nodes in the order they were added (level by level, a node's children
together in draw order), so parents[c] < c and the cache slot of node c >= 1 in a pass that starts
right after the root is c - 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..rules.warp import SamplingConfig, warp_logits

MAX_CHILDREN = 8  # the most children one node may get (EAGLE-2 uses its top-k = 10)
SLOT_FLOOR = 0.05  # temperature > 0: a child slot worth less than this share of its level's best is not drawn


@dataclass
class DraftTree:
    """A draft tree of n nodes (node 0 the root, the last committed token).

    parents  n ints (parents[0] = -1); a node's children in index order are their draw order
    tokens   n token ids
    depths   n ints (the root 0)
    q_rows   (n, V) the distribution each node's children were drawn from (zeros for a node that
             was never expanded); at temperature 0 the draft's unwarped softmax (its children are its top-k)
    scores   n floats: log of the product of draft probabilities along the path (root 0)
    kind     "draft" (a model's guesses) | "lookup" (a copied chain, q one-hot)
    """

    parents: list[int]
    tokens: list[int]
    depths: list[int]
    q_rows: torch.Tensor
    scores: list[float] = field(default_factory=list)
    kind: str = "draft"
    catch_up_seconds: float = 0.0
    kinds: list[str] | None = None  # per node where they differ (a model chain continued by a copy); None: `kind`
    kept: list[int] | None = None  # after `best_subtree`: each node's index in the grown tree (None: the same)

    def kind_of(self, node: int) -> str:
        return self.kinds[node] if self.kinds is not None else self.kind

    @property
    def size(self) -> int:
        """Draft nodes (root excluded)."""
        return len(self.parents) - 1

    @property
    def depth(self) -> int:
        return max(self.depths)

    @property
    def is_chain(self) -> bool:
        """Whether every node's parent is the node before it (a copied or model chain): its tree mask is
        then the causal mask."""
        return all(parent == node - 1 for node, parent in enumerate(self.parents))

    def path_to(self, node: int) -> list[int]:
        """Node indices root-exclusive from the root down to `node` (inclusive)."""
        out = []
        while node > 0:
            out.append(node)
            node = self.parents[node]
        return out[::-1]


def chain_tree(root: int, tokens: list[int], q_rows: torch.Tensor, kind: str = "lookup",
               kinds: list[str] | None = None) -> DraftTree:
    """A chain as a tree: node i + 1 = tokens[i], its parent node i; q_rows (k, V) the rows the tokens
    were drawn from, placed at their parents (row v = the q of v's one child). `kinds`: per token, where
    they differ (a model draft continued by a copy)."""
    k = len(tokens)
    rows = torch.zeros(k + 1, q_rows.shape[-1], dtype=q_rows.dtype, device=q_rows.device)
    rows[:k] = q_rows[:k]
    return DraftTree(list(range(-1, k)), [root] + list(tokens), list(range(k + 1)), rows, [0.0] * (k + 1), kind,
                     kinds=["root", *kinds] if kinds is not None else None)


def tree_mask(parents: list[int], fed: list[int], slots: dict[int, int], committed: int, width: int) -> torch.Tensor:
    """Bool (len(fed), width): the attention rows of tree nodes `fed`, fed in one pass. Node c sees
    the `committed` cached entries of the committed sequence (the root among them), and the cache slot
    `slots[a]` of every ancestor a of c that is a tree node in the cache (c itself included: the fed
    nodes' slots are in `slots` too). `width` = entries in the cache after the pass."""
    mask = torch.zeros(len(fed), width, dtype=torch.bool)
    mask[:, :committed] = True
    for row, c in enumerate(fed):
        a = c
        while a > 0:
            if a in slots:
                mask[row, slots[a]] = True
            a = parents[a]
    return mask


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A bool mask (rows, cols) as the 4D additive float mask (1, 1, rows, cols) the models read."""
    out = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return out.masked_fill(~mask, torch.finfo(dtype).min)[None, None]


def gumbel_top_k(q: torch.Tensor, k: int, generator: torch.Generator | None) -> list[int]:
    """k tokens drawn from q (V,) without replacement, in draw order: the k largest log q + G,
    G i.i.d. Gumbel(0, 1) (the Gumbel-top-k trick; Kool, van Hoof, Welling, "Stochastic Beams and
    Where to Find Them", arXiv:1903.06059). k must not exceed the support of q."""
    u = torch.rand(q.shape, generator=generator, device=q.device).clamp(1e-20, 1 - 1e-7)
    keys = torch.log(q) - torch.log(-torch.log(u))
    return torch.topk(keys, k).indices.tolist()


def allocate_children(scores: list[float], q_rows: torch.Tensor, budget: int,
                      max_children: int = MAX_CHILDREN, floor: float = 0.0) -> list[int]:
    """How many children each frontier node gets: the `budget` best slots (v, j) by
    scores[v] + log(j-th largest q_v), j < min(max_children, support of q_v), leaving out slots worth less
    than `floor` times the best one. Depends on the scores and the shape of each q only (never on a draw).
    scores: log path probabilities (F,); q_rows (F, V). Returns F counts (a prefix of each node's slots)."""
    if budget <= 0 or not scores:
        return [0] * len(scores)
    k = min(max_children, q_rows.shape[-1])
    top = torch.topk(q_rows, k, dim=-1).values  # (F, k), falling along j
    values = torch.tensor(scores, dtype=top.dtype, device=top.device)[:, None] + torch.log(top)
    values = values.masked_fill(top <= 0, float("-inf")).flatten()
    if floor > 0:
        values = values.masked_fill(values < values.max() + torch.log(torch.tensor(floor)), float("-inf"))
    take = min(budget, int(torch.isfinite(values).sum()))
    counts = [0] * len(scores)
    if take:
        for i in torch.topk(values, take).indices.tolist():
            counts[i // k] += 1
    return counts


def best_subtree(tree: "DraftTree", nodes: int) -> "DraftTree":
    """The `nodes` draft nodes of highest path score (EAGLE-2's reranking), as a tree in the same order.
    A child's score is at most its parent's and ties go to the earlier index, so the kept set holds every
    kept node's parent. Only for temperature 0: it keeps or drops a node by its own drawn value, which
    would bias a sampled tree."""
    if tree.size <= nodes:
        return tree
    order = sorted(range(1, len(tree.parents)), key=lambda c: (-tree.scores[c], c))
    keep = [0] + sorted(order[:nodes])
    index = {old: new for new, old in enumerate(keep)}
    kept = [tree.kept[c] for c in keep] if tree.kept is not None else keep
    rows = tree.q_rows[keep] if tree.q_rows.shape[0] == len(tree.parents) else tree.q_rows
    return DraftTree([index.get(tree.parents[c], -1) for c in keep], [tree.tokens[c] for c in keep],
                     [tree.depths[c] for c in keep], rows, [tree.scores[c] for c in keep], tree.kind,
                     tree.catch_up_seconds, kept=kept)


# expand(new_nodes, tree_so_far) -> draft logits (len(new_nodes), V) after each new node's path
Expand = Callable[[list[int], DraftTree], torch.Tensor]
# keep_growing(level, best_score) -> whether to grow level + 1, asked before level `level` is drawn with the log
# path probability of the best node it can hold (gamma_policy.GammaPolicy.tree_stopper)
KeepGrowing = Callable[[int, float], bool]


def grow_tree(root: int, root_logits: torch.Tensor, expand: Expand, nodes: int, depth: int,
              sampling: SamplingConfig, generator: torch.Generator | None, width: int = 8,
              max_children: int = MAX_CHILDREN, token_ids: torch.Tensor | None = None,
              vocab: int | None = None, keep_growing: KeepGrowing | None = None) -> DraftTree:
    """Grow a tree of at most `nodes` draft nodes and `depth` levels from the draft's logits after
    the root (V,); after each level but the last, the `width` best new nodes by path score are fed to
    the draft in one `expand` call (only fed nodes can have children).

    Temperature > 0 (exact): at each level the frontier's children are allocated before they are drawn
    (`allocate_children`: slots worth at least SLOT_FLOOR of the level's best, at most half the budget
    left while deeper levels remain, so a flat q does not spend it all at the top), then drawn without
    replacement. Temperature 0: EAGLE-2's way, every fed node gets its `max_children` likeliest tokens
    and the `nodes` best by path score are kept at the end (`best_subtree`).
    q is warp_logits of the draft's logits (at temperature 0 its softmax).

    `token_ids` (K,) with `vocab`: the logits (root (K,), expand's (m, K)) score only these vocabulary ids (a
    head over a token subset, drafters/output_head.py: every other id has q = 0), so the tree is grown over K
    columns instead of the whole vocabulary (the same q, softmax and top-k over a sixth of the width for the
    shipped feature draft's 8192 of 49152) and its q_rows are spread to (n, vocab) at the end.

    `keep_growing(level, best_score)`: asked before each level but the last is drawn, with the log path
    probability of the best node that level can hold (its best slot: a frontier node's score plus the log of
    its largest q, known before the draw; at temperature 0 the level's best node itself); False makes that
    level the last: it gets the whole budget left (no half kept for deeper levels) and no draft pass follows
    it. It reads the draft side only, from before the level's draw, so a child's presence still never
    depends on its own value and the rule stays exact."""
    greedy = sampling.greedy
    ids = token_ids.tolist() if token_ids is not None else None

    def q_of(logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits.float(), dim=-1) if greedy else warp_logits(logits, sampling)

    q_root = q_of(root_logits)
    rows = {0: q_root}  # the q of every fed node (the only nodes that get children)
    tree = DraftTree([-1], [root], [0], q_root[None], [0.0])
    frontier = [0]
    for level in range(1, depth + 1):
        left = nodes - tree.size
        if (left <= 0 and not greedy) or not frontier:
            break
        q_front = torch.stack([rows[v] for v in frontier])
        last = level == depth
        if not last and keep_growing is not None:  # the best path this level can hold, before it is drawn
            best_q = q_front.max(dim=-1).values.tolist()
            last = not keep_growing(level, max(tree.scores[v] + math.log(b) for v, b in zip(frontier, best_q) if b > 0))
        if greedy:  # every fed node's likeliest tokens, in one top-k over the frontier's rows
            top = torch.topk(q_front, min(max_children, q_front.shape[-1]), dim=-1)
            counts = (top.values > 0).sum(-1).tolist()
            picks, logs = top.indices.tolist(), torch.log(top.values).tolist()
        else:
            cap = left if last else max(1, (left + 1) // 2)
            counts = allocate_children([tree.scores[v] for v in frontier], q_front, cap, max_children, SLOT_FLOOR)
        added = []
        for i, (v, k) in enumerate(zip(frontier, counts)):
            if not k:
                continue
            if greedy:
                xs, logq = picks[i][:k], logs[i][:k]
            else:
                q = rows[v]
                xs = gumbel_top_k(q, k, generator)
                logq = torch.log(q[xs]).tolist()
            for x, lq in zip(xs, logq):
                added.append(len(tree.parents))
                tree.parents.append(v)
                tree.tokens.append(ids[x] if ids is not None else x)
                tree.depths.append(level)
                tree.scores.append(tree.scores[v] + lq)
        if last or (tree.size >= nodes and not greedy) or not added:
            break
        fed = sorted(added, key=lambda c: -tree.scores[c])[:width]
        fed.sort()
        logits = expand(fed, tree)
        for c, row in zip(fed, logits):
            rows[c] = q_of(row)
        frontier = fed
    if greedy:
        tree = best_subtree(tree, nodes)  # (its q_rows are filled below from `rows`, by kept index)
    width_q = q_root.shape[-1] if token_ids is None else vocab
    tree.q_rows = torch.zeros(len(tree.parents), width_q, device=q_root.device)
    for new, old in enumerate(tree.kept if tree.kept is not None else range(len(tree.parents))):
        if old in rows:
            if token_ids is None:
                tree.q_rows[new] = rows[old]
            else:
                tree.q_rows[new, token_ids] = rows[old]
    return tree
