"""Acceptance rules on hand-written distributions: exact counts, tokens and thresholds."""

import pytest
import torch

from decoding.rules.acceptance import (
    acceptance_threshold,
    greedy_lenient_accept,
    greedy_lenient_rule,
    lenient_output_distribution,
    residual_distribution,
    verify_chain,
)

P = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)  # the worked example (docs/papers.md)
Q = torch.tensor([0.5, 0.25, 0.15, 0.1], dtype=torch.float64)


def test_worked_example_threshold_and_residual():
    # "is" (index 0): q = 0.5 > p = 0.4, accepted with probability 0.8
    assert float(acceptance_threshold(P[0], Q[0])) == pytest.approx(0.8)
    assert float(acceptance_threshold(P[1], Q[1])) == 1.0  # q <= p: always accepted
    residual, mass = residual_distribution(P, Q)
    assert mass == pytest.approx(0.1)
    assert residual.tolist() == pytest.approx([0.0, 0.5, 0.5, 0.0])


def test_residual_falls_back_to_p_when_equal():
    residual, mass = residual_distribution(P, P.clone())
    assert mass < 1e-12
    assert residual.tolist() == pytest.approx(P.tolist())


def test_lenient_output_is_p_at_l1_and_capped_by_p_over_l():
    assert lenient_output_distribution(P, Q, 1.0).tolist() == pytest.approx(P.tolist())
    for l in (0.9, 0.5, 0.2):
        out = lenient_output_distribution(P, Q, l)
        assert float(out.sum()) == pytest.approx(1.0)
        assert bool((out <= P / l + 1e-12).all())
    # l = 0.5: min(q, p/l) = q everywhere, so the draft is always accepted and the output is q
    assert lenient_output_distribution(P, Q, 0.5).tolist() == pytest.approx(Q.tolist())


def test_lenience_raises_threshold():
    assert float(acceptance_threshold(P[0], Q[0], 0.8)) == pytest.approx(1.0)
    assert float(acceptance_threshold(P[0], Q[0], 0.9)) == pytest.approx(0.4 / 0.45)


def _rows(logit_rows):
    return torch.softmax(torch.tensor(logit_rows, dtype=torch.float32), dim=-1)


def test_verify_chain_hand_written_vocab10():
    """Like transformers' _speculative_sampling test: hand-written logits, exact verdict."""
    # three draft positions over a vocabulary of 10, plus the bonus position
    target_logits = [
        [0, 0, 5, 0, 0, 0, 0, 0, 0, 0],  # p favours token 2
        [0, 0, 0, 5, 0, 0, 0, 0, 0, 0],  # p favours token 3
        [0, 0, 0, 0, 5, 0, 0, 0, 0, 0],  # p favours token 4
        [0, 0, 0, 0, 0, 5, 0, 0, 0, 0],  # bonus position: token 5
    ]
    draft_logits = [
        [0, 0, 5, 0, 0, 0, 0, 0, 0, 0],  # agrees
        [0, 0, 0, 5, 0, 0, 0, 0, 0, 0],  # agrees
        [9, 0, 0, 0, 0, 0, 0, 0, 0, 0],  # proposes token 0, which p barely allows
    ]
    p, q = _rows(target_logits), _rows(draft_logits)
    draft = [2, 3, 0]
    coins = torch.tensor([0.5, 0.5, 0.5])
    v = verify_chain(p, q, draft, coins)
    assert v.n_accepted == 2
    assert v.accepted == [True, True, False]
    assert v.thresholds[0] == pytest.approx(1.0) and v.thresholds[1] == pytest.approx(1.0)
    assert v.thresholds[2] == pytest.approx(float(p[2, 0] / q[2, 0]), rel=1e-5)
    assert not v.next_is_bonus
    # the residual at the rejected position puts its largest mass on token 4
    assert int(v.next_distribution.argmax()) == 4
    assert float(v.next_distribution[0]) == 0.0

    all_pass = verify_chain(p, q, [2, 3, 4], torch.tensor([0.1, 0.1, 0.1]))
    assert all_pass.n_accepted == 3 and all_pass.next_is_bonus
    assert int(all_pass.next_distribution.argmax()) == 5

    q_confident = _rows([[9, 0, 0, 0, 0, 0, 0, 0, 0, 0]] * 3)  # q sure of token 0, p is not
    never = verify_chain(p, q_confident, [0, 0, 0], torch.tensor([0.99, 0.0, 0.0]))
    assert never.n_accepted == 0 and never.accepted == [False, None, None]


def test_verify_chain_empty_draft_gives_p():
    p = _rows([[0, 1, 2]])
    v = verify_chain(p, p[:0], [], torch.empty(0))
    assert v.n_accepted == 0 and v.next_is_bonus
    assert torch.equal(v.next_distribution, p[0])


def test_greedy_rule_with_lenience():
    p_raw = torch.tensor([0.5, 0.3, 0.2])
    assert greedy_lenient_accept(p_raw, 0, 1.0) == (True, 0.5)
    assert greedy_lenient_accept(p_raw, 1, 1.0)[0] is False
    assert greedy_lenient_accept(p_raw, 1, 0.6)[0] is True  # 0.3 >= 0.6 * 0.5
    assert greedy_lenient_accept(p_raw, 2, 0.6)[0] is False
    # the rule on values read already (verify_chain reads a whole chain's at once) gives the same verdicts
    for x, lenience in ((0, 1.0), (1, 1.0), (1, 0.6), (2, 0.6)):
        assert greedy_lenient_rule(float(p_raw[x]), float(p_raw.max()), lenience) == \
            greedy_lenient_accept(p_raw, x, lenience)
    onehot = torch.nn.functional.one_hot(torch.tensor([0, 0]), 3).float()
    v = verify_chain(onehot[:2], torch.nn.functional.one_hot(torch.tensor([1]), 3).float(), [1], None, 1.0,
                     p_raw_rows=p_raw.unsqueeze(0))
    assert v.n_accepted == 0 and int(v.next_distribution.argmax()) == 0
