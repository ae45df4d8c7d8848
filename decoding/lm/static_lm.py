"""A static-shape KV cache LM: preallocated buffers written at explicit slots, attention over the whole buffer.

`StaticLM` has CachedLM's interface (forward/extend/rollback/length/calls/keep_features/features,
`keep`, a restricted `head`, `returns_hidden` subclasses, and the tree passes of PPD: `tree_pass`,
`compact`; MJSD's `beam_cache`), but every pass of n tokens runs the same tensor shapes whatever the
cache holds, which is what CUDA graphs need (`cuda_graphs.py` captures them):

- `SlotCache`: per layer, keys/values buffers (1, kv_heads, C, head_dim), zero-filled, C = the
  capacity. A pass writes its n keys/values at the slots `cache.slots` (n,) (index_copy_ along the
  sequence axis) and hands attention the WHOLE buffers (1, kv_heads, C, head_dim).
- The mask: an additive 4D mask (1, 1, n, C) in the model's dtype, 0 where a row may attend and
  the dtype's minimum elsewhere. A causal pass of n tokens at length L lets row i see slots
  [0, L + i]; a tree pass brings its own (m, L + m) pattern, padded with "blocked" up to C.
  transformers' `masking_utils` returns a 4D mask unchanged (`_preprocess_mask_arguments`), and
  rotary positions come from explicit `position_ids` (1, n), so the model never asks the cache
  for its length. Blocked slots get weight exp(min - max) = 0 exactly; their zero (or stale,
  always finite) values add nothing, so float32 logits equal the dynamic cache's up to the
  summation order of the attention kernel, and greedy tokens are the same.
- Rollback moves `length` (nothing is copied: the next pass overwrites the stale slots, and the mask
  hides them meanwhile). PPD's compaction gathers the accepted rows to contiguous slots in place.
- Capacity: given at construction (prompt + new tokens + the largest pass, rounded up to
  `ROUND` tokens; with graphs, to a power of two of at least `GRAPH_CAPACITY`: `graph_capacity`)
  or `DEFAULT_CAPACITY`; a pass that would run past it re-allocates the buffers
  with twice the room (rounded), copying the filled part and dropping captured graphs (they point
  at the old buffers); so a run never fails on capacity, it only re-captures once.
- A prefill (a pass into an empty cache, or longer than `MAX_GRAPH_TOKENS`), and any pass on a
  device without graphs, runs eagerly on the same cache.
- Passes of at most `MAX_GRAPH_TOKENS` tokens, eager or captured, into an allocated cache run our own
  decoder layer (`lean_layer.py`: fused q|k|v and gate|up matmuls, slot attention, fused RMS norms) where
  the model is Llama-shaped, else (or with SPECDEC_LEAN_LAYER=0) HF's modules with two of them swapped
  for cheaper kernels on this shape (`static_kernels.py`: slot attention instead of SDPA over the whole
  buffer, fused RMS norms); longer passes run HF's modules as they are. On CUDA (or anywhere with
  SPECDEC_COMPILE=1) the lean layer's step goes through `torch.compile`; with SPECDEC_COMPILE=1 the whole
  short pass does where the lean layer does not fit (`compiled_body.py`).

Cross-run batching (`batching.py`, the app's classes) concatenates DynamicCaches; a StaticLM never
hands its calls to the batcher: `forward` always runs the pass alone (the factory, `backend.py`,
picks the dynamic path whenever batching is on, so runs never silently mix the two).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, StaticLayer

from .cached_lm import CachedLM
from . import compiled_body, lean_layer
from .cuda_graphs import count
from .static_kernels import MAX_SHORT_TOKENS, short_pass_kernels

ROUND = 256  # capacities are multiples of this
DEFAULT_CAPACITY = 1024  # tokens, when the caller gives no hint
GRAPH_CAPACITY = 2048  # with graphs, the least capacity, and capacities are powers of two (see graph_capacity)
MAX_GRAPH_TOKENS = MAX_SHORT_TOKENS  # passes of at most this many tokens may be captured (prefills are not)


def round_capacity(tokens: int) -> int:
    """`tokens` rounded up to a multiple of ROUND (at least ROUND)."""
    return max(ROUND, -(-int(tokens) // ROUND) * ROUND)


def graph_capacity(tokens: int) -> int:
    """The capacity of a cache whose passes are captured: the least power of two >= `tokens`, at least
    GRAPH_CAPACITY. A cache that grows drops its graphs, and a benchmark's runs of prompts of every
    length take turns on the same few caches: with one size for every prompt up to GRAPH_CAPACITY -
    its run, the graphs captured on the first run are replayed by all later ones instead of being
    captured again (each capture costs warm-up passes and a recording, tens of milliseconds)."""
    return max(GRAPH_CAPACITY, 1 << (max(1, int(tokens)) - 1).bit_length())


class SlotCache(Cache):
    """A transformers Cache whose layers (StaticLayer, allocated at the first write) hold
    (1, kv_heads, capacity, head_dim) keys and values; `update` writes at `self.slots` (n,) and
    returns the whole buffers. Set `slots` before every pass."""

    def __init__(self, layers: int, capacity: int):
        super().__init__(layers=[StaticLayer(capacity) for _ in range(layers)])
        self.capacity = capacity
        self.slots: torch.Tensor | None = None  # (n,) long: where the current pass writes

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        """key_states/value_states (1, kv_heads, n, head_dim) -> the layer's full buffers."""
        layer = self.layers[layer_idx]
        if not layer.is_initialized:
            _allocate(layer, key_states, value_states, self.capacity)
        layer.keys.index_copy_(2, self.slots, key_states)
        layer.values.index_copy_(2, self.slots, value_states)
        return layer.keys, layer.values

    @torch.inference_mode()
    def grow(self, capacity: int, filled: int) -> None:
        """Re-allocate every layer's buffers with `capacity` slots, keeping slots [0, filled). Under
        inference mode, as the first write's allocation is: buffers of one kind whoever allocates them
        (a compiled pass, `compiled_body.py`, would otherwise recompile on the other kind)."""
        for layer in self.layers:
            if layer.is_initialized:
                keys, values = layer.keys, layer.values
                _allocate(layer, keys, values, capacity)
                layer.keys[:, :, :filled] = keys[:, :, :filled]
                layer.values[:, :, :filled] = values[:, :, :filled]
            layer.max_cache_len = capacity
        self.capacity = capacity

    def gather(self, start: int, rows: torch.Tensor) -> None:
        """Copy the slots `rows` (k,) to [start, start + k) in every layer (PPD's compaction)."""
        for layer in self.layers:
            if layer.is_initialized:
                k = rows.numel()
                layer.keys[:, :, start: start + k] = layer.keys.index_select(2, rows)
                layer.values[:, :, start: start + k] = layer.values.index_select(2, rows)


