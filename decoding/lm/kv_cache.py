"""A KV cache that grows in place: one buffer per layer, written at the end, cropped by a length.

transformers' DynamicLayer appends a pass's keys and values with torch.cat, which copies the whole
cache in every layer on every forward pass: on a long prompt that copy is a real share of a decoding
step. `GrowingLayer` keeps keys and values in a buffer with room to spare (grown by half when full)
and writes each pass's new entries after the cached ones; `keys`/`values` are views of the buffer's
filled part, so cropping after a rejected draft is a shorter view and the next pass overwrites the
rejected entries. A tree's compaction to its accepted path (`compact_cache`) moves the few kept
entries inside the buffer (`GrowingLayer.compact`) instead of copying the whole cache. Whatever else
replaces `keys`/`values` from outside (a batch reorder) is taken over into a new buffer on the next
update, so every DynamicLayer operation keeps its meaning.
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

    def compact(self, start: int, rows: torch.Tensor) -> bool:
        """Keep entries [0, start), then the entries at slots `rows` (k,) long, in that order, at
        [start, start + k): the k rows are gathered first and written back inside the buffer, so the
        cached prefix is neither copied nor re-allocated (a tree iteration's compaction on a long context
        otherwise copies the whole cache twice: here and again when the next pass adopts the copy). False,
        with nothing changed, where the layer does not hold its own buffer views (then the caller copies)."""
        buffer = self._key_buffer if self.is_initialized else None
        if (buffer is None or self.keys.dim() != 4 or self.keys.data_ptr() != buffer.data_ptr()
                or self.values.data_ptr() != self._value_buffer.data_ptr() or start > self.keys.shape[-2]):
            return False
        end = start + rows.numel()
        with torch.inference_mode(buffer.is_inference()):
            keys, values = self.keys.index_select(-2, rows), self.values.index_select(-2, rows)  # (b, h, k, d)
            buffer[:, :, start:end] = keys
            self._value_buffer[:, :, start:end] = values
            self.keys = buffer[:, :, :end]
            self.values = self._value_buffer[:, :, :end]
        return True

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
    """Keep cache entries [0, start) and then the entries at absolute slots `keep` (in that
    order); drop everything after. This is the KV compaction of a tree's accepted branch (PPD's, a
    draft tree's): in place in a GrowingLayer's buffer, a copy of the kept entries elsewhere."""
    keep = list(keep)
    index = rows = None
    for layer in cache.layers:
        if getattr(layer, "is_sliding", False):
            raise ValueError("PPD's KV compaction supports full-attention caches only")
        if not getattr(layer, "is_initialized", True) or layer.keys is None or layer.keys.numel() == 0:
            continue
        if isinstance(layer, GrowingLayer):
            if rows is None:
                rows = torch.tensor(keep, dtype=torch.long, device=layer.keys.device)
            if layer.compact(start, rows):
                continue
        if index is None:
            index = torch.tensor(list(range(start)) + keep, dtype=torch.long)
        idx = index.to(layer.keys.device)
        layer.keys = layer.keys.index_select(-2, idx)
        layer.values = layer.values.index_select(-2, idx)
