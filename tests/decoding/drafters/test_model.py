"""The draft model (`decoding/drafters/model.py`): stopping when told, its prefill apart from its steps,
and a draft in half precision beside a float32 target (the CPU default on AVX-512 machines), which
must stay exact: greedy output equals greedy autoregressive, sampled output has the target's two-token
distribution, and the q in the trace is the float32 softmax of the float16 draft's own logits."""

import pytest
import torch

from decoding.drafters.model import ModelDrafter
from decoding.lm.models import load_model
from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig, warp_logits

from _siblings import load_test_module

test_speculative = load_test_module("decoding/methods/test_speculative.py")
GREEDY, PROMPT, _tokens = test_speculative.GREEDY, test_speculative.PROMPT, test_speculative._tokens
REPEATING = load_test_module("decoding/drafters/test_hybrid.py").REPEATING


def test_model_drafter_stops_when_told(tiny_pair):
    from decoding.drafters.model import ModelDrafter

    target, draft = tiny_pair
    drafter = ModelDrafter(draft.model, draft.device, min(target.vocab_size, draft.vocab_size), draft.name)
    seq = target.encode_prompt("hello world", chat=False)
    seen = []

    def stop_after_two(i, confidence):
        seen.append(confidence)
        return i < 1

    proposal = drafter.propose(seq, 6, GREEDY, torch.Generator().manual_seed(0), stop_after_two)
    assert len(proposal.tokens) == 2 and proposal.q_rows.shape[0] == 2
    assert len(seen) == 2 and all(0.0 < c <= 1.0 for c in seen)
    drafter.rollback(len(seq) - 1)
    assert len(drafter.propose(seq, 6, GREEDY, torch.Generator().manual_seed(0)).tokens) == 6


def test_model_draft_reports_its_prefill_apart_from_its_steps(tiny_pair):
    target, draft = tiny_pair
    drafter = ModelDrafter(draft.model, draft.device, min(target.vocab_size, draft.vocab_size), draft.name)
    ids = target.encode_prompt(REPEATING + " and the dog sat on the log", chat=False)
    first = drafter.propose(ids, 2, GREEDY, torch.Generator())
    assert len(ids) > 8 and first.catch_up_seconds > 0  # the prompt's pass is a prefill
    nxt = drafter.propose(ids + first.tokens, 2, GREEDY, torch.Generator())
    assert nxt.catch_up_seconds == 0.0  # two new tokens: an ordinary step


@pytest.fixture(scope="module")
def half_pair(tiny_target_dir, tiny_draft_dir):
    return (load_model(str(tiny_target_dir), device="cpu", dtype="float32"),
            load_model(str(tiny_draft_dir), device="cpu", dtype="float16"))


@pytest.fixture(scope="module")
def half_close_pair(tiny_target_dir, tiny_close_draft_dir):
    return (load_model(str(tiny_target_dir), device="cpu", dtype="float32"),
            load_model(str(tiny_close_draft_dir), device="cpu", dtype="float16"))


def test_half_draft_is_half(half_pair):
    target, draft = half_pair
    assert target.dtype == torch.float32 and draft.model.dtype == torch.float16


@pytest.mark.parametrize("gamma", [2, 5])
def test_greedy_with_half_draft_equals_autoregressive(half_pair, gamma):
    target, draft = half_pair
    base = RunConfig(method="autoregressive", max_new_tokens=30, sampling=GREEDY, stop_at_eos=False)
    spec = RunConfig(method="speculative", max_new_tokens=30, sampling=GREEDY, gamma=gamma, stop_at_eos=False)
    expected, _ = _tokens(target, None, base)
    got, records = _tokens(target, draft, spec)
    assert got == expected
    assert any(r.accepted_length < r.gamma for r in records)


def test_sampled_with_half_draft_matches_target_distribution(half_close_pair):
    test_speculative.test_sampled_speculative_matches_target_distribution(half_close_pair)


def test_q_of_half_draft_is_float32_softmax_of_its_logits(half_pair):
    target, draft = half_pair
    sampling = SamplingConfig(temperature=0.8, top_k=10, top_p=0.9)
    prompt_ids = target.encode_prompt(PROMPT, chat=False)
    drafter = ModelDrafter(draft.model, draft.device, min(target.vocab_size, draft.vocab_size), draft.name)
    proposal = drafter.propose(prompt_ids, 1, sampling, torch.Generator().manual_seed(3))
    assert proposal.q_rows.dtype == torch.float32
    with torch.inference_mode():
        fresh = draft.model(torch.tensor([prompt_ids])).logits[0, -1:].float()
    # one position, same input: the cached and the fresh pass compute the same fp16 logits
    assert torch.allclose(proposal.q_rows, warp_logits(fresh, sampling), atol=1e-3)
    assert proposal.q_rows[0, proposal.tokens[0]] > 0
