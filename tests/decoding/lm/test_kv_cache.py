"""The in-place KV cache (`decoding/lm/kv_cache.py`) holds exactly what transformers' DynamicCache holds
through every operation the engine makes on it: passes, crops after a rejection, growth past the
buffer, compaction from outside (PPD), and model passes through it give the same logits."""

import pytest
import torch
from transformers import DynamicCache

from decoding.lm.cached_lm import CachedLM
from decoding.lm.kv_cache import MIN_CAPACITY, GrowingLayer, growing_cache
from decoding.lm.models import load_model
from decoding.methods.ppd.engine import compact_cache


def _states(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 2, n, 4, generator=g), torch.randn(1, 2, n, 4, generator=g)


def _assert_same(ours: DynamicCache, theirs: DynamicCache):
    assert ours.get_seq_length() == theirs.get_seq_length()
    for a, b in zip(ours.layers, theirs.layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def test_growing_layers_hold_what_dynamic_layers_hold(tiny_target_dir):
    config = load_model(str(tiny_target_dir), device="cpu").model.config
    ours, theirs = growing_cache(config), DynamicCache(config=config)
    assert all(isinstance(layer, GrowingLayer) for layer in ours.layers)
    # a prefill, verify passes and crops, then passes that outgrow the first buffer
    steps = [("pass", 40), ("pass", 5), ("crop", 3), ("pass", 1), ("crop", 1), ("pass", 9), ("crop", 9)]
    steps += [("pass", 17), ("crop", 4)] * 20
    for i, (op, n) in enumerate(steps):
        for cache in (ours, theirs):
            if op == "pass":
                for index in range(len(cache.layers)):
                    k, v = _states(n, seed=100 * i + index)
                    returned = cache.update(k, v, index)
                    assert torch.equal(returned[0], cache.layers[index].keys)
            else:
                cache.crop(-n)
        _assert_same(ours, theirs)
    assert ours.get_seq_length() > MIN_CAPACITY  # the buffer grew (and kept every entry)
    # a compaction that replaces the keys from outside is taken over by the next pass
    keep = [ours.get_seq_length() - 3, ours.get_seq_length() - 1]
    for cache in (ours, theirs):
        compact_cache(cache, 30, keep)
        for index in range(len(cache.layers)):
            cache.update(*_states(2, seed=index), index)
    _assert_same(ours, theirs)


def test_writes_happen_in_place_after_a_crop():
    layer = GrowingLayer()
    layer.update(*_states(10, seed=0))
    buffer = layer._key_buffer
    layer.crop(-4)
    keys, _ = layer.update(*_states(2, seed=1))
    assert layer._key_buffer is buffer and keys.data_ptr() == buffer.data_ptr()  # no copy of the cache
    assert keys.shape[-2] == 8 and torch.equal(keys[:, :, 6:], _states(2, seed=1)[0])


def test_cached_passes_give_the_logits_of_one_fresh_pass(tiny_target_dir):
    """Prefill, steps, rejected drafts rolled back: each pass's logits equal a pass over the whole
    sequence with no cache, past the first buffer's size (float32)."""
    model = load_model(str(tiny_target_dir), device="cpu", dtype="float32").model
    vocab = model.config.vocab_size
    tokens = torch.randint(3, vocab, (MIN_CAPACITY + 120,), generator=torch.Generator().manual_seed(3)).tolist()
    lm = CachedLM(model, torch.device("cpu"), vocab)
    committed = 0
    for size in [30] + [7, 1, 5] * 30:
        if committed + size > len(tokens):
            break
        logits = lm.extend(tokens[:committed], tokens[committed:committed + size])
        with torch.inference_mode():
            fresh = model(input_ids=torch.tensor([tokens[:committed + size]])).logits[0, -size:].float()
        torch.testing.assert_close(logits, fresh[:, :vocab], rtol=1e-4, atol=1e-4)
        committed += max(1, size - 2)  # the last tokens of a draft rejected: roll back
        lm.rollback(committed)
    assert committed > MIN_CAPACITY


def test_a_buffer_made_while_decoding_takes_writes_after_it():
    """Decoding fills the cache in inference mode; the cross-run batcher writes a run's new entries
    after its pass, outside it."""
    layer = GrowingLayer()
    with torch.inference_mode():
        layer.update(*_states(6, seed=0))
    keys, values = layer.update(*_states(3, seed=1))
    assert keys.shape[-2] == 9 and torch.equal(values[:, :, 6:], _states(3, seed=1)[1])


def test_compaction_moves_the_kept_entries_inside_the_buffer(tiny_target_dir):
    """A tree's compaction keeps [0, start) and the accepted slots in order, as DynamicCache's copy does,
    without re-allocating the buffer or copying the prefix; the next pass writes in place after it."""
    config = load_model(str(tiny_target_dir), device="cpu").model.config
    for keep in ([], [33], [30, 31, 32], [36, 31, 34], [34, 30]):
        ours, theirs = growing_cache(config), DynamicCache(config=config)
        for cache in (ours, theirs):
            for index in range(len(cache.layers)):
                cache.update(*_states(30, seed=index), index)
                cache.update(*_states(8, seed=50 + index), index)  # a tree of 8 nodes after the context
        buffers = [layer._key_buffer for layer in ours.layers]
        for cache in (ours, theirs):
            compact_cache(cache, 30, keep)
        _assert_same(ours, theirs)
        assert [layer._key_buffer for layer in ours.layers] == buffers  # same buffers: nothing re-allocated
        assert all(layer.keys.data_ptr() == layer._key_buffer.data_ptr() for layer in ours.layers)
        for cache in (ours, theirs):
            for index in range(len(cache.layers)):
                cache.update(*_states(3, seed=90 + index), index)
        _assert_same(ours, theirs)
        assert [layer._key_buffer for layer in ours.layers] == buffers  # the next pass wrote in place


def test_compaction_past_the_cache_is_refused_as_before(tiny_target_dir):
    config = load_model(str(tiny_target_dir), device="cpu").model.config
    for cache in (growing_cache(config), DynamicCache(config=config)):
        for index in range(len(cache.layers)):
            cache.update(*_states(10, seed=index), index)
        with pytest.raises((IndexError, RuntimeError)):
            compact_cache(cache, 8, [12])
