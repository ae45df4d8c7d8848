"""`python -m decoding bench`: speed, acceptance, quality, memory and energy of the decoding methods,
with Hugging Face transformers' own `generate()` and assisted generation measured in the same run.

Protocol (issue 7):
  1. Warm-up: every variant runs `--warmup` times on the first prompt; discarded.
  2. Timing runs: for each repeat, for each prompt, every variant in turn (interleaved, and the
     order rotated per repeat, so machine drift hits all alike). Fixed token counts: the
     end-of-sequence token is ignored (as benchmarks usually do) and the lean trace is used.
  3. Quality runs: once per prompt and variant, stopping at end-of-sequence; the target
     perplexity of those outputs (raw target, temperature 1) and, for greedy, whether the output
     equals our autoregressive output.
  4. Peak memory: every variant in its own child process (resource maxrss after loading the
     models and after one run).

Figures per variant: tokens/s (median and range over repeats of total tokens / total time),
speedup = (total tokens / total time) over the same for our autoregressive run in this run,
mean accepted length (accepted draft tokens per iteration with a draft, correction/bonus
excluded), tokens per target call (bonus/correction included), measured alpha (mean draft
overlap sum_x min(p, q) over the draft positions of the records) and c (draft step time per
drafted token / autoregressive target step time, both from this run), the speedup predicted by
Theorem 3.8 from those (`theory.improvement_factor`), by the measured cost model
(`theory.measured_improvement` with the measured verify time of gamma + 1 tokens) and by the
trace cost model (each iteration's k draft steps + the measured verify time of its k + 1 tokens:
what the time would be without any overhead outside the two models), target perplexity, peak
memory, energy (meter or null with the reason) and the weight-bytes-per-token proxy.

Variants: our methods (`--methods`), every drafting method at each `--gamma` entry (numbers,
`auto`, `heuristic`; see `gamma_policy.py`), and with `--hf` (default) HF `generate()`, HF
assisted generation at its default draft-length settings, and HF assisted generation pinned to
each numeric gamma (schedule "constant", num_assistant_tokens = gamma, confidence threshold
off; for prompt lookup: prompt_lookup_num_tokens = gamma and our n-gram size 3).
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from . import theory
from .drafters import PROMPT_LOOKUP
from .energy import PROXY_LABEL, energy_per_token, make_meter, weight_bytes_per_token
from .warp import SamplingConfig

DRAFTING = ("speculative", "mentored", "mjsd")
ADAPTIVE = {"speculative", "mentored"}  # chain_loop methods: accept gamma schedules
HF_DEFAULT_PROMPT_LOOKUP_TOKENS = 10  # the value HF's docs use; generate() has no default for it


@dataclass
class Variant:
    key: str  # unique name in the tables
    engine: str  # "ours" | "hf"
    method: str  # ours: a METHODS key; hf: "generate" | "assisted"
    gamma: int | None = None  # None: HF default settings / no drafting
    schedule: str = "fixed"  # fixed | auto | heuristic | hf-default

    @property
    def drafts(self) -> bool:
        return self.method in DRAFTING or self.method == "assisted"


@dataclass
class RunStats:
    """One timing or quality run of one variant on one prompt."""

    tokens: int = 0
    seconds: float = 0.0
    token_ids: list = field(default_factory=list)
    target_calls: int = 0
    draft_calls: int = 0
    iterations: int = 0
    drafted_iterations: int = 0
    accepted: int = 0
    overlap_sum: float = 0.0
    overlap_n: int = 0
    draft_seconds: float = 0.0
    drafted_tokens: int = 0
    full_drafts: int = 0  # iterations whose draft had the asked gamma tokens
    gammas: list = field(default_factory=list)
    verify_by_size: dict = field(default_factory=dict)  # fed tokens -> [seconds] (prefill excluded)
    trace_sizes: list = field(default_factory=list)  # per non-prefill iteration: (k drafted, fed)
    prefill_seconds: float = 0.0
    joules: float | None = None
    logprob_sum: float | None = None
    logprob_n: int = 0


# ------------------------------------------------------------------------------------------ setup
def parse_gammas(text: str) -> list:
    out = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if part in ("auto", "heuristic"):
            out.append(part)
            continue
        try:
            g = int(part)
        except ValueError:
            raise ValueError(f"--gamma entries are whole numbers, 'auto' or 'heuristic' (got {part!r})") from None
        if not 1 <= g <= 64:
            raise ValueError(f"gamma must be from 1 to 64 (got {g})")
        out.append(g)
    if not out:
        raise ValueError("--gamma is empty")
    return out


def build_variants(methods: list[str], gammas: list, hf: bool, hf_gammas: list | None = None) -> list[Variant]:
    from .strategies import METHODS

    variants: list[Variant] = []
    numeric = [g for g in gammas if isinstance(g, int)]
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"unknown method {m!r}; choose from: {', '.join(METHODS)}")
        if m not in DRAFTING:
            variants.append(Variant(m, "ours", m))
            continue
        for g in gammas:
            if isinstance(g, int):
                variants.append(Variant(f"{m}-g{g}", "ours", m, g))
            elif m in ADAPTIVE:
                variants.append(Variant(f"{m}-{g}", "ours", m, numeric[0] if numeric else 4, g))
    if "autoregressive" not in methods:
        variants.insert(0, Variant("autoregressive", "ours", "autoregressive"))
    if hf:
        variants.append(Variant("hf-generate", "hf", "generate"))
        variants.append(Variant("hf-assisted-default", "hf", "assisted", None, "hf-default"))
        for g in (numeric if hf_gammas is None else hf_gammas):
            variants.append(Variant(f"hf-assisted-g{g}", "hf", "assisted", g))
    return variants


def read_prompts(path: str | Path) -> list[str]:
    from .eval_draft import read_prompts as _read

    return _read(path)


def spread(items: list, n: int) -> list:
    """n items spread evenly over `items` (first one included), in file order."""
    return [items[(i * len(items)) // n] for i in range(n)]


def machine_info() -> dict:
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
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu": cpu or platform.processor() or "unknown",
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "versions": versions,
    }


# ------------------------------------------------------------------------------------------ runs
def run_ours(variant: Variant, target, draft, prompt_ids: list[int], args, timing: bool, meter=None) -> RunStats:
    from .runner import decode
    from .strategies import RunConfig

    extra = {"gamma_schedule": variant.schedule} if variant.schedule in ("auto", "heuristic") else {}
    config = RunConfig(
        method=variant.method,
        max_new_tokens=args.max_new_tokens,
        sampling=args.sampling,
        gamma=variant.gamma or 4,
        seed=args.seed,
        chat=args.chat,
        stop_at_eos=not timing,
        lean=True,
        extra=extra,
    )
    stats = RunStats()
    gen = decode(target, draft if draft is not None else PROMPT_LOOKUP, prompt_ids, config,
                 meter if timing else None)
    t0 = time.perf_counter()
    records = list(gen)
    stats.seconds = time.perf_counter() - t0
    last = records[-1]
    stats.token_ids = [t.token_id for r in records for t in r.emitted]
    stats.tokens = len(stats.token_ids)
    stats.target_calls = last.target_calls
    stats.draft_calls = last.draft_calls
    stats.iterations = len(records)
    stats.joules = last.energy_joules
    lp_sum, lp_n = 0.0, 0
    for i, r in enumerate(records):
        lps = r.extra.get("target_logprobs")
        if lps is not None and lp_sum is not None:
            lp_sum += sum(lps)
            lp_n += len(lps)
        elif r.emitted:
            lp_sum = None
        if variant.method == "autoregressive":
            if i == 0:
                stats.prefill_seconds = r.timings.verify
            else:
                stats.verify_by_size.setdefault(1, []).append(r.timings.verify)
            continue
        k = len(r.draft)
        stats.gammas.append(r.gamma)
        if k:
            stats.drafted_iterations += 1
            stats.accepted += r.accepted_length
            stats.drafted_tokens += k
            stats.draft_seconds += r.timings.draft
            for d in r.draft:
                stats.overlap_sum += d.overlap
                stats.overlap_n += 1
            if k == r.gamma:
                stats.full_drafts += 1
        if i == 0:
            stats.prefill_seconds = r.timings.verify + r.timings.draft
        else:
            stats.verify_by_size.setdefault(k + 1, []).append(r.timings.verify)
            stats.trace_sizes.append(k)
    if lp_sum is not None and lp_n:
        stats.logprob_sum, stats.logprob_n = lp_sum, lp_n
    return stats


class _CallCounter:
    """Counts forward calls of a module (HF's loop gives us no counters)."""

    def __init__(self, module):
        self.calls = 0
        self.handle = module.register_forward_pre_hook(self._hook)

    def _hook(self, *_):
        self.calls += 1

    def close(self):
        self.handle.remove()


def hf_generation_config(variant: Variant, target, args, timing: bool, prompt_lookup: bool):
    from transformers import GenerationConfig

    s: SamplingConfig = args.sampling
    eos = target.eos_token_ids(args.chat)
    kwargs = dict(
        max_new_tokens=args.max_new_tokens,
        do_sample=not s.greedy,
        num_beams=1,
        pad_token_id=eos[0] if eos else 0,
        eos_token_id=[] if timing else eos,  # [] never stops early (None means: the model's eos)
    )
    if not s.greedy:
        kwargs.update(temperature=s.temperature, top_k=s.top_k or None, top_p=s.top_p)
    if variant.method == "assisted" and prompt_lookup:
        if variant.gamma is None:
            kwargs["prompt_lookup_num_tokens"] = HF_DEFAULT_PROMPT_LOOKUP_TOKENS
        else:
            kwargs["prompt_lookup_num_tokens"] = variant.gamma
            kwargs["max_matching_ngram_size"] = 3  # our PromptLookupDrafter's largest n-gram
    return GenerationConfig(**kwargs)


@torch.inference_mode()
def run_hf(variant: Variant, target, draft, prompt_ids: list[int], args, timing: bool, meter=None) -> RunStats:
    prompt_lookup = draft is None
    config = hf_generation_config(variant, target, args, timing, prompt_lookup)
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=target.device)
    kwargs = {"attention_mask": torch.ones_like(ids), "generation_config": config}
    saved = None
    draft_counter = None
    if variant.method == "assisted" and not prompt_lookup:
        kwargs["assistant_model"] = draft.model
        saved = draft.model.generation_config
        gc = copy.deepcopy(saved)
        if variant.gamma is not None:  # pinned: constant gamma, no early stop on confidence
            gc.num_assistant_tokens_schedule = "constant"
            gc.num_assistant_tokens = variant.gamma
            gc.assistant_confidence_threshold = 0.0
        draft.model.generation_config = gc
        draft_counter = _CallCounter(draft.model)
    counter = _CallCounter(target.model)
    if not args.sampling.greedy:
        torch.manual_seed(args.seed)  # HF samples from the global RNG
    try:
        if timing and meter is not None:
            meter.begin()
        t0 = time.perf_counter()
        out = target.model.generate(ids, **kwargs)
        seconds = time.perf_counter() - t0
        joules = meter.read().joules if timing and meter is not None else None
    finally:
        counter.close()
        if draft_counter is not None:
            draft_counter.close()
        if saved is not None:
            draft.model.generation_config = saved
    new = out[0, len(prompt_ids):].tolist()
    if not timing:
        eos = set(target.eos_token_ids(args.chat))
        for i, t in enumerate(new):
            if t in eos:
                new = new[: i + 1]
                break
    stats = RunStats(tokens=len(new), seconds=seconds, token_ids=new, target_calls=counter.calls,
                     draft_calls=draft_counter.calls if draft_counter else 0, joules=joules)
    if not timing and new:
        stats.logprob_sum, stats.logprob_n = _score(target, prompt_ids, new), len(new)
    return stats


