"""Hardware-aware tree size (`002_*`, section 4.2): Speedup(n) = T(n) / L(n).

  L(n)  forward latency of one PPD step with a tree of size n on THIS device (measured, cached
        per device and model in `<cache dir>/ppd/tuning.json`);
  T(n)  tokens per step (accepted candidates + the one target token) at tree size n, from
        validation prompts (the paper's tau(n); not MJSD's tau);
  n*    = argmax_n T(n) / L(n), the default tree size of `--method ppd` on this device once tuned.

`python -m decoding.ppd tune` measures both and stores n* (see decoding/ppd/__main__.py).
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path

import torch

from ..models import cache_dir
from .engine import compact_cache, tree_forward
from .tree import dynamic_trees, tree_buffers


def device_key(target) -> str:
    """What the target's L(n) depends on: its device (CPU: architecture and thread count) and its
    weights' dtype (a bfloat16 target has a different latency curve from a float32 one)."""
    device = torch.device(target.device)
    if device.type == "cuda":
        key = f"cuda:{torch.cuda.get_device_name(device)}"
    else:
        key = f"{device.type}:{platform.machine()}:{platform.processor() or 'cpu'}:{torch.get_num_threads()}threads"
    return f"{key}:{str(target.dtype).removeprefix('torch.')}"


def tuning_path() -> Path:
    return cache_dir() / "ppd" / "tuning.json"


def _read() -> dict:
    path = tuning_path()
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def save_tuning(target, entry: dict) -> Path:
    data = _read()
    data.setdefault(device_key(target), {})[target.name] = entry
    path = tuning_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)
    return path


def cached_tuning(target) -> dict | None:
    return _read().get(device_key(target), {}).get(target.name)


def cached_choice(target, embeddings_source: str | None = None) -> int | None:
    """The tuned tree size for this device and model (None when not tuned, or tuned with other
    prompt embeddings)."""
    entry = cached_tuning(target)
    if not entry or "tree_size" not in entry:
        return None
    if embeddings_source is not None and entry.get("embeddings") not in (None, embeddings_source):
        return None
    return int(entry["tree_size"])


@torch.inference_mode()
def measure_latency(target, prompts, sizes, context: int = 64, reps: int = 11) -> dict[int, float]:
    """Median seconds of one PPD forward pass (state-m tree of each size) over a cached context of
    `context` tokens; the cache is compacted back after every pass.

    The sizes are timed round-robin (one pass of each size per round, the starting size rotating),
    so a burst of noise on a shared machine lands on every size instead of on the one being timed;
    a size-by-size loop let one noisy stretch flip n* between runs."""
    from ..cached_lm import CachedLM

    lm = CachedLM(target.model, target.device, target.vocab_size)
    ids = [int(target.tokenizer.eos_token_id or 0)] * context
    lm.forward(ids[:-1])
    sizes = [int(n) for n in sizes]
    passes = {}
    for n in sizes:
        buffers = tree_buffers(dynamic_trees(n, prompts.m, prompts.ept).trees[prompts.m], prefix_length=context - 1,
                               ept=prompts.ept)
        passes[n] = (buffers, [ids[-1]] * (1 + buffers.n_candidates))

    def one_pass(n: int) -> float:
        buffers, tree_ids = passes[n]
        if target.device.type == "cuda":
            torch.cuda.synchronize(target.device)
        t0 = time.perf_counter()
        tree_forward(target.model, lm.cache, context - 1, [], tree_ids, buffers, prompts, target.device,
                     target.vocab_size)
        if target.device.type == "cuda":
            torch.cuda.synchronize(target.device)
        elapsed = time.perf_counter() - t0
        compact_cache(lm.cache, context - 1, [])
        return elapsed

    for n in sizes:  # warm-up pass of every size, not timed
        one_pass(n)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for rep in range(max(1, reps)):
        start = rep % len(sizes)
        for n in sizes[start:] + sizes[:start]:
            times[n].append(one_pass(n))
    return {n: statistics.median(times[n]) for n in sizes}


