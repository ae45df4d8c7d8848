"""The attention kernel of a model in half precision on the CPU: SDPA for long passes, eager for short ones.

PyTorch's CPU SDPA is the fast kernel for a prompt's prefill, but in bfloat16 it is slow for a pass
of one or a few query tokens over a long cache. Measured with `scripts/attention_kernels.py`
(SmolLM2-135M, bfloat16, 1 thread, the shared 2-core AMD EPYC with avx512_bf16, torch 2.13):
with 1,000 tokens cached, one token takes 73 ms with SDPA and 52 ms with eager attention, 5 tokens
65 and 60 ms, 17 tokens 93 and 85 ms; a 1,000-token prefill takes about 1.9 s with SDPA and 2.9 s
eager. In float32 SDPA is as fast or faster at every size, so float32 models keep plain SDPA (and
the float32 greedy-equality checks run exactly the kernels they always did).

The choice is one attention function registered with transformers' AttentionInterface, deciding
per call by the number of query tokens, so a model is never switched while another thread runs it.
It takes SDPA's masks (None when the pass is plainly causal, else boolean or an additive float
mask such as PPD's tree mask) and hands a short pass to the model's own eager function.
"""

from __future__ import annotations

import sys

import torch

NAME = "sdpa_short_eager"
SHORT_PASS = 32  # passes of at most this many query tokens run the eager kernel
HALF = (torch.bfloat16, torch.float16)


def _eager_of(module: torch.nn.Module):
    """The eager attention function of the module's own modeling file (None when it has none)."""
    return getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)


def short_eager_attention(module, query, key, value, attention_mask, **kwargs):
    """SDPA, except for passes of at most SHORT_PASS query tokens, which run the eager math."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    eager = _eager_of(module)
    q_len = query.shape[2]
    # A missing mask on a multi-token pass means "causal" to SDPA (is_causal); eager would read
    # it as "attend everywhere", so that pass (a short prompt's prefill) stays with SDPA.
    if eager is None or q_len > SHORT_PASS or (attention_mask is None and q_len > 1):
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        blocked = torch.finfo(query.dtype).min
        attention_mask = torch.zeros(attention_mask.shape, dtype=query.dtype,
                                     device=query.device).masked_fill(~attention_mask, blocked)
    kwargs.pop("is_causal", None)
    return eager(module, query, key, value, attention_mask, **kwargs)


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, short_eager_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)


def use_fast_cpu_attention(model: torch.nn.Module) -> bool:
    """Give a CPU model in bfloat16/float16 that runs SDPA the split kernel; True when it did."""
    params = next(model.parameters(), None)
    if params is None or params.device.type != "cpu" or params.dtype not in HALF:
        return False
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    _register()
    model.set_attn_implementation(NAME)
    return True
