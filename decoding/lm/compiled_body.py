"""The static cache's short passes through `torch.compile`, still captured as our CUDA graphs (`cuda_graphs.py`).
Switch SPECDEC_COMPILE: unset, the lean layer's step is compiled on CUDA GPUs (measured on an H200: a captured
one-token step of the default target replayed in 1.53 ms compiled against 2.94 ms uncompiled, greedy decoding
578.9 against 290.5 tokens/s, docs/bench/gpu/gpu-profile-h200.json) and nothing is compiled elsewhere; "1"
compiles on any device, and also HF's whole short pass where the lean layer does not fit; "0" compiles nothing.

Why: a captured step replays every kernel HF's modules launch, about 37 a layer for the default
target (norms, rotary embedding, residual adds, activation, projections); on an H200 the replay of
one token's step costs about 3.1 ms for a model whose weights take well under a millisecond to read.
Inductor fuses the elementwise chains into a few kernels per layer, which is what HF's own fastest
`generate()` does (a static cache and `torch.compile(mode="reduce-overhead")`).

How, where the lean layer fits the model (`lean_layer.py`, the default for Llama-shaped models): regional
compilation. One compiled `lean_layer.layer_step` per process (`_compiled_layer`), called by every layer of every
model: its arguments are tensors (the layer's weights among them), so no layer index reaches dynamo; with dynamic
shapes it compiles twice (n = 1 and n > 1) and all layers replay those two graphs (tests/decoding/lm/
test_lean_layer.py counts them; on the CPU the default target's two compiles took 6-10 s each, cold,
docs/experiments.md, lean_layer_cpu). The embedding, the rotary cos/sin, the layer loop and the final norm stay
uncompiled.

How, for models the lean layer does not fit (or SPECDEC_LEAN_LAYER=0): one compiled function per process,
`_short_body(lm, inputs, positions, cache, mask)`, calling the LM's own `_body` (so the target and the feature
draft's layer both go through it), compiled with
dynamic shapes (the pass length n and the capacity C are symbolic; n = 1 is specialised by dynamo, so
a model compiles twice: one-token steps and longer passes). Inductor's default mode: no CUDA graphs
of its own; ours capture the compiled kernels like any others (the first sighting of a shape runs
eagerly, which is where compilation happens, outside any capture). The swapped slot attention
(`static_kernels.py`) stays, since inductor does not rewrite SDPA's kernel choice; the RMS norms are
left to inductor to fuse.

Compiling HF's decoder layer by layer instead (regional compilation of HF's modules) does not share: HF's
attention hands the cache its `layer_idx`, which dynamo specialises on, even with the cache's update left
uncompiled (on the CPU, 10 graphs for a 2-layer model); the lean layer exists for that reason. A first pass
into an empty cache (which allocates it) is never compiled.

Compiling takes long on first use (once per process; HF's whole body of the default target with dynamic shapes
took over 110 s on an H200; the lean layer's two graphs took 24.6 s there, which is why only they are compiled
by default) and needs a working
inductor backend (Triton on CUDA; a C++ compiler on the CPU). A compile that raises turns compiling
off for the process with its reason (`failure()`, shown as the run's backend note), and the pass
runs uncompiled: a run never fails on it. ZeroGPU does not support torch.compile: never there.
"""

from __future__ import annotations

import threading

import torch

from .devices import env_flag, on_zero_gpu

ENV = "SPECDEC_COMPILE"  # "1": compile the static cache's short passes
RECOMPILE_LIMIT = 64  # compiled variants kept per code object (models x precisions x n = 1 / n > 1)

BACKEND = "inductor"  # torch.compile's backend (tests count graphs with a counting backend)

_state: dict = {"fn": None, "layer": None, "failed": None}
_lock = threading.Lock()


def wanted(default: bool = False) -> bool:
    """SPECDEC_COMPILE on (unset: `default`), and not on ZeroGPU (SPACES_ZERO_GPU set), and no earlier compile
    failed."""
    return env_flag(ENV, default) and not on_zero_gpu() and _state["failed"] is None


def lean_default(device) -> bool:
    """Whether the lean layer's step is compiled when SPECDEC_COMPILE is unset: on CUDA GPUs (module doc)."""
    return torch.device(device).type == "cuda"


def failure() -> str | None:
    """Why compiling was turned off in this process, or None."""
    return _state["failed"]


def _short_body(lm, inputs: torch.Tensor, positions: torch.Tensor, cache, mask: torch.Tensor) -> torch.Tensor:
    """The compiled function: the LM's decoder over inputs (1, n) or (1, n, width) -> (1, n, hidden)."""
    hidden, _ = lm._body(inputs, positions, cache, mask)
    return hidden


def _compile(key: str, fn):
    """torch.compile(fn) once per process (kept under `key`), with dynamic shapes."""
    with _lock:
        if _state[key] is None:
            import torch._dynamo.config as dynamo_config

            for name in ("recompile_limit", "cache_size_limit"):
                if getattr(dynamo_config, name, RECOMPILE_LIMIT) < RECOMPILE_LIMIT:
                    setattr(dynamo_config, name, RECOMPILE_LIMIT)
            _state[key] = torch.compile(fn, dynamic=True, backend=BACKEND)
        return _state[key]


def _compiled():
    return _compile("fn", _short_body)


def _compiled_layer():
    from .lean_layer import layer_step

    return _compile("layer", layer_step)


def _failed(error: Exception) -> None:
    _state["failed"] = f"torch.compile of the static passes failed ({type(error).__name__}: " \
                       f"{str(error).splitlines()[0] if str(error) else ''}); uncompiled static passes"


def run(lm, inputs: torch.Tensor, positions: torch.Tensor, cache, mask: torch.Tensor) -> torch.Tensor | None:
    """The compiled pass's (1, n, hidden), or None when compiling is off or has just failed (then the
    caller runs the pass uncompiled; the cache is untouched by a compile that raised before running)."""
    if not wanted():
        return None
    try:
        return _compiled()(lm, inputs, positions, cache, mask)
    except Exception as error:  # noqa: BLE001 - any compile error means: run uncompiled, say why
        _failed(error)
        return None


def lean_run(lean, hidden: torch.Tensor, positions: torch.Tensor, cache, slots: torch.Tensor,
             mask: torch.Tensor) -> torch.Tensor | None:
    """`lean_layer.lean_body` with the compiled `layer_step` (regional compilation: one compiled layer for every
    layer; the rotary embedding, the final norm and the loop stay uncompiled): (1, n, hidden), or None when
    compiling is off or has just failed. A failure may come after some layers wrote their slots; the caller's
    uncompiled rerun of the whole pass writes the same values at the same slots, so nothing is left half-done."""
    if not wanted(lean_default(hidden.device)):
        return None
    from .lean_layer import lean_body

    try:
        return lean_body(lean, hidden, positions, cache, slots, mask, step=_compiled_layer())
    except Exception as error:  # noqa: BLE001 - any compile error means: run uncompiled, say why
        _failed(error)
        return None


def reset() -> None:
    """Forget the compiled function and any failure (tests)."""
    with _lock:
        _state.update(fn=None, layer=None, failed=None)
        torch._dynamo.reset()