@torch.inference_mode()
def _score(target, prompt_ids: list[int], new: list[int]) -> float:
    """Sum of log p_raw (temperature 1, unwarped) of `new` after `prompt_ids`, teacher-forced."""
    ids = torch.tensor([prompt_ids + new], device=target.device)
    logits = target.model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
    lp = logits.log_softmax(-1)
    return float(lp[torch.arange(len(new)), torch.tensor(new)].sum())


def run_variant(variant, target, draft, prompt_ids, args, timing, meter=None) -> RunStats:
    fn = run_hf if variant.engine == "hf" else run_ours
    return fn(variant, target, draft, prompt_ids, args, timing, meter)


# ------------------------------------------------------------------------------------------ memory
def measure_memory(variant: Variant, args, prompt: str, timeout: float = 600) -> dict:
    """Peak resident memory of one variant run in a fresh child process."""
    spec = {
        "variant": asdict(variant), "target": args.target, "draft": args.draft_spec, "device": args.device,
        "dtype": args.dtype, "draft_dtype": getattr(args, "draft_dtype", None), "prompt": prompt,
        "max_new_tokens": args.max_new_tokens, "chat": args.chat,
        "temperature": args.sampling.temperature, "top_k": args.sampling.top_k, "top_p": args.sampling.top_p,
        "seed": args.seed, "threads": torch.get_num_threads(),
    }
    try:
        proc = subprocess.run([sys.executable, "-m", "decoding.bench", "--memory-child", json.dumps(spec)],
                              capture_output=True, text=True, timeout=timeout,
                              cwd=str(Path(__file__).resolve().parents[1]))
        line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        if proc.returncode != 0 or not line.startswith("{"):
            return {"peak_rss_mb": None, "note": f"child failed: {proc.stderr.strip()[-300:]}"}
        return json.loads(line)
    except subprocess.TimeoutExpired:
        return {"peak_rss_mb": None, "note": "child timed out"}


