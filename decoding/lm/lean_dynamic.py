"""The dynamic path's short passes on the CPU through our own Llama decoder stack, op for op HF's (on by
default; SPECDEC_LEAN_DYNAMIC=0 runs HF's modules).

`CachedLM` (a DynamicCache grown in place, `kv_cache.py`) runs HF's `LlamaModel` for every pass. Its numbers come
from a few dozen tensor ops a layer; around them are ~12 module calls a layer, keyword-argument decorators and the
attention dispatch. `body` runs the same decoder as plain function calls:

    mask = create_causal_mask(config, h0, attention_mask, cache, positions)    HF's own mask, as LlamaModel makes it
    cos, sin = rotary_emb(h0, positions)                                        HF's rotary module, in the model dtype
    per layer:  h = rms(x) * w_in                                               LlamaRMSNorm's ops: float32, cast
                q|k|v = h [W_q; W_k; W_v]^T                                     one matmul (see below)
                q, k = q cos + rotate_half(q) sin, k cos + rotate_half(k) sin   apply_rotary_pos_emb's ops
                k, v = cache.update(k, v, layer)                                the cache's own update
                a = attention(module, q, k, v, mask, ...)                       the model's attention function
                x = x + a W_o^T                                                 (split_attention in bfloat16)
                g|u = rms(x) * w_post [W_gate; W_up]^T                          one matmul
                x = x + (silu(g) * u) W_down^T
    rms(x) * w_norm                                                             the final norm

Every op is HF's op on the same inputs in the same precision, q and k enter the attention with HF's shapes and
strides, and the attention function is the one HF would call (`models/attention.py`'s split kernel on a bfloat16
CPU model, SDPA in float32), so the final hidden states are bit-identical to HF's; fused matmuls are the only
change, and on this CPU a matmul with concatenated weights gives bit for bit the rows of the separate matmuls
(bfloat16 and float32, 1 and 2 threads, 1..79, 100, 257, 700 rows, the default target's and the tiny tests'
shapes). tests/decoding/lm/test_lean_dynamic.py checks torch.equal logits for every kind of pass.

Weights: `lean_layer.lean_model`'s (read once per model; q/k/v and gate/up re-pointed at row views of the fused
tensors, so each weight is held once). Alignment: on this CPU a float32 one-row matmul rounds differently when its
weight sits at 8 mod 16 bytes (as the default target's float32 weights do, at 40 mod 64) than on an aligned copy
(bfloat16 did not, at the offsets tried); the fused tensors keep the old weights' address modulo 64 bytes, and a model
whose weights could not keep it (not back to back) runs HF's modules, its weights left where they are.

Measured (experiments/lean_dynamic_cpu.py, docs/bench/lean-dynamic-cpu.json: the default target in bfloat16, one
thread, ~100 cached tokens): a step took 28.02 ms with HF's modules, 25.60 ms with the same ops as plain calls and
separate matmuls, 24.46 ms with the fused ones (0.87x); a 5-token verify pass 29.97, 28.23 and 26.82 ms.

Used for passes of at most MAX_TOKENS tokens (steps, verify passes, tree passes, short prefills) of a CPU model
whose decoder is HF's `LlamaModel` fitting `lean_layer.misfit`; longer passes, other models and other devices run
HF's modules. Cross-run batched passes (`batching.py`: several runs' caches padded into one, a 4D mask) take it
under the same conditions (at most MAX_TOKENS tokens a row), bit-identical to HF's batched passes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .devices import env_flag
from .lean_layer import LayerWeights, LeanModel, lean_model, rotate_half

ENV = "SPECDEC_LEAN_DYNAMIC"  # "0": the dynamic CPU path's short passes run HF's modules (default: `body`)
MAX_TOKENS = 64  # passes of at most this many tokens
DECODERS = ("LlamaModel",)  # the decoder classes whose forward `body` repeats (others: HF's modules)


def enabled() -> bool:
    """SPECDEC_LEAN_DYNAMIC on (read at every pass: on unless set to 0, false, no or off)."""
    return env_flag(ENV, True)


def usable(decoder: torch.nn.Module, device: torch.device, n: int) -> LeanModel | None:
    """The lean weights when a pass of `n` tokens of `decoder` on `device` may run `body`, else None."""
    if n > MAX_TOKENS or device.type != "cpu" or type(decoder).__name__ not in DECODERS or not enabled():
        return None
    return lean_model(decoder, exact=True)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """LlamaRMSNorm.forward op for op: x (..., d) to float32, x * rsqrt(mean(x^2) + eps), cast back, times weight."""
    dtype = x.dtype
    x = x.to(torch.float32)
    variance = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    return weight * x.to(dtype)


def layer_pass(x: torch.Tensor, w: LayerWeights, attn: torch.nn.Module, cache, index: int, cos: torch.Tensor,
               sin: torch.Tensor, mask, attend, positions: torch.Tensor) -> torch.Tensor:
    """One LlamaDecoderLayer (module doc): x (b, n, d), cos/sin (b, 1, n, hd), `attn` the layer's LlamaAttention
    (the attention function reads its groups and scaling), `cache` written at layer `index`, `mask` HF's mask
    for the pass, `attend` the attention function -> (b, n, d)."""
    b, n, _ = x.shape
    hd = attn.head_dim
    q_width = w.o.shape[1]
    kv_width = (w.qkv.shape[0] - q_width) // 2
    qkv = F.linear(rms_norm(x, w.norm_in, w.eps), w.qkv)  # (b, n, q_width + 2 kv_width)
    q = qkv[..., :q_width].view(b, n, -1, hd).transpose(1, 2)  # (b, heads, n, hd): HF's layout after rotary
    k = qkv[..., q_width: q_width + kv_width].view(b, n, -1, hd).transpose(1, 2)
    v = qkv[..., q_width + kv_width:].view(b, n, -1, hd).transpose(1, 2)
    q = (q * cos) + (rotate_half(q) * sin)
    k = (k * cos) + (rotate_half(k) * sin)
    k, v = cache.update(k, v, index)
    out, _ = attend(attn, q, k, v, mask, dropout=0.0, scaling=attn.scaling, position_ids=positions, use_cache=True)
    x = x + F.linear(out.reshape(b, n, -1).contiguous(), w.o)
    gate, up = F.linear(rms_norm(x, w.norm_post, w.eps), w.gate_up).chunk(2, dim=-1)
    return x + F.linear(F.silu(gate) * up, w.down)


def body(lean: LeanModel, decoder: torch.nn.Module, hidden: torch.Tensor, positions: torch.Tensor, cache,
         attention_mask: torch.Tensor | None = None, step=layer_pass) -> torch.Tensor:
    """LlamaModel.forward from its input embeddings: hidden (b, n, d) entering layer 0, rotary `positions` (b, n),
    the DynamicCache `cache` (grown by n), `attention_mask` None (causal) or a 4D additive mask (b, 1, n, cached + n)
    -> the final normed hidden states (b, n, d). `step`: layer_pass (an experiment may time another)."""
    from transformers.masking_utils import create_causal_mask
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.llama.modeling_llama import eager_attention_forward

    config = decoder.config
    mask = create_causal_mask(config=config, inputs_embeds=hidden, attention_mask=attention_mask, cache=cache,
                              position_ids=positions)
    cos, sin = decoder.rotary_emb(hidden, position_ids=positions)  # (b, n, hd) each, in hidden's dtype
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    x = hidden
    for index, (w, layer) in enumerate(zip(lean.layers, decoder.layers)):
        attn = layer.self_attn  # its config names the attention function, as LlamaAttention reads it
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(attn.config._attn_implementation, eager_attention_forward)
        x = step(x, w, attn, cache, index, cos, sin, mask, attend, positions)
    return rms_norm(x, lean.norm, lean.eps)
