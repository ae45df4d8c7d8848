"""The time budget of one gpu-check: which benchmark jobs run, and on how many prompts each.

A job is one benchmark run (`jobs.py`): a set of variants decoded on the same prompts, so that its
speedups are ratios within one run. A job's cost is estimated as

    load + warm-up (one prompt of every variant) + compile (the compiled HF peer)
         + prompts x new tokens x sum over its variants of 1 / (that variant's tokens/s)

with the speeds measured on the spot where known (each job probes its own plain decoding before it
starts) and `ASSUMED_TPS` otherwise. Jobs run in `JOBS`' order; before each, the prompts it gets are
the most (up to its `want`) that fit in the time left once every later job's `least` and the later
parts' reserves are kept, and never fewer than one per category (where even that does not fit, the
job runs long: the later jobs are then skipped, the report says so). Prompts are spread over the
Spec-Bench categories (`pick_prompts`), so a job with fewer prompts still covers every category.
A plan is an estimate: a job that runs slower than planned is stopped when its share is spent (the
time left less every later job's least cost), after its first prompt of each category, with its
prompts taken category by category (`interleave_categories`), so the later jobs still run.
Pure functions: the tests plan fake budgets."""

from __future__ import annotations

import math
from dataclasses import dataclass

# tokens/s assumed before anything is measured (an H100 with the static backend and CUDA graphs; HF eager)
ASSUMED_TPS = {"graphs": 300.0, "dynamic": 33.0, "hf-eager": 50.0, "hf-compiled": 300.0}
LOAD_S = 8.0  # loading a target and its drafters
COMPILE_S = 45.0  # torch.compile(mode="reduce-overhead") of HF's decoding step, first call (33-38 s on an H200)
PROBE_TOKENS_FACTOR = 2  # a probe decodes one prompt twice (the first captures graphs / warms up)
# what the parts after the benchmark are kept (seconds): NVML windows of 2 s per method; the CUDA tests
PART_RESERVE_S = {"bench": 0.0, "energy": 20.0, "tests": 70.0, "ppd": 0.0}
# a part that runs only when this much of the budget is left (ppd is not among the GPU goals' figures: no reserve)
PART_NEEDS_S = {"ppd": 120.0}
MIN_TESTS_TIMEOUT_S = 90  # the CUDA tests took 58 s on an H100 (docs/gpu.md, 2026-11-23)


@dataclass(frozen=True)
class Job:
    """One benchmark run of gpu-check. `drafts`: bench drafter specs (their labels name the rows);
    `hf`: HF's eager generate() and assisted generation with the model drafts and prompt lookup at
    their default settings; `hf_compiled`: HF generate() with a static cache and compiled step."""

    key: str
    title: str
    precision: str  # "half" (the GPU's bfloat16, else float16) or "float32"
    backend: str  # "static" (the static KV cache; with `graphs`, CUDA graphs) or "dynamic" (today's path)
    graphs: bool
    methods: tuple = ("autoregressive",)
    drafts: tuple = ()
    gammas: str = "4,auto"
    hf: bool = False
    hf_compiled: bool = False
    want: int = 48  # prompts it should get when time allows
    least: int = 6  # prompts it gets at the least (one per category)

    @property
    def speed_kind(self) -> str:
        return "graphs" if self.backend == "static" else "dynamic"

    def variant_counts(self) -> dict[str, int]:
        """How many variants of each speed kind the job decodes."""
        ours = 1
        if "speculative" in self.methods:
            ours += len(self.drafts) * len([g for g in self.gammas.split(",") if g.strip()])
        model_or_lookup = len([d for d in self.drafts if not d.startswith("hybrid") and d != "feature"])
        return {self.speed_kind: ours, "hf-eager": (1 + model_or_lookup) if self.hf else 0,
                "hf-compiled": int(self.hf_compiled)}


SPEC_DRAFTS = ("distilled", "feature", "hybrid:feature", "prompt-lookup")
JOBS = (
    Job("half-static", "ours, static cache + CUDA graphs, every offline drafter", "half", "static", True,
        ("autoregressive", "speculative"), SPEC_DRAFTS, want=48, least=24),
    Job("float32-static", "ours in float32 (greedy equality), static cache + CUDA graphs", "float32", "static", True,
        ("autoregressive", "speculative"), ("hybrid:feature",), want=48, least=12),
    Job("half-dynamic", "ours before: the dynamic cache, no graphs", "half", "dynamic", False, want=12),
    Job("half-hf-compiled", "HF generate(), static cache + torch.compile(reduce-overhead)", "half", "static", True,
        hf_compiled=True, want=48),
    Job("half-hf-eager", "HF generate() and assisted generation, eager", "half", "static", True,
        drafts=("distilled", "prompt-lookup"), hf=True, want=12),
)


def per_prompt_s(job: Job, tokens: int, tps: dict[str, float]) -> float:
    """Seconds one prompt costs the job: every variant decodes `tokens` at its kind's speed."""
    return sum(n * tokens / tps[kind] for kind, n in job.variant_counts().items() if n)