def _memory_child(spec_json: str) -> int:
    from types import SimpleNamespace

    from .models import load_draft, load_model

    spec = json.loads(spec_json)
    torch.set_num_threads(spec["threads"])
    variant = Variant(**spec["variant"])
    target = load_model(spec["target"], device=spec["device"], dtype=spec["dtype"])
    draft = None
    if variant.drafts and spec["draft"] != PROMPT_LOOKUP:
        draft = load_draft(spec["draft"], spec["device"], spec["dtype"], spec.get("draft_dtype"))
    loaded_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    reset = _reset_peak_rss()
    rss_before_kb = _proc_status_kb("VmRSS")
    args = SimpleNamespace(max_new_tokens=spec["max_new_tokens"], chat=spec["chat"], seed=spec["seed"],
                           sampling=SamplingConfig(spec["temperature"], spec["top_k"], spec["top_p"]))
    prompt_ids = target.encode_prompt(spec["prompt"], spec["chat"])
    run_variant(variant, target, draft, prompt_ids, args, timing=True)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run_peak_kb = _proc_status_kb("VmHWM") if reset else None
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


def _proc_status_kb(field_name: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux >= 4.0), so VmHWM then covers the run only."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


# ------------------------------------------------------------------------------------------ summary
def _median(xs):
    return statistics.median(xs) if xs else None


