"""One benchmark run: warm-up, interleaved timing runs, quality runs, memory, then the tables.

Protocol:
  1. Warm-up: every variant runs `--warmup` times on the first prompt; discarded.
  2. Timing runs: for each repeat, for each prompt, every variant in turn (interleaved, and the
     order rotated per repeat, so machine drift hits all alike). Fixed token counts: the
     end-of-sequence token is ignored (as benchmarks usually do) and the lean trace is used.
     At a temperature, repeat r samples with seed `--seed` + r: a sampled text is one draw, and its
     speedup depends on the draw (how often the text repeats itself, how long the accepted runs are),
     so the repeats average over `--repeats` draws per prompt instead of timing one draw again. With
     `--seed-per-prompt`, prompt i of repeat r samples with `--seed` + r x prompts + i: every run draws
     on its own (with one seed per repeat, a file of near-identical prompts, such as a class's, draws
     near-identical texts, and a repeat is about one draw of the whole file).
  3. Quality runs (unless `--no-quality`): once per prompt and variant, stopping at
     end-of-sequence; the target perplexity of those outputs (raw target, temperature 1) and, for
     greedy decoding, whether the output equals our autoregressive output. Without them the
     greedy comparison uses the timing runs' tokens.
  4. Peak memory: every variant in its own child process (`memory.py`).
"""

from __future__ import annotations

import datetime as _dt
import os
import statistics
import sys
import time

from ...lm.backend import describe as describe_backend
from ...lm.devices import usable_cores
from ...drafters.hybrid import HYBRID
from ..energy import PROXY_LABEL, make_meter
from ...paths import display_path
from .hf_fast import CACHE_MARGIN_TOKENS
from .hf_peer import HF_DEFAULT_PROMPT_LOOKUP_TOKENS
from .memory import measure_memory
from .runs import run_variant
from .variants import RunStats, build_variants, parse_gammas, parse_trees
from .stats import category_table, finish_summary, goals, per_prompt_table, summarize_variant


def repeat_seed(seed: int, repeat: int, sampling) -> int:
    """The seed of timing repeat `repeat`: `seed` + repeat at a temperature (each repeat a new draw),
    `seed` when greedy (the seed draws nothing)."""
    return seed if sampling.greedy else seed + repeat


def prompt_seed(seed: int, repeat: int, prompt: int, prompts: int, sampling, per_prompt: bool) -> int:
    """The seed of prompt `prompt` (of `prompts` planned) in timing repeat `repeat`: with `per_prompt` at a
    temperature `seed` + repeat x prompts + prompt (a seed of its own per run), else the repeat's (`repeat_seed`)."""
    if per_prompt and not sampling.greedy:
        return seed + repeat * prompts + prompt
    return repeat_seed(seed, repeat, sampling)