def tokens_per_step(target, prompt_ids_list, sizes, max_new_tokens: int = 32, embeddings=None,
                    acceptance=None) -> tuple[dict[int, float], list]:
    """T(n): emitted tokens / PPD steps (prefill step excluded) over greedy runs on the prompts.
    Also returns the records of the largest size (for the acceptance table)."""
    from ..strategies.base import RunConfig
    from ..strategies.ppd import ppd
    from ..warp import SamplingConfig

    out, records_last = {}, []
    for n in sizes:
        tokens = steps = 0
        runs = []
        for ids in prompt_ids_list:
            config = RunConfig(method="ppd", max_new_tokens=max_new_tokens, sampling=SamplingConfig(0.0),
                               lean=True, stop_at_eos=True,
                               extra={"tree_size": n, "ppd_embeddings": embeddings, "ppd_acceptance": acceptance})
            records = list(ppd(target, None, ids, config))
            runs.append(records)
            for r in records[1:]:  # the first step is the prefill (no candidates yet)
                tokens += len(r.emitted)
                steps += 1
        out[int(n)] = tokens / steps if steps else 1.0
        records_last = runs
    return out, records_last


def acceptance_table(runs, m: int, ranks: int = 10) -> list[list[float]]:
    """P(rank-r prompt guess at distance d is the token actually emitted there), from PPD runs'
    records (extra.ppd.next_predictions of each step vs the tokens emitted after its last one)."""
    hits = [[0] * ranks for _ in range(m)]
    total = [0] * m
    for records in runs:
        tokens = [t.token_id for r in records for t in r.emitted]
        end = 0
        for r in records:
            end += len(r.emitted)  # tokens[end - 1] is this step's target token (next root)
            for d, ids in enumerate(r.extra["ppd"]["next_predictions"][:m]):
                pos = end + d  # distance d + 1 beyond the last accepted node = d after the root
                if pos >= len(tokens):
                    break
                total[d] += 1
                if tokens[pos] in ids[:ranks]:
                    hits[d][ids.index(tokens[pos])] += 1
    return [[h / total[d] if total[d] else 0.0 for h in hits[d]] for d in range(m)]


def choose_tree_size(latency: dict[int, float], tokens: dict[int, float]) -> tuple[int, dict[int, float]]:
    """n* = argmax T(n) / L(n) over the sizes measured for both; returns n* and the speedup curve
    normalized to the smallest size's latency (a relative Speedup(n))."""
    sizes = sorted(set(latency) & set(tokens))
    if not sizes:
        raise ValueError("no tree size has both a latency and a tokens-per-step measurement")
    base = latency[sizes[0]]
    curve = {n: tokens[n] / latency[n] * base for n in sizes}
    return max(sizes, key=lambda n: (curve[n], -n)), curve


def tuning_curves(target, m: int = 3, ept: int = 1) -> dict | None:
    """What the app plots: the tuned L(n) (ms), T(n) and relative Speedup(n) on this device, plus
    the dynamic-tree model's expected tokens per step at the same sizes (Prop. 4.4 with the
    measured acceptance table). None when this device/model has not been tuned."""
    entry = cached_tuning(target)
    if not entry or not all(k in entry for k in ("latency_s", "tokens_per_step", "speedup_rel", "tree_size")):
        return None
    sizes = sorted(int(n) for n in entry["latency_s"])
    get = lambda d, n: d.get(str(n), d.get(n))  # noqa: E731  JSON keys are strings
    return {
        "n": sizes,
        "latency_ms": [1000 * get(entry["latency_s"], n) for n in sizes],
        "tokens_per_step": [get(entry["tokens_per_step"], n) for n in sizes],
        "speedup_rel": [get(entry["speedup_rel"], n) for n in sizes],
        "model_tokens_per_step": [dynamic_trees(n, m, ept, entry.get("acceptance")).expected_tokens_per_step
                                  if n >= ept else None for n in sizes],
        "chosen": int(entry["tree_size"]),
        "embeddings": entry.get("embeddings"),
        "device": device_key(target),
    }
