"""The cached LM (`decoding/lm/cached_lm.py`) on tiny random models: a rolled-back cache gives the
same logits as a fresh forward pass."""

import pytest
import torch

from decoding.lm.cached_lm import CachedLM

PROMPT = "hello world, the cat"


def rollback_and_fresh(model):
    """Extend the cache by 4 draft tokens, roll back to one accepted, extend again; return the
    logits of that second extension, a fresh uncached pass's logits at the same positions, and the
    number of positions the cache should then hold and does."""
    ids = model.encode_prompt(PROMPT, chat=False)
    lm = CachedLM(model.model, model.device, model.vocab_size)
    lm.extend(ids, [5, 6, 7, 8])  # prefill + 4 "draft" tokens
    lm.rollback(len(ids) + 1)  # keep one accepted draft token
    cont = [5, 9, 10]
    got = lm.extend(ids + [5], cont[1:])
    with torch.inference_mode():
        fresh = model.model(torch.tensor([ids + cont], device=model.device)).logits[0, -2:].float()
    return got, fresh[:, : lm.vocab_width], (lm.length, len(ids) + 3)


@pytest.mark.parametrize("which", ["target", "draft"])
def test_cache_rollback_matches_fresh_forward(tiny_pair, which):
    model = tiny_pair[0] if which == "target" else tiny_pair[1]
    got, fresh, (length, expected_length) = rollback_and_fresh(model)
    assert torch.allclose(got, fresh, atol=1e-5)
    assert length == expected_length
