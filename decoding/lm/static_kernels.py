"""Fewer, cheaper GPU kernels for the static cache's short passes (`static_lm.py`): slot attention and
fused RMS norms, swapped into the model for the length of one pass (`short_pass_kernels`).

A pass of a few tokens over the static cache is a handful of tiny kernels per layer, and a CUDA
graph replays them back to back, so the step costs what its kernels cost (measured on an H200 with
the default target, 30 layers, bfloat16, one token over a 2048-slot cache: 3.5 ms a replay; per
step, about 1 ms in the attention kernel and about 1,100 kernels in all). Two of HF's modules spend
most of that on this shape:

- Attention. SDPA over the whole buffer with an additive mask picks cuDNN's flash kernel, which
  walks all C keys with one thread block per head: about 32 us a layer for one query. `slot_attention`
  computes the same softmax(q k^T * scale + mask) v with two batched matrix products, the heads of
  a key/value group folded into the rows so that keys and values are never repeated:
    query (b, h, n, d) -> (b, kvh, g*n, d), g = h / kvh (rows: head of the group, then token);
    scores (b, kvh, g*n, C) = q k^T, key (b, kvh, C, d); + mask (b, 1, n, C) broadcast over g;
    softmax in float32 (as HF's eager attention), back to the model's dtype;
    out (b, kvh, g*n, d) = probs v, value (b, kvh, C, d) -> (b, n, h, d), the layout HF expects.
  Any other call (no 4D float mask, more than MAX_SHORT_TOKENS queries, softcap) goes to HF's SDPA.
- RMSNorm. HF's LlamaRMSNorm is eight elementwise kernels (cast, pow, mean, add, rsqrt, mul, cast,
  mul by the weight); `_fused_rms_norm` computes x * rsqrt(mean(x^2) + eps) in float32 with torch's
  fused `rms_norm` (one kernel on CUDA), then casts and multiplies by the weight as HF does.

Both compute HF's functions in HF's precisions; only the order of floating-point sums differs, so
float32 tokens equal the dynamic cache's (tests/decoding/lm/test_static_kernels.py checks logits
and tokens on tiny models). The swap sets the model's `config._attn_implementation` and the norms'
`forward` for one pass and puts them back; a pass of another run's thread on the same model during
that window computes the same functions through the same swapped code.
"""

from __future__ import annotations

import contextlib
import threading
import types
import weakref

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from .devices import env_flag

NAME = "specdec_slots"  # the attention implementation's registered name
ENV = "SPECDEC_SHORT_KERNELS"  # "0": HF's modules as they are (to compare; static passes then run HF's SDPA)
MAX_SHORT_TOKENS = 64  # passes of at most this many tokens use these kernels (static_lm.MAX_GRAPH_TOKENS is it)

_parts: "weakref.WeakKeyDictionary[torch.nn.Module, tuple[list, list]]" = weakref.WeakKeyDictionary()
_lock = threading.RLock()


def slot_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                   **kwargs) -> tuple[torch.Tensor, None]:
    """HF's attention interface: query (b, h, n, d), key/value (b, kvh, C, d), attention_mask (b, 1, n, C)
    additive -> (attn_output (b, n, h, d), None). See the module doc."""
    b, h, n, d = query.shape
    kvh = key.shape[1]
    if (attention_mask is None or attention_mask.dim() != 4 or not attention_mask.is_floating_point()
            or n > MAX_SHORT_TOKENS or h % kvh or kwargs.get("softcap") is not None
            or kwargs.get("output_attentions") or (dropout and module.training)):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    return grouped_slot_attention(query, key, value, attention_mask, d ** -0.5 if scaling is None else scaling), None


def grouped_slot_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor,
                           scale: float) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v with the heads of a key/value group folded into the rows (module doc):
    query (b, h, n, d), key/value (b, kvh, C, d), mask (b, 1, n, C) additive -> (b, n, h, d), contiguous.
    The body of `slot_attention`, and the lean layer's attention (`lean_layer.py`)."""
    b, h, n, d = query.shape
    kvh = key.shape[1]
    g = h // kvh
    rows = (query * scale).reshape(b, kvh, g * n, d)
    scores = torch.matmul(rows, key.transpose(2, 3))  # (b, kvh, g*n, C)
    scores = scores.view(b, kvh, g, n, -1) + mask[:, :, None]  # mask (b, 1, 1, n, C)
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    out = torch.matmul(probs.view(b, kvh, g * n, -1), value)  # (b, kvh, g*n, d)
    return out.view(b, h, n, d).transpose(1, 2).contiguous()


AttentionInterface.register(NAME, slot_attention)


def _fused_rms_norm(self, hidden_states: torch.Tensor) -> torch.Tensor:
    """LlamaRMSNorm.forward with torch's fused rms_norm: weight * (x * rsqrt(mean(x^2) + eps)) in
    float32, cast to x's dtype before the weight, as HF does."""
    return rms_norm(hidden_states, self.weight, self.variance_epsilon)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * (x * rsqrt(mean(x^2) + eps)): x (..., d), weight (d,); the normalisation in float32 by torch's
    fused rms_norm, cast back to x's dtype before the weight, as HF's LlamaRMSNorm does."""
    normed = F.rms_norm(x.float(), (x.shape[-1],), eps=eps)
    return weight * normed.to(x.dtype)


def _is_rms_norm(module: torch.nn.Module) -> bool:
    """HF's Llama-family RMSNorm (LlamaRMSNorm, Qwen2RMSNorm, MistralRMSNorm...): weight + variance_epsilon."""
    return (type(module).__name__.endswith("RMSNorm") and hasattr(module, "variance_epsilon")
            and isinstance(getattr(module, "weight", None), torch.Tensor) and module.weight.dim() == 1)


def _model_parts(model: torch.nn.Module) -> tuple[list, list]:
    """(the configs the attention layers read, the RMSNorm modules), found once per model."""
    with _lock:
        found = _parts.get(model)
        if found is None:
            configs = {id(m.config): m.config for m in model.modules()
                       if hasattr(m, "num_key_value_groups") and hasattr(m, "config")}
            found = (list(configs.values()), [m for m in model.modules() if _is_rms_norm(m)])
            _parts[model] = found
        return found


@contextlib.contextmanager
def short_pass_kernels(model: torch.nn.Module, norms: bool = True):
    """For the body of one short pass: the model's attention layers use `slot_attention` and (with `norms`)
    its RMS norms `_fused_rms_norm`; everything is put back afterwards (see the module doc).
    SPECDEC_SHORT_KERNELS=0: nothing is swapped."""
    if not env_flag(ENV, True):
        yield
        return
    configs, norm_modules = _model_parts(model)
    norm_modules = norm_modules if norms else []
    with _lock:
        saved = [c._attn_implementation for c in configs]
        try:
            for config in configs:
                config._attn_implementation = NAME
            for norm in norm_modules:
                norm.forward = types.MethodType(_fused_rms_norm, norm)
            yield
        finally:
            for config, name in zip(configs, saved):
                config._attn_implementation = name
            for norm in norm_modules:
                norm.__dict__.pop("forward", None)
