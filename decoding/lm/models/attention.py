"""The attention kernel of a model in half precision on the CPU: SDPA, with one-token steps in float32
and several-token passes over a cache with grouped queries.

PyTorch's CPU SDPA in bfloat16 is slow for a single query token over a long cache: a one-token step
of a whole target pass is faster when the step's attention runs SDPA on float32 copies of q, k and
v, and can cost more than a 5-token pass in bfloat16 (`experiments/attention_kernels.py` measures the
kernels; docs/bench/attention-kernels.json holds a run). transformers' eager attention is fast for
the step too but rounds the attention scores to bfloat16: its output is several times further from
the exact result than SDPA's (tests/decoding/lm/test_attention.py), enough to change greedy text and
to lower a draft's acceptance.

A pass of several tokens over a cache (a verify pass, a tree pass, a batched pass) comes with a
mask, and with a mask transformers' SDPA path copies every cached key and value once per query head
of its group (`repeat_kv`: SmolLM2 has 3 query heads per key/value head), a copy of the whole cache
in every layer of every verify pass. Here the query heads that share a key/value head are stacked
along the query axis instead ((heads, q) -> (kv heads, group x q), the mask repeated per group), so
SDPA reads each cached key and value once: the same attention, row for row, and a several-token pass
over a long cache is faster this way (same measurement as above). Prefills (no cache, no mask:
SDPA's causal kernel) are unchanged.

The choice is one attention function registered with transformers' AttentionInterface, deciding
per call by the number of query tokens and the mask, so a model is never switched while another
thread runs it; it takes SDPA's masks. float32 models keep plain SDPA, so the float32
greedy-equality checks run exactly the kernels they always did.
"""

from __future__ import annotations

import torch

NAME = "sdpa_float32_steps"
HALF = (torch.bfloat16, torch.float16)


def split_attention(module, query, key, value, attention_mask, **kwargs):
    """SDPA; a one-token pass in half precision runs it on float32 copies of q, k and v, a masked
    pass of several tokens with grouped queries runs it without copying the cache per query head."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if query.dtype in HALF and query.shape[2] > 1 and _groupable(module, query, attention_mask, kwargs):
        return grouped_query_attention(query, key, value, attention_mask, module.num_key_value_groups,
                                       kwargs.get("scaling"))
    if query.shape[2] != 1 or query.dtype not in HALF:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.float()  # an additive mask must match the query's dtype
    out, weights = sdpa_attention_forward(module, query.float(), key.float(), value.float(), attention_mask, **kwargs)
    return out.to(query.dtype), weights


def _groupable(module, query, mask, kwargs) -> bool:
    """A masked pass (one mask for all heads) of a grouped-query model, with nothing SDPA's plain
    path would add (dropout, a position bias, a paged cache)."""
    groups = getattr(module, "num_key_value_groups", 1)
    return (groups > 1 and mask is not None and mask.dim() == 4 and mask.shape[1] == 1
            and mask.shape[2] == query.shape[2] and not kwargs.get("dropout")
            and kwargs.get("position_bias") is None and kwargs.get("cache") is None
            and kwargs.get("softcap") is None)


def grouped_query_attention(query, key, value, mask, groups: int, scaling: float | None):
    """SDPA of (batch, heads, q, d) queries over (batch, heads / groups, kv, d) keys and values: query
    head h reads key/value head h // groups (transformers' repeat_kv order), so the `groups` heads of
    one key/value head become one head of groups x q query rows, each row keeping its mask row.
    Returns (batch, q, heads, d), as transformers' attention functions do, and no weights."""
    batch, heads, q_len, dim = query.shape
    stacked = query.reshape(batch, heads // groups, groups * q_len, dim)
    out = torch.nn.functional.scaled_dot_product_attention(
        stacked, key, value, attn_mask=_repeated_mask(mask, groups), scale=scaling)
    return out.reshape(batch, heads, q_len, dim).transpose(1, 2).contiguous(), None


# the last mask repeated per group: (the mask it came from, groups, the repeat); every layer of a pass gets the
# same mask object from transformers, so a pass repeats it once instead of once a layer (~12 us a layer here)
_last_repeat: tuple | None = None


def _repeated_mask(mask: torch.Tensor, groups: int) -> torch.Tensor:
    """mask (batch, 1, q, kv) repeated per group along the query axis: (batch, 1, groups x q, kv). On the CPU outside
    compilation the repeat of the mask object seen last is reused (it is held here, so no other tensor can take
    its place; nothing writes into a pass's mask between its layers). A CUDA mask may be a graph's static buffer
    rewritten in place between replays, so it is repeated every time."""
    global _last_repeat
    if mask.device.type != "cpu" or torch.compiler.is_compiling():
        return mask.repeat(1, 1, groups, 1)
    last = _last_repeat
    if last is not None and last[0] is mask and last[1] == groups:
        return last[2]
    repeated = mask.repeat(1, 1, groups, 1)
    _last_repeat = (mask, groups, repeated)
    return repeated


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, split_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)


def use_fast_cpu_attention(model: torch.nn.Module) -> bool:
    """Give a CPU model in bfloat16/float16 that runs SDPA the split kernel; True when it did."""
    params = next(model.parameters(), None)
    if params is None or params.device.type != "cpu" or params.dtype not in HALF:
        return False
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    try:
        _register()
        model.set_attn_implementation(NAME)
    except (ValueError, ImportError, AttributeError):  # a model that takes no custom kernel keeps SDPA
        return False
    return True