def _allocate(layer: StaticLayer, key_states: torch.Tensor, value_states: torch.Tensor, capacity: int) -> None:
    """Zero buffers (batch, kv_heads, capacity, head_dim) shaped after the given states: zeros, not
    empty memory, so that a blocked slot's value is finite (0 x NaN would poison the attention)."""
    batch, heads = key_states.shape[:2]
    kw = {"dtype": key_states.dtype, "device": key_states.device}
    layer.keys = torch.zeros(batch, heads, capacity, key_states.shape[-1], **kw)
    layer.values = torch.zeros(batch, heads, capacity, value_states.shape[-1], **kw)
    layer.max_cache_len = capacity
    layer.is_initialized = True


def _layer_count(model) -> int:
    config = model.config
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    return int(text.num_hidden_layers)


def _model_dtype(model) -> torch.dtype:
    return next(p.dtype for p in model.parameters() if p.is_floating_point())


def supports_static(model) -> str | None:
    """None when `model` can run on a SlotCache; else why not (sliding-window or other special layers)."""
    config = model.config
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    kinds = set(getattr(text, "layer_types", None) or ["full_attention"])
    if kinds != {"full_attention"}:
        return f"its layers are {', '.join(sorted(kinds))} (the static cache holds full-attention layers only)"
    if getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True):
        return "it attends through a sliding window (the static cache holds full-attention layers only)"
    return None


