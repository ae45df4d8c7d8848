"""HF `generate()` in its own fastest configuration, as the benchmark's "hf-generate-compiled" peer.

transformers' recipe for a fast `generate()` (its docs: "static cache" and "torch.compile"): a
static KV cache (`cache_implementation="static"`), sized once for the longest prompt of the run plus
the new tokens (`max_cache_len`), so that every decoding step has the same shapes, and that step
compiled with `torch.compile(mode="reduce-overhead")` (CUDA graphs). `generate()` compiles the step
itself when the cache is static and the device is CUDA (its `compile_config`); the prompt's prefill
stays eager. On any other device transformers does not compile by design: this peer then runs the
static cache eagerly and says why.

Compiling can fail (a torch/inductor build without a compiler, a graph the compiler refuses). The
first call compiles (the benchmark's warm-up on one prompt); a compile error is recorded, not
retried (it costs minutes and fails the same way), and the peer falls back to the eager static cache
for the rest of the run, so the benchmark carries on and the report says what failed.
`fast_peer_status(model)` gives that record."""

from __future__ import annotations

import copy
import weakref
from dataclasses import asdict, dataclass

COMPILE_MODE = "reduce-overhead"
CACHE_MARGIN_TOKENS = 8  # slack over the longest prompt + new tokens (the chat template's end tokens)
VARIANT_KEY = "hf-generate-compiled"
VARIANT_METHOD = "generate-compiled"


@dataclass
class FastPeerState:
    """What the peer did on one model: the cache size, whether a compiled step ran, and why not."""

    max_cache_len: int
    compile_asked: bool  # the device is one transformers compiles on
    compiled: bool = False  # a call with the compiled step finished
    compiled_calls: int = 0  # calls made with the compiled step (the first one compiles)
    eager_why: str | None = None  # why the step runs eagerly (None while compiled or not yet known)
    error: str | None = None  # the compile error, first line

    def as_dict(self) -> dict:
        return {**asdict(self), "mode": COMPILE_MODE if self.compiled else None}


_STATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def compiles_on(device_type: str) -> bool:
    """Whether transformers' `generate()` compiles its step on this device type by itself."""
    return device_type == "cuda"


def peer_state(model, max_cache_len: int) -> FastPeerState:
    """The peer's record for `model` (an HF module), created on first use with the run's cache size."""
    state = _STATES.get(model)
    if state is None or state.max_cache_len < max_cache_len:
        asked = compiles_on(model.device.type)
        state = FastPeerState(max_cache_len=max_cache_len, compile_asked=asked,
                              eager_why=None if asked else
                              f"transformers compiles generate()'s step on CUDA only; on {model.device.type} "
                              "the static cache runs eagerly")
        _STATES[model] = state
    return state


def fast_peer_status(model) -> dict | None:
    """The record of the compiled peer on `model` as plain data, or None when it never ran."""
    state = _STATES.get(model)
    return None if state is None else state.as_dict()


def fast_generation_config(base, max_cache_len: int, compile_step: bool):
    """`base` (a GenerationConfig) with the static cache of `max_cache_len` tokens and, when
    `compile_step`, the step compiled in mode reduce-overhead; otherwise compiling switched off."""
    from transformers import CompileConfig

    config = copy.deepcopy(base)
    config.cache_implementation = "static"
    config.max_cache_len = int(max_cache_len)
    if compile_step:
        config.compile_config = CompileConfig(mode=COMPILE_MODE)
        config.disable_compile = False
    else:
        config.compile_config = None
        config.disable_compile = True
    return config


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def generate_fast(model, ids, base_config, max_cache_len: int, make_clock, **kwargs):
    """One `generate()` call of the fastest configuration: (output ids, the clock of the call that
    counted). `make_clock()` makes a fresh streamer clock (its time starts when made), so that a
    failed compile's time is not counted. ids: [1, prompt tokens] long tensor on the model's device."""
    state = peer_state(model, max_cache_len)
    compile_now = state.compile_asked and state.error is None
    if compile_now:
        state.compiled_calls += 1
        clock = make_clock()
        try:
            out = model.generate(ids, streamer=clock, generation_config=fast_generation_config(
                base_config, state.max_cache_len, True), **kwargs)
        except Exception as exc:  # noqa: BLE001 - a compile failure is a finding: record it, run eagerly
            state.error = _first_line(exc)
            state.eager_why = f"torch.compile failed ({state.error}); the static cache runs eagerly"
            if hasattr(model, "_compiled_call"):
                del model._compiled_call
            try:
                import torch._dynamo

                torch._dynamo.reset()
            except Exception:  # noqa: BLE001 - nothing more to clean
                pass
        else:
            if hasattr(model, "_compiled_call"):
                state.compiled = True
                state.eager_why = None
            else:
                state.compile_asked = False
                state.eager_why = "transformers did not compile the step (its own criteria for compiling were not met)"
            return out, clock
    clock = make_clock()
    out = model.generate(ids, streamer=clock, generation_config=fast_generation_config(
        base_config, state.max_cache_len, False), **kwargs)
    return out, clock
