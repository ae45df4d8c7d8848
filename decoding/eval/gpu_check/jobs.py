"""One benchmark job of gpu-check (see `plan.py` for the jobs and their budget).

A job runs with its decoding backend named in the environment (`SPECDEC_BACKEND` static|dynamic,
`SPECDEC_CUDA_GRAPHS` 1|0, read by the static-cache path where it exists; the same values also ride
on the benchmark's arguments as `backend` and `cuda_graphs`), loads its target and drafters (kept for
the next job of the same precision and backend), probes its speed on one prompt, takes the prompts
that fit the time left (`plan.next_prompts`), and runs the benchmark's own driver
(`decoding.eval.bench.driver.run_bench`) on them: warm-up, one timing run per prompt and variant,
interleaved, end of sequence ignored, greedy equality read off the timing runs. Its full result goes
to `<runs dir>/bench/<job>/bench.json`; `compact` keeps what the report and the results JSON need.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time

from ...paths import SHIPPED_DRAFT, display_path
from .pairs import Pair, half_dtype
from .plan import Job, interleave_categories, later_least_s, next_prompts, pick_prompts, spent_before_prompts

BACKEND_ENV = "SPECDEC_BACKEND"
GRAPHS_ENV = "SPECDEC_CUDA_GRAPHS"
ROW_FIELDS = ("engine", "method", "draft", "gamma", "schedule", "tokens", "seconds", "tokens_per_second", "speedup",
              "mean_accepted", "tokens_per_target_call", "energy_joules_per_token", "mean_gamma_asked")


# the static path's switches (SPECDEC_DRAFT_CHAIN_GRAPH: greedy draft chains as one CUDA graph, lm/chain_graphs.py)
TUNING_ENVS = ("SPECDEC_SHORT_KERNELS", "SPECDEC_LEAN_LAYER", "SPECDEC_COMPILE", "SPECDEC_DRAFT_CHAIN_GRAPH")


def job_env(job: Job) -> dict[str, str]:
    """The environment that names the job's backend, with the static path's switches where the check's
    environment sets them (so the report says which configuration ran)."""
    env = {BACKEND_ENV: job.backend, GRAPHS_ENV: "1" if job.graphs else "0"}
    env.update({k: os.environ[k].strip() for k in TUNING_ENVS if os.environ.get(k, "").strip()})
    return env


@contextlib.contextmanager
def backend_env(job: Job):
    """The job's backend in the environment while it loads and decodes; the earlier values after."""
    values = job_env(job)
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield values
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def precision_dtype(precision: str, device: str) -> str:
    """"float32", or the half precision this device computes in ("half")."""
    if precision == "float32":
        return "float32"
    return half_dtype() if device.startswith("cuda") else "bfloat16"


class Models:
    """The loaded targets and drafters, one set per (precision, backend, graphs): a later job of the
    same set reuses them. A drafter that does not load is skipped with the loader's reason."""

    def __init__(self, pair: Pair, device: str):
        self.pair, self.device = pair, device
        self.targets: dict = {}
        self.drafts: dict = {}

    def load(self, job: Job) -> tuple[object, dict, list[dict]]:
        from ...lm.models import DEFAULT_TARGET, ModelLoadError
        from ...run.pair import load_draft_value, load_pair
        from ..bench.cli import draft_label

        key = (job.precision, job.backend, job.graphs)
        dtype = precision_dtype(job.precision, self.device)
        if key not in self.targets:
            self.targets[key], _ = load_pair(self.pair.target, device=self.device, dtype=dtype, need_draft=False)
        target = self.targets[key]
        drafts, skipped = {}, []
        specs = job.drafts
        if self.pair.target != DEFAULT_TARGET and specs:  # the shipped drafts belong to the default target
            skipped = [{"what": spec, "why": "a drafter of the default target only"} for spec in specs
                       if spec != "prompt-lookup"]
            specs = ("prompt-lookup",)
        for spec in specs:
            label = draft_label(spec)
            if (key, spec) not in self.drafts:
                try:
                    self.drafts[(key, spec)] = load_draft_value(str(SHIPPED_DRAFT) if spec == "distilled" else spec,
                                                                target, dtype, None, target_spec=self.pair.target)
                except ModelLoadError as exc:
                    skipped.append({"what": spec, "why": str(exc)})
                    continue
            drafts[label] = self.drafts[(key, spec)]
        return target, drafts, skipped