def summarize_variant(variant: Variant, timing: dict, quality: list[RunStats], ar_key: str, t_target_step,
                      target_bytes: int, draft_bytes: int, repeats: int, meter_note: str | None) -> dict:
    runs = [s for rep in timing.values() for s in rep]
    tokens = sum(s.tokens for s in runs)
    seconds = sum(s.seconds for s in runs)
    per_rep = [sum(s.tokens for s in timing[r]) / sum(s.seconds for s in timing[r]) for r in sorted(timing)]
    target_calls = sum(s.target_calls for s in runs)
    draft_calls = sum(s.draft_calls for s in runs)
    out = {
        "variant": variant.key, "engine": variant.engine, "method": variant.method, "gamma": variant.gamma,
        "schedule": variant.schedule, "runs": len(runs), "tokens": tokens, "seconds": seconds,
        "tokens_per_second": tokens / seconds if seconds else None,
        "tokens_per_second_median": _median(per_rep),
        "tokens_per_second_min": min(per_rep) if per_rep else None,
        "tokens_per_second_max": max(per_rep) if per_rep else None,
        "tokens_per_second_by_repeat": per_rep,
        "tokens_per_target_call": tokens / target_calls if target_calls else None,
        "target_calls": target_calls, "draft_calls": draft_calls,
    }
    drafted_iters = sum(s.drafted_iterations for s in runs)
    out["mean_accepted"] = (sum(s.accepted for s in runs) / drafted_iters) if drafted_iters else None
    overlap_n = sum(s.overlap_n for s in runs)
    alpha = sum(s.overlap_sum for s in runs) / overlap_n if overlap_n else None
    out["alpha"] = alpha
    drafted_tokens = sum(s.drafted_tokens for s in runs)
    t_draft = sum(s.draft_seconds for s in runs) / drafted_tokens if drafted_tokens else None
    out["t_draft_step_ms"] = 1000 * t_draft if t_draft is not None else None
    out["c"] = t_draft / t_target_step if t_draft is not None and t_target_step else None
    iters = sum(s.iterations for s in runs)
    out["draft_coverage"] = drafted_iters / iters if iters and variant.engine == "ours" and variant.drafts else None
    gammas = [g for s in runs for g in s.gammas]
    out["mean_gamma_asked"] = statistics.fmean(gammas) if gammas else None
    # verify-time medians by fed size (this variant's own passes; prefill excluded)
    sizes: dict[int, list] = {}
    for s in runs:
        for n, ts in s.verify_by_size.items():
            sizes.setdefault(int(n), []).extend(ts)
    verify_ms = {n: 1000 * statistics.median(ts) for n, ts in sorted(sizes.items())}
    out["verify_ms_by_tokens"] = {str(n): v for n, v in verify_ms.items()}
    # predictions
    out["theory_speedup"] = out["cost_model_speedup"] = out["theory_speedup_at_optimal_gamma"] = None
    out["cost_model_trace_speedup"] = None
    if variant.engine == "ours" and variant.drafts and alpha is not None and t_draft is not None and t_target_step:
        c = out["c"]
        a = min(max(alpha, 0.0), 1.0)
        g_opt = theory.optimal_gamma(a, c)
        out["theory_optimal_gamma"] = g_opt
        out["theory_speedup_at_optimal_gamma"] = theory.improvement_factor(a, g_opt, c)
        if variant.schedule == "fixed":
            out["theory_speedup"] = theory.improvement_factor(a, variant.gamma, c)
            t_v = verify_ms.get(variant.gamma + 1)
            if t_v is not None:
                out["cost_model_speedup"] = theory.measured_improvement(a, variant.gamma, t_draft, t_target_step,
                                                                        t_v / 1000)
        # trace cost model: each iteration's own draft steps + the median verify time of its size
        model_time = 0.0
        ok = True
        for s in runs:
            model_time += s.prefill_seconds
            for k in s.trace_sizes:
                t_v = verify_ms.get(k + 1)
                if t_v is None:
                    ok = False
                    break
                model_time += k * t_draft + t_v / 1000
        if ok and model_time > 0:
            out["_trace_model_tokens_per_second"] = tokens / model_time
    # quality
    lp_n = sum(s.logprob_n for s in quality if s.logprob_sum is not None)
    lp_sum = sum(s.logprob_sum for s in quality if s.logprob_sum is not None)
    out["target_perplexity"] = math.exp(-lp_sum / lp_n) if lp_n and all(s.logprob_sum is not None for s in quality) else None
    out["quality_tokens"] = sum(s.tokens for s in quality)
    # energy and proxy
    joules = [s.joules for s in runs]
    if joules and all(j is not None for j in joules):
        out["energy_joules"] = sum(joules)
        out["energy_joules_per_token"] = energy_per_token(sum(joules), tokens, seconds)
        out["energy_note"] = "measured" if out["energy_joules_per_token"] is not None else "window under 1 s"
    else:
        out["energy_joules"] = out["energy_joules_per_token"] = None
        out["energy_note"] = meter_note or "no energy meter"
    out["weight_bytes_per_token_proxy"] = weight_bytes_per_token(target_calls, target_bytes, draft_calls,
                                                                 draft_bytes if variant.drafts else 0, tokens)
    return out


