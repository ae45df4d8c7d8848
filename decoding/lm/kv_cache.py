"""A KV cache that grows in place: one buffer per layer, written at the end, cropped by a length.

transformers' DynamicLayer appends a pass's keys and values with torch.cat, which copies the whole
cache in every layer on every forward pass: on a long prompt that copy is a real share of a decoding
step. `GrowingLayer` keeps keys and values in a buffer with room to spare (grown by half when full)
and writes each pass's new entries after the cached ones; `keys`/`values` are views of the buffer's
filled part, so cropping after a rejected draft is a shorter view and the next pass overwrites the
rejected entries. A tree's compaction to its accepted path (`compact_cache`) moves the few kept
entries in place too. Whatever replaces `keys`/`values` from outside (a batch reorder) is taken over
into a new buffer on the next update, so every DynamicLayer operation keeps its meaning.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

MIN_CAPACITY = 256  # tokens a buffer holds at first


class GrowingLayer(DynamicLayer):
    """A DynamicLayer whose keys/values are views of a preallocated buffer (see the module doc)."""

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._key_buffer: torch.Tensor | None = None
        self._value_buffer: torch.Tensor | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        cached = self.get_seq_length()
        end = cached + key_states.shape[-2]
        if not self._owns_views(key_states, end):
            self._adopt(key_states, value_states, cached, end)
        # a buffer made in inference mode (decoding) takes writes in inference mode only (the
        # cross-run batcher writes a run's new entries after its pass)
        with torch.inference_mode(self._key_buffer.is_inference()):
            self._key_buffer[:, :, cached:end] = key_states
            self._value_buffer[:, :, cached:end] = value_states
            self.keys = self._key_buffer[:, :, :end]
            self.values = self._value_buffer[:, :, :end]
        return self.keys, self.values

    def _owns_views(self, key_states: torch.Tensor, end: int) -> bool:
        """Are keys/values still this layer's views at the buffer start, with room up to `end`?"""
        buffer = self._key_buffer
        return (buffer is not None and end <= buffer.shape[-2] and self.keys.dim() == 4
                and self.keys.data_ptr() == buffer.data_ptr() and self.values.data_ptr() == self._value_buffer.data_ptr()
                and self.keys.shape[:2] == key_states.shape[:2] == buffer.shape[:2]
                and self.keys.dtype == key_states.dtype)

    def _adopt(self, key_states: torch.Tensor, value_states: torch.Tensor, cached: int, end: int) -> None:
        """New buffers holding the cached entries, with room for half as many tokens again as `end`
        (at least MIN_CAPACITY): growth stays amortized while a long prompt's cache wastes at most a third."""
        batch, heads, _, dim = key_states.shape
        capacity = end + max(MIN_CAPACITY, end // 2)
        keys = key_states.new_empty(batch, heads, capacity, dim)
        values = value_states.new_empty(batch, heads, capacity, value_states.shape[-1])
        if cached:
            keys[:, :, :cached] = self.keys
            values[:, :, :cached] = self.values
        self._key_buffer, self._value_buffer = keys, values


def growing_cache(config) -> DynamicCache:
    """A DynamicCache for `config` whose full-attention layers grow in place (sliding-window and
    other special layers stay as transformers makes them)."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


def compact_cache(cache, start: int, keep: list[int]) -> None:
    """Keep cache entries [0, start) and then the entries at absolute slots `keep` (in that order, each
    below the cache's length); drop everything after. The KV compaction of a tree's accepted branch
    (PPD's, a draft tree's; Medusa's): in every layer the k kept entries are gathered first, then written
    at [start, start + k) of the same tensors, and keys/values become views up to start + k, so the
    cached prefix is neither copied nor re-allocated (a copy of it per iteration cost 3.6 ms at a
    725-token context on this project's CPU) and a GrowingLayer's next pass still writes in place."""
    keep = list(keep)
    rows = None
    for layer in cache.layers:
        if getattr(layer, "is_sliding", False):
            raise ValueError("the KV compaction of a tree's accepted branch supports full-attention caches only")
        if not getattr(layer, "is_initialized", True) or layer.keys is None or layer.keys.numel() == 0:
            continue
        length = layer.keys.shape[-2]
        if start > length:
            raise IndexError(f"compaction keeps {start} cached entries of {length}")
        if rows is None or rows.device != layer.keys.device:
            rows = torch.tensor(keep, dtype=torch.long, device=layer.keys.device)
        end = start + rows.numel()
        # a cache written in inference mode (decoding) takes in-place writes in inference mode only
        with torch.inference_mode(layer.keys.is_inference()):
            keys, values = layer.keys.index_select(-2, rows), layer.values.index_select(-2, rows)  # (b, h, k, d)
            layer.keys[:, :, start:end] = keys
            layer.values[:, :, start:end] = values
            layer.keys, layer.values = layer.keys[:, :, :end], layer.values[:, :, :end]