def machine_info() -> dict:
    import platform
    from pathlib import Path

    import torch

    cpu = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for mod in ("transformers", "numpy", "plotly", "tokenizers"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - absent package: just not listed
            pass
    usable = usable_cores()
    return {
        "cpu": cpu or platform.processor() or "unknown",
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "versions": versions,
    }


def hybrids_with_peer(drafts: dict) -> set[str]:
    """Labels of drafters without HF assisted rows: hybrids whose model also drafts alone in this
    run (their HF peer would repeat the model drafter's HF rows), and feature drafts (HF's assisted
    generation drafts with a model of its own or by prompt lookup, not from the target's states)."""
    alone = {(d.model.spec, d.head is None) for d in drafts.values() if d.kind == "model" and d.model is not None}
    return {label for label, d in drafts.items() if d.feature is not None
            or (d.kind == HYBRID and (d.model.spec, d.head is None) in alone)}


def run_bench(args, target, drafts: dict, prompts: list, progress: bool = True, deadline: float | None = None,
              least: int = 1, clock=time.monotonic) -> dict:
    """Benchmark `args.methods` on `prompts` (`PromptRow`s or plain strings); `drafts` maps each
    drafter's label to its `pair.Draft`. `deadline` (a `clock()` time): no new prompt is started after
    it once `least` prompts are done; the run then covers the prompts done (all their repeats'
    timing runs, quality runs and tables), and says so in "cut_short"."""
    from tqdm import tqdm

    texts = [getattr(p, "prompt", p) for p in prompts]
    categories = [getattr(p, "category", "") for p in prompts]
    gammas = parse_gammas(args.gamma)
    hf_gamma = getattr(args, "hf_gamma", None)
    hf_gammas = None if hf_gamma is None else [] if hf_gamma == "none" else [
        g for g in parse_gammas(hf_gamma) if isinstance(g, int)]
    variants = build_variants(args.methods, gammas, args.hf, hf_gammas,
                              {label: d.model is not None for label, d in drafts.items()}, hybrids_with_peer(drafts),
                              parse_trees(getattr(args, "draft_tree", None)),
                              {label for label, d in drafts.items() if d.kind != "prompt-lookup"},
                              hf_compiled=getattr(args, "hf_compiled", False))
    ar_key = "autoregressive"
    quality_runs = getattr(args, "quality", True)
    meter = make_meter(target.device)
    meter_note = None if meter.available else meter.note
    encoded = [target.encode_prompt(p, args.chat) for p in texts]
    # the compiled HF peer's static cache: one size for the whole run (a new size would recompile)
    args.hf_cache_len = max((len(e) for e in encoded), default=0) + args.max_new_tokens + CACHE_MARGIN_TOKENS
    load_before = os.getloadavg()
    per_variant = args.warmup + args.repeats * len(texts) + (len(texts) if quality_runs else 0)
    n_runs = len(variants) * per_variant + (len(variants) if args.memory else 0)
    bar = tqdm(total=n_runs, desc="bench", file=sys.stderr, disable=not progress, dynamic_ncols=True)
    started = time.time()

    def run(v, ids, timing, with_meter=False):
        return run_variant(v, target, drafts.get(v.draft) if v.draft else None, ids, args, timing,
                           meter if with_meter and meter.available else None)

    for _ in range(args.warmup):
        for v in variants:
            bar.set_postfix_str(f"warm-up {v.key}")
            run(v, encoded[0], True)
            bar.update()
    timing: dict[str, dict[int, list[RunStats]]] = {v.key: {} for v in variants}
    cut_short = None
    base_seed = args.seed
    seeds = [repeat_seed(base_seed, r, args.sampling) for r in range(args.repeats)]
    per_prompt = bool(getattr(args, "seed_per_prompt", False)) and not args.sampling.greedy
    planned = len(encoded)
    for r in range(args.repeats):
        order = variants[r % len(variants):] + variants[: r % len(variants)]
        for pi, ids in enumerate(encoded):
            args.seed = prompt_seed(base_seed, r, pi, planned, args.sampling, per_prompt)
            if r == 0 and deadline is not None and pi >= max(1, least) and clock() > deadline:
                cut_short = {"prompts_done": pi, "prompts_planned": len(encoded),
                             "why": "its time share was spent"}
                texts, categories, encoded, prompts = texts[:pi], categories[:pi], encoded[:pi], prompts[:pi]
                break
            for v in order:
                bar.set_postfix_str(f"repeat {r + 1} prompt {pi + 1} {v.key}")
                timing[v.key].setdefault(r, []).append(run(v, ids, True, with_meter=True))
                bar.update()
    args.seed = base_seed
    quality: dict[str, list[RunStats]] = {v.key: [] for v in variants}
    if quality_runs:
        for ids in encoded:
            for v in variants:
                bar.set_postfix_str(f"quality {v.key}")
                quality[v.key].append(run(v, ids, False))
                bar.update()
    memory = {}
    for v in variants:
        if args.memory:
            bar.set_postfix_str(f"memory {v.key}")
            memory[v.key] = measure_memory(v, args, texts[0])
            bar.update()
        else:
            memory[v.key] = {"peak_rss_mb": None, "note": "memory measurement skipped (--no-memory)"}
    bar.close()
    ar_steps = [t for rep in timing[ar_key].values() for s in rep for t in s.verify_by_size.get(1, [])]
    t_target_step = statistics.median(ar_steps) if ar_steps else None
    rows = {}
    for v in variants:
        draft = drafts.get(v.draft) if v.draft else None
        row = summarize_variant(v, timing[v.key], quality[v.key], t_target_step, target.weight_bytes,
                                draft.weight_bytes if draft is not None else 0, meter_note)
        row["memory"] = memory[v.key]
        rows[v.key] = row
    top = finish_summary(rows, ar_key, args.hf, gammas, t_target_step)
    equal = None
    if args.sampling.greedy:
        compare = quality if quality_runs else {k: timing[k][0] for k in timing}
        ref = [s.token_ids for s in compare[ar_key]]
        equal = {k: f"{sum(a.token_ids == b for a, b in zip(q, ref))}/{len(ref)}" for k, q in compare.items()}
    first = next(iter(drafts.values()), None)
    result = {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_info(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "cut_short": cut_short,
        "bench_seconds": time.time() - started,
        "settings": {
            "prompts": len(texts), "prompts_file": display_path(args.prompts),
            "prompt_texts": [p[:80] for p in texts], "prompt_categories": categories, "methods": args.methods,
            "gammas": gammas, "max_new_tokens": args.max_new_tokens, "repeats": args.repeats, "warmup": args.warmup,
            "quality_runs": quality_runs,
            "temperature": args.sampling.temperature, "top_k": args.sampling.top_k, "top_p": args.sampling.top_p,
            "seed": args.seed, "chat": args.chat, "hf_peer": args.hf,
            "repeat_seeds": seeds, "seed_per_prompt": per_prompt,
            "hf_default_settings": "assistant model: its generation_config as shipped, unset fields from HF's global "
                                   "defaults (num_assistant_tokens 20, schedule constant, confidence threshold 0.4); "
                                   f"prompt lookup: prompt_lookup_num_tokens {HF_DEFAULT_PROMPT_LOOKUP_TOKENS}, "
                                   "max_matching_ngram_size default (2)",
            "hf_pinned_settings": "schedule constant, num_assistant_tokens = gamma, assistant_confidence_threshold 0; "
                                  "prompt lookup: prompt_lookup_num_tokens = gamma, max_matching_ngram_size 3",
        },
        "models": {"target": target.name,
                   "draft": ", ".join(d.name for d in drafts.values()) if drafts else None,
                   "drafts": {label: {"name": d.name, "kind": d.kind, "params": d.n_params,
                                      "weight_bytes": d.weight_bytes,
                                      "dtype": str(d.dtype) if d.dtype is not None else None}
                              for label, d in drafts.items()},
                   "target_params": target.n_params, "target_weight_bytes": target.weight_bytes,
                   "draft_params": first.n_params if first is not None else 0,
                   "draft_weight_bytes": first.weight_bytes if first is not None else 0,
                   "dtype": str(target.dtype),
                   "draft_dtype": str(first.dtype) if first is not None and first.dtype is not None else None,
                   "device": str(target.device),
                   # the KV-cache path of the target's runs (lm/backend.py) and why it was refused, if it was
                   **describe_backend(target.model)},
        "t_target_step_ms": 1000 * t_target_step if t_target_step else None,
        "energy": {"meter": getattr(meter, "name", None), "available": meter.available,
                   "note": "measured with " + meter.name if meter.available else meter.note,
                   "proxy_label": PROXY_LABEL},
        **top,
        "methods": rows,
        "categories": category_table(timing, categories, ar_key, "hf-generate" if args.hf else None),
        "per_prompt": per_prompt_table(timing, prompts, ar_key),
        "greedy_equal_to_autoregressive": equal,
        "greedy_equal_precision": str(target.dtype).removeprefix("torch.") if equal is not None else None,
    }
    result["goals"] = goals(rows, top)
    return result