def finish_summary(rows: dict, ar_key: str, hf: bool, gammas: list, t_target_step) -> dict:
    ar = rows[ar_key]
    ar_tps = ar["tokens_per_second"]
    ar_reps = ar["tokens_per_second_by_repeat"]
    for row in rows.values():
        row["speedup"] = row["tokens_per_second"] / ar_tps if ar_tps and row["tokens_per_second"] else None
        ratios = [a / b for a, b in zip(row["tokens_per_second_by_repeat"], ar_reps)]
        row["speedup_min"] = min(ratios) if ratios else None
        row["speedup_max"] = max(ratios) if ratios else None
        row["speedup_median"] = _median(ratios)
        trace_tps = row.pop("_trace_model_tokens_per_second", None)
        if trace_tps is not None and t_target_step:
            # relative to the pure-model autoregressive time (one step per token)
            row["cost_model_trace_speedup"] = trace_tps * t_target_step
        row["slower_than_autoregressive"] = bool(row["speedup"] is not None and row["speedup"] < 1.0)
    out = {"speedup": {k: r["speedup"] for k, r in rows.items()}}
    if hf and "hf-generate" in rows:
        hf_gen = rows["hf-generate"]["tokens_per_second"]
        out["hf_generate_tokens_per_second"] = hf_gen
        for row in rows.values():
            row["speedup_vs_hf_generate"] = row["tokens_per_second"] / hf_gen if hf_gen else None
        d = rows.get("hf-assisted-default")
        out["hf_assisted_speedup"] = d["speedup_vs_hf_generate"] if d else None
        out["hf_assisted_speedup_pinned"] = {str(g): rows[f"hf-assisted-g{g}"]["speedup_vs_hf_generate"]
                                             for g in gammas if isinstance(g, int) and f"hf-assisted-g{g}" in rows}
        ratios = {"autoregressive_vs_hf_generate": ar_tps / hf_gen if hf_gen else None}
        for g in gammas:
            if isinstance(g, int) and f"speculative-g{g}" in rows and f"hf-assisted-g{g}" in rows:
                ours, theirs = rows[f"speculative-g{g}"]["speedup"], rows[f"hf-assisted-g{g}"]["speedup_vs_hf_generate"]
                ratios[f"speculative-g{g}_speedup_vs_hf_assisted-g{g}_speedup"] = ours / theirs if theirs else None
                if out["hf_assisted_speedup"]:
                    ratios[f"speculative-g{g}_speedup_vs_hf_assisted-default_speedup"] = ours / out["hf_assisted_speedup"]
        out["ratios"] = ratios
    return out


def goals(rows: dict, top: dict) -> dict:
    """The issue's goals, checked on this run's numbers (None when a figure is missing)."""
    g: dict = {}
    r = top.get("ratios", {}).get("autoregressive_vs_hf_generate")
    g["autoregressive_at_least_0.95x_hf_generate"] = {"value": r, "met": None if r is None else r >= 0.95}
    fixed = {k: v for k, v in rows.items() if v["engine"] == "ours" and v["method"] == "speculative" and v["schedule"] == "fixed"}
    if fixed:
        best_key = max(fixed, key=lambda k: fixed[k]["speedup"] or 0)
        best = fixed[best_key]["speedup"]
        # each side's speedup over its own baseline (ours over our AR, HF's over HF generate());
        # best against best, any schedule (HF's default is itself adaptive), and gamma for gamma
        hf = {k: v.get("speedup_vs_hf_generate") for k, v in rows.items() if k.startswith("hf-assisted")}
        hf = {k: v for k, v in hf.items() if v}
        ours = {k: v["speedup"] for k, v in rows.items()
                if v["engine"] == "ours" and v["method"] == "speculative" and v["speedup"]}
        entry: dict = {"ours_best_fixed": best_key, "ours_fixed": best}
        if hf and ours:
            o_key, h_key = max(ours, key=ours.get), max(hf, key=hf.get)
            entry.update({"ours_best": o_key, "ours": ours[o_key], "hf_best_assisted": h_key, "hf": hf[h_key],
                          "ratio": ours[o_key] / hf[h_key], "met": ours[o_key] >= hf[h_key],
                          "aim_1.2x_met": ours[o_key] >= 1.2 * hf[h_key]})
            same = {}
            for k, v in hf.items():
                mine = f"speculative-{k.removeprefix('hf-assisted-')}" if k != "hf-assisted-default" else "speculative-auto"
                if mine in ours:
                    same[f"{mine} vs {k}"] = ours[mine] / v
            entry["pairs"] = same
        else:
            entry["met"] = None
        g["speculative_speedup_at_least_hf_assisted"] = entry
        gaps = {}
        for k, v in fixed.items():
            if v.get("cost_model_speedup"):
                gaps[k] = v["speedup"] / v["cost_model_speedup"] - 1
        g["within_20pct_of_cost_model"] = {"relative_gap": gaps,
                                           "met": None if not gaps else all(abs(x) <= 0.2 for x in gaps.values())}
        for sched in ("auto", "heuristic"):
            key = f"speculative-{sched}"
            if key in rows and rows[key]["speedup"] and best:
                ratio = rows[key]["speedup"] / best
                g[f"{sched}_gamma_vs_best_fixed"] = {"ratio": ratio, "met": ratio >= 0.9 if sched == "auto" else None}
    return g


# ------------------------------------------------------------------------------------------ reports
def _fmt(v, spec=".2f"):
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return format(v, spec)