class StaticMixin:
    """The static-shape pass for CachedLM and its subclasses (mixed in before them: `StaticLM` for
    plain LMs, `static_class(FeatureDraftLM)` for the feature draft). Uses the base's `_body`,
    `_inputs` and `_logits`, so whatever a subclass feeds (ids, or vectors) and returns (logits, or
    hidden states) stays as it is."""

    backend = "static"

    def __init__(self, *args, capacity: int | None = None, graphs=None, cache: SlotCache | None = None, **kwargs):
        """`capacity`: tokens to hold (rounded up; grown when a pass needs more). `cache` and
        `graphs`: a SlotCache and its cuda_graphs.GraphRunner handed on from an earlier LM of the
        same model and class (`backend.py` recycles them so graphs survive across runs)."""
        super().__init__(*args, **kwargs)
        self.graphs = graphs  # a cuda_graphs.GraphRunner, or None (eager)
        want = self._sized(capacity or DEFAULT_CAPACITY)
        if cache is None:
            cache = SlotCache(_layer_count(self.model), want)
        elif cache.capacity < want:
            cache.grow(want, 0)
            if graphs is not None:
                graphs.reset()
        self.cache = cache
        self.dtype = _model_dtype(self.model)
        self._columns = torch.arange(self.cache.capacity, device=self.device)  # (C,)
        self._mask_values: tuple[torch.Tensor, torch.Tensor] | None = None  # 0 and the minimum (`_additive`)

    @property
    def capacity(self) -> int:
        return self.cache.capacity

    def _sized(self, tokens: int) -> int:
        """The capacity to allocate for `tokens`: rounded to ROUND, or to graph_capacity with graphs."""
        return graph_capacity(tokens) if self.graphs is not None else round_capacity(tokens)

    def _ensure_room(self, end: int) -> None:
        """Grow the buffers when slots up to `end` do not fit (see the module doc)."""
        if end <= self.cache.capacity:
            return
        self.cache.grow(self._sized(max(end, 2 * self.cache.capacity)), self.length)
        self._columns = torch.arange(self.cache.capacity, device=self.device)
        if self.graphs is not None:
            self.graphs.reset()

    def forward(self, tokens, keep: int | None = None) -> torch.Tensor:
        """As CachedLM.forward, always as one pass of this run alone (never the batcher's)."""
        if len(tokens) == 0:
            raise ValueError("forward needs at least one token")
        return self.forward_alone(tokens, keep)

    def forward_ids(self, ids: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        """As CachedLM.forward_ids: ids (1, n) long on the device, never read back (never the batcher's)."""
        return self.forward_alone(ids[0], keep)

    def causal_mask(self, n: int, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Additive (1, 1, n, C): row i (position length + i) sees slots [0, length + i]. `rows`: those
        positions (n,) where the caller has them already."""
        if rows is None:
            rows = torch.arange(self.length, self.length + n, device=self.device)
        allowed = self._columns[None, :] <= rows[:, None]
        return self._additive(allowed)[None, None]

    def _additive(self, allowed: torch.Tensor) -> torch.Tensor:
        """0 where `allowed`, the dtype's minimum elsewhere (one op: 0-d tensors of the model's dtype picked
        per entry, the same values as zeros masked with the minimum)."""
        if self._mask_values is None:
            self._mask_values = (torch.zeros((), dtype=self.dtype, device=self.device),
                                 torch.full((), torch.finfo(self.dtype).min, dtype=self.dtype, device=self.device))
        return torch.where(allowed, *self._mask_values)

    def _run(self, inputs: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
             slots: torch.Tensor | None = None) -> torch.Tensor:
        """One pass writing at slots [length, length + n): inputs (1, n) ids or (1, n, width) vectors,
        positions (1, n) rotary positions, mask (1, 1, n, C), `slots` (n,) where the caller has them;
        final hidden states (n, hidden), a tensor this call owns (a graph's output is copied out)."""
        n = inputs.shape[1]
        if slots is None:
            slots = torch.arange(self.length, self.length + n, device=self.device)
        if self.graphs is not None and n <= MAX_GRAPH_TOKENS and self.length > 0:  # a prefill runs eagerly
            hidden = self.graphs.run(self, inputs, positions, slots, mask)
            if hidden is not None:
                return hidden
        if self.graphs is not None:
            count("eager_passes")
        if n <= MAX_GRAPH_TOKENS:
            return self.body_pass(inputs, positions, slots, mask)[0]
        self.cache.slots = slots
        hidden, _ = self._body(inputs, positions, self.cache, mask)
        return hidden[0]

    def body_pass(self, inputs, positions, slots, mask) -> torch.Tensor:
        """A short pass, the one a graph captures: (1, n, hidden) final hidden states (see `_run`): the lean
        layer (`lean_layer.py`) where the model fits it, else HF's modules with the short-pass kernels
        (`static_kernels.py`: slot attention, fused RMS norms)."""
        self.cache.slots = slots
        hidden = self._lean_pass(inputs, positions, slots, mask)
        if hidden is not None:
            return hidden
        compiling = compiled_body.wanted() and self.cache.layers[0].is_initialized  # a first pass allocates
        with short_pass_kernels(self.model, norms=not compiling):  # compiled: inductor fuses HF's norms itself
            hidden = compiled_body.run(self, inputs, positions, self.cache, mask) if compiling else None
            if hidden is None:
                hidden, _ = self._body(inputs, positions, self.cache, mask)
        return hidden

    def _lean_pass(self, inputs, positions, slots, mask) -> torch.Tensor | None:
        """The short pass through the lean layer, compiled on CUDA by default (compiled_body.py): (1, n, hidden);
        None when the switch is off (SPECDEC_LEAN_LAYER; on by default on CPUs and CUDA), the model does not fit
        it, or the cache is not allocated yet (a first pass)."""
        if not lean_layer.enabled(self.device) or not self.cache.layers[0].is_initialized:
            return None
        lean = lean_layer.lean_model(self._decoder())
        if lean is None:
            return None
        hidden = self._first_hidden(inputs)
        out = compiled_body.lean_run(lean, hidden, positions, self.cache, slots, mask)
        return out if out is not None else lean_layer.lean_body(lean, hidden, positions, self.cache, slots, mask)

    @torch.inference_mode()
    def forward_alone(self, tokens, keep: int | None = None) -> torch.Tensor:
        """`forward` on the static cache: logits (len(tokens) or keep, vocab_width), float32, or
        hidden states for a `returns_hidden` subclass."""
        n = len(tokens)
        self._ensure_room(self.length + n)
        slots = torch.arange(self.length, self.length + n, device=self.device)  # also the rotary positions
        hidden = self._run(self._inputs(tokens), slots.unsqueeze(0), self.causal_mask(n, slots), slots)
        if self.features is not None:
            self.store_features(hidden)
        self.length += n
        self.calls += 1
        rows = hidden[-keep:] if keep else hidden
        return rows if self.returns_hidden else self._logits(rows)

    @torch.inference_mode()
    def tree_pass(self, inputs_embeds: torch.Tensor, positions: torch.Tensor, allowed: torch.Tensor,
                  keep: int | None = None) -> torch.Tensor:
        """As CachedLM.tree_pass: inputs_embeds (1, m, hidden), positions (1, m), allowed (1, 1, m,
        length + m) bool; the mask is padded with "blocked" to (1, 1, m, C)."""
        m = inputs_embeds.shape[1]
        hidden = self.masked_pass(inputs_embeds, positions, allowed[0, 0])
        self.length += m
        self.calls += 1
        rows = hidden[-keep:] if keep else hidden
        return self._logits(rows)

    def masked_pass(self, inputs: torch.Tensor, positions: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """As CachedLM.masked_pass on the static cache: the mask is padded with "blocked" to (m, C) and the pass
        goes through `_run` (its slots set, captured where its shape is), so a drafter's tree passes work here."""
        m = inputs.shape[1]
        self._ensure_room(self.length + m)
        full = torch.zeros(m, self.cache.capacity, dtype=torch.bool, device=self.device)
        full[:, : allowed.shape[-1]] = allowed.to(self.device)
        return self._run(inputs, positions.to(self.device), self._additive(full)[None, None])

    @torch.inference_mode()
    def compact(self, start: int, keep: list[int]) -> None:
        """Keep slots [0, start), then the slots `keep` in that order, at start..; length follows."""
        if keep:
            self.cache.gather(start, torch.tensor(list(keep), dtype=torch.long, device=self.device))
        self.length = start + len(keep)

    def beam_cache(self):
        """A DynamicCache holding copies of the filled slots [0, length) (MJSD's beams grow their own
        copy by a batch of beams, which a static buffer of batch 1 cannot)."""
        from transformers import DynamicCache

        copy = DynamicCache()
        for index, layer in enumerate(self.cache.layers):
            if layer.is_initialized:
                copy.update(layer.keys[:, :, : self.length].clone(), layer.values[:, :, : self.length].clone(), index)
        return copy

    def rollback(self, length: int) -> None:
        """Drop cached tokens beyond `length`: only the length moves (the mask hides the rest)."""
        if self.length > length:
            self.length = length


class StaticLM(StaticMixin, CachedLM):
    """A CachedLM on a SlotCache (see the module doc)."""


_CLASSES: dict[type, type] = {CachedLM: StaticLM}


def static_class(base: type) -> type:
    """The static variant of a CachedLM subclass `base` (StaticMixin mixed in before it)."""
    if base not in _CLASSES:
        _CLASSES[base] = type(f"Static{base.__name__}", (StaticMixin, base), {"__doc__": StaticMixin.__doc__})
    return _CLASSES[base]
