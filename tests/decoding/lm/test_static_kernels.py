"""The static cache's short-pass kernels (`decoding/lm/static_kernels.py`): slot attention equals HF's SDPA
attention on grouped heads under an additive mask, the fused RMS norm equals HF's, the swap puts the
model back, and a grouped-query model gives the dynamic cache's greedy tokens on the static cache.

Tolerances: float32 atol 1e-5 (summation order only); bfloat16 atol 2e-2 on values of order 1 (one
bfloat16 rounding step is 2^-8 = 0.004 near 1, and the two paths round at different points)."""

import pytest
import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from decoding.lm import backend
from decoding.lm.static_kernels import MAX_SHORT_TOKENS, NAME, _fused_rms_norm, short_pass_kernels, slot_attention
from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig
from decoding.run.runner import decode


class _Attention(torch.nn.Module):
    """What HF's attention functions read off the module."""

    def __init__(self, groups: int):
        super().__init__()
        self.num_key_value_groups = groups
        self.is_causal = True


def _case(n: int, heads: int = 6, kv_heads: int = 2, slots: int = 16, dim: int = 8, filled: int = 9,
          dtype=torch.float32, seed: int = 0):
    """query (1, heads, n, dim), key/value (1, kv_heads, slots, dim), and the static cache's mask
    (1, 1, n, slots): row i sees slots [0, filled + i]."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, heads, n, dim, generator=g).to(dtype)
    k = torch.randn(1, kv_heads, slots, dim, generator=g).to(dtype)
    v = torch.randn(1, kv_heads, slots, dim, generator=g).to(dtype)
    allowed = torch.arange(slots)[None, :] <= torch.arange(filled, filled + n)[:, None]
    mask = torch.zeros(n, slots, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)[None, None]
    return q, k, v, mask


@pytest.mark.parametrize("n", [1, 3, 5])
@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_slot_attention_equals_sdpa_on_grouped_heads(n, dtype, atol):
    q, k, v, mask = _case(n, dtype=dtype, seed=n)
    module = _Attention(groups=3)
    got, _ = slot_attention(module, q, k, v, mask, scaling=0.35)
    want, _ = sdpa_attention_forward(module, q, k, v, mask, scaling=0.35)
    assert got.shape == want.shape == (1, n, 6, 8)
    assert torch.allclose(got.float(), want.float(), atol=atol, rtol=0)


def test_slot_attention_ignores_blocked_slots_whatever_they_hold():
    """Stale keys/values past the mask (a rolled-back draft) change nothing, even huge ones."""
    q, k, v, mask = _case(2)
    k2, v2 = k.clone(), v.clone()
    k2[:, :, 11:], v2[:, :, 11:] = 1e4, -1e4  # rows see slots up to 9 and 10
    module = _Attention(groups=3)
    assert torch.equal(slot_attention(module, q, k, v, mask)[0], slot_attention(module, q, k2, v2, mask)[0])


def test_slot_attention_hands_other_calls_to_sdpa(monkeypatch):
    """No mask (a causal prefill), a bool mask, or more than MAX_SHORT_TOKENS queries: HF's SDPA."""
    calls = []
    import decoding.lm.static_kernels as kernels

    monkeypatch.setattr(kernels, "sdpa_attention_forward", lambda *a, **kw: calls.append(a[4]) or ("sdpa", None))
    module = _Attention(groups=3)
    q, k, v, mask = _case(2)
    assert slot_attention(module, q, k, v, None)[0] == "sdpa"
    assert slot_attention(module, q, k, v, mask == 0)[0] == "sdpa"
    long_q, long_k, long_v, long_mask = _case(MAX_SHORT_TOKENS + 1, slots=MAX_SHORT_TOKENS + 16)
    assert slot_attention(module, long_q, long_k, long_v, long_mask)[0] == "sdpa"
    assert len(calls) == 3
    assert slot_attention(module, q, k, v, mask)[0] is not None and len(calls) == 3


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_fused_rms_norm_equals_hf(dtype, atol):
    norm = LlamaRMSNorm(32, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 2.0, 32))
    norm = norm.to(dtype)
    x = torch.randn(3, 5, 32, generator=torch.Generator().manual_seed(1)).to(dtype) * 3
    got, want = _fused_rms_norm(norm, x), norm(x)
    assert got.dtype == want.dtype == dtype
    assert torch.allclose(got.float(), want.float(), atol=atol, rtol=0)


def test_the_swap_is_undone_even_after_an_error(tiny_pair):
    model = tiny_pair[0].model
    before = model.config._attn_implementation
    norm = next(m for m in model.modules() if type(m).__name__.endswith("RMSNorm"))
    with pytest.raises(RuntimeError):
        with short_pass_kernels(model):
            assert model.config._attn_implementation == NAME
            assert norm.forward.__func__ is _fused_rms_norm
            raise RuntimeError("a pass failed")
    assert model.config._attn_implementation == before
    assert "forward" not in norm.__dict__


@pytest.fixture(scope="module")
def grouped_target(tmp_path_factory, tiny_tokenizer):
    """A tiny random Llama with grouped-query attention (4 heads, 2 key/value heads), float32."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from decoding.lm.models import load_model

    eos = tiny_tokenizer.convert_tokens_to_ids(tiny_tokenizer.eos_token)
    config = LlamaConfig(vocab_size=len(tiny_tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         initializer_range=0.5, tie_word_embeddings=False, eos_token_id=eos, pad_token_id=eos)
    torch.manual_seed(3)
    path = tmp_path_factory.mktemp("tiny-gqa")
    LlamaForCausalLM(config).eval().save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return load_model(str(path), device="cpu", dtype="float32")


@pytest.mark.parametrize("method,draft", [("autoregressive", None), ("speculative", "prompt-lookup")])
def test_grouped_heads_give_the_dynamic_tokens_on_the_static_cache(grouped_target, method, draft, monkeypatch):
    """HF's modules with the swapped kernels (the lean layer off: tests/decoding/lm/test_lean_layer.py has it)."""
    monkeypatch.setenv("SPECDEC_LEAN_LAYER", "0")
    ids = grouped_target.encode_prompt("the cat sat on the mat", chat=False)
    config = RunConfig(method=method, max_new_tokens=24, sampling=SamplingConfig(temperature=0.0), stop_at_eos=False)
    tokens, calls = {}, []

    def counted(module, query, *args, **kwargs):
        calls.append(query.shape[2])
        return slot_attention(module, query, *args, **kwargs)

    AttentionInterface.register(NAME, counted)
    try:
        for name in ("dynamic", "static"):
            backend.set_backend(name)
            tokens[name] = [t.token_id for r in decode(grouped_target, draft, ids, config) for t in r.emitted]
            assert backend.describe(grouped_target.model)["backend"] == name
    finally:
        backend.set_backend(None)
        AttentionInterface.register(NAME, slot_attention)
    assert calls and all(n <= MAX_SHORT_TOKENS for n in calls)  # the static run's short passes, 2 layers each
    assert len(tokens["static"]) == 24
    assert tokens["static"] == tokens["dynamic"]


def test_the_switch_keeps_hf_modules(tiny_pair, monkeypatch):
    model = tiny_pair[0].model
    before = model.config._attn_implementation
    monkeypatch.setenv("SPECDEC_SHORT_KERNELS", "0")
    with short_pass_kernels(model):
        assert model.config._attn_implementation == before
        assert all("forward" not in m.__dict__ for m in model.modules())
