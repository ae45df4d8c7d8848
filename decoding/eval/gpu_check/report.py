"""docs/gpu.md: the device and every part's figures in markdown, from the parts' result dicts.

Parts can run one at a time, so each run's results are kept in runs/gpu-check/results.json and
merged with the earlier parts measured on the same device and torch; the report is rewritten from
the merged results. Text that came from errors has this machine's repository and home directory
replaced, so the report names no local path."""

from __future__ import annotations

import json
from pathlib import Path

from ...paths import REPO, display_path
from .goals import before_after, check_goals
from .settings import PARTS

TITLES = {"tests": "CUDA-marked tests (tiny random models, float32, TF32 off)",
          "bench": "Benchmark on Spec-Bench (our decoding per backend, the HF peers)",
          "energy": "Energy per token (NVML)",
          "ppd": "PPD hardware tune"}


def scrub(text: str) -> str:
    """`text` without this machine's repository or home path."""
    return str(text).replace(str(REPO), ".").replace(str(Path.home()), "~")


def _num(v, spec=".3f") -> str:
    return "n/a" if v is None else format(v, spec)


def merge(previous: dict | None, info: dict, results: dict) -> dict:
    """{"device": info, "parts": ...}: the new parts over the earlier ones of the same device and torch."""
    same = bool(previous) and all(previous.get("device", {}).get(k) == info.get(k) for k in ("device", "torch"))
    parts = {**(previous["parts"] if same else {}), **{k: {**v, "date": info["date"]} for k, v in results.items()}}
    return {"device": info, "parts": parts}


def _device_table(info: dict) -> list[str]:
    return ["| | |", "|---|---|",
            f"| device | {info['device']} (compute capability {info['capability']}, {info['memory_gib']} GiB, "
            f"bfloat16 {'yes' if info['bf16'] else 'no'}) |",
            f"| driver | {info['driver']} |",
            f"| CUDA (torch's build) / cuDNN | {info['cuda']} / {info['cudnn']} |",
            f"| torch / transformers / Python | {info['torch']} / {info['transformers']} / {info['python']} |",
            f"| date | {info['date']} |"]


def _tests(r: dict) -> list[str]:
    counts = ", ".join(f"{n} {k}" for k, n in r.get("counts", {}).items()) or "no summary"
    out = [f"`{r.get('command', '')}`: {counts}."]
    if not r.get("tail"):  # a failed run shows pytest's own tail instead
        out += [f"- `{scrub(line)}`" for line in r.get("problems", [])]
    return out


CATEGORY_NAMES = {"mt_bench": "multi-turn", "translation": "translation", "summarization": "summarization",
                  "qa": "QA", "math_reasoning": "math", "rag": "RAG"}
MET = {True: "**met**", False: "**not met**", None: "not measured"}


def _cell(tps, speedup) -> str:
    return "n/a" if tps is None else f"{tps:.1f} ({_num(speedup, '.2f')}x)"


