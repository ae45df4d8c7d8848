"""The GPU backend's goals checked on one gpu-check's benchmark jobs, and the before/after of the static path.

Pure functions of the bench part's result (`bench_part.py`; each job compacted by `jobs.compact`):
every ratio is taken inside one job, on that job's prompts, so no figure is compared across prompt
sets or across runs. Each goal is {"goal", "met" (True/False, None where a figure is missing),
"value", "detail"}; the report renders them as they are.
"""

from __future__ import annotations

PLAIN_TPS_GOAL = 300.0  # tokens/s of our plain decoding of the 135M target in half precision
HYBRID_GOAL = 1.5  # the hybrid (lookup + feature draft) over our plain decoding
HYBRID = "hybrid-feature"
MODEL_DRAFTERS = ("distilled", "feature", "hybrid-feature")  # the drafters with a draft model
MAIN_JOB, FLOAT32_JOB, DYNAMIC_JOB = "half-static", "float32-static", "half-dynamic"


def ok_jobs(bench: dict | None) -> dict:
    return {k: j for k, j in ((bench or {}).get("jobs") or {}).items() if j.get("status") == "ok"}


def _fmt(x, spec=".2f") -> str:
    return "n/a" if x is None else format(x, spec)


def speculative_rows(job: dict, drafts=None) -> dict:
    """{variant: row} of our speculative variants in a job (of the drafters `drafts`, or all)."""
    return {k: v for k, v in job["variants"].items() if v.get("engine") == "ours" and v.get("method") == "speculative"
            and (drafts is None or v.get("draft") in drafts)}


def hf_peers(jobs: dict) -> list[dict]:
    """Every HF generate() row (eager or compiled) with our plain decoding's speed in the same job."""
    out = []
    for job in jobs.values():
        ours = (job["variants"].get("autoregressive") or {}).get("tokens_per_second")
        for key, v in job["variants"].items():
            if v.get("engine") == "hf" and v.get("method") in ("generate", "generate-compiled") and ours \
                    and v.get("tokens_per_second"):
                out.append({"variant": key, "job": job["key"], "prompts": job["prompts"], "hf": v["tokens_per_second"],
                            "ours": ours, "ratio": ours / v["tokens_per_second"]})
    return out


def before_after(bench: dict | None) -> dict | None:
    """Our plain decoding with the dynamic cache (before) against the static cache with graphs (after),
    summed over the prompts both jobs decoded; None without both."""
    jobs = ok_jobs(bench)
    main, dyn = jobs.get(MAIN_JOB), jobs.get(DYNAMIC_JOB)
    if not main or not dyn:
        return None
    common = [p for p in dyn["per_prompt"] if p in main["per_prompt"]
              and "autoregressive" in dyn["per_prompt"][p] and "autoregressive" in main["per_prompt"][p]]
    if not common:
        return None

    def tps(job):
        tokens = sum(job["per_prompt"][p]["autoregressive"][0] for p in common)
        seconds = sum(job["per_prompt"][p]["autoregressive"][1] for p in common)
        return tokens / seconds if seconds else None

    before, after = tps(dyn), tps(main)
    return {"prompts": len(common), "dtype": main["dtype"], "dynamic_tps": before, "static_tps": after,
            "speedup": after / before if before and after else None}


def check_goals(bench: dict | None, compiled_status: dict | None = None) -> list[dict]:
    """The GPU backend's goals on the bench part's result."""
    jobs = ok_jobs(bench)
    main, f32 = jobs.get(MAIN_JOB), jobs.get(FLOAT32_JOB)
    goals = []

    ar = (main["variants"].get("autoregressive") or {}).get("tokens_per_second") if main else None
    goals.append({"goal": f"plain decoding in {main['dtype'] if main else 'half precision'} >= "
                          f"{PLAIN_TPS_GOAL:.0f} tokens/s",
                  "met": None if ar is None else ar >= PLAIN_TPS_GOAL, "value": f"{_fmt(ar, '.1f')} tokens/s",
                  "detail": f"{main['prompts']} prompts, static cache + CUDA graphs" if main else "not measured"})

    peers = hf_peers(jobs)
    if peers:
        worst = min(peers, key=lambda p: p["ratio"])
        detail = "; ".join(f"{p['variant']} {p['hf']:.1f} tokens/s against ours {p['ours']:.1f} "
                           f"({p['prompts']} prompts, job {p['job']})" for p in peers)
        status = (compiled_status or {})
        if status and not status.get("compiled"):
            detail += f". HF's compiled configuration ran eagerly: {status.get('eager_why')}"
        has_compiled = any(p["variant"] == "hf-generate-compiled" for p in peers)
        goals.append({"goal": "plain decoding at least as fast as HF generate()'s fastest configuration",
                      "met": (worst["ratio"] >= 1.0) if has_compiled else None,
                      "value": f"{worst['ratio']:.2f}x {worst['variant']} (same job, same prompts)",
                      "detail": detail + ("" if has_compiled else ". HF's compiled configuration did not run")})
    else:
        goals.append({"goal": "plain decoding at least as fast as HF generate()'s fastest configuration", "met": None,
                      "value": "n/a", "detail": "no HF peer was measured"})

    hyb = speculative_rows(main, (HYBRID,)) if main else {}
    best = max((v["speedup"] for v in hyb.values() if v.get("speedup") is not None), default=None)
    goals.append({"goal": f"the hybrid (lookup + feature draft) >= {HYBRID_GOAL}x our plain decoding",
                  "met": None if best is None else best >= HYBRID_GOAL,
                  "value": "n/a" if best is None else f"{best:.2f}x (its better gamma)",
                  "detail": ", ".join(f"{k} {_fmt(v.get('speedup'))}x" for k, v in hyb.items()) or "not measured"})

    model = speculative_rows(main, MODEL_DRAFTERS) if main else {}
    slow = [k for k, v in model.items() if v.get("speedup") is None or v["speedup"] <= 1.0]
    goals.append({"goal": "every model drafter faster than plain decoding (gamma 4 and auto)",
                  "met": None if not model else not slow,
                  "value": f"{len(model) - len(slow)}/{len(model)} variants faster",
                  "detail": ", ".join(f"{k} {_fmt(v.get('speedup'))}x" for k, v in model.items()) or "not measured"})

    eq = (f32 or {}).get("greedy_equal") or {}
    spec = {k: eq[k] for k in speculative_rows(f32) if k in eq} if f32 else {}
    unequal = [k for k, v in spec.items() if v.split("/")[0] != v.split("/")[1]]
    goals.append({"goal": "float32 greedy text equal to plain decoding on every prompt, graphs on",
                  "met": None if not spec else not unequal,
                  "value": f"{len(spec) - len(unequal)}/{len(spec)} variants equal on every prompt",
                  "detail": (", ".join(f"{k} {v}" for k, v in spec.items()) + f" ({f32['prompts']} prompts)")
                  if spec else "not measured"})
    return goals
