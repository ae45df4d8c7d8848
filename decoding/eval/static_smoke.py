"""The static cache's GPU smoke check: plain decoding of the default target on the dynamic cache, the
eager static cache and the static cache with CUDA graphs, in bfloat16 and float32.

`static_smoke(device)` loads the default target (SmolLM2-135M-Instruct) in each precision, runs
greedy plain decoding of `tokens` new tokens (no stop at the end token) once per backend as a
warm-up (it captures the graphs; `lm/backend.py` keeps them for the next run) and once timed, and
returns per precision: tokens/s of each backend, whether the three gave the same tokens, and the
capture error if capture failed (then the "graphs" run was eager). `scripts/gpu_static_smoke.py`
prints it; it takes well under a minute on an H100.
"""

from __future__ import annotations

import os
import time

import torch

BACKENDS = {  # label -> (backend, SPECDEC_CUDA_GRAPHS)
    "dynamic": ("dynamic", "1"),
    "static-eager": ("static", "0"),
    "static-graphs": ("static", "1"),
}
PROMPT = "Explain why the sky is blue in two sentences."
WARMUP_TOKENS = 16


def _run(target, prompt_ids, tokens: int) -> tuple[list[int], float]:
    from ..lm.devices import sync
    from ..methods.base import RunConfig
    from ..rules.warp import SamplingConfig
    from ..run.runner import decode

    config = RunConfig(method="autoregressive", max_new_tokens=tokens, sampling=SamplingConfig(0.0), chat=True,
                       lean=True, stop_at_eos=False)
    sync(target.device)
    started = time.perf_counter()
    out = [t.token_id for r in decode(target, None, prompt_ids, config) for t in r.emitted]
    sync(target.device)
    return out, time.perf_counter() - started


def static_smoke(device="cuda", tokens: int = 64, dtypes=("bfloat16", "float32"), prompt: str = PROMPT) -> dict:
    """{"device", "torch", "rows": {dtype: {"tokens_per_s": {label: float}, "backend": {label: str},
    "same_tokens": bool (all three), "graphs_equal_eager": bool, "graphs_vs_dynamic": float (speed ratio),
    "capture_error": str | None}}} (see the module doc). In bfloat16 the dynamic and the static cache run
    differently shaped kernels, so their greedy tokens may part; in float32 they must not.
    The backend setting and SPECDEC_CUDA_GRAPHS are put back afterwards."""
    from ..lm import backend
    from ..lm.cuda_graphs import failure
    from ..lm.models import DEFAULT_TARGET, load_model_cached

    saved = os.environ.get(backend.GRAPHS_ENV)
    device = torch.device(device)
    result = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else str(device),
              "torch": torch.__version__, "tokens": tokens, "rows": {}}
    try:
        for dtype in dtypes:
            target = load_model_cached(DEFAULT_TARGET, device=device, dtype=dtype)
            ids = target.encode_prompt(prompt, True)
            speed, names, outputs = {}, {}, {}
            for label, (name, graphs) in BACKENDS.items():
                os.environ[backend.GRAPHS_ENV] = graphs
                backend.set_backend(name)
                backend._spare.clear()  # each backend starts from fresh caches (and captures its own graphs)
                _run(target, ids, WARMUP_TOKENS)
                outputs[label], seconds = _run(target, ids, tokens)
                speed[label] = round(len(outputs[label]) / seconds, 1)
                names[label] = backend.describe(target.model)["backend"]
            row = {"tokens_per_s": speed, "backend": names,
                   "same_tokens": outputs["dynamic"] == outputs["static-eager"] == outputs["static-graphs"],
                   "graphs_equal_eager": outputs["static-eager"] == outputs["static-graphs"],
                   "graphs_vs_dynamic": round(speed["static-graphs"] / speed["dynamic"], 2),
                   "capture_error": failure(target.model)}
            if not row["same_tokens"]:
                row["first_difference"] = {label: next((i for i, (a, b) in enumerate(zip(outputs["dynamic"], out))
                                                        if a != b), None) for label, out in outputs.items()}
            result["rows"][dtype] = row
    finally:
        backend.set_backend(None)
        backend._spare.clear()
        if saved is None:
            os.environ.pop(backend.GRAPHS_ENV, None)
        else:
            os.environ[backend.GRAPHS_ENV] = saved
    return result
