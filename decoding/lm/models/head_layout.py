"""A workaround for a slow path of torch's CPU bfloat16 matmul, installed on every loaded model.

A 3D input whose outer stride is not the standard one multiplies through a bfloat16 linear layer
many times slower than the same values laid out afresh (seen with torch 2.13.0+cpu; float16 and
float32 are not affected). That is exactly what `logits_to_keep` hands the LM head:
`hidden[:, -k:, :]` of a longer pass, in every prefill and in every verification that feeds more
tokens than it keeps. The pre-hook copies such an input (only the kept rows: cheap) into a fresh
tensor first; the values, and so the logits, are unchanged. `python experiments/head_layout.py`
measures both paths.
"""

from __future__ import annotations

import torch


def _standard_strides(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _fresh_layout(module, args):
    x = args[0]
    if x.dim() >= 3 and x.device.type == "cpu" and x.stride() != _standard_strides(x.shape):
        return (torch.empty(x.shape, dtype=x.dtype).copy_(x), *args[1:])
    return None


def install(model: torch.nn.Module) -> None:
    """Give `model`'s output embeddings (its LM head) the fresh-layout pre-hook (once)."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is not None and not getattr(head, "_specdec_fresh_layout", False):
        head.register_forward_pre_hook(_fresh_layout)
        head._specdec_fresh_layout = True
