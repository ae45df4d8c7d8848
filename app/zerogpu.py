"""Running on ZeroGPU, Hugging Face's shared GPU hardware for Gradio Spaces.

On ZeroGPU a function gets a GPU only for the length of one call decorated with `@spaces.GPU`,
and its arguments and results cross a process boundary (they are pickled). So on ZeroGPU:

- one decorated call decodes a whole run (`whole_run`: Run, Step, each method of the comparison
  table) or a whole race (`whole_race`): the
  engine's generator runs inside it and yields its plain-data records; the session is updated
  from them on the CPU side, and pacing, Step, the timeline and the race player replay those
  records without booking the GPU again;
- its duration is estimated from max new tokens and the pair (`run_seconds`), within the
  platform's per-call limit;
- the preset models are loaded at start-up (`preload`), and custom models are refused.

Off ZeroGPU (`SPACES_ZERO_GPU` unset: importing `spaces` succeeds on CPU hardware too, so that
is not the test) the decorator is the identity and nothing changes.
"""

from __future__ import annotations

import math
import os

ZERO_GPU_ENV = "SPACES_ZERO_GPU"
MIN_GPU_SECONDS = 10
MAX_GPU_SECONDS = 120  # a call asking more is refused ("illegal duration") on common tiers; shorter calls queue first
ATTACH_SECONDS = 5.0  # getting the GPU slice and moving the weights onto it
STEP_SECONDS = 0.03  # one target call of a small model plus the engine's work (a generous GPU figure)
STEP_SECONDS_PER_BPARAM = 0.02  # the weights' share of a step, per billion target parameters


def on_zerogpu() -> bool:
    """True when the app runs on ZeroGPU hardware (the variable the `spaces` package reads)."""
    return os.environ.get(ZERO_GPU_ENV, "").strip().lower() in ("1", "t", "true")


def device() -> str | None:
    """Where models load: on ZeroGPU "cuda" (the `spaces` package makes torch report a GPU at
    start-up and moves the weights onto each call's GPU), elsewhere None (the machine's default)."""
    if not on_zerogpu():
        return None
    import torch

    return "cuda" if torch.cuda.is_available() else None


def gpu(duration):
    """`@spaces.GPU(duration=duration)` on ZeroGPU, the identity elsewhere. `duration` is a number
    of seconds or a function of the decorated function's arguments."""
    def decorate(fn):
        if not on_zerogpu():
            return fn
        import spaces

        return spaces.GPU(duration=duration)(fn)
    return decorate


def run_seconds(settings, target_params: float | None = None) -> int:
    """Seconds of GPU to ask for one run of `settings` (app.settings.Settings): attaching, then
    every new token at a generous per-step cost that grows with the target's size; clamped to
    [MIN_GPU_SECONDS, MAX_GPU_SECONDS]."""
    from decoding.methods.registry import METHODS  # here, not at the top: app.py imports this module before torch

    params = target_params if target_params is not None else _target_params(settings.target)
    step = STEP_SECONDS + STEP_SECONDS_PER_BPARAM * params / 1e9
    spec = METHODS.get(settings.method)  # beams and trees cost more per generated token (the registry's step_cost)
    seconds = ATTACH_SECONDS + settings.max_new_tokens * step * (spec.step_cost if spec is not None else 1.0)
    return int(min(MAX_GPU_SECONDS, max(MIN_GPU_SECONDS, math.ceil(seconds))))


def race_seconds(a, b) -> int:
    """Seconds of GPU for a race: both lanes (warm-ups are short), within the same limit."""
    total = run_seconds(a) + run_seconds(b) - ATTACH_SECONDS
    return int(min(MAX_GPU_SECONDS, max(MIN_GPU_SECONDS, math.ceil(total))))


def _target_params(spec: str) -> float:
    """The loaded target's parameter count (models are loaded at start-up), else a 2B guess."""
    from decoding.lm.models import cached_model

    model = cached_model(spec)
    return float(model.n_params) if model is not None else 2e9


def load_run_pair(target_spec: str, draft_spec: str, need_draft: bool, dtype: str = "auto", **progress):
    """The memoized (target, pair.Draft) of a run, on this hardware's device and in `dtype` ("auto":
    the device's default); `progress`: load_pair's target_progress / draft_progress."""
    from decoding.run.pair import load_pair

    return load_pair(target_spec, draft_spec, need_draft=need_draft, cached=True, device=device(),
                     dtype=None if dtype == "auto" else dtype, **progress)


def _pair(settings):
    """The run's (target, draft), memoized: the handler loaded (or refused) them before this call."""
    from decoding.methods.registry import METHODS

    return load_run_pair(settings.target, settings.draft, METHODS[settings.method].uses_drafter, settings.dtype)


@gpu(duration=lambda settings, lean=False: run_seconds(settings))
def whole_run(settings, lean: bool = False):
    """Decode one run of `settings` to the end, yielding its records (one GPU call on ZeroGPU);
    `lean` leaves out the top-k lists (for timing, as the comparison table does)."""
    import dataclasses

    from decoding.eval.energy import make_meter
    from decoding.run.runner import decode

    target, draft = _pair(settings)
    prompt_ids = target.encode_prompt(settings.prompt, settings.chat)
    meter = make_meter(target.device)
    try:
        yield from decode(target, draft, prompt_ids, dataclasses.replace(settings.config(), lean=lean), meter)
    finally:
        meter.close()


@gpu(duration=lambda a, b, recorded: race_seconds(a, b))
def whole_race(a, b, recorded: dict):
    """Record a race of lane settings `a` and `b` (warm-ups, then one lane after the other) in one
    GPU call on ZeroGPU; returns the race_file.Race."""
    from .race_run import LaneRun, record_race

    runs = [LaneRun(label, s, *_pair(s)) for label, s in zip("AB", (a, b))]
    return record_race(runs, None, recorded=recorded)


def preload(pairs: list[tuple[str, str]]) -> list[str]:
    """Load the preset pairs on the GPU at start-up, as ZeroGPU requires (it places the weights on
    the GPU of each call); returns a line per pair that could not be loaded (the app still starts)."""
    from decoding.lm.models import ModelLoadError

    problems = []
    for target, draft in pairs:
        try:
            load_run_pair(target, draft, True)
        except ModelLoadError as exc:
            problems.append(f"{target} + {draft}: {exc}")
    return problems


def warm_up_on_gpu(target_spec: str, draft_spec: str, log=print):
    """On a dedicated CUDA GPU (not ZeroGPU, whose calls never compile), load the pair and warm it up in a
    background thread (`decoding/run/warm_up.py`: the compile and the graph captures happen before the first
    visitor's run); the thread, or None where there is nothing to warm up. It logs one line either way."""
    import threading

    import torch

    if on_zerogpu() or not torch.cuda.is_available():
        return None

    def work():
        from decoding.lm.models import ModelLoadError
        from decoding.run.warm_up import warm_up

        try:
            target, draft = load_run_pair(target_spec, draft_spec, True)
            log(f"warm-up: {target_spec} + {draft_spec} ready on the GPU in {warm_up(target, draft):.1f} s")
        except (ModelLoadError, RuntimeError) as exc:  # the app still serves; the first run then waits instead
            log(f"warning: warm-up of {target_spec} + {draft_spec} failed: {exc}")

    thread = threading.Thread(target=work, name="gpu-warm-up", daemon=True)
    thread.start()
    return thread
