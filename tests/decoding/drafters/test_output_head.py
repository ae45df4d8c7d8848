"""A draft's restricted output head (`decoding/drafters/output_head.py`): saved, loaded, scoring only its
tokens, and exact when the target's argmax or mass lies outside it."""

import pytest
import torch

from decoding.drafters.output_head import frequent_tokens, load_head, subset_head
from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig, warp_logits
from decoding.run.pair import Draft
from decoding.run.runner import decode

from _siblings import load_test_module

test_speculative = load_test_module("decoding/methods/test_speculative.py")
GREEDY = SamplingConfig(temperature=0.0)


# ------------------------------------------------------------------ a head over frequent tokens only
def _outside(target, ids, sampling, k=2):
    """The target's top tokens at the prompt's next position: the ones to keep out of the head."""
    with torch.inference_mode():
        p = warp_logits(target.model(torch.tensor([ids])).logits[0, -1].float(), sampling)
    return torch.topk(p, k).indices.tolist()


def test_restricted_head_saves_loads_and_scores_only_its_tokens(tiny_pair, tmp_path):
    _, draft = tiny_pair
    head = subset_head(draft.model, [3, 5, 7])
    head.save(tmp_path)
    back = load_head(tmp_path, torch.float32, "cpu")
    assert back.token_ids.tolist() == [3, 5, 7] and torch.equal(back.weight, head.weight)
    logits = back.logits(torch.randn(2, back.weight.shape[1]), 20)
    assert torch.isinf(logits[:, [0, 1, 2, 4, 6, 8]]).all() and torch.isfinite(logits[:, [3, 5, 7]]).all()
    narrow = back.logits(torch.randn(2, back.weight.shape[1]), 6)  # a vocabulary that ends before id 7
    assert narrow.shape == (2, 6) and torch.isfinite(narrow[:, [3, 5]]).all() and torch.isinf(narrow[:, [0, 1, 2, 4]]).all()
    assert frequent_tokens([[1, 1, 2], [2, 2, 9]], 2, always=[0]) == [0, 2]
    # a head of token ids only (trim-head's) takes its rows from the model's own head when it loads
    head.save(tmp_path, with_weight=False)
    ids_only = load_head(tmp_path, torch.float32, "cpu", draft.model)
    assert ids_only.token_ids.tolist() == [3, 5, 7] and torch.equal(ids_only.weight, head.weight)
    with pytest.raises(ValueError, match="token ids only"):
        load_head(tmp_path, torch.float32, "cpu")
    # the energy proxy: a step reads the body and the head's 3 rows, not the whole output head
    from decoding.run.pair import Draft

    out = draft.model.get_output_embeddings().weight
    rest = sum(p.numel() * p.element_size() for p in draft.model.parameters() if p is not out)
    assert Draft.of_model(draft, head).weight_bytes == rest + 3 * out.shape[1] * out.element_size()
    assert Draft.of_model(draft).weight_bytes == draft.weight_bytes
    # the distillation shards hold tensors: counted by value, returned as ints
    ranked = frequent_tokens([torch.tensor([1, 1, 2]), torch.tensor([2, 2, 9])], 2, always=[0])
    assert ranked == [0, 2] and all(type(t) is int for t in ranked)


def test_restricted_head_sampled_output_has_the_target_distribution(tiny_close_pair):
    """The target's two likeliest next tokens are outside the head: q is 0 there, and the residual
    must bring the target's mass back exactly."""
    target, draft = tiny_close_pair
    sampling = SamplingConfig(temperature=2.0, top_k=4)
    ids = target.encode_prompt(test_speculative.PROMPT, chat=False)
    outside = set(_outside(target, ids, sampling))
    head = subset_head(draft.model, [t for t in range(draft.vocab_size) if t not in outside])
    restricted = Draft.of_model(draft, head)
    proposal = restricted.drafter(target).propose(ids, 1, sampling, torch.Generator().manual_seed(0))
    assert all(float(proposal.q_rows[0, t]) == 0.0 for t in outside)  # explicit zeros outside the head
    test_speculative.test_sampled_speculative_matches_target_distribution((target, restricted))


def test_restricted_head_greedy_equals_autoregressive_when_the_target_argmax_is_outside(tiny_pair):
    target, draft = tiny_pair
    ids = target.encode_prompt(test_speculative.PROMPT, chat=False)
    base = RunConfig(method="autoregressive", max_new_tokens=30, sampling=GREEDY, stop_at_eos=False)
    expected = [t.token_id for r in decode(target, None, ids, base) for t in r.emitted]
    banned = sorted(set(expected[:10]))[:3]  # tokens the target's greedy output uses
    head = subset_head(draft.model, [t for t in range(draft.vocab_size) if t not in banned])
    config = RunConfig(method="speculative", max_new_tokens=30, sampling=GREEDY, gamma=3, stop_at_eos=False)
    records = list(decode(target, Draft.of_model(draft, head), ids, config))
    assert [t.token_id for r in records for t in r.emitted] == expected
    assert not any(d.token_id in banned for r in records for d in r.draft)  # never drafted
    assert any(t.token_id in banned for r in records for t in r.emitted)  # yet in the output
