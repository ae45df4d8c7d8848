"""A causal LM with a KV cache that can be extended by any number of tokens and rolled back.

Speculative decoding appends draft tokens to both caches and, after a rejection, drops the
rejected tail (DynamicCache.crop; its layers grow in place, kv_cache.py). The cache always covers a
prefix of the committed sequence; `extend(sequence)` feeds whatever part of `sequence` the cache
lacks plus `extra` tokens in one forward pass, so prefill, single steps and gamma+1-token
verification are the same call.
A draft with a restricted output head (`output_head.py`) computes its logits with that head.
A target that a feature draft reads from (`drafters/feature.py`) keeps its final hidden states
(`keep_features`): `features[t]` is the hidden state at position t, valid for t < length.
When cross-run batching is on (`batching.py`, the app's classes), concurrent runs' calls on one
model share a forward pass; each run still sees exactly its own cache and keeps its own features.
A subclass may feed input vectors instead of token ids and return hidden states instead of
logits (`returns_hidden`; the feature draft's layer, `drafters.feature.FeatureDraftLM`): `_body` is
the one place that calls the model, for a solo pass and for a batched one alike.
Tree passes (PPD) feed input vectors under a 4D mask (`tree_pass`) and keep the accepted branch
(`compact`); MJSD's beams grow a copy of the cache (`beam_cache`). `static_lm.StaticLM` is the same
interface on a preallocated static-shape cache; `backend.make_lm` chooses between them.
By default (SPECDEC_LEAN_DYNAMIC=0 turns it off) a pass of at most 64 tokens of a CPU Llama runs HF's decoder ops
as plain calls with fused q|k|v and gate|up matmuls (`lean_dynamic.py`), bit-identical to HF's modules.
"""

from __future__ import annotations

import torch

from . import batching, lean_dynamic
from .hf_cache import cache_kwargs, grown_cache
from .kv_cache import compact_cache, growing_cache


