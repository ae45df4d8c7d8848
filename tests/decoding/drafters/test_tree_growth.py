"""drafters/tree.py: growing a tree over a head's token subset gives the tree grown over the whole vocabulary."""

from __future__ import annotations

import pytest
import torch

from decoding.drafters.tree import DraftTree, grow_tree
from decoding.rules.warp import SamplingConfig

VOCAB, K, HIDDEN = 50, 12, 8


def _setup(seed: int):
    """A random 'draft': node logits are a fixed function of the node's path (its token ids), over K ids
    of a VOCAB-wide vocabulary; the same scores as full-width logits (-inf outside the subset)."""
    g = torch.Generator().manual_seed(seed)
    token_ids = torch.randperm(VOCAB, generator=g)[:K]
    table = torch.randn(VOCAB, K, generator=g) * 2.0

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
