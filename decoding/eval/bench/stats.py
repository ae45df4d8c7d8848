"""The benchmark's figures: one row per variant, speedups against the baselines, per-category
tables and the standing goals, all from the metrics' definitions (`decoding/trace/metrics.py`)."""

from __future__ import annotations

import math
import statistics

from ...rules import theory
from ..energy import energy_per_token, weight_bytes_per_token
from ...trace.metrics import RunCounts, c_step
from .variants import RunStats, Variant


def _median(xs):
    return statistics.median(xs) if xs else None


def total(runs: list[RunStats]) -> RunCounts:
    """The metrics' counts of several runs added up."""
    return sum((s.counts for s in runs), RunCounts())


def acceptance_figures(counts: RunCounts) -> dict:
    """vLLM's mean acceptance length, acceptance per draft position and the histogram of accepted lengths
    (definitions: `decoding/trace/metrics.py`), with the position counts they come from, so that several
    runs' figures follow from their counts; empty lists for a variant without chain drafts."""
    p = counts.positions
    return {"mean_acceptance_length": counts.mean_acceptance_length, "acceptance_per_position": p.rates,
            "acceptance_length_histogram": p.histogram, "iid_acceptance": counts.iid_acceptance,
            "position_drafted": list(p.drafted), "position_accepted": list(p.reached)}


def summarize_variant(variant: Variant, timing: dict, quality: list[RunStats], t_target_step,
                      target_bytes: int, draft_bytes: int, meter_note: str | None) -> dict:
    """One row of the tables: speed, acceptance, the cost models' predictions, quality, energy.
    `timing` maps each repeat to its runs (one per prompt); `t_target_step` is the median
    single-token step of our autoregressive runs (seconds)."""
    runs = [s for rep in timing.values() for s in rep]
    counts = total(runs)
    tokens, seconds = counts.tokens, counts.seconds
    per_rep = [total(timing[r]).tokens_per_second for r in sorted(timing)]
    target_calls, draft_calls = counts.target_calls, counts.draft_calls
    out = {
        "variant": variant.key, "engine": variant.engine, "method": variant.method, "gamma": variant.gamma,
        "schedule": variant.schedule, "runs": len(runs), "tokens": tokens, "seconds": seconds,
        "tokens_per_second": counts.tokens_per_second if seconds else None,
        "first_pass_share": counts.first_pass_share,
        "tokens_per_second_after_first_pass": counts.tokens_per_second_after_first_pass,
        "tokens_per_second_median": _median(per_rep),
        "tokens_per_second_min": min(per_rep) if per_rep else None,
        "tokens_per_second_max": max(per_rep) if per_rep else None,
        "tokens_per_second_by_repeat": per_rep,
        "tokens_per_target_call": counts.tokens_per_call if target_calls else None,
        "target_calls": target_calls, "draft_calls": draft_calls, "draft": variant.draft,
    }
    out["mean_accepted"] = counts.mean_accepted
    alpha = out["alpha"] = counts.alpha
    out.update(acceptance_figures(counts))
    t_draft = counts.draft_step_seconds
    out["t_draft_step_ms"] = 1000 * t_draft if t_draft is not None else None
    out["c"] = c_step(t_draft, t_target_step)  # Leviathan's c: draft step / our autoregressive step
    iters = counts.iterations
    out["draft_coverage"] = (counts.drafted_iterations / iters if iters and variant.engine == "ours"
                             and variant.drafts else None)
    if counts.by_source:  # a drafter with several sources (the hybrid): what each one did
        out["by_source"] = counts.by_source.rows()
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


def _ratio(a, b):
    return a / b if a and b else None


def _ratio_name(hf_key: str) -> str:
    """How the ratio keys name an HF row ("hf_assisted-g4": the published key format)."""
    return hf_key.replace("hf-assisted", "hf_assisted", 1)


