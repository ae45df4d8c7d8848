"""The tree rule (rules/tree_acceptance.py) on hand-written distributions: the worked example's p and q
with set coins, the greedy walk, and the one-level output distribution equal to p (Monte Carlo with
siblings drawn without replacement)."""

import pytest
import torch

from decoding.drafters.tree import gumbel_top_k
from decoding.rules.tree_acceptance import (ACCEPTED, REJECTED, UNTRIED, recursive_rejection_step,
                                            validate_tree_lenience, verify_tree)

P = torch.tensor([0.4, 0.3, 0.2, 0.1])
Q = torch.tensor([0.5, 0.25, 0.15, 0.1])


def test_worked_example_second_sibling_is_tested_against_the_residual():
    # root with children 0 then 1 (drawn from Q in that order); coins 0.9 (reject: 0.9 > 0.4/0.5), then 0.99
    parents, tokens = [-1, 0, 0], [9, 0, 1]
    p_rows, q_rows = torch.stack([P, P, P]), torch.stack([Q, Q, Q])
    v = verify_tree(parents, tokens, p_rows, q_rows, torch.tensor([0.0, 0.9, 0.99]))
    first, second = v.nodes[1], v.nodes[2]
    assert first.verdict == REJECTED and first.threshold == pytest.approx(0.8) and first.rank == 0
    # residual max(0, p - q) = [0, .05, .05, 0], mass 0.1; q without token 0 = [0, .5, .3, .2]
    assert first.residual_mass == pytest.approx(0.1)
    assert torch.allclose(first.residual, torch.tensor([0, 0.5, 0.5, 0]))
    assert second.q == pytest.approx(0.5) and second.p == pytest.approx(0.5) and second.threshold == pytest.approx(1.0)
    assert second.verdict == ACCEPTED and v.path == [2] and v.next_is_bonus


def test_all_siblings_rejected_draws_from_the_last_residual():
    # after rejecting token 0: p_2 = [0, .5, .5, 0], q_2 = [0, .5, .3, .2]; the second sibling is token 3 (p_2(3) = 0)
    parents, tokens = [-1, 0, 0, 1], [9, 0, 3, 1]
    p_rows, q_rows = torch.stack([P] * 4), torch.stack([Q] * 4)
    v = verify_tree(parents, tokens, p_rows, q_rows, torch.tensor([0.0, 0.95, 0.1, 0.0]))
    assert [n.verdict for n in v.nodes[1:]] == [REJECTED, REJECTED, UNTRIED]
    assert v.nodes[2].p == 0.0 and v.nodes[2].q == pytest.approx(0.2) and v.nodes[2].threshold == 0.0
    # p_3 = norm(max(0, [0,.5,.5,0] - [0,.5,.3,.2])) = [0, 0, 1, 0]
    assert not v.next_is_bonus and v.path == [] and torch.allclose(v.next_distribution, torch.tensor([0., 0, 1, 0]), atol=1e-6)
    assert v.nodes[3].rank == 0  # the child of a rejected node keeps its sibling rank, untried


def test_greedy_follows_the_argmax():
    parents, tokens = [-1, 0, 0, 2, 2], [9, 1, 0, 3, 1]
    raw = torch.stack([P, P, torch.tensor([0.1, 0.6, 0.2, 0.1]), P, P])
    v = verify_tree(parents, tokens, raw, None, None, raw)
    assert v.path == [2, 4] and v.next_is_bonus
    assert [n.verdict for n in v.nodes[1:]] == [REJECTED, ACCEPTED, REJECTED, ACCEPTED]
    assert v.nodes[1].coin is None and v.nodes[1].threshold == pytest.approx(0.4)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_one_level_output_is_p(k):
    """k children drawn from q without replacement and tried in order: the emitted token has law p."""
    gen = torch.Generator().manual_seed(k)
    counts = torch.zeros(4)
    n = 30000
    for _ in range(n):
        xs = gumbel_top_k(Q, k, gen)
        parents, tokens = [-1] + [0] * k, [9] + xs
        rows_p, rows_q = torch.stack([P] * (k + 1)), torch.stack([Q] * (k + 1))
        v = verify_tree(parents, tokens, rows_p, rows_q, torch.rand(k + 1, generator=gen))
        y = tokens[v.path[0]] if v.path else int(torch.multinomial(v.next_distribution, 1, generator=gen))
        counts[y] += 1
    assert torch.allclose(counts / n, P, atol=0.01), counts / n


def test_step_without_removal_differs():
    out = recursive_rejection_step(P, Q, 0, 0.99)
    assert not out.accepted and out.q_next[0] == 0 and out.q_next.sum() == pytest.approx(1.0)


def test_lenience_is_refused_for_trees():
    validate_tree_lenience(1.0)
    with pytest.raises(ValueError, match="lenience"):
        validate_tree_lenience(0.5)