def bench_args(job: Job, settings, drafts: dict) -> argparse.Namespace:
    """The benchmark driver's arguments for the job (what `python -m decoding bench` would parse)."""
    from ...rules.warp import SamplingConfig

    return argparse.Namespace(
        methods=list(job.methods), gamma=job.gammas, hf=job.hf, hf_gamma="none", hf_compiled=job.hf_compiled,
        quality=False, memory=False, warmup=1, repeats=1, max_new_tokens=settings.max_new_tokens,
        sampling=SamplingConfig(0.0), seed=0, chat=True, prompts=settings.prompts,
        draft_specs={label: d.spec for label, d in drafts.items()},
        draft_spec=next((d.spec for d in drafts.values()), None),
        backend=job.backend, cuda_graphs=job.graphs)


def probe(job: Job, target, drafts: dict, ids: list[int], args) -> dict[str, float]:
    """Tokens/s of the job's speed kinds on one prompt: our plain decoding (second of two runs: the
    first warms up or captures), HF's eager generate() (once), the compiled HF peer (twice: the first
    call compiles, once, for the whole job)."""
    from ..bench.hf_fast import VARIANT_KEY, VARIANT_METHOD
    from ..bench.runs import run_variant
    from ..bench.variants import Variant

    def tps(variant: Variant, times: int) -> float:
        for _ in range(times):
            stats = run_variant(variant, target, None, ids, args, True)
        return stats.tokens / stats.seconds if stats.seconds > 0 else float("inf")

    out = {job.speed_kind: tps(Variant("autoregressive", "ours", "autoregressive"), 2)}
    if job.hf:
        out["hf-eager"] = tps(Variant("hf-generate", "hf", "generate"), 1)
    if job.hf_compiled:
        out["hf-compiled"] = tps(Variant(VARIANT_KEY, "hf", VARIANT_METHOD), 2)
    return out


def named(key: str, draft: str | None) -> str:
    """A variant's key with its drafter in it (the benchmark leaves the drafter out of the keys when a
    run has one drafter: "speculative-g4" becomes "speculative-hybrid-feature-g4")."""
    if not draft or draft in key:
        return key
    for stem in ("speculative", "hf-assisted"):
        if key.startswith(stem + "-"):
            return f"{stem}-{draft}-{key[len(stem) + 1:]}"
    return key


def compact(job: Job, result: dict) -> dict:
    """The job's figures the report and the results JSON keep: per variant its totals, speedup over
    our plain decoding in the job, per category tokens/s and speedup; per prompt (by id) each
    variant's tokens and seconds; greedy equality."""
    cats = result.get("categories") or {}
    names = {key: named(key, row.get("draft")) for key, row in result["methods"].items()}
    variants = {}
    for key, row in result["methods"].items():
        v = {k: row.get(k) for k in ROW_FIELDS}
        v["by_category"] = {}
        for name, block in cats.items():
            b = block.get(key)
            if b:
                v["by_category"][name] = {"tokens_per_second": b["tokens"] / b["seconds"] if b["seconds"] else None,
                                          "speedup": b["speedup"], "prompts": b["prompts"]}
        variants[names[key]] = v
    per_prompt = {p["id"]: {names.get(k, k): [v["tokens"], round(v["seconds"], 5)] for k, v in p["variants"].items()}
                  for p in result.get("per_prompt", [])}
    equal = result.get("greedy_equal_to_autoregressive")
    s = result["settings"]
    return {"key": job.key, "title": job.title, "prompts_file": display_path(s["prompts_file"]),
            "dtype": str(result["models"]["dtype"]).removeprefix("torch."), "backend": job.backend,
            "graphs": job.graphs, "prompts": s["prompts"],
            "prompt_categories": {c: s["prompt_categories"].count(c) for c in dict.fromkeys(s["prompt_categories"])},
            "max_new_tokens": s["max_new_tokens"], "date": result["date"], "variants": variants,
            "cut_short": result.get("cut_short"),
            "per_prompt": per_prompt,
            "greedy_equal": {names.get(k, k): v for k, v in equal.items()} if equal else equal,
            "models": {"target": result["models"]["target"],
                       "drafts": {k: d["name"] for k, d in result["models"]["drafts"].items()}}}