def _category_table(jobs: dict) -> list[str]:
    """One row per variant of every job: tokens/s (speedup over our plain decoding in the same job)
    per Spec-Bench category, then over all the job's prompts."""
    names = list(dict.fromkeys(c for j in jobs.values() for c in j.get("prompt_categories", {})))
    head = ["job", "variant", "precision", "prompts"] + [CATEGORY_NAMES.get(c, c) for c in names] + ["all"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for job in jobs.values():
        per_cat = job.get("prompt_categories", {})
        count = f"{job['prompts']} (" + ", ".join(str(per_cat.get(c, 0)) for c in names) + ")"
        for key, v in job["variants"].items():
            cells = [_cell((v["by_category"].get(c) or {}).get("tokens_per_second"),
                           (v["by_category"].get(c) or {}).get("speedup")) for c in names]
            total = _cell(v.get("tokens_per_second"), v.get("speedup"))
            out.append(f"| {job['key']} | {key} | {job['dtype']} | {count} | " + " | ".join(cells)
                       + f" | **{total}** |")
    return out


def _bench_jobs(r: dict) -> list[str]:
    """The bench part of `bench_part.py`: plan, goals, before/after, the category table, the notes."""
    jobs = {k: j for k, j in r["jobs"].items() if j.get("status") == "ok"}
    compiled = next((j.get("hf_compiled") for j in jobs.values() if j.get("hf_compiled")), None)
    out = []
    if r["status"] == "running":
        out += ["**This part had not finished when the report was written**: the jobs below are those done "
                "(the rest were cut short).", ""]
    if r.get("skipped"):
        out += ["Skipped:", ""] + [f"- {s['what']}: {scrub(s['why'])}" for s in r["skipped"]] + [""]
    out += [f"Pair: {r.get('pair')}" + (f" ({r['note']})" if r.get("note") else "") + f". Prompts: "
            f"`{r.get('prompts_file')}`, spread over its categories; {r.get('max_new_tokens')} new tokens "
            "(end of sequence ignored), greedy, one timing run per prompt and variant after one warm-up, interleaved. "
            "Speedups are tokens/s ratios against our plain decoding in the same job (same prompts, precision and "
            "backend).", "",
            f"Time budget: {r.get('budget_s'):.0f} s for the whole check, {r.get('bench_seconds_planned')} s for this "
            "part. Speeds assumed for planning: "
            + ", ".join(f"{k} {v:.0f}" for k, v in r.get("assumed_tps", {}).items())
            + " tokens/s; measured by the jobs' probes: "
            + (", ".join(f"{k} {v:.1f}" for k, v in (r.get("measured_tps") or {}).items()) or "none") + ".", "",
            "| job | what | backend | planned prompts | prompts used | seconds | CUDA graphs | status |",
            "|---|---|---|---|---|---|---|---|"]
    planned = {p["job"]: p for p in r.get("plan", [])}
    for key, j in r["jobs"].items():
        plan = planned.get(key, {})
        backend = j.get("env") or {}
        out.append(f"| {key} | {j.get('title', '')} | {', '.join(f'{k}={v}' for k, v in backend.items()) or 'n/a'} "
                   f"| {plan.get('prompts', 'n/a')} (~{plan.get('estimate_s', 'n/a')} s) | {j.get('prompts', 0)} "
                   f"| {j.get('seconds', 'n/a')} | {_graph_counts(j.get('graph_counts'))} | {j['status']}"
                   + (f" (stopped after {j['cut_short']['prompts_done']} of {j['cut_short']['prompts_planned']} "
                      f"prompts: {j['cut_short']['why']})" if j.get("cut_short") else "")
                   + (f": {scrub(j.get('why') or j.get('error'))}"
                                                                       if j["status"] != "ok" else "") + " |")
    out += ["", "### The GPU backend's goals, checked on this run", "",
            "| goal | | value | detail |", "|---|---|---|---|"]
    for g in check_goals(r, compiled):
        out.append(f"| {g['goal']} | {MET[g['met']]} | {g['value']} | {scrub(g['detail'])} |")
    ba = before_after(r)
    out += ["", "### Before and after: plain decoding, dynamic cache against static cache + CUDA graphs", ""]
    if ba:
        out.append(f"{ba['dtype']}, the {ba['prompts']} prompts both jobs decoded: dynamic cache "
                   f"{_num(ba['dynamic_tps'], '.1f')} tokens/s, static cache + CUDA graphs "
                   f"{_num(ba['static_tps'], '.1f')} "
                   f"tokens/s: **{_num(ba['speedup'], '.2f')}x**.")
    else:
        out.append("Not measured (a job of the two did not finish).")
    if compiled:
        how = (f"compiled (torch.compile, mode {compiled.get('mode')}), static cache of "
               f"{compiled['max_cache_len']} tokens"
               if compiled.get("compiled") else f"not compiled: {scrub(compiled.get('eager_why'))}")
        out += ["", f"HF generate()'s fastest configuration (hf-generate-compiled): {how}."]
    out += ["", "### Tokens/s per Spec-Bench category (speedup over our plain decoding in the same job)", "",
            "The prompts column gives the job's prompts and, in brackets, how many of each category.", ""]
    out += _category_table(jobs)
    for key, j in jobs.items():
        notes = []
        if any(k != "autoregressive" for k in j.get("greedy_equal") or {}):
            notes.append(f"greedy text equal to our plain decoding's in {j['dtype']}"
                         + ("" if j["dtype"] == "float32" else " (exactness is claimed in float32 only)") + ": "
                         + ", ".join(f"{k} {v}" for k, v in j["greedy_equal"].items() if k != "autoregressive"))
        if j.get("skipped_drafts"):
            notes.append("drafters not loaded: "
                         + "; ".join(f"{s['what']} ({scrub(s['why'])})" for s in j["skipped_drafts"]))
        if j.get("backend_reported"):
            notes.append(f"backend the target reported: {j['backend_reported']}")
        if notes:
            out += ["", f"{key} ({j['out']}): " + "; ".join(notes) + "."]
    for key, j in r["jobs"].items():
        if j["status"] == "failed" and j.get("traceback"):
            out += ["", f"{key} failed:", "", "```text", scrub(j["traceback"]).rstrip(), "```"]
    fastest = r.get("fastest")
    if fastest:
        out += ["", f"Fastest drafter in {fastest['dtype']} (job {fastest['job']}): **{fastest['drafter']}** at gamma "
                    f"{fastest['gamma']}, {fastest['speedup']:.2f}x our plain decoding."]
    return out


def _bench(r: dict) -> list[str]:
    if "jobs" in r:
        return _bench_jobs(r)
    out = []
    if r.get("skipped"):
        out += ["Skipped:", ""] + [f"- {s['what']}: {scrub(s['why'])}" for s in r["skipped"]] + [""]
    for run in r.get("runs", []):
        s = run["settings"]
        draft_dtype = str(run["models"].get("draft_dtype") or "none").removeprefix("torch.")
        out += [f"### {run['pair']}, {run['dtype']}", "",
                f"Dev prompts: {s['prompts']}; {s['max_new_tokens']} new tokens, greedy, gamma "
                f"{', '.join(str(g) for g in s['gammas'])}, {s['repeats']} repeat after {s['warmup']} warm-up; draft "
                f"dtype {draft_dtype}; full results in `{run['out']}`." + (f" {run['note']}." if run.get("note") else ""),
                "", run["table"].rstrip(), ""]
        if run.get("greedy_equal"):
            out.append(f"Greedy output equal to our autoregressive output in {run['dtype']}"
                       + ("" if run["dtype"] == "float32" else " (exactness is claimed in float32 only)") + ": "
                       + ", ".join(f"{k} {v}" for k, v in run["greedy_equal"].items()) + ".")
        fastest = run.get("fastest")
        if fastest:
            out.append(f"Fastest drafter of this run: **{fastest['drafter']}** at gamma {fastest['gamma']}, "
                       f"{fastest['speedup']:.2f}x our autoregressive decoding.")
        elif run.get("default_target"):
            out.append("No drafter of this run was faster than our autoregressive decoding.")
        out += [f"Energy in these short runs: {run['energy_note']} (per-token figures need windows of at least "
                "one second: see the energy section).", ""]
    return out


def _energy(r: dict) -> list[str]:
    if r["status"] == "unavailable":
        return [f"Not measured: {scrub(r['reason'])}."]
    drafter = (f", speculative with the {r['drafter']} drafter at gamma {r.get('gamma', 4)}"
               if r.get("drafter") else "")
    backend = r.get("backend")
    backend = f", backend {', '.join(f'{k}={v}' for k, v in backend.items())}" if backend else ""
    out = [f"{r['pair']}{drafter}, {r['dtype']}{backend}, greedy; {r['meter']}; windows of at least "
           f"{r['window_seconds']:.0f} s; idle power {_num(r['idle_watts'], '.1f')} W.", "",
           "| method | tokens | window s | joules | J/token | J/token above idle |", "|---|---|---|---|---|---|"]
    for name, m in r["methods"].items():
        out.append(f"| {name} | {m['tokens']} | {m['seconds']:.2f} | {_num(m['joules'], '.2f')} "
                   f"| {_num(m['joules_per_token'], '.4f')} | {_num(m['above_idle_joules_per_token'], '.4f')} |")
    return out


def _ppd(r: dict) -> list[str]:
    sizes = r["rows"][0]["sizes"]
    out = [f"Target {r['target']}; prompt embeddings: {scrub(r['rows'][0]['embeddings'])}. "
           f"n* on the project's CPU: {r['cpu_tree_size']}. On this GPU: "
           + ", ".join(f"{row['tree_size']} in {row['dtype']}" for row in r["rows"])
           + (" (**moved**)." if r["moved"] else " (same as on the CPU)."), "",
           "| n | " + " | ".join(str(n) for n in sizes) + " |", "|---|" + "---|" * len(sizes)]
    for row in r["rows"]:
        out.append(f"| T(n) tokens per step, {row['dtype']} | " + " | ".join(f"{v:.2f}" for v in row["tokens_per_step"]) + " |")
        out.append(f"| L(n) ms, {row['dtype']} | " + " | ".join(f"{v:.2f}" for v in row["latency_ms"]) + " |")
        out.append(f"| T/L relative, {row['dtype']} | " + " | ".join(f"{v:.2f}" for v in row["speedup_rel"]) + " |")
    return out


RENDER = {"tests": _tests, "bench": _bench, "energy": _energy, "ppd": _ppd}


def render(data: dict) -> str:
    """The markdown of docs/gpu.md from merged results."""
    info, parts = data["device"], data["parts"]
    budget = (parts.get("bench") or {}).get("budget_s")
    command = "python -m decoding gpu-check" + (f" --budget-s {budget:.0f}" if isinstance(budget, (int, float)) else "")
    lines = ["# GPU check", "",
             f"Written by `make gpu-check PYTHON=python3` (this run: `{command}`); one part "
             "alone: `python -m decoding gpu-check --part bench|energy|tests|ppd`. The figures of this page are "
             "also in `runs/gpu-check/gpu-check.json` on the machine that ran it.", ""] + _device_table(info) + [""]
    for name in PARTS:
        lines += [f"## {TITLES[name]}", ""]
        r = parts.get(name)
        if r is None:
            lines += [f"Not run yet: `python -m decoding gpu-check --part {name}`.", ""]
            continue
        lines += [f"Status: **{r['status']}** ({r.get('date')}, {r.get('seconds', 'n/a')} s).", ""]
        if r["status"] == "skipped":
            lines += [f"Skipped: {scrub(r.get('why', ''))}", ""]
            continue
        if r["status"] == "failed":
            lines += [f"Error: {scrub(r.get('error', 'unknown'))}", ""]
            detail = r.get("traceback") or r.get("tail")
            if detail:
                lines += ["```text", scrub(detail).rstrip(), "```", ""]
            if name in ("tests", "bench") and (r.get("counts") or r.get("runs") or r.get("jobs")):
                lines += RENDER[name](r) + [""]
            continue
        lines += RENDER[name](r) + [""]
    return "\n".join(lines).rstrip() + "\n"


def write_report(info: dict, results: dict, out: Path, runs_dir: Path) -> str:
    """Merge with the earlier parts, keep the merged results, write the markdown; returns its path as shown."""
    store = runs_dir / "results.json"
    try:
        previous = json.loads(store.read_text())
    except (OSError, ValueError):
        previous = None
    data = merge(previous, info, results)
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps(data, indent=1, default=str))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(data))
    return display_path(out)


def _graph_counts(counts: dict | None) -> str:
    """A job's CUDA-graph tallies (lm/cuda_graphs.counts) in words: captures (their ms), replays, eager passes."""
    if not counts:
        return "n/a"
    return (f"{counts.get('captures', 0)} captured ({counts.get('capture_ms', 0):.0f} ms), "
            f"{counts.get('replays', 0)} replays, {counts.get('eager_passes', 0)} eager passes")