def markdown_table(result: dict) -> str:
    rows = result["methods"]
    head = ("| variant | tokens/s (median [min-max] of repeats) | speedup vs our AR | mean accepted | tokens/target call "
            "| alpha | c | theory | cost model (verify g+1) | trace cost model | perplexity | peak RSS MB "
            "| J/token | weight MB/token (proxy) |")
    lines = [head, "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    for r in rows.values():
        speed = (f"{_fmt(r['tokens_per_second_median'], '.1f')} [{_fmt(r['tokens_per_second_min'], '.1f')}-"
                 f"{_fmt(r['tokens_per_second_max'], '.1f')}]")
        sp = _fmt(r["speedup"], ".3f") + (" (slower)" if r["slower_than_autoregressive"] else "")
        wb = r["weight_bytes_per_token_proxy"]
        lines.append(
            f"| {r['variant']} | {speed} | {sp} | {_fmt(r['mean_accepted'])} | {_fmt(r['tokens_per_target_call'])} "
            f"| {_fmt(r['alpha'])} | {_fmt(r['c'], '.3f')} | {_fmt(r['theory_speedup'])} | {_fmt(r['cost_model_speedup'])} "
            f"| {_fmt(r['cost_model_trace_speedup'])} | {_fmt(r['target_perplexity'], '.3f')} "
            f"| {_fmt(r['memory'].get('peak_rss_mb'), '.0f')} | {_fmt(r['energy_joules_per_token'], '.3f')} "
            f"| {_fmt(None if wb is None else wb / 1e6, '.1f')} |"
        )
    return "\n".join(lines) + "\n"


def markdown_report(result: dict, command: str | None = None) -> str:
    m, s = result["machine"], result["settings"]
    lines = [
        f"# Benchmark ({result['date']})", "",
        *([f"Generated by `{command}`.", ""] if command else []),
        f"Charts: `{result.get('charts', {}).get('html')}`" + (f", `{result['charts']['png']}`" if result.get("charts", {}).get("png") else "")
        + ("" if not result.get("charts", {}).get("png_note") else f" ({result['charts']['png_note']})") + ".", "",
        f"Machine: {m['cpu']}, {m['usable_cores']} usable cores, torch threads {m['torch_threads']}; "
        f"load average before/after {result['load_average_before']} / {result['load_average_after']}. "
        f"Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ".", "",
        f"Pair: target {result['models']['target']} ({result['models'].get('dtype')}), draft {result['models']['draft']}"
        + (f" ({result['models']['draft_dtype']})" if result["models"].get("draft_dtype") else "") + ". "
        f"{s['prompts']} prompts, {s['max_new_tokens']} new tokens (EOS ignored in timing runs), temperature "
        f"{s['temperature']}, {s['repeats']} interleaved repeats after {s['warmup']} warm-up, chat={s['chat']}.", "",
        markdown_table(result),
        "Speedup = total tokens / total time over the same for our autoregressive run in this run. "
        "mean accepted = accepted draft tokens per iteration with a draft; tokens/target call includes the "
        "correction/bonus token. alpha = mean draft overlap sum min(p, q) over draft positions; c = draft step "
        "time / autoregressive target step time (this run). theory = Theorem 3.8 from alpha, gamma, c; cost model "
        "= the same with the measured time of a verify pass of gamma+1 tokens; trace cost model = each iteration's "
        "draft steps plus the measured verify time of its own size, i.e. no overhead outside the models. "
        f"Energy: {result['energy']['note']}. Weight MB/token: {PROXY_LABEL}.", "",
    ]
    slower = [k for k, r in result["methods"].items() if r["slower_than_autoregressive"]]
    if slower:
        lines.append("Slower than our autoregressive decoding in this run: " + ", ".join(slower) + ".")
    else:
        lines.append("No variant was slower than our autoregressive decoding in this run.")
    lines += ["", "Goals of issue 7, checked on this run:", "", "```json", json.dumps(result["goals"], indent=1), "```", ""]
    if result.get("greedy_equal_to_autoregressive"):
        lines.append("Greedy outputs equal to our autoregressive output (quality runs, per variant): "
                     + ", ".join(f"{k} {v}" for k, v in result["greedy_equal_to_autoregressive"].items()) + ".")
    return "\n".join(lines) + "\n"


def write_charts(result: dict, out_dir: Path) -> dict:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = list(result["methods"].values())
    names = [r["variant"] for r in rows]
    colors = ["#888" if r["engine"] == "hf" else ("#d62728" if r["slower_than_autoregressive"] else "#1f77b4") for r in rows]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("tokens/s (median, range over repeats)",
                                                        "speedup vs our autoregressive: measured and predicted"))
    med = [r["tokens_per_second_median"] or 0 for r in rows]
    fig.add_trace(go.Bar(x=names, y=med, marker_color=colors, name="tokens/s",
                         error_y=dict(type="data", symmetric=False,
                                      array=[(r["tokens_per_second_max"] or 0) - m for r, m in zip(rows, med)],
                                      arrayminus=[m - (r["tokens_per_second_min"] or 0) for r, m in zip(rows, med)])),
                  row=1, col=1)
    for key, label in (("speedup", "measured"), ("theory_speedup", "theory (Thm 3.8)"),
                       ("cost_model_speedup", "cost model (verify g+1)"), ("cost_model_trace_speedup", "trace cost model")):
        fig.add_trace(go.Bar(x=names, y=[r[key] for r in rows], name=label), row=1, col=2)
    fig.add_hline(y=1.0, line_dash="dot", row=1, col=2)
    fig.update_layout(barmode="group", height=520, width=1300,
                      title=f"{result['models']['target']} + {result['models']['draft']}, {result['machine']['cpu']}, "
                            f"{result['date']}")
    html = out_dir / "bench.html"
    fig.write_html(html, include_plotlyjs="cdn")
    charts = {"html": str(html), "png": None, "png_note": None}
    try:
        png = out_dir / "bench.png"
        fig.write_image(png)
        charts["png"] = str(png)
    except Exception as exc:  # noqa: BLE001 - PNG is optional: say why it is missing
        charts["png_note"] = f"PNG not written: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return charts


