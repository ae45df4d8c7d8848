"""The split attention kernel (`decoding/models/attention.py`): which models get it, and that each
pass computes exactly what the kernel it stands in for computes (SDPA for a prefill, the model's
eager attention for a short pass), whatever mask the pass comes with."""

import pytest
import torch

from decoding.cached_lm import CachedLM
from decoding.models import load_model
from decoding.models.attention import NAME, SHORT_PASS


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
    """Logits of a 40-token prefill (SDPA), then, with `impl_after_prefill`, a one-token step, a
    5-token verify pass and a pass longer than SHORT_PASS, each on the prefilled cache."""
    model.set_attn_implementation("sdpa")
    lm = CachedLM(model, torch.device("cpu"), model.config.vocab_size)
    out = [lm.forward(tokens[:40])]
    model.set_attn_implementation(impl_after_prefill)
    for size in (1, 5, SHORT_PASS + 8):
        out.append(lm.forward(tokens[40:40 + size]))
        lm.rollback(40)
    return out


def test_each_pass_equals_the_kernel_it_stands_in_for(gqa_bf16):
    model = gqa_bf16.model
    tokens = torch.randint(3, model.config.vocab_size, (100,), generator=torch.Generator().manual_seed(0)).tolist()
    try:
        split = _passes(model, NAME, tokens)
        eager = _passes(model, "eager", tokens)
        sdpa = _passes(model, "sdpa", tokens)
        short_prompt = {}
        for impl in (NAME, "sdpa"):  # a prefill of a few tokens comes without a mask: SDPA's causal path
            model.set_attn_implementation(impl)
            short_prompt[impl] = CachedLM(model, torch.device("cpu"), model.config.vocab_size).forward(tokens[:10])
    finally:
        model.set_attn_implementation(NAME)
    assert torch.equal(split[0], sdpa[0])  # the prefill runs SDPA
    assert torch.equal(split[1], eager[1])  # one token: no mask, eager
    assert torch.equal(split[2], eager[2])  # 5 tokens: SDPA's boolean mask, turned additive for eager
    assert torch.equal(split[3], sdpa[3])  # longer than SHORT_PASS: SDPA
    assert torch.equal(short_prompt[NAME], short_prompt["sdpa"])
    assert not torch.equal(eager[1], sdpa[1])  # the kernels differ, so the equalities above say something


def test_a_short_pass_with_an_additive_mask_equals_eager(gqa_bf16):
    """PPD's tree mask and the cross-run batcher's padding mask come as 4D additive float masks."""
    model = gqa_bf16.model
    ids = torch.randint(3, model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(1))
    allowed = torch.ones(12, 12, dtype=torch.bool).tril()
    allowed[7, 3:6] = False  # a tree node that does not see a sibling branch
    mask = torch.zeros(2, 1, 12, 12, dtype=torch.bfloat16).masked_fill(~allowed, torch.finfo(torch.bfloat16).min)
    logits = {}
    try:
        for impl in (NAME, "eager"):
            model.set_attn_implementation(impl)
            with torch.inference_mode():
                logits[impl] = model(input_ids=ids, attention_mask=mask).logits
    finally:
        model.set_attn_implementation(NAME)
    assert torch.equal(logits[NAME], logits["eager"])
