"""Which KV-cache LM a run's passes use: the dynamic cache (`cached_lm.CachedLM`) or the static-shape
cache (`static_lm.StaticLM`, with CUDA graphs on CUDA: `cuda_graphs.py`), through one factory.

`make_lm(cls, *args, capacity=...)` is how every decoding loop, drafter and tool gets its LM
(`cls` is CachedLM or a subclass such as the feature draft's FeatureDraftLM; `args` are its
constructor's). The choice, in order: the `backend` argument, the process setting
(`set_backend`, the CLI's `--backend`), the env SPECDEC_BACKEND, else "auto":

- "dynamic": today's path (a DynamicCache grown in place).
- "static": the static cache; on CUDA its fixed-shape passes are captured as graphs unless
  SPECDEC_CUDA_GRAPHS=0 (eager static passes, to compare), and on ZeroGPU (SPACES_ZERO_GPU set)
  only when SPECDEC_ZEROGPU_GRAPHS=1: whether capture works inside a `spaces.GPU` call is untested.
- "auto": static with graphs on CUDA, dynamic elsewhere (on this project's CPU the static path was
  measured slower: attention over the whole buffer; docs/architecture.md has the figures).

The static path is refused, with the reason kept as the run's `backend_note`, when cross-run
batching is on (the batcher merges DynamicCaches: runs never mix the two) or the model has layers
the static cache does not hold (sliding windows). `describe(model)` gives the run summary's
`backend` and `backend_note` for the last LM built on `model`.

A static LM's cache and graphs outlive it: when the LM is garbage collected they go back to a
small per-model pool and the next LM of the same model and class takes them, so a benchmark's
runs replay the graphs captured by its first run instead of capturing again.
"""

from __future__ import annotations

import os
import threading
import weakref

import torch

from . import batching
from .cached_lm import CachedLM
from .devices import ZERO_GPU_ENV, env_flag, on_zero_gpu  # noqa: F401 (ZERO_GPU_ENV: the env graphs_wanted reads)
from .static_lm import static_class, supports_static

BACKENDS = ("auto", "static", "dynamic")
BACKEND_ENV = "SPECDEC_BACKEND"
GRAPHS_ENV = "SPECDEC_CUDA_GRAPHS"  # "0": no CUDA graphs (eager static passes)
ZEROGPU_GRAPHS_ENV = "SPECDEC_ZEROGPU_GRAPHS"  # "1": try CUDA graphs on ZeroGPU too
POOLED = 4  # spare caches kept per model and class

_setting: dict[str, str | None] = {"backend": None}
_lock = threading.Lock()
_spare: "weakref.WeakKeyDictionary[torch.nn.Module, dict]" = weakref.WeakKeyDictionary()
_used: "weakref.WeakKeyDictionary[torch.nn.Module, tuple[str, str | None, object]]" = weakref.WeakKeyDictionary()


def check_backend(name: str) -> str:
    """`name` if it is a backend, else ValueError naming the choices."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of: {', '.join(BACKENDS)}")
    return name


def set_backend(name: str | None) -> None:
    """The process's backend from now on (None: back to SPECDEC_BACKEND, else auto)."""
    _setting["backend"] = None if name is None else check_backend(name)


def use_backend(name: str) -> None:
    """The CLI's --backend: this process's backend, and its subprocesses' (the env)."""
    set_backend(name)
    os.environ[BACKEND_ENV] = name


def requested_backend() -> str:
    """The backend asked for: set_backend's, else SPECDEC_BACKEND's, else "auto"."""
    name = _setting["backend"] or os.environ.get(BACKEND_ENV, "").strip().lower() or "auto"
    return check_backend(name)


def graphs_wanted(device) -> bool:
    """Capture CUDA graphs for static passes on `device`? (CUDA only; see the module doc.)"""
    if torch.device(device).type != "cuda" or not env_flag(GRAPHS_ENV, True):
        return False
    return env_flag(ZEROGPU_GRAPHS_ENV, False) if on_zero_gpu() else True