def job_cost(job: Job, prompts: int, tokens: int, tps: dict[str, float]) -> float:
    """Estimated seconds of the job on `prompts` prompts (load, probe, warm-up, compile included)."""
    one = per_prompt_s(job, tokens, tps)
    probe = PROBE_TOKENS_FACTOR * tokens / tps[job.speed_kind]
    return LOAD_S + probe + one * (prompts + 1) + (COMPILE_S if job.hf_compiled else 0.0)


def floor_prompts(job: Job, cap: int, available: int, categories: int) -> int:
    """The fewest prompts a job runs on: one per category (fewer only where `least`, `cap` or the file say so)."""
    return max(1, min(job.least, cap, available, max(categories, 1)))


def spent_before_prompts(job: Job, tokens: int, tps: dict[str, float]) -> float:
    """The part of `job_cost` a job has spent once loaded and probed (load, probe, the HF compile):
    added back to the time left when its prompts are chosen after its probe."""
    return job_cost(job, 0, tokens, tps) - per_prompt_s(job, tokens, tps)


def fit_prompts(job: Job, seconds: float, tokens: int, tps: dict[str, float], available: int,
                cap: int, categories: int) -> int:
    """The most prompts (up to min(`job.want`, `cap`, `available`)) whose cost fits in `seconds`, but
    never fewer than one per category (`floor_prompts`); a multiple of `categories` where it is not
    the most, so that each category gets as many."""
    most = max(1, min(job.want, cap, available))
    floor = floor_prompts(job, cap, available, categories)
    fixed = job_cost(job, 0, tokens, tps)
    one = per_prompt_s(job, tokens, tps)
    n = most if one <= 0 else int(math.floor((seconds - fixed) / one))
    n = max(floor, min(most, n))
    if categories > 1 and n >= categories and n < most:
        n = max(floor, n - n % categories)
    return n


def reserve_after(parts: list[str], part: str) -> float:
    """Seconds kept for the parts that run after `part`."""
    later = parts[parts.index(part) + 1:] if part in parts else []
    return sum(PART_RESERVE_S.get(p, 0.0) for p in later)


def plan_jobs(jobs: tuple[Job, ...], seconds: float, tokens: int, tps: dict[str, float], available: int,
              cap: int, categories: int) -> list[dict]:
    """The whole benchmark's plan in `seconds`: per job its prompts and estimated seconds, each
    job fitted after keeping every later job's least cost (what `next_prompts` does before each job)."""
    out, left = [], float(seconds)
    for i, job in enumerate(jobs):
        n = next_prompts(jobs, i, left, tokens, tps, available, cap, categories)
        cost = job_cost(job, n, tokens, tps)
        out.append({"job": job.key, "prompts": n, "estimate_s": round(cost, 1)})
        left -= cost
    return out


def later_least_s(jobs: tuple[Job, ...], i: int, tokens: int, tps: dict[str, float], available: int,
                  cap: int) -> float:
    """Seconds kept for the jobs after job `i`: each one's least cost."""
    return sum(job_cost(j, min(j.least, cap, available), tokens, tps) for j in jobs[i + 1:])


def next_prompts(jobs: tuple[Job, ...], i: int, seconds_left: float, tokens: int, tps: dict[str, float],
                 available: int, cap: int, categories: int) -> int:
    """Prompts for job `i` with `seconds_left` for it and every later job (their least kept)."""
    later = later_least_s(jobs, i, tokens, tps, available, cap)
    return fit_prompts(jobs[i], seconds_left - later, tokens, tps, available, cap, categories)


def interleave_categories(rows: list) -> list:
    """`rows` reordered one category after another in turn (the first of each category, then the
    second of each, ...), so that a job stopped after any number of prompts still covers its categories
    as evenly as it can (the benchmark stops a job whose time share is spent: `driver.run_bench`)."""
    groups: dict[str, list] = {}
    for row in rows:
        groups.setdefault(getattr(row, "category", "") or "", []).append(row)
    out, depth = [], max((len(g) for g in groups.values()), default=0)
    for k in range(depth):
        out += [g[k] for g in groups.values() if k < len(g)]
    return out


def pick_prompts(rows: list, n: int) -> list:
    """`n` of `rows` (objects with a `category`) spread over the categories, as evenly as the
    counts allow (earlier categories get the extra ones), each category's evenly over its rows; in
    file order."""
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(getattr(row, "category", "") or "", []).append(i)
    n = max(0, min(n, len(rows)))
    names = list(groups)
    share = {name: 0 for name in names}
    left = n
    while left:  # deal one prompt per category in turn; a category with none left is passed over
        dealt = False
        for name in names:
            if left and share[name] < len(groups[name]):
                share[name] += 1
                left -= 1
                dealt = True
        if not dealt:
            break
    picked = []
    for name in names:
        idx, k = groups[name], share[name]
        picked += [idx[(j * len(idx)) // k] for j in range(k)]
    return [rows[i] for i in sorted(picked)]
