"""PPD's tree pass and verification (`decoding/methods/ppd/engine.py`): an oracle tree accepts the greedy
branch and compaction equals a fresh pass; typical acceptance picks the longest passing path."""

import math

import pytest
import torch
from transformers import DynamicCache

from decoding.lm.cached_lm import CachedLM
from decoding.lm.hf_cache import cache_kwargs
from decoding.methods.ppd.engine import (
    compact_cache, prompt_predictions, tree_forward, typical_threshold, verify_greedy, verify_typical
)
from decoding.methods.ppd.prompts import untrained_prompt_tokens
from decoding.methods.ppd.tree import make_tree, tree_buffers

from _siblings import load_test_module

test_ppd = load_test_module("decoding/methods/ppd/test_ppd.py")
PROMPT, tiny = test_ppd.PROMPT, test_ppd.tiny


def _greedy_continuation(model, ids, n):
    seq = list(ids)
    with torch.no_grad():
        for _ in range(n):
            seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
    return seq[len(ids):]


def test_oracle_tree_accepts_greedy_branch_and_compaction_equals_fresh_pass(tiny):
    model, ids = tiny.model, tiny.encode_prompt(PROMPT, False)
    g = _greedy_continuation(model, ids, 4)
    other = lambda t: (t + 7) % tiny.vocab_size  # noqa: E731  a token that is not the greedy one
    tree = make_tree([(0,), (1,), (0, 0), (0, 1), (0, 0, 0)], [1, 2, 0, 1, 0, 1])
    tree_ids = [ids[-1], g[0], other(g[0]), g[1], other(g[1]), g[2]]
    prompts = untrained_prompt_tokens(tiny, 2, 1)
    L = len(ids)
    lm = CachedLM(model, tiny.device, tiny.vocab_size)
    with torch.inference_mode():
        lm.forward(ids[:-2])  # leave one uncached committed token before the root
        buffers = tree_buffers(tree, prefix_length=L - 1)
        logits = tree_forward(model, lm.cache, L - 2, [ids[-2]], tree_ids, buffers, prompts, tiny.device,
                              tiny.vocab_size)
        fresh = model(torch.tensor([ids + g[:3]])).logits[0].float()
    # root and candidates on the greedy branch see exactly the sequence: same logits as a plain pass
    for node, pos in [(0, L - 1), (1, L), (3, L + 1), (5, L + 2)]:
        torch.testing.assert_close(logits[node], fresh[pos], atol=1e-5, rtol=0)
    verdict = verify_greedy(buffers, tree_ids, logits)
    assert verdict.accepted == [1, 3, 5] and verdict.last == 5
    assert int(logits[verdict.last].argmax()) == g[3]
    assert len(prompt_predictions(buffers, logits, 5, 1)) == 1 and prompt_predictions(buffers, logits, 2, 1) == []

    # compaction: prefix + root + accepted branch, in order == the cache of a fresh pass
    compact_cache(lm.cache, L - 1, [L - 1 + c for c in [0] + verdict.accepted])
    lm.length = L + 3
    with torch.inference_mode():
        ref = DynamicCache(config=model.config)
        model(torch.tensor([ids + g[:3]]), **cache_kwargs(model, ref), use_cache=True)
        for mine, theirs in zip(lm.cache.layers, ref.layers):
            torch.testing.assert_close(mine.keys, theirs.keys, atol=1e-5, rtol=0)
            torch.testing.assert_close(mine.values, theirs.values, atol=1e-5, rtol=0)
        nxt = lm.forward([g[3]])[-1]
        want = model(torch.tensor([ids + g[:4]])).logits[0, -1].float()
    torch.testing.assert_close(nxt, want, atol=1e-5, rtol=0)


def test_typical_acceptance_picks_longest_passing_path():
    tree = make_tree([(0,), (1,), (0, 0)], 0)
    b = tree_buffers(tree)
    tree_ids = [0, 2, 3, 4]
    probs = torch.tensor([[0.05, 0.05, 0.5, 0.3, 0.1],
                          [0.1, 0.1, 0.1, 0.1, 0.6],
                          [0.2, 0.2, 0.2, 0.2, 0.2],
                          [0.2, 0.2, 0.2, 0.2, 0.2]])
    h = -(probs[0] * probs[0].log()).sum()
    assert typical_threshold(probs[0], 0.09, 0.3) == pytest.approx(min(0.09, 0.3 * math.exp(-h)))
    verdict = verify_typical(b, tree_ids, probs, 0.09, 0.3)
    assert verdict.accepted == [1, 3] and verdict.last == 3
    # node 1's child fails (p = 0.01): both depth-1 children pass, the first one wins the tie
    probs[1] = torch.tensor([0.96, 0.01, 0.01, 0.01, 0.01])
    assert verify_typical(b, tree_ids, probs, 0.09, 0.3).accepted == [1]
    # epsilon 0: threshold 0, every candidate with p > 0 passes; threshold 1: nothing passes
    assert verify_typical(b, tree_ids, probs, 0.0, 0.3).accepted == [1, 3]
    assert verify_typical(b, tree_ids, probs, 1.0, 1e9).accepted == []