def run_job(jobs: tuple[Job, ...], i: int, settings, models: Models, rows: list, deadline: float,
            tps: dict[str, float], clock=time.monotonic, progress: bool = True) -> dict:
    """Run job `i` of `jobs` within `deadline` (a `clock()` time, shared by it and the later jobs);
    `tps` (speeds known so far) is updated with its probe. Returns the compact result with "status"."""
    from ..bench.driver import run_bench
    from ..bench.hf_fast import CACHE_MARGIN_TOKENS, fast_peer_status
    from ..bench.report import markdown_report

    job = jobs[i]
    t0 = clock()
    with backend_env(job) as env:
        target, drafts, skipped = models.load(job)
        if "speculative" in job.methods and not drafts:
            return {"key": job.key, "title": job.title, "status": "skipped", "why": "no drafter loaded",
                    "skipped_drafts": skipped}
        args = bench_args(job, settings, drafts)
        encoded = [target.encode_prompt(r.prompt, True) for r in rows]
        args.hf_cache_len = max(len(e) for e in encoded) + settings.max_new_tokens + CACHE_MARGIN_TOKENS
        measured = probe(job, target, drafts, encoded[0], args)
        tps.update(measured)
        left = deadline - clock() + spent_before_prompts(job, settings.max_new_tokens, tps)  # loaded, probed
        categories = len({r.category for r in rows})
        n = next_prompts(jobs, i, left, settings.max_new_tokens, tps, len(rows), settings.max_prompts,
                         categories)  # a plan; the run stops at its share (stop_at)
        chosen = interleave_categories(pick_prompts(rows, n))
        stop_at = deadline - later_least_s(jobs, i, settings.max_new_tokens, tps, len(rows), settings.max_prompts)
        from ...lm import cuda_graphs

        cuda_graphs.reset_counts()
        result = run_bench(args, target, drafts, chosen, progress=progress, deadline=stop_at,
                           least=min(categories, len(chosen)), clock=clock)
        graph_counts = cuda_graphs.counts()
    result["command"] = f"python -m decoding gpu-check --part bench (job {job.key})"
    out = settings.runs_dir / "bench" / job.key
    out.mkdir(parents=True, exist_ok=True)
    result["charts"] = {"html": None, "png": None, "png_note": "charts are not drawn by gpu-check"}
    (out / "bench.json").write_text(json.dumps(result, indent=1, default=str))
    row = compact(job, result)
    try:
        (out / "bench.md").write_text(markdown_report(result, command=result["command"]))
    except Exception as exc:  # noqa: BLE001 - the figures are measured and kept: only the job's own page is lost
        row["note"] = f"bench.md not written: {type(exc).__name__}: {exc}"
    row.update(status="ok", env=env, seconds=round(clock() - t0, 1), skipped_drafts=skipped, out=display_path(out),
               probe_tps={k: round(v, 1) for k, v in measured.items()}, graph_counts=graph_counts,
               backend_reported=getattr(target, "backend", None))
    if job.hf_compiled:
        row["hf_compiled"] = fast_peer_status(target.model)
    row["_result"] = result  # the full result, for the choice (dropped before anything is written)
    return row
