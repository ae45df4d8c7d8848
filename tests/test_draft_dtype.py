"""A draft in half precision beside a float32 target (the CPU default on AVX-512 machines).

The dtype rule is checked on its own; then the mixed pair must stay exact: greedy output equals
greedy autoregressive, sampled output has the target's two-token distribution, and the q in the
trace is the float32 softmax of the float16 draft's own logits.
"""

import pytest
import torch

from decoding.drafters.model import ModelDrafter
from decoding.lm.models import default_dtype, load_draft, load_model, resolve_draft_dtype
from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig, warp_logits

import test_engine
from test_engine import GREEDY, PROMPT, _tokens


def test_resolve_draft_dtype_rules(monkeypatch):
    assert resolve_draft_dtype("bf16", "float32", "cpu") == torch.bfloat16  # explicit wins
    assert resolve_draft_dtype(None, "float32", "cpu") == torch.float32  # follows a chosen --dtype
    assert resolve_draft_dtype("auto", "bfloat16", "cpu") == torch.bfloat16
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr("decoding.lm.devices.cpu_has_native_bf16", lambda: False)
    assert resolve_draft_dtype(None, None, "cpu") == torch.float16
    monkeypatch.setattr("decoding.lm.devices.cpu_has_native_bf16", lambda: True)  # bfloat16 native: as the target
    assert resolve_draft_dtype(None, None, "cpu") == default_dtype(torch.device("cpu")) == torch.bfloat16
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    monkeypatch.setattr("decoding.lm.devices.cpu_has_native_bf16", lambda: False)
    assert resolve_draft_dtype(None, None, "cpu") == default_dtype(torch.device("cpu")) == torch.float32


@pytest.fixture(scope="module")
def half_pair(tiny_target_dir, tiny_draft_dir):
    return (load_model(str(tiny_target_dir), device="cpu", dtype="float32"),
            load_model(str(tiny_draft_dir), device="cpu", dtype="float16"))


@pytest.fixture(scope="module")
def half_close_pair(tiny_target_dir, tiny_close_draft_dir):
    return (load_model(str(tiny_target_dir), device="cpu", dtype="float32"),
            load_model(str(tiny_close_draft_dir), device="cpu", dtype="float16"))


def test_load_draft_applies_the_rule(tiny_draft_dir, monkeypatch):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr("decoding.lm.devices.cpu_has_native_bf16", lambda: False)
    assert load_draft(str(tiny_draft_dir), "cpu").model.dtype == torch.float16
    assert load_draft(str(tiny_draft_dir), "cpu", dtype="float32").model.dtype == torch.float32
    assert load_draft(str(tiny_draft_dir), "cpu", draft_dtype="bf16", cached=True).model.dtype == torch.bfloat16


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
    test_engine.test_sampled_speculative_matches_target_distribution(half_close_pair)


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