def finish_summary(rows: dict, ar_key: str, hf: bool, gammas: list, t_target_step) -> dict:
    """Speedups against our autoregressive run and HF generate(), and the headline ratios."""
    ar = rows[ar_key]
    ar_tps = ar["tokens_per_second"]
    ar_reps = ar["tokens_per_second_by_repeat"]
    for row in rows.values():
        row["speedup"] = _ratio(row["tokens_per_second"], ar_tps)
        row["speedup_after_first_pass"] = _ratio(row.get("tokens_per_second_after_first_pass"),
                                                 ar.get("tokens_per_second_after_first_pass"))
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
        defaults = {k: r for k, r in rows.items() if r["engine"] == "hf" and r["schedule"] == "hf-default"}
        pinned = {k: r for k, r in rows.items() if r["engine"] == "hf" and r["method"] == "assisted"
                  and r["gamma"] is not None}
        named = len({r["draft"] for r in defaults.values()}) > 1
        first = next(iter(defaults.values()), None)
        out["hf_assisted_speedup"] = first["speedup_vs_hf_generate"] if first else None
        out["hf_assisted_speedup_by_draft"] = {r["draft"]: r["speedup_vs_hf_generate"] for r in defaults.values()}
        out["hf_assisted_speedup_pinned"] = {(f"{r['draft']}-{r['gamma']}" if named else str(r["gamma"])):
                                             r["speedup_vs_hf_generate"] for r in pinned.values()}
        ratios = {"autoregressive_vs_hf_generate": ar_tps / hf_gen if hf_gen else None}
        for key, row in rows.items():
            if row["engine"] != "ours" or row["method"] != "speculative" or row["schedule"] != "fixed":
                continue
            peer = next((k for k, r in pinned.items() if r["draft"] == row["draft"] and r["gamma"] == row["gamma"]), None)
            if peer is not None:
                theirs = rows[peer]["speedup_vs_hf_generate"]
                ratios[f"{key}_speedup_vs_{_ratio_name(peer)}_speedup"] = row["speedup"] / theirs if theirs else None
            default = next((k for k, r in defaults.items() if r["draft"] == row["draft"]), None)
            if default is not None and rows[default]["speedup_vs_hf_generate"]:
                ratios[f"{key}_speedup_vs_{_ratio_name(default)}_speedup"] = (
                    row["speedup"] / rows[default]["speedup_vs_hf_generate"])
        out["ratios"] = ratios
    return out


def goals(rows: dict, top: dict) -> dict:
    """The project's standing goals against the HF peer, checked on this run's numbers (None when
    a figure is missing)."""
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
                rest = k.removeprefix("hf-assisted-")
                mine = "speculative-" + (rest[: -len("default")] + "auto" if rest.endswith("default") else rest)
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
            # each drafter's schedule against the best fixed gamma of the same drafter
            for key, row in rows.items():
                if row["engine"] != "ours" or row["method"] != "speculative" or row["schedule"] != sched:
                    continue
                same = [v["speedup"] for v in fixed.values() if v["draft"] == row["draft"] and v["speedup"]]
                if row["speedup"] and same:
                    ratio = row["speedup"] / max(same)
                    name = f"{sched}_gamma_vs_best_fixed" + ("" if key == f"speculative-{sched}" else f"[{row['draft']}]")
                    g[name] = {"ratio": ratio, "met": ratio >= 0.9 if sched == "auto" else None}
    return g


UNCATEGORIZED = "uncategorized"


def category_table(timing: dict, categories: list[str], ar_key: str, hf_generate_key: str | None = None) -> dict:
    """Per prompt category, every variant's figures from the same timing runs as the overall row.

    `timing[variant][repeat]` lists one RunStats per prompt, in the order of `categories` (the
    category of each prompt). Speedup = the category's tokens / seconds over the same for our
    autoregressive runs of that category; tokens and seconds are kept, so the overall figures
    follow from the categories' (sum the tokens and the seconds)."""
    names = sorted({c or UNCATEGORIZED for c in categories})
    out: dict = {}
    for name in names:
        idx = [i for i, c in enumerate(categories) if (c or UNCATEGORIZED) == name]
        per_variant = {}
        for key, reps in timing.items():
            per_variant[key] = total([reps[r][i] for r in sorted(reps) for i in idx])
        ar = per_variant[ar_key].tokens_per_second
        ar_after = per_variant[ar_key].tokens_per_second_after_first_pass
        hf = per_variant[hf_generate_key].tokens_per_second if hf_generate_key in per_variant else None
        block = {}
        for key, counts in per_variant.items():
            row = {
                "speedup": counts.tokens_per_second / ar if ar else None,
                "speedup_after_first_pass": _ratio(counts.tokens_per_second_after_first_pass, ar_after),
                "first_pass_share": counts.first_pass_share,
                "tokens_per_call": counts.tokens_per_call if counts.target_calls else None,
                "mean_accepted": counts.mean_accepted,
                **acceptance_figures(counts),
                "tokens": counts.tokens,
                "seconds": counts.seconds,
                "target_calls": counts.target_calls,
                "prompts": len(idx),
            }
            if hf and key.startswith("hf-"):
                row["speedup_vs_hf_generate"] = counts.tokens_per_second / hf
            if counts.by_source:
                row["by_source"] = counts.by_source.rows()
            block[key] = row
        out[name] = block
    return out


def per_prompt_table(timing: dict, prompts: list, ar_key: str) -> list[dict]:
    """Per prompt (in file order): its id and category, and each variant's tokens, seconds, tokens per
    target call and speedup over our autoregressive run of that prompt (summed over repeats)."""
    out = []
    for i, prompt in enumerate(prompts):
        per_variant = {key: total([reps[r][i] for r in sorted(reps)]) for key, reps in timing.items()}
        ar = per_variant[ar_key].tokens_per_second
        out.append({"id": getattr(prompt, "id", "") or str(i), "category": getattr(prompt, "category", ""),
                    "variants": {key: {"speedup": c.tokens_per_second / ar if ar else None,
                                       "tokens_per_call": c.tokens_per_call if c.target_calls else None,
                                       "tokens": c.tokens, "seconds": c.seconds} for key, c in per_variant.items()}})
    return out
