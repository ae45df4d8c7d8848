"""PPD sparse trees: hand-written trees against exactly written-out buffers, and the dynamic
sparse-tree construction (propositions 4.1-4.4 of Chen et al., PPD)."""

import pytest
import torch

from decoding.methods.ppd.tree import (
    allocate_prompts, candidate_tree, dynamic_trees, expected_accepted, last_accepted_probability, make_tree,
    tree_buffers
)


def rows_to_mask(rows, n, prefix):
    mask = torch.zeros(n, prefix + n, dtype=torch.bool)
    mask[:, :prefix] = True
    for i, seen in enumerate(rows):
        for j in seen:
            mask[i, prefix + j] = True
    return mask[None, None]


def test_hand_written_tree_buffers():
    # root + candidates (0,), (1,), (0,0); prompt tokens: root 1, (0,) 2, (1,) 0, (0,0) 1
    tree = make_tree([(1,), (0, 0), (0,)], [1, 0, 1, 2])  # given unsorted: prompts follow their paths
    assert tree.candidates == ((0,), (1,), (0, 0))
    assert tree.prompts == (1, 2, 0, 1)
    assert tree.size() == 3 + 4
    b = tree_buffers(tree, prefix_length=2)
    # nodes: 0 root, 1 (0,), 2 (1,), 3 (0,0), 4 root/p1, 5 (0,)/p1, 6 (0,)/p2, 7 (0,0)/p1
    assert b.kind == ["root", "candidate", "candidate", "candidate", "prompt", "prompt", "prompt", "prompt"]
    assert b.parent == [-1, 0, 0, 1, 0, 1, 5, 3]
    assert b.depth == [0, 1, 1, 2, 1, 2, 3, 3]
    assert b.distance == [0, 0, 0, 0, 1, 1, 2, 1]
    assert b.owner == [0, 1, 2, 3, 0, 1, 1, 3]
    assert b.position_ids.tolist() == [[2, 3, 3, 4, 3, 4, 5, 5]]
    expected = rows_to_mask([{0}, {0, 1}, {0, 2}, {0, 1, 3}, {0, 4}, {0, 1, 5}, {0, 1, 5, 6}, {0, 1, 3, 7}], 8, 2)
    assert torch.equal(b.mask, expected)
    assert b.retrieve.tolist() == [[0, 2, -1], [0, 1, 3]]
    assert b.children(0) == [1, 2] and b.children(1) == [3] and b.children(2) == []


def test_ensemble_prompt_tokens_see_only_their_group():
    tree = make_tree([(0,)], [2, 1])
    b = tree_buffers(tree, prefix_length=0, ept=2)
    # 0 root, 1 cand; root prompts (k1,j0)=2 (k1,j1)=3 (k2,j0)=4 (k2,j1)=5; cand prompts (k1,j0)=6 (k1,j1)=7
    assert b.parent == [-1, 0, 0, 0, 2, 3, 1, 1]
    assert b.group == [0, 0, 0, 1, 0, 1, 0, 1]
    assert b.depth == [0, 1, 1, 1, 2, 2, 2, 2]
    expected = rows_to_mask([{0}, {0, 1}, {0, 2}, {0, 3}, {0, 2, 4}, {0, 3, 5}, {0, 1, 6}, {0, 1, 7}], 8, 0)
    assert torch.equal(b.mask, expected)
    assert b.prompt_index == {(0, 1, 0): 2, (0, 1, 1): 3, (0, 2, 0): 4, (0, 2, 1): 5, (1, 1, 0): 6, (1, 1, 1): 7}
    assert b.retrieve.tolist() == [[0, 1]]
    assert tree.size(ept=2) == 1 + 2 * 3


def test_root_only_tree():
    b = tree_buffers(make_tree([], [3]), prefix_length=5)
    assert b.parent == [-1, 0, 1, 2] and b.position_ids.tolist() == [[5, 6, 7, 8]]
    assert b.retrieve.tolist() == [[0]]
    assert torch.equal(b.mask, rows_to_mask([{0}, {0, 1}, {0, 1, 2}, {0, 1, 2, 3}], 4, 5))


@pytest.mark.parametrize("candidates, prompts", [
    ([(0, 0)], 1),  # no parent
    ([(0,), (0,)], 1),  # duplicate
    ([(0,), (-1,)], 1),  # negative rank
    ([(0,)], [1]),  # one count missing
    ([(0,)], [1, -1]),
])
def test_bad_trees_rejected(candidates, prompts):
    with pytest.raises(ValueError):
        make_tree(candidates, prompts)


ACC = [[0.6, 0.2, 0.1], [0.5, 0.2, 0.1], [0.4, 0.1, 0.05]]


def test_candidate_tree_maximizes_expected_tokens():
    # path values: (0,)=.6 (1,)=.2 (2,)=.1 (0,0)=.3 (0,1)=.12 (0,0,0)=.12 (1,0)=.1 ...
    # (0,1) and (0,0,0) tie at 0.12: the heap breaks ties by path order
    assert candidate_tree(ACC, 4, max_depth=3) == [(0,), (0, 0), (1,), (0, 0, 0)]
    assert candidate_tree(ACC, 4, max_depth=2) == [(0,), (0, 0), (1,), (0, 1)]
    assert candidate_tree(ACC, 3, max_depth=1) == [(0,), (1,), (2,)]
    assert candidate_tree(ACC, 5, max_depth=0) == []
    assert expected_accepted(ACC, [(0,), (0, 0), (1,)]) == pytest.approx(0.6 + 0.3 + 0.2)


def test_last_accepted_probability_and_prompt_allocation():
    cands = [(0,), (1,), (0, 0)]
    # root: 1 - .6 - .2 = .2; (0,): .6 - .3 = .3; (1,): .2; (0,0): .3
    assert last_accepted_probability(ACC, cands) == pytest.approx([0.2, 0.3, 0.2, 0.3])
    f = [0.0, 0.9, 1.2, 1.3]  # f(T_0..T_3)
    # start with 3 on every node (12), remove 8 greedily by the smallest p(c) (f_i - f_{i-1})
    counts = allocate_prompts(ACC, cands, 4, 3, f)
    assert sum(counts) == 4
    # the cheapest removals are the third prompt tokens (0.1 * p), then the second (0.3 * p): the
    # first prompt token (0.9 * p) of the likeliest last nodes survives
    assert counts == [1, 1, 1, 1]
    # 7: all four third tokens go (cost .1 p), then one second token among the cheapest
    # (root and (1,) tie at .3 * .2; the later node goes first)
    assert allocate_prompts(ACC, cands, 7, 3, f) == [2, 2, 1, 2]
    assert allocate_prompts(ACC, cands, 99, 3, f) == [3, 3, 3, 3]


@pytest.mark.parametrize("size, ept", [(1, 1), (6, 1), (12, 1), (24, 2), (40, 1)])
def test_dynamic_trees_are_valid(size, ept):
    dyn = dynamic_trees(size, m=3, ept=ept)
    assert set(dyn.trees) == {0, 1, 2, 3}
    for k, tree in dyn.trees.items():
        assert tree.depth <= k
        assert tree.size(ept) <= size
        assert all(n <= 3 for n in tree.prompts)
        make_tree(tree.candidates, tree.prompts)  # closed under prefixes
    assert dyn.trees[3].size(ept) == size
    assert abs(sum(dyn.steady_state) - 1) < 1e-6
    assert dyn.expected_tokens_per_step >= 1.0


def test_dynamic_trees_grow_with_size():
    values = [dynamic_trees(n).expected_accepted for n in (2, 6, 12, 24)]
    assert values == sorted(values) and values[-1] > values[0]