def graphs_note(device) -> str | None:
    """Why a static LM on `device` runs without graphs where one might expect them (ZeroGPU), else None."""
    if torch.device(device).type == "cuda" and on_zero_gpu() and env_flag(GRAPHS_ENV, True) \
            and not graphs_wanted(device):
        return f"ZeroGPU: eager static passes (CUDA graphs are untested there; {ZEROGPU_GRAPHS_ENV}=1 tries them)"
    return None


def choose(model, device, backend: str | None = None) -> tuple[str, str | None]:
    """("static" or "dynamic", a note saying why the static path was refused, or None)."""
    name = check_backend(backend) if backend else requested_backend()
    if name == "auto":
        name = "static" if torch.device(device).type == "cuda" else "dynamic"
    if name == "dynamic":
        return "dynamic", None
    if batching.enabled():
        return "dynamic", "cross-run batching is on: its shared passes run on the dynamic cache"
    reason = supports_static(model)
    if reason is not None:
        return "dynamic", f"the static cache does not fit this model: {reason}"
    return "static", None


def make_lm(cls: type = CachedLM, *args, capacity: int | None = None, backend: str | None = None, **kwargs):
    """An LM of class `cls` (CachedLM or a subclass) built from `args` (model, device, ...), on the
    chosen backend (module doc). `capacity`: the tokens the run may hold (a hint for the static
    cache: prompt + new tokens + the largest pass; it grows past it if need be)."""
    model, device = args[0], torch.device(args[1])
    name, note = choose(model, device, backend)
    if name == "dynamic":
        lm = cls(*args, **kwargs)
        _used[model] = ("dynamic", note, None)
        return lm
    key = (cls, str(device))
    cache, graphs = _take(model, key)
    if not graphs_wanted(device):
        graphs = None  # a spare cache may come with graphs from a run that wanted them
        note = note or graphs_note(device)
    elif graphs is None:
        from .cuda_graphs import GraphRunner

        graphs = GraphRunner(model, device)
    lm = static_class(cls)(*args, capacity=capacity, cache=cache, graphs=graphs, **kwargs)
    weakref.finalize(lm, _give, weakref.ref(model), key, lm.cache, lm.graphs)
    _used[model] = ("static", note, lm.graphs)
    return lm


def _take(model, key) -> tuple[object, object]:
    with _lock:
        spare = _spare.get(model, {}).get(key)
        return spare.pop() if spare else (None, None)


def _give(model_ref, key, cache, graphs) -> None:
    """A static LM's cache and graphs back to the pool (called when the LM is collected)."""
    model = model_ref()
    if model is None:
        return
    with _lock:
        spare = _spare.setdefault(model, {}).setdefault(key, [])
        if len(spare) < POOLED:
            spare.append((cache, graphs))


def describe(model) -> dict:
    """{"backend": "dynamic" | "static" | "static+cuda-graphs" (+ "+compiled" when compiling, compiled_body.py),
    "backend_note": str | None} of the last LM built on `model` (a capture or compile failure shows as
    eager or uncompiled static passes with its reason; a draft chain's failed capture, lm/chain_graphs.py, as
    eager draft chains)."""
    if model not in _used:
        return {"backend": "dynamic", "backend_note": None}
    name, note, graphs = _used[model]
    if name == "static" and graphs is not None:
        if graphs.failed is None:
            name = "static+cuda-graphs"
        else:
            note = graphs.failed
        from .chain_graphs import failure as chain_failure

        note = "; ".join(n for n in (note, chain_failure(model)) if n) or None
    if name != "dynamic":
        from . import compiled_body, lean_layer

        failed = compiled_body.failure()
        device = next(model.parameters()).device
        if failed is not None:
            note = "; ".join(n for n in (note, failed) if n)
        elif compiled_body.wanted(compiled_body.lean_default(device) and lean_layer.enabled(device)):
            name += "+compiled"
    return {"backend": name, "backend_note": note}


PASS_ROOM = 64  # room for the largest pass past the run's tokens (a verify chain, a PPD tree)


def run_capacity(prompt_ids, config) -> int:
    """The tokens a run's target cache may hold: prompt + max new tokens + the largest pass."""
    return len(prompt_ids) + int(config.max_new_tokens) + PASS_ROOM
