"""Peak memory of one variant, each in its own child process (so one variant's allocations never
count against another's)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import torch

from ...paths import REPO
from ..procstat import status_kb
from ...rules.warp import SamplingConfig
from .runs import run_variant
from .variants import Variant


def measure_memory(variant: Variant, args, prompt: str, timeout: float = 600) -> dict:
    """Peak resident memory of one variant run in a fresh child process (`python -m decoding.eval.bench
    --memory-child SPEC`): the models loaded there, then one timing run."""
    drafts = getattr(args, "draft_specs", None) or {}
    draft_spec = drafts.get(variant.draft, getattr(args, "draft_spec", None)) if variant.drafts else None
    spec = {
        "variant": asdict(variant), "target": args.target, "draft": draft_spec, "device": args.device,
        "dtype": args.dtype, "draft_dtype": getattr(args, "draft_dtype", None), "prompt": prompt,
        "max_new_tokens": args.max_new_tokens, "chat": args.chat,
        "temperature": args.sampling.temperature, "top_k": args.sampling.top_k, "top_p": args.sampling.top_p,
        "seed": args.seed, "threads": torch.get_num_threads(),
    }
    try:
        proc = subprocess.run([sys.executable, "-m", "decoding.eval.bench", "--memory-child", json.dumps(spec)],
                              capture_output=True, text=True, timeout=timeout, cwd=str(REPO))
        line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        if proc.returncode != 0 or not line.startswith("{"):
            return {"peak_rss_mb": None, "note": f"child failed: {proc.stderr.strip()[-300:]}"}
        return json.loads(line)
    except subprocess.TimeoutExpired:
        return {"peak_rss_mb": None, "note": "child timed out"}


def memory_child(spec_json: str) -> int:
    from types import SimpleNamespace

    from ...run.pair import load_pair

    spec = json.loads(spec_json)
    torch.set_num_threads(spec["threads"])
    variant = Variant(**spec["variant"])
    target, draft = load_pair(spec["target"], spec["draft"], device=spec["device"], dtype=spec["dtype"],
                              draft_dtype=spec.get("draft_dtype"), need_draft=variant.drafts)
    loaded_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    reset = _reset_peak_rss()
    rss_before_kb = status_kb("VmRSS")
    args = SimpleNamespace(max_new_tokens=spec["max_new_tokens"], chat=spec["chat"], seed=spec["seed"],
                           sampling=SamplingConfig(spec["temperature"], spec["top_k"], spec["top_p"]))
    prompt_ids = target.encode_prompt(spec["prompt"], spec["chat"])
    run_variant(variant, target, draft, prompt_ids, args, timing=True)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run_peak_kb = status_kb("VmHWM") if reset else None
    out = {"peak_rss_mb": peak_kb / 1024, "after_load_peak_rss_mb": loaded_kb / 1024,
           "run_peak_rss_mb": None if run_peak_kb is None else run_peak_kb / 1024,
           "run_increase_mb": None if run_peak_kb is None or rss_before_kb is None
           else (run_peak_kb - rss_before_kb) / 1024,
           "note": "child process: models loaded, then one timing run on the first prompt; peak_rss_mb = "
                   "ru_maxrss over the whole child; run_peak_rss_mb = VmHWM after the peak mark was reset post-load "
                   "(/proc/self/clear_refs); run_increase_mb = that peak minus RSS before the run (memory-mapped "
                   "weights count once the first forward pass touches them)"}
    print(json.dumps(out))
    return 0


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux >= 4.0), so VmHWM then covers the run only."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False