class CachedLM:
    returns_hidden = False  # forward returns final hidden states, not logits (a subclass's choice)
    backend = "dynamic"  # the name a run summary records (static_lm.StaticLM: "static")

    def __init__(self, model: torch.nn.Module, device: torch.device, vocab_width: int, head=None):
        self.model = model
        self.device = device
        self.vocab_width = vocab_width  # logits are cut to the vocabulary shared with the other model
        self.head = head  # an OutputHead: logits over its tokens only (-inf elsewhere)
        self.cache = growing_cache(model.config)  # appends in place (kv_cache.py)
        self.length = 0  # tokens whose keys/values are in the cache
        self.calls = 0  # forward passes so far (a batched pass counts once)
        self.features: torch.Tensor | None = None  # (capacity, hidden) once keep_features() is called

    def keep_features(self) -> None:
        """From now on keep the final hidden state of every position fed (for a feature draft);
        batched passes keep them too (the batcher hands each run its rows)."""
        if self.features is None:
            hidden = self.model.get_input_embeddings().weight.shape[1]
            self.features = torch.empty(0, hidden, device=self.device)

    def forward(self, tokens, keep: int | None = None) -> torch.Tensor:
        """Append `tokens` to the cache; return float32 logits of shape (len(tokens), vocab_width),
        or of the last `keep` tokens only (the LM head then runs on those rows alone: a prefill
        that needs one row skips a (prompt x vocab) matmul). `tokens`: token ids, or for a subclass
        that feeds vectors a (n, inputs) tensor."""
        if len(tokens) == 0:
            raise ValueError("forward needs at least one token")
        batcher = batching.batcher()
        if batcher is not None:
            return batcher.forward(self, tokens, keep)
        return self.forward_alone(tokens, keep)

    def forward_ids(self, ids: torch.Tensor, keep: int | None = None) -> torch.Tensor:
        """`forward` of token ids already on the device, `ids` (1, n) long (a greedy draft's argmax fed to its
        next step): nothing is read back to the host nor copied from it, so the caller's next launch need not
        wait for the device. With cross-run batching on, the batcher takes host lists: the ids are read first."""
        if batching.batcher() is not None:
            return self.forward(ids[0].tolist(), keep)
        return self.forward_alone(ids[0], keep)

    def _body(self, inputs: torch.Tensor, position_ids: torch.Tensor, cache, attention_mask=None):
        """One pass of the model's decoder over `inputs` (batch, n) token ids, or (batch, n, hidden)
        input embeddings (a tree pass): its final hidden states (batch, n, hidden) and the grown
        `cache`. `attention_mask`: None (causal) or a 4D additive mask (batch, 1, n, cached + n)."""
        feed = {"inputs_embeds": inputs} if inputs.is_floating_point() else {"input_ids": inputs}
        decoder = self.model.get_decoder()
        out = decoder(**feed, **cache_kwargs(decoder, cache), use_cache=True, position_ids=position_ids,
                      attention_mask=attention_mask)
        return out.last_hidden_state, grown_cache(out)

    def masked_pass(self, inputs: torch.Tensor, positions: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """One pass appending `inputs` (1, m) ids or (1, m, width) vectors at cache slots [length, length + m),
        rotary `positions` (1, m), under the bool mask `allowed` (m, length + m) (True = attend): final hidden
        states (m, hidden). The length is the caller's to move (lm/tree_pass.py). The static path overrides it."""
        additive = self._additive_mask(allowed, next(self.model.parameters()).dtype)[None, None]
        hidden, self.cache = self.decoder_pass(inputs, positions, self.cache, additive)
        return hidden[0]

    def _lean_hidden(self, inputs: torch.Tensor, positions: torch.Tensor, attention_mask=None,
                     cache=None) -> torch.Tensor | None:
        """`_body`'s final hidden states (batch, n, hidden) computed by `lean_dynamic.body` (the same ops without
        HF's modules; fused q|k|v and gate|up matmuls), growing `cache` (default `self.cache`; the cross-run
        batcher passes its merged cache) the same way, when SPECDEC_LEAN_DYNAMIC is on (the default) and the pass
        fits it (a CPU Llama, at most lean_dynamic.MAX_TOKENS tokens a row); else None: run `_body`."""
        decoder = self._decoder()
        lean = lean_dynamic.usable(decoder, self.device, inputs.shape[1])
        if lean is None:
            return None
        return lean_dynamic.body(lean, decoder, self._first_hidden(inputs), positions,
                                 self.cache if cache is None else cache, attention_mask)

    def decoder_pass(self, inputs: torch.Tensor, positions: torch.Tensor, cache, attention_mask=None):
        """`_body` on any cache (the cross-run batcher's merged one), through `lean_dynamic.body` where the pass fits
        it: (final hidden states (batch, n, hidden), the grown cache)."""
        hidden = self._lean_hidden(inputs, positions, attention_mask, cache)
        if hidden is not None:
            return hidden, cache
        return self._body(inputs, positions, cache, attention_mask=attention_mask)

    def _additive_mask(self, allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """A bool mask (True = attend) as the additive mask HF's models take: 0 where allowed, the dtype's
        minimum elsewhere, on this LM's device, same shape."""
        return torch.zeros(allowed.shape, dtype=dtype, device=self.device).masked_fill(
            ~allowed.to(self.device), torch.finfo(dtype).min)

    def _decoder(self) -> torch.nn.Module:
        """The decoder stack `_body` runs (layers, final norm, rotary embedding): the static path's lean layer
        (`lean_layer.py`) runs its layers itself."""
        return self.model.get_decoder()

    def _first_hidden(self, inputs: torch.Tensor) -> torch.Tensor:
        """What enters the decoder's first layer for `inputs` (as `_body` takes them): (batch, n, hidden)."""
        return inputs if inputs.is_floating_point() else self.model.get_input_embeddings()(inputs)

    def _inputs(self, tokens) -> torch.Tensor:
        """A call's tokens (a list of ids, or (n,) long ids on the device) as one row of the model's input: (1, n)."""
        if isinstance(tokens, torch.Tensor):
            return tokens.view(1, -1)
        return torch.tensor([list(tokens)], dtype=torch.long, device=self.device)

    def _logits(self, rows: torch.Tensor) -> torch.Tensor:
        """Float32 logits (n, vocab_width) of final hidden states `rows` (n, hidden)."""
        if self.head is not None:
            return self.head.logits(rows, self.vocab_width)
        return self.model.get_output_embeddings()(rows)[:, : self.vocab_width].float()

    @torch.inference_mode()
    def forward_alone(self, tokens, keep: int | None = None) -> torch.Tensor:
        """`forward` as one pass of this run alone."""
        positions = torch.arange(self.length, self.length + len(tokens), device=self.device).unsqueeze(0)
        inputs = self._inputs(tokens)
        hidden = self._lean_hidden(inputs, positions)
        if hidden is not None or self.head is not None or self.features is not None or self.returns_hidden:
            if hidden is None:
                hidden, self.cache = self._body(inputs, positions, self.cache)
            hidden = hidden[0]
            if self.features is not None:
                self.store_features(hidden)
            self.length += len(tokens)
            self.calls += 1
            rows = hidden[-keep:] if keep else hidden
            return rows if self.returns_hidden else self._logits(rows)
        out = self.model(
            input_ids=inputs,
            **cache_kwargs(self.model, self.cache),
            use_cache=True,
            position_ids=positions,
            **({"logits_to_keep": keep} if keep is not None and keep < len(tokens) else {}),
        )
        self.cache = grown_cache(out)
        self.length += len(tokens)
        self.calls += 1
        return out.logits[0, :, : self.vocab_width].float()

    def store_features(self, hidden: torch.Tensor) -> None:
        """Write the fed positions' hidden states at [length, length + n) (growing the buffer)."""
        end = self.length + hidden.shape[0]
        if end > self.features.shape[0]:
            grown = torch.empty(max(end, 2 * self.features.shape[0], 256), hidden.shape[1],
                                dtype=hidden.dtype, device=hidden.device)
            grown[: self.length] = self.features[: self.length].to(hidden.dtype)
            self.features = grown
        self.features[self.length: end] = hidden

    def extend(self, sequence: list[int], extra: list[int] = (), keep: int | None = None) -> torch.Tensor:
        """Feed sequence[self.length:] + extra; logits for every fed token (the last `keep` only)."""
        if self.length > len(sequence):
            raise RuntimeError("cache is ahead of the sequence: roll back first")
        return self.forward(list(sequence[self.length :]) + list(extra), keep)

    @torch.inference_mode()
    def tree_pass(self, inputs_embeds: torch.Tensor, positions: torch.Tensor, allowed: torch.Tensor,
                  keep: int | None = None) -> torch.Tensor:
        """One pass of m input vectors `inputs_embeds` (1, m, hidden) at rotary `positions` (1, m)
        under the bool mask `allowed` (1, 1, m, length + m) (True = attend; PPD's tree); they take
        cache slots [length, length + m). Float32 logits of all rows (m, vocab_width), or of the
        last `keep`."""
        m = inputs_embeds.shape[1]
        mask = self._additive_mask(allowed, self.model.get_input_embeddings().weight.dtype)
        hidden = self._lean_hidden(inputs_embeds, positions.to(self.device), mask)
        if hidden is not None:
            self.length += m
            self.calls += 1
            return self._logits(hidden[0, -keep:] if keep else hidden[0])
        out = self.model(inputs_embeds=inputs_embeds, attention_mask=mask, position_ids=positions.to(self.device),
                         **cache_kwargs(self.model, self.cache), use_cache=True,
                         **({"logits_to_keep": keep} if keep is not None and keep < m else {}))
        self.cache = grown_cache(out)
        self.length += m
        self.calls += 1
        return out.logits[0, :, : self.vocab_width].float()

    @torch.inference_mode()
    def compact(self, start: int, keep: list[int]) -> None:
        """Keep cache entries [0, start), then the entries at absolute slots `keep` in that order
        (PPD's KV compaction of the accepted branch); the length follows."""
        compact_cache(self.cache, start, list(keep))
        self.length = start + len(keep)

    def beam_cache(self):
        """A copy of the cache that MJSD's beams may grow by a batch of beams (this one stays)."""
        import copy

        return copy.deepcopy(self.cache)

    def rollback(self, length: int) -> None:
        """Drop cached tokens beyond `length` (no-op when the cache is not longer)."""
        remove = self.length - length
        if remove > 0:
            self.cache.crop(-remove)
            self.length = length
