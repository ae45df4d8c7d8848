"""drafters/tree.py: growing a tree over a head's token subset gives the tree grown over the whole vocabulary; a
tree stops growing where keep_growing says so (at a low path probability, not at a high one)."""

from __future__ import annotations

import math

import pytest
import torch

from decoding.drafters.tree import DraftTree, grow_tree
from decoding.rules.warp import SamplingConfig

VOCAB, K, HIDDEN = 50, 12, 8


def _setup(seed: int, scale: float = 2.0):
    """A random 'draft': node logits are a fixed function of the node's path (its token ids), over K ids
    of a VOCAB-wide vocabulary; the same scores as full-width logits (-inf outside the subset). `scale`: how
    peaked the draft is (large: one likely token per node; small: nearly uniform)."""
    g = torch.Generator().manual_seed(seed)
    token_ids = torch.randperm(VOCAB, generator=g)[:K]
    table = torch.randn(VOCAB, K, generator=g) * scale

    def sub(paths: list[list[int]]) -> torch.Tensor:  # (m, K): a deterministic score of each path
        return torch.stack([table[p].sum(0) + 0.1 * len(p) for p in paths])

    def full(rows: torch.Tensor) -> torch.Tensor:
        out = torch.full((rows.shape[0], VOCAB), float("-inf"))
        out[:, token_ids] = rows
        return out

    def expand_with(to_logits):
        def expand(fed: list[int], tree: DraftTree) -> torch.Tensor:
            return to_logits(sub([[tree.tokens[a] for a in [*tree.path_to(c)]] for c in fed]))
        return expand

    return token_ids, sub, full, expand_with


@pytest.mark.parametrize("nodes,depth", [(16, 6), (8, 4), (5, 2)])
def test_greedy_tree_over_the_subset_equals_the_full_width_tree(nodes, depth):
    token_ids, sub, full, expand_with = _setup(nodes)
    root = sub([[3]])
    greedy = SamplingConfig(temperature=0.0)
    whole = grow_tree(3, full(root)[0], expand_with(full), nodes, depth, greedy, None)
    small = grow_tree(3, root[0], expand_with(lambda rows: rows), nodes, depth, greedy, None,
                      token_ids=token_ids, vocab=VOCAB)
    assert small.parents == whole.parents and small.tokens == whole.tokens and small.depths == whole.depths
    assert small.scores == pytest.approx(whole.scores, abs=1e-5)
    assert small.q_rows.shape == whole.q_rows.shape == (len(whole.parents), VOCAB)
    torch.testing.assert_close(small.q_rows, whole.q_rows)
    assert whole.size == nodes and set(small.tokens[1:]) <= set(token_ids.tolist())


def test_sampled_tree_over_the_subset_draws_vocabulary_ids_with_full_width_rows():
    """At temperature > 0 the draws differ (the noise is over K columns), but every token is a vocabulary id
    of the subset, its parent's full-width q row is the subset's q spread out, and the row sums to 1."""
    token_ids, sub, full, expand_with = _setup(7)
    sampling = SamplingConfig(temperature=1.0)
    root = sub([[3]])
    tree = grow_tree(3, root[0], expand_with(lambda rows: rows), 10, 3, sampling, torch.Generator().manual_seed(1),
                     token_ids=token_ids, vocab=VOCAB)
    assert tree.size >= 2 and set(tree.tokens[1:]) <= set(token_ids.tolist())
    torch.testing.assert_close(tree.q_rows[0], torch.softmax(full(root)[0], -1))
    for c in range(1, len(tree.parents)):
        row = tree.q_rows[tree.parents[c]]
        assert float(row[tree.tokens[c]]) > 0 and float(row.sum()) == pytest.approx(1.0, abs=1e-5)


def _grow(scale: float, sampling: SamplingConfig, keep_growing, nodes: int = 8, depth: int = 4, seed: int = 5):
    """A tree from a draft of the given peakedness, and how many draft passes (expand calls) it took."""
    token_ids, sub, _, expand_with = _setup(seed, scale)
    expand, passes = expand_with(lambda rows: rows), [0]

    def counted(fed, tree):
        passes[0] += 1
        return expand(fed, tree)

    tree = grow_tree(3, sub([[3]])[0], counted, nodes, depth, sampling, torch.Generator().manual_seed(seed),
                     token_ids=token_ids, vocab=VOCAB, keep_growing=keep_growing)
    return tree, passes[0]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_growth_stops_at_a_low_path_probability_and_not_at_a_high_one(temperature):
    sampling = SamplingConfig(temperature=temperature)
    asked = []

    def keep_growing(level, best_score):  # the stopper's form: grow on while the level's best path is likely
        asked.append((level, best_score))
        return math.exp(best_score) >= 0.3

    # a peaked draft (its best path stays likely): every level is grown, as without a stopper
    peaked, passes = _grow(20.0, sampling, keep_growing)
    assert peaked.depth == 4 and passes == 3 and [lv for lv, _ in asked] == [1, 2, 3]
    unstopped, _ = _grow(20.0, sampling, None)
    assert peaked.parents == unstopped.parents and peaked.tokens == unstopped.tokens
    # a flat draft (the best node of the first level has path probability ~1/K): one level, which gets the
    # whole budget, and no draft pass after it
    asked.clear()
    flat, passes = _grow(0.01, sampling, keep_growing)
    assert flat.depth == 1 and passes == 0 and len(asked) == 1 and math.exp(asked[0][1]) < 0.3
    assert flat.size == 8 and set(flat.parents[1:]) == {0}
    # asked before the level is drawn, with the best path it can hold: the root's largest q
    assert asked[0][1] == pytest.approx(math.log(float(flat.q_rows[0].max())), abs=1e-6)
    # the q rows still describe the tree: the root's row is the draft's q there, its children were drawn from
    # it, and the never-expanded leaves have none
    assert float(flat.q_rows[0].sum()) == pytest.approx(1.0, abs=1e-5)
    assert all(float(flat.q_rows[0][t]) > 0 for t in flat.tokens[1:])
    assert float(flat.q_rows[1:].abs().sum()) == 0.0
    # without the stopper a sampled tree keeps half its budget for the deeper levels
    if temperature > 0:
        assert _grow(0.01, sampling, None)[0].depth > 1