# ------------------------------------------------------------------------------------------ driver
def run_bench(args, target, draft, prompts: list[str], progress=True) -> dict:
    from tqdm import tqdm

    gammas = parse_gammas(args.gamma)
    hf_gammas = None if getattr(args, "hf_gamma", None) is None else [g for g in parse_gammas(args.hf_gamma) if isinstance(g, int)]
    variants = build_variants(args.methods, gammas, args.hf, hf_gammas)
    ar_key = "autoregressive"
    meter = make_meter(target.device)
    meter_note = None if meter.available else meter.note
    encoded = [target.encode_prompt(p, args.chat) for p in prompts]
    load_before = os.getloadavg()
    n_runs = len(variants) * (args.warmup + args.repeats * len(prompts) + len(prompts)) + (len(variants) if args.memory else 0)
    bar = tqdm(total=n_runs, desc="bench", file=sys.stderr, disable=not progress, dynamic_ncols=True)
    started = time.time()
    for _ in range(args.warmup):
        for v in variants:
            bar.set_postfix_str(f"warm-up {v.key}")
            run_variant(v, target, draft, encoded[0], args, timing=True)
            bar.update()
    timing: dict[str, dict[int, list[RunStats]]] = {v.key: {} for v in variants}
    for r in range(args.repeats):
        order = variants[r % len(variants):] + variants[: r % len(variants)]
        for pi, ids in enumerate(encoded):
            for v in order:
                bar.set_postfix_str(f"repeat {r + 1} prompt {pi + 1} {v.key}")
                stats = run_variant(v, target, draft, ids, args, timing=True, meter=meter if meter.available else None)
                timing[v.key].setdefault(r, []).append(stats)
                bar.update()
    quality: dict[str, list[RunStats]] = {v.key: [] for v in variants}
    for ids in encoded:
        for v in variants:
            bar.set_postfix_str(f"quality {v.key}")
            quality[v.key].append(run_variant(v, target, draft, ids, args, timing=False))
            bar.update()
    memory = {}
    for v in variants:
        if args.memory:
            bar.set_postfix_str(f"memory {v.key}")
            memory[v.key] = measure_memory(v, args, prompts[0])
            bar.update()
        else:
            memory[v.key] = {"peak_rss_mb": None, "note": "memory measurement skipped (--no-memory)"}
    bar.close()
    ar_steps = [t for rep in timing[ar_key].values() for s in rep for t in s.verify_by_size.get(1, [])]
    t_target_step = _median(ar_steps)
    rows = {}
    for v in variants:
        row = summarize_variant(v, timing[v.key], quality[v.key], ar_key, t_target_step, target.weight_bytes,
                                draft.weight_bytes if draft is not None else 0, args.repeats, meter_note)
        row["memory"] = memory[v.key]
        rows[v.key] = row
    top = finish_summary(rows, ar_key, args.hf, gammas, t_target_step)
    equal = None
    if args.sampling.greedy:
        ref = [s.token_ids for s in quality[ar_key]]
        equal = {k: f"{sum(a.token_ids == b for a, b in zip(q, ref))}/{len(ref)}" for k, q in quality.items()}
    result = {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_info(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "bench_seconds": time.time() - started,
        "settings": {
            "prompts": len(prompts), "prompts_file": str(args.prompts),
            "prompt_texts": [p[:80] for p in prompts], "methods": args.methods, "gammas": gammas,
            "max_new_tokens": args.max_new_tokens, "repeats": args.repeats, "warmup": args.warmup,
            "temperature": args.sampling.temperature, "top_k": args.sampling.top_k, "top_p": args.sampling.top_p,
            "seed": args.seed, "chat": args.chat, "hf_peer": args.hf,
            "hf_default_settings": "assistant model: its generation_config as shipped, unset fields from HF's global "
                                   "defaults (num_assistant_tokens 20, schedule constant, confidence threshold 0.4); "
                                   f"prompt lookup: prompt_lookup_num_tokens {HF_DEFAULT_PROMPT_LOOKUP_TOKENS}, "
                                   "max_matching_ngram_size default (2)",
            "hf_pinned_settings": "schedule constant, num_assistant_tokens = gamma, assistant_confidence_threshold 0; "
                                  "prompt lookup: prompt_lookup_num_tokens = gamma, max_matching_ngram_size 3",
        },
        "models": {"target": target.name, "draft": draft.name if draft is not None else PROMPT_LOOKUP,
                   "target_params": target.n_params, "target_weight_bytes": target.weight_bytes,
                   "draft_params": draft.n_params if draft is not None else 0,
                   "draft_weight_bytes": draft.weight_bytes if draft is not None else 0,
                   "dtype": str(target.dtype),
                   "draft_dtype": str(draft.dtype) if draft is not None else None, "device": str(target.device)},
        "t_target_step_ms": 1000 * t_target_step if t_target_step else None,
        "energy": {"meter": getattr(meter, "name", None), "available": meter.available,
                   "note": "measured with " + meter.name if meter.available else meter.note,
                   "proxy_label": PROXY_LABEL},
        **top,
        "methods": rows,
        "greedy_equal_to_autoregressive": equal,
    }
    result["goals"] = goals(rows, top)
    return result


def write_outputs(result: dict, out_dir: Path) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    result["charts"] = write_charts(result, out_dir)
    (out_dir / "bench.json").write_text(json.dumps(result, indent=1, default=str))
    (out_dir / "bench.md").write_text(markdown_report(result))
    return {"json": str(out_dir / "bench.json"), "markdown": str(out_dir / "bench.md"), **result["charts"]}


# ------------------------------------------------------------------------------------------ CLI
def add_parser(sub) -> None:
    b = sub.add_parser("bench", help="benchmark methods (and HF transformers as a peer) on a prompt file")
    b.add_argument("--prompts", required=True, help="JSON lines with a 'prompt' field, or plain lines")
    b.add_argument("--methods", default="autoregressive,speculative", help="comma-separated methods")
    b.add_argument("--gamma", default="4", help="comma-separated: numbers, 'auto', 'heuristic' (e.g. 2,4,8,auto,heuristic)")
    b.add_argument("--temperature", type=float, default=0.0, help="0 (default) means greedy")
    b.add_argument("--top-k", type=int, default=0)
    b.add_argument("--top-p", type=float, default=1.0)
    b.add_argument("--max-new-tokens", type=int, default=64)
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--warmup", type=int, default=1)
    b.add_argument("--max-prompts", type=int, default=None,
                   help="use N prompts spread evenly over the file (every kind of prompt stays represented)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--no-chat", dest="chat", action="store_false", help="raw prompts (default: chat template)")
    b.add_argument("--target", default="default")
    b.add_argument("--draft", default=None, help="hub id, directory, .gguf or 'prompt-lookup' (default: the target's default draft)")
    b.add_argument("--device", default=None)
    b.add_argument("--dtype", default=None)
    b.add_argument("--draft-dtype", default=None, help="draft dtype (default: float16 on AVX-512 CPUs, else as --dtype; see docs)")
    b.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    b.add_argument("--no-hf", dest="hf", action="store_false", help="skip the HF transformers peer")
    b.add_argument("--hf-gamma", default=None, help="gammas HF assisted generation is pinned to (default: every numeric --gamma)")
    b.add_argument("--report", default=None, help="also write the markdown report to this path (e.g. docs/performance.md)")
    b.add_argument("--no-memory", dest="memory", action="store_false", help="skip per-method memory subprocesses")
    b.add_argument("--out", default="runs/bench", help="output directory for JSON, markdown and charts")
    b.add_argument("--json", action="store_true", help="print the result JSON on stdout")


def run_cli(args) -> int:
    from .cli import UsageError, default_draft_for
    from .models import ModelLoadError, load_draft, load_model

    if args.repeats < 1 or args.warmup < 0 or args.max_new_tokens < 1:
        raise UsageError("--repeats must be >= 1, --warmup >= 0 and --max-new-tokens >= 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    args.sampling = SamplingConfig(args.temperature, args.top_k, args.top_p)
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    parse_gammas(args.gamma)
    try:
        prompts = read_prompts(args.prompts)
    except OSError as exc:
        raise UsageError(f"cannot read prompts: {exc}") from None
    if args.max_prompts and args.max_prompts < len(prompts):
        prompts = spread(prompts, args.max_prompts)
    try:
        target = load_model(args.target, device=args.device, dtype=args.dtype)
        args.draft_spec = args.draft or default_draft_for(args.target)
        draft = None
        if args.draft_spec != PROMPT_LOOKUP:
            draft = load_draft(args.draft_spec, args.device, args.dtype, args.draft_dtype)
            from .models import check_same_vocabulary

            check_same_vocabulary(target, draft)
    except ModelLoadError as exc:
        raise UsageError(str(exc)) from None
    result = run_bench(args, target, draft, prompts)
    paths = write_outputs(result, Path(args.out))
    if args.report:
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(markdown_report(result, command=" ".join(["python -m decoding"] + sys.argv[1:])))
    if args.json:
        sys.stdout.write(json.dumps(result, default=str) + "\n")
    else:
        sys.stdout.write(markdown_table(result))
        print(f"\nwrote {', '.join(v for k, v in paths.items() if v and k != 'png_note')}"
              + (f"; {paths['png_note']}" if paths.get("png_note") else ""))
    return 0


if __name__ == "__main__":  # the per-method memory child
    if len(sys.argv) == 3 and sys.argv[1] == "--memory-child":
        sys.exit(_memory_child(sys.argv[2]))
    print("usage: python -m decoding bench ...", file=sys.stderr)
    sys.exit(2)
