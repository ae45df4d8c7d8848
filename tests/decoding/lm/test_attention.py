"""The split attention kernel (`decoding/lm/models/attention.py`): which models get it, that passes of
several tokens run plain SDPA, and that a one-token step in float32 is as exact as bfloat16 holds,
whatever mask it comes with."""

import pytest
import torch

from decoding.lm.cached_lm import CachedLM
from decoding.lm.models import load_model
from decoding.lm.models.attention import NAME


@pytest.fixture(scope="module")
def gqa_dir(tmp_path_factory, tiny_tokenizer):
    """A tiny Llama with grouped-query attention (4 query heads share 2 key/value heads), as SmolLM2."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tiny_tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, tie_word_embeddings=False)
    torch.manual_seed(7)
    path = tmp_path_factory.mktemp("tiny-gqa")
    LlamaForCausalLM(config).eval().save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def gqa_bf16(gqa_dir):
    return load_model(str(gqa_dir), device="cpu", dtype="bfloat16")


def test_half_precision_cpu_models_get_the_split_kernel(tiny_target_dir, gqa_bf16):
    assert gqa_bf16.model.config._attn_implementation == NAME
    assert load_model(str(tiny_target_dir), device="cpu", dtype="float16").model.config._attn_implementation == NAME
    # float32 keeps SDPA: the greedy-equality checks run in float32 with the kernels they always had
    assert load_model(str(tiny_target_dir), device="cpu", dtype="float32").model.config._attn_implementation == "sdpa"


def _passes(model, impl_after_prefill: str, tokens: list[int]) -> list[torch.Tensor]:
    """Logits of a 40-token prefill (SDPA), then, with `impl_after_prefill`, 5-token and 40-token
    passes on the prefilled cache."""
    model.set_attn_implementation("sdpa")
    lm = CachedLM(model, torch.device("cpu"), model.config.vocab_size)
    out = [lm.forward(tokens[:40])]
    model.set_attn_implementation(impl_after_prefill)
    for size in (5, 40):
        out.append(lm.forward(tokens[40:40 + size]))
        lm.rollback(40)
    return out


def test_long_passes_run_plain_sdpa(gqa_bf16):
    model = gqa_bf16.model
    tokens = torch.randint(3, model.config.vocab_size, (100,), generator=torch.Generator().manual_seed(0)).tolist()
    try:
        split = _passes(model, NAME, tokens)
        sdpa = _passes(model, "sdpa", tokens)
    finally:
        model.set_attn_implementation(NAME)
    assert torch.equal(split[0], sdpa[0])  # the prefill
    assert torch.equal(split[1], sdpa[1])  # a verify-sized pass
    assert torch.equal(split[2], sdpa[2])


class _Module(torch.nn.Module):
    """What an attention function reads off its attention module (SmolLM2's grouping: 3 query heads per key/value head)."""
    num_key_value_groups = 3
    is_causal = True


def _attention_inputs(q_len: int, cached: int = 200):
    g = torch.Generator().manual_seed(q_len)
    q = torch.randn(1, 9, q_len, 64, generator=g) * 2
    k = torch.randn(1, 3, cached + q_len, 64, generator=g) * 2
    v = torch.randn(1, 3, cached + q_len, 64, generator=g)
    return q.bfloat16(), k.bfloat16(), v.bfloat16()


def _exact(q, k, v, allowed):
    """Attention in float64 on the same (bfloat16) inputs."""
    k, v = k.double().repeat_interleave(3, 1), v.double().repeat_interleave(3, 1)
    scores = (q.double() @ k.transpose(2, 3)) / 8
    scores = scores.masked_fill(~allowed, float("-inf"))
    return (scores.softmax(-1) @ v).transpose(1, 2)


@pytest.mark.parametrize("mask_kind", ["none", "bool", "additive"])
@pytest.mark.parametrize("cached", [200, 1000])
def test_one_token_steps_are_as_exact_as_bfloat16_can_hold(mask_kind, cached):
    """A one-token step over a long cache (a padded batch brings a mask): the split kernel's output
    is the exact attention within bfloat16's rounding; transformers' eager attention in bfloat16
    (fast there too) rounds the scores and is not, which is why the split kernel does not use it."""
    from transformers.models.llama.modeling_llama import eager_attention_forward

    from decoding.lm.models.attention import split_attention

    q_len = 1
    q, k, v = _attention_inputs(q_len, cached)
    allowed = torch.arange(cached + q_len)[None, :] <= cached + torch.arange(q_len)[:, None]
    allowed = allowed[None, None].expand(1, 1, q_len, cached + q_len)
    mask = {"none": None, "bool": allowed,
            "additive": torch.zeros(allowed.shape, dtype=torch.bfloat16).masked_fill(~allowed, -1e30)}[mask_kind]
    exact = _exact(q, k, v, allowed)
    out, _ = split_attention(_Module(), q, k, v, mask, scaling=1 / 8, dropout=0.0)
    assert out.dtype == torch.bfloat16 and out.shape == exact.shape
    torch.testing.assert_close(out.double(), exact, rtol=2 ** -8, atol=1e-6)
    eager_mask = torch.zeros(allowed.shape, dtype=torch.bfloat16).masked_fill(~allowed, -1e30)
    eager, _ = eager_attention_forward(_Module(), q, k, v, eager_mask, scaling=1 / 8)
    # on average the eager output is several times further off (4-8x in these cases)
    assert (eager.double() - exact).abs().mean() > 3 * (out.double() - exact).abs().mean()


def test_a_pass_with_an_additive_mask_runs_plain_sdpa(gqa_bf16):
    """PPD's tree mask and the cross-run batcher's padding mask come as 4D additive float masks."""
    model = gqa_bf16.model
    ids = torch.randint(3, model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(1))
    allowed = torch.ones(12, 12, dtype=torch.bool).tril()
    allowed[7, 3:6] = False  # a tree node that does not see a sibling branch
    mask = torch.zeros(2, 1, 12, 12, dtype=torch.bfloat16).masked_fill(~allowed, torch.finfo(torch.bfloat16).min)
    logits = {}
    try:
        for impl in (NAME, "sdpa"):
            model.set_attn_implementation(impl)
            with torch.inference_mode():
                logits[impl] = model(input_ids=ids, attention_mask=mask).logits.float()
    finally:
        model.set_attn_implementation(NAME)
    assert torch.equal(logits[NAME], logits["sdpa"])


@pytest.mark.parametrize("mask_kind", ["bool", "additive"])
@pytest.mark.parametrize("q_len", [2, 5, 17])
def test_several_token_passes_read_the_cache_once_per_group(mask_kind, q_len):
    """A masked pass of several tokens stacks each key/value head's query heads instead of copying
    the cache per query head: the same attention as SDPA over repeated keys and values, row for
    row, for a batch of two with different masks (a padded batch, a tree)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from decoding.lm.models.attention import split_attention

    cached = 300
    q, k, v = (torch.cat([t, t.roll(1, dims=2)]) for t in _attention_inputs(q_len, cached))
    allowed = torch.arange(cached + q_len)[None, :] <= cached + torch.arange(q_len)[:, None]
    allowed = allowed[None, None].repeat(2, 1, 1, 1)
    allowed[1, 0, :, :40] = False  # the second row's padding
    mask = allowed if mask_kind == "bool" else torch.zeros(allowed.shape, dtype=torch.bfloat16).masked_fill(
        ~allowed, torch.finfo(torch.bfloat16).min)
    out, _ = split_attention(_Module(), q, k, v, mask, scaling=1 / 8, dropout=0.0)
    plain, _ = sdpa_attention_forward(_Module(), q, k, v, mask, scaling=1 / 8, dropout=0.0)
    assert out.shape == plain.shape == (2, q_len, 9, 64)
    torch.testing.assert_close(out, plain, rtol=0, atol=2 ** -7)  # within one bfloat16 rounding
    exact = torch.cat([_exact(q[i:i + 1], k[i:i + 1], v[i:i + 1], allowed[i:i + 1]) for i in range(2)])
    # as close to the exact attention as the plain kernel
    assert (out.double() - exact).abs().mean() <= 1.05 * (plain.double() - exact).abs().mean()
