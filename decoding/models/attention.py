"""The attention kernel of a model in half precision on the CPU: SDPA, with one-token steps in float32.

PyTorch's CPU SDPA in bfloat16 is slow for a single query token over a long cache. Whole target
passes of SmolLM2-135M in bfloat16 on 1,000 cached tokens (`scripts/attention_kernels.py`,
docs/bench/attention-kernels.json; 1 thread): a one-token step takes 76.4 ms with bfloat16 SDPA and
51.8 ms when the step's attention runs SDPA on float32 copies of q, k and v, while a 5-token pass
takes 67.8 ms with bfloat16 SDPA, less than the step. transformers' eager attention is fast for the
step too (54.1 ms) but rounds the attention scores to bfloat16: its output is several times further
from the exact result than SDPA's (`tests/test_attention_kernel.py`), enough to change greedy text
and to lower a draft's acceptance. Passes of several tokens (prefills, verify passes) stay with
bfloat16 SDPA, which is as fast or faster there.

The choice is one attention function registered with transformers' AttentionInterface, deciding
per call by the number of query tokens, so a model is never switched while another thread runs it;
it takes SDPA's masks. float32 models keep plain SDPA, so the float32 greedy-equality checks run
exactly the kernels they always did.
"""

from __future__ import annotations

import torch

NAME = "sdpa_float32_steps"
HALF = (torch.bfloat16, torch.float16)


def split_attention(module, query, key, value, attention_mask, **kwargs):
    """SDPA; a one-token pass in half precision runs it on float32 copies of q, k and v."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if query.shape[2] != 1 or query.dtype not in HALF:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.float()  # an additive mask must match the query's dtype
    out, weights = sdpa_attention_forward(module, query.float(), key.float(), value.float(), attention_mask, **kwargs)
    return out.to(query.dtype), weights


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
