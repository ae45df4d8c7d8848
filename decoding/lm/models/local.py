"""Loading with transformers' from_pretrained: a model directory, with sdpa attention where the
architecture has it, spread over several GPUs only when one is not enough."""

from __future__ import annotations

from pathlib import Path

import torch

from ...errors import ModelLoadError
from .loaded import LoadedModel, build_loaded


def one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return text or type(err).__name__


def _placement(device: torch.device) -> dict:
    # A model too large for one GPU spreads over several. "sequential" fills GPU 0 first, so a
    # model that fits on one GPU stays on one ("auto" would balance it over all of them).
    if device.type == "cuda" and device.index is None and torch.cuda.device_count() > 1:
        return {"device_map": "sequential"}
    return {}


def from_pretrained_model(source, dtype: torch.dtype, device: torch.device, **kwargs):
    """AutoModelForCausalLM.from_pretrained with sdpa attention (eager where unsupported)."""
    from transformers import AutoModelForCausalLM

    placement = _placement(device)
    kwargs = {"dtype": dtype, "trust_remote_code": False, **placement, **kwargs}
    try:
        model = AutoModelForCausalLM.from_pretrained(source, attn_implementation="sdpa", **kwargs)
    except (ValueError, ImportError) as err:
        text = str(err).lower()
        if not any(k in text for k in ("sdpa", "scaled_dot_product", "attn", "attention implementation")):
            raise
        model = AutoModelForCausalLM.from_pretrained(source, attn_implementation="eager", **kwargs)
    return model, bool(placement)


def load_dir(path: Path, spec: str, device, dtype, report) -> LoadedModel:
    """A transformers model directory (one with a config.json)."""
    from transformers import AutoTokenizer

    report(0.1, f"loading {path.name}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        model, placed = from_pretrained_model(path, dtype, device)
    except Exception as err:  # noqa: BLE001 - any loader failure becomes one clear line
        raise ModelLoadError(f"cannot load '{spec}': {one_line(err)}") from err
    report(0.9, "moving to device")
    return build_loaded(model, tokenizer, spec, path.resolve().name, "local", device, dtype, placed)
