"""Write docs/performance.md, the README's headline table and docs/classroom.md's table from the committed
measurements, so no figure in them is typed by hand.

Reads the benchmark runs under docs/bench/ (each `<name>/bench.json`, written by `python -m decoding
bench ... --out docs/bench/<name>`), `docs/bench/verify-cost*.json` (`python -m decoding verify-cost
--json`), `docs/bench/attention-kernels.json` (`experiments/attention_kernels.py`),
`docs/bench/draft-head-*.json` and `docs/bench/feature-draft*.json` (`python -m decoding eval-draft
--json`), the experiments' JSON it reports (copy ceiling, copy continuation, several layers) and the
class checks (`docs/bench/class-*-<precision>/result.json`, written by `make class-check` and its
siblings). Usage:

    .venv/bin/python scripts/performance_report.py [--runs spec-bench-bfloat16,spec-bench-float32,...]

The README's table (the first run of --runs) sits between the lines `<!-- performance:begin -->` and
`<!-- performance:end -->`; docs/classroom.md's between `<!-- classroom:begin -->` and
`<!-- classroom:end -->`.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import textwrap
from pathlib import Path

from decoding.paths import BENCH_RUNS as BENCH, DOCS

ROOT = Path(__file__).resolve().parents[1]

CATEGORY_NAMES = {"mt_bench": "multi-turn", "translation": "translation", "summarization": "summarization",
                  "qa": "QA", "math_reasoning": "math", "rag": "RAG"}
ORDER = list(CATEGORY_NAMES)
# Spec-Bench's leaderboard (RTX 3090, Vicuna-7B-v1.3, fp16, greedy): speedups per category, overall
# (benchmarks/README.md gives the source).
PUBLISHED = {
    "SpS (vanilla speculative sampling), GPU, 7B": [1.94, 1.37, 1.96, 1.86, 1.81, 1.83, 1.79],
    "PLD (prompt lookup), GPU, 7B": [1.64, 1.15, 2.46, 1.28, 1.72, 1.71, 1.64],
}
BEGIN, END = "<!-- performance:begin -->", "<!-- performance:end -->"
CLASS_BEGIN, CLASS_END = "<!-- classroom:begin -->", "<!-- classroom:end -->"
# The class checks of the Makefile first, in this order; any other class-* run after them.
CLASS_RUNS = {"class-check": "make class-check", "class-hall": "make class-hall", "class-soak": "make class-soak"}


def read_json(path: Path) -> dict | None:
    """A committed measurement's JSON, or None when that measurement was not made."""
    return json.loads(path.read_text()) if path.is_file() else None


def load(name: str) -> dict | None:
    return read_json(BENCH / name / "bench.json")


def _x(v) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def _f(v, spec=".2f") -> str:
    return "n/a" if v is None else format(v, spec)


def precision(result: dict) -> str:
    return str(result["models"].get("dtype", "?")).removeprefix("torch.")


def category_table(result: dict, keys: list[str]) -> list[str]:
    cats = [c for c in ORDER if c in result["categories"]] + [c for c in result["categories"] if c not in ORDER]
    head = "| variant | " + " | ".join(CATEGORY_NAMES.get(c, c) for c in cats) + f" | all {result['settings']['prompts']} |"
    lines = [head, "|" + "---|" * (len(cats) + 2)]
    for key in keys:
        if key not in result["methods"]:
            continue
        cells = [_x(result["categories"][c][key]["speedup"]) for c in cats]
        lines.append(f"| {key} | " + " | ".join(cells) + f" | **{_x(result['methods'][key]['speedup'])}** |")
    return lines


def calls_table(result: dict, keys: list[str]) -> list[str]:
    cats = [c for c in ORDER if c in result["categories"]]
    lines = ["| variant | " + " | ".join(CATEGORY_NAMES[c] for c in cats) + " | all |", "|" + "---|" * (len(cats) + 2)]
    for key in keys:
        if key not in result["methods"]:
            continue
        cells = [f"{_f(result['categories'][c][key]['tokens_per_call'])} / {_f(result['categories'][c][key]['mean_accepted'])}"
                 for c in cats]
        r = result["methods"][key]
        lines.append(f"| {key} | " + " | ".join(cells) + f" | {_f(r['tokens_per_target_call'])} / {_f(r['mean_accepted'])} |")
    return lines


def after_prefill_table(result: dict, keys: list[str]) -> list[str]:
    """Speedup once each run's prompt prefill pass is done, per category; the last row gives the
    share of our autoregressive time that pass took (empty for runs made before it was timed)."""
    cats = [c for c in ORDER if c in result["categories"]]
    ar = "autoregressive"
    if result["methods"].get(ar, {}).get("first_pass_share") is None:
        return []
    lines = ["| variant | " + " | ".join(CATEGORY_NAMES[c] for c in cats) + " | all |", "|" + "---|" * (len(cats) + 2)]
    for key in keys:
        if key == ar or key not in result["methods"]:
            continue
        cells = [_x(result["categories"][c][key].get("speedup_after_first_pass")) for c in cats]
        lines.append(f"| {key} | " + " | ".join(cells) + f" | {_x(result['methods'][key].get('speedup_after_first_pass'))} |")
    shares = [_f(result["categories"][c][ar]["first_pass_share"], ".0%") for c in cats]
    lines.append("| *prefill share of autoregressive time* | " + " | ".join(shares)
                 + f" | {_f(result['methods'][ar]['first_pass_share'], '.0%')} |")
    return lines


def continuation_section() -> list[str]:
    """The hybrid with and without continuing a model draft by a copy (experiments/hybrid_continuation.py)."""
    data = read_json(BENCH / "hybrid-continuation.json")
    if data is None:
        return []
    figures = data["figures"]
    cats = [c for c in ORDER if c in figures] + ["all"]
    lines = ["## The hybrid's copy continuation", "",
             f"Command: `{data['command']}` ({data['dtype'].removeprefix('torch.')}, {data['threads']} thread, "
             f"gamma {data['gamma']}; one run, the variants interleaved per prompt). Speedup over autoregressive "
             "decoding / tokens per target call / speedup after the prefill:", "",
             "| variant | " + " | ".join(CATEGORY_NAMES.get(c, c) for c in cats) + " |", "|" + "---|" * (len(cats) + 1)]
    for variant in figures["all"]:
        if variant == "autoregressive":
            continue
        cells = [f"{_x(figures[c][variant]['speedup'])} / {_f(figures[c][variant]['tokens_per_call'])} / "
                 f"{_x(figures[c][variant]['speedup_after_first_pass'])}" for c in cats]
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return lines + [""]


def attention_section() -> list[str]:
    """Target pass times per attention kernel and cache length (experiments/attention_kernels.py)."""
    data = read_json(BENCH / "attention-kernels.json")
    if data is None:
        return []
    machine = data["machine"]
    kernels = [k for k in data["rows"][0] if k not in ("dtype", "context", "new_tokens", "pass")]
    lines = ["## Which attention kernel a pass runs", "",
             f"Command: `python experiments/attention_kernels.py --out docs/bench/attention-kernels.json` "
             f"({machine['cpu']}, {machine.get('cpu_capability', '?')}, {machine['threads']} thread, torch {machine['torch']}, median of "
             f"{data['repeats']}). One target pass, in ms, with each kernel; the last column is the split kernel "
             "the loader gives a bfloat16 or float16 model on the CPU (`decoding/lm/models/attention.py`): "
             "SDPA, with one-token steps run on float32 copies of q, k and v, and masked passes of several tokens "
             "(verify, tree and batched passes) with the query heads of each key/value head stacked, so the cache is "
             "not copied per query head. float32 models keep SDPA. Every kernel runs on the in-place KV cache "
             "(`decoding/lm/kv_cache.py`).", "",
             "| dtype | cached tokens | pass | " + " | ".join(kernels) + " |", "|" + "---|" * (len(kernels) + 3)]
    for r in data["rows"]:
        prefill = r["pass"] == "prefill"
        label = f"prefill of {r['new_tokens']}" if prefill else f"{r['new_tokens']} new"
        lines.append(f"| {r['dtype']} | {0 if prefill else r['context']} | {label} | "
                     + " | ".join(f"{r[k]:.1f}" for k in kernels) + " |")
    return lines + [""]


def eval_draft_runs(*names: str) -> list[dict]:
    """The committed eval-draft runs (docs/bench/<name>.json) that exist."""
    return [r for name in names if (r := read_json(BENCH / f"{name}.json"))]


def eval_draft_rows(runs: list[dict], cells) -> list[str]:
    """One table row per draft of every run: its prompt file, then `cells(result)`."""
    return [f"| {run.get('prompt_file', '?')} ({run['prompts']}, {run['max_new_tokens']} tokens) | {cells(r)} |"
            for run in runs for r in run["results"]]


def draft_head_section() -> list[str]:
    """The distilled draft with output heads of several sizes (docs/bench/draft-head-*.json: eval-draft runs)."""
    runs = eval_draft_runs("draft-head-spec-bench", "draft-head-dev")
    if not runs:
        return []
    lines = ["## The draft's output head", "",
             "The distilled draft with its full tied head and with heads over the target's most frequent tokens "
             "(`python -m training trim-head`; the shipped draft keeps 8,192), one `python -m decoding eval-draft "
             "--draft <the four, comma-separated> --json` run per prompt file, target and draft in "
             f"{runs[0]['results'][0]['draft_dtype']}, 1 thread:", "",
             "| prompts | head tokens | alpha (T=1) | greedy agreement | tokens/call (greedy, gamma 4) | draft step ms | c |",
             "|---|---|---|---|---|---|---|"]
    lines += eval_draft_rows(runs, lambda r: (
        f"{r['head_tokens']:,}" if r.get("head_tokens") else "all (tied head)")
        + f" | {r['alpha']:.3f} | {r['greedy_agreement']:.3f} | {r['tokens_per_call_gamma4']:.2f} | "
          f"{r['draft_step_ms']:.2f} | {r['c']:.3f}")
    return lines + [""]


def feature_draft_section() -> list[str]:
    """The feature draft (EAGLE) beside the distilled draft (docs/bench/feature-draft-*.json: eval-draft runs)."""
    runs = eval_draft_runs("feature-draft-spec-bench", "feature-draft-dev")
    if not runs:
        return []
    lines = ["## The feature draft (EAGLE) beside the distilled draft", "",
             "One `python -m decoding eval-draft --draft distilled,feature --json` run per prompt file, target and "
             f"drafts in {runs[0]['results'][0]['draft_dtype']}, 1 thread. The feature draft's alpha and greedy "
             "agreement are its first draft token's, from the target's true states; its tokens per call are the "
             "engine's own greedy runs at gamma 4 over every prompt (its later tokens read its own predicted states), "
             "the distilled draft's are replayed from its teacher-forced matches ("
             + "; ".join(f"on {run.get('prompt_file', '?')} engine {r['engine_check']['tokens_per_call_engine']:.2f} "
                         f"against replay {r['engine_check']['tokens_per_call_replay']:.2f} on the "
                         f"{r['engine_check']['prompts']} prompts the engine also ran"
                         for run in runs for r in run["results"]
                         if (r.get("engine_check") or {}).get("tokens_per_call_replay") is not None)
             + "). These runs measured the feature draft as it was before its GPU stages (next section).", ""]
    lines += FEATURE_DRAFT_HEADER
    lines += eval_draft_rows(runs, feature_draft_cells)
    return lines + [""]


FEATURE_DRAFT_HEADER = ["| prompts | draft | params | alpha (T=1) | greedy agreement | tokens/call (greedy, gamma 4) | "
                        "draft step ms | c |", "|---|---|---|---|---|---|---|---|"]


def feature_draft_cells(r: dict) -> str:
    return (f"{r['draft']} | {r['draft_params'] / 1e6:.1f}M | {r['alpha']:.3f} | {r['greedy_agreement']:.3f} | "
            f"{r['tokens_per_call_gamma4']:.2f} | {r['draft_step_ms']:.2f} | {r['c']:.3f}")


def feature_draft_gpu_section() -> list[str]:
    """The feature draft before and after its GPU stages (docs/bench/feature-draft-gpu-*.json: eval-draft runs)."""
    runs = eval_draft_runs("feature-draft-gpu-spec-bench", "feature-draft-gpu-dev")
    if not runs:
        return []
    lines = ["## The feature draft's GPU stages", "",
             "Stages 3 and 4 went on from the draft of the section above on more data, on a GPU (the model "
             "card says how). One `python -m decoding eval-draft --json` run per prompt file over the "
             f"three versions, target and drafts in {runs[0]['results'][0]['draft_dtype']}, 1 thread; tokens per call "
             "are the engine's greedy runs at gamma 4 over every prompt.", ""]
    return lines + FEATURE_DRAFT_HEADER + eval_draft_rows(runs, feature_draft_cells) + [""]


def sources_table(result: dict, key: str) -> list[str]:
    """Per draft source of one variant (rows) and category (columns): share of the iterations after
    the prefill / tokens emitted per iteration / draft tokens accepted per iteration."""
    from decoding.eval.bench.report import source_markdown

    return source_markdown(result, key, ORDER, CATEGORY_NAMES, drafted=False).splitlines()


def headline_keys(result: dict) -> list[str]:
    """Our autoregressive baseline, every speculative variant, and HF's peers."""
    keys = ["autoregressive"]
    keys += [k for k, r in result["methods"].items() if r["engine"] == "ours" and r["method"] != "autoregressive"]
    keys += [k for k, r in result["methods"].items() if r["engine"] == "hf"]
    return keys


def machine_line(result: dict) -> str:
    m, s = result["machine"], result["settings"]
    return (f"{m['cpu']} ({m.get('cpu_capability', '?')}), {m['usable_cores']} usable cores, torch threads "
            f"{m['torch_threads']}, torch {m['versions'].get('torch')}; target {result['models']['target']} in "
            f"{precision(result)}, drafts {result['models']['draft']}; {s['prompts']} prompts of "
            f"`{s['prompts_file']}`, {s['max_new_tokens']} new tokens (end-of-sequence ignored), greedy, "
            f"{s['repeats']} repeat after {s['warmup']} warm-up; {result['date']}")


def run_section(name: str, result: dict) -> list[str]:
    keys = headline_keys(result)
    new_tokens = result.get("settings", {}).get("max_new_tokens", "?")
    equal = result.get("greedy_equal_to_autoregressive") or {}
    lines = [f"## {precision(result)}: `docs/bench/{name}/`", "", machine_line(result) + ".", "",
             f"Command: `{result.get('command', '?')}`", "",
             "Speedup over our autoregressive decoding in the same run and precision (tokens/s ratio):", ""]
    lines += category_table(result, keys)
    lines += ["", "Tokens per target call / mean accepted draft tokens:", ""]
    lines += calls_table(result, [k for k in keys if result["methods"][k]["engine"] == "ours"])
    after = after_prefill_table(result, keys)
    if after:
        lines += ["", "After the prompt's prefill: the speedup once each run's first target pass (the prompt's prefill, "
                  "the same work in every variant) is done, and that pass's share of our autoregressive time. On "
                  f"long prompts the prefill caps the whole run's speedup at {new_tokens} new tokens:", ""] + after
    for key in keys:
        sources = result["methods"].get(key, {}).get("by_source") or {}
        if len(sources) > 1 and "model" in sources:  # a hybrid: which source drafted where
            lines += ["", f"Where {key}'s iterations after the prefill drafted from: share of the iterations / tokens "
                      "per iteration (the correction or bonus token included) / draft tokens accepted per iteration. "
                      "lookup: a copy after a suffix match of at least 2 tokens; lookup-short: after a 1-token match; "
                      "none: a plain target step (the automatic γ chose 0):", ""] + sources_table(result, key)
    hf = result.get("hf_assisted_speedup_by_draft") or {}
    ar_vs_hf = result.get("ratios", {}).get("autoregressive_vs_hf_generate")
    lines += ["", f"Our autoregressive decoding runs at {_x(ar_vs_hf)} the speed of HF `generate()`; HF assisted "
              "generation at its default settings, speedup over HF `generate()`: "
              + ", ".join(f"{k} {_x(v)}" for k, v in hf.items()) + ".", ""]
    if equal:
        lines.append(f"Greedy text equal to greedy autoregressive text ({result.get('greedy_equal_precision')}, all "
                     f"{new_tokens} tokens of each timing run): " + ", ".join(f"{k} {v}" for k, v in equal.items()) + ".")
    auto = [k for k in keys if k.endswith("-auto")]
    if auto:
        lines.append("")
        lines.append("Automatic gamma (mean gamma asked): " + ", ".join(
            f"{k} {_f(result['methods'][k].get('mean_gamma_asked'), '.1f')}" for k in auto) + ".")
    return lines + [""]


def verify_section() -> list[str]:
    """One table per verify-cost run: docs/bench/verify-cost.json (a short cache) and, when present,
    docs/bench/verify-cost-long.json (`--context 1000`: the cache of a long prompt)."""
    runs = [v for p in (BENCH / "verify-cost.json", BENCH / "verify-cost-long.json") if (v := read_json(p))]
    if not runs:
        return []
    lines = ["## What a verify pass costs", ""]
    for v in runs:
        sizes = sorted({int(k) for row in v["rows"].values() for k in row["relative"]})
        lines += [f"`python -m decoding verify-cost --context {v['context']}` on {v['device']}, {v['threads']} torch "
                  f"thread(s), median of {v['reps']} passes ({v.get('cpu_capability', '?')}): one target pass over k "
                  f"new tokens on a cache of {v['context']} tokens, relative to one token.", "",
                  "| k | " + " | ".join(str(k) for k in sizes) + " |", "|" + "---|" * (len(sizes) + 1)]
        for name, row in v["rows"].items():
            lines.append(f"| {name} | " + " | ".join(f"{row['relative'][str(k)]:.2f}x" for k in sizes) + " |")
        lines.append("")
    five = {f"{name} {v['context']}": row["relative"].get("5") for v in runs for name, row in v["rows"].items()}
    said = ", ".join(f"{key.split()[0]} on {key.split()[1]} cached tokens {value:.2f}x"
                     for key, value in five.items() if value is not None)
    lines += [f"A pass over gamma + 1 = 5 tokens costs, relative to one step: {said}. Speculative decoding's speed "
              "rests on that ratio (Leviathan et al. assume about 1x): it is why bfloat16 is the default on CPUs with "
              "native bf16 (`decoding/lm/devices.py`), and float32 stays the reference for exactness. On a long cache "
              "the ratio grows, so long prompts gain less per accepted token.", ""]
    return lines


def ceiling_section(results: dict) -> list[str]:
    """How far copying and a draft model can go on these outputs (experiments/copy_ceiling.py), beside
    the measured speedups of the benchmark run it took its prefill shares from."""
    data = read_json(BENCH / "copy-ceiling.json")
    if data is None:
        return []
    from decoding.eval.bench.ceiling import markdown

    rows = {row["key"]: row for row in data["rows"]}
    lookup, oracle, model = rows.get("lookup"), rows.get("oracle-copy"), rows.get("model")
    measured = results.get(Path(data["bench"]).parent.name, {}).get("methods", {})
    measured_lookup = measured.get("speculative-prompt-lookup-auto", {}).get("speedup")
    measured_feature = measured.get("speculative-feature-auto", {}).get("speedup")
    lines = ["## How far copying can go: the engine's lookup against oracles", "",
             f"Command: `{data['command']}` ({data['date']}, {data['dtype']}, {data['threads']} thread). Greedy "
             "speculative decoding emits the autoregressive output, so any drafting rule's accepted tokens follow from "
             f"that output alone. The script decodes the {data['prompts']} prompts autoregressively ({data['max_new_tokens']} "
             "new tokens, as the benchmark does), replays each output under a rule, and costs every pass with the measured "
             f"verify times (`{data['verify_cost']}`, interpolated in pass size and cached length) and each category's "
             f"prefill share from `{data['bench']}`. Oracles read the output: where to copy from, whether the copy's first "
             "token is right, how many tokens will be accepted. The `+ model` rows give every position no copy covers to a "
             "draft model in expectation (alpha per token, independent, at its best gamma), with the alpha and c that "
             f"`eval-draft` measured for the shipped feature draft (`{data['draft_eval']['file']}`: alpha "
             f"{data['draft_eval']['alpha']:.3f}, c {data['draft_eval']['c']:.3f}) or a stronger one. They are optimistic: "
             "a real draft's acceptance falls along a draft, and its passes cost more than c says.", ""]
    lines += markdown(data, CATEGORY_NAMES).splitlines() + [""]
    if lookup and oracle and model:
        lines += [f"The replay of the engine's rule makes {lookup['overall']:.2f}x over all {data['prompts']}; the "
                  f"benchmark measured prompt lookup (automatic gamma) at {_x(measured_lookup)}, which checks the cost "
                  f"model. The model alone replays at {model['overall']:.2f}x where the feature draft alone measured "
                  f"{_x(measured_feature)}: that is how optimistic the `+ model` rows are. A copier that "
                  f"knows where to copy from and exactly how much, at no cost, reaches {oracle['overall']:.2f}x over all "
                  f"and {oracle['categories']['summarization']['whole_run']:.2f}x on summarization, "
                  f"{oracle['categories']['rag']['whole_run']:.2f}x on RAG.", ""]
    lengths = [rows.get(k) for k in ("long-lookup+model", "long-lookup-8+model", "long-lookup-by-match+model",
                                     "oracle-length-long+model")]
    if all(lengths):
        four, eight, by_match, exact = lengths
        lines += ["How much to copy: after a match of at least 2 tokens, with the model elsewhere, copying 4 tokens "
                  f"replays at {four['overall']:.2f}x over all, 8 tokens (the hybrid's length) at {eight['overall']:.2f}x, "
                  f"a length that grows with the match ({', '.join(f'{n} after {m}' for m, n in data.get('copy_by_match', {}).items())} "
                  f"tokens) at {by_match['overall']:.2f}x, and exactly the run that will be accepted (an oracle) at "
                  f"{exact['overall']:.2f}x (summarization {by_match['categories']['summarization']['whole_run']:.2f}x "
                  f"against {exact['categories']['summarization']['whole_run']:.2f}x). A longer match is followed by a "
                  "longer run on average (the table above), but a length chosen from the match recovers little of what "
                  "knowing each copy's own run is worth.", ""]
    corpus_alone = rows.get("lookup-corpus")
    with_model = [rows[k] for k in ("long-lookup+model", "long-lookup-corpus+model") if k in rows]
    run = results.get("spec-bench-corpus-bfloat16", {}).get("methods", {})
    measured_with = run.get("speculative-hybrid-corpus-feature-auto", {}).get("speedup")
    measured_without = run.get("speculative-hybrid-feature-auto", {}).get("speedup")
    if lookup and corpus_alone and len(with_model) == 2:
        lines += [f"The corpus of the target's own answers (`assets/corpus-smollm2-135m`) adds "
                  f"{corpus_alone['overall'] - lookup['overall']:+.2f}x to copying alone in this replay "
                  f"({lookup['overall']:.2f}x -> {corpus_alone['overall']:.2f}x), but only "
                  f"{with_model[1]['overall'] - with_model[0]['overall']:+.2f}x once a model drafts the rest "
                  f"({with_model[0]['overall']:.2f}x -> {with_model[1]['overall']:.2f}x), and in the benchmark beside "
                  f"the feature draft the hybrid ran {_x(measured_with)} with it against {_x(measured_without)} without "
                  "(`docs/bench/spec-bench-corpus-bfloat16`): where the corpus is right the feature draft mostly is too.",
                  ""]
    return lines


def published_section() -> list[str]:
    lines = ["## Spec-Bench's published figures (a reference, not a like-for-like comparison)", "",
             "| method | " + " | ".join(CATEGORY_NAMES[c] for c in ORDER) + " | overall |", "|" + "---|" * 8]
    for name, values in PUBLISHED.items():
        lines.append(f"| {name} | " + " | ".join(f"{v:.2f}x" for v in values) + " |")
    return lines + ["", "Source: Spec-Bench's leaderboard (benchmarks/README.md); RTX 3090, Vicuna-7B-v1.3, fp16. "
                    "Our target is a 135M model on a CPU: a verify pass there is relatively dearer and a draft "
                    "relatively cheaper than for a 7B model on a GPU.", ""]


def readme_block(name: str, result: dict) -> str:
    """The README's one table: every variant of the headline run, with a caption that says how it was
    measured and where the rest is (no date: the run's date is in docs/performance.md)."""
    m, st = result["machine"], result["settings"]
    caption = (f"Speedup over our own autoregressive decoding in the same run (tokens/s ratio; "
               f"`docs/bench/{name}/`): {st['prompts']} prompts of the Spec-Bench subset, {st['max_new_tokens']} "
               f"new tokens, greedy, target {result['models']['target']} in {precision(result)}, "
               f"{m['torch_threads']} torch thread on a {m['usable_cores']}-core {m['cpu']} CPU. "
               "`speculative-<drafter>-auto` is our speculative decoding with the automatic γ; `hf-*` rows are "
               "Hugging Face transformers' `generate()` and assisted generation in the same run. Every run, command "
               "and table: [docs/performance.md](docs/performance.md).")
    return "\n".join(textwrap.wrap(caption, 100) + [""] + category_table(result, headline_keys(result)))


def _span(bursts: list[dict], key: str, unit: str = " s", fmt: str = "g") -> str:
    """One figure of a class check's bursts: the value, or its range over the bursts of a soak."""
    values = [b[key] for b in bursts]
    lo, hi = min(values), max(values)
    return f"{lo:{fmt}}{unit}" if lo == hi else f"{lo:{fmt}}-{hi:{fmt}}{unit}"


def class_label(path: Path, result: dict) -> str:
    """A class run's name in the table: its make target, else what its command changed."""
    for prefix, target in CLASS_RUNS.items():
        if path.parent.name.startswith(prefix + "-"):
            return f"`{target}`"
    st = result["settings"]
    key = re.search(r"--preset (\S+)", result.get("command", ""))  # the preset's key, not its long label
    changed = [f"--preset {key.group(1) if key else st['preset']}" if st.get("preset") else "",
               "--connect-in-burst" if st.get("connect_in_burst") else "",
               " ".join(f"--set {k}={v}" for k, v in (st.get("set") or {}).items())]
    return "`classroom_load.py " + " ".join(c for c in changed if c) + "`"


def classroom_block() -> str:
    """docs/classroom.md's table: one row per class run under docs/bench/ (class-*-<precision>/result.json,
    written by `make class-check` and its siblings), the Makefile's checks first; a soak's figures are
    ranges over its bursts."""
    rows = ["| run | clients | served / refused | wait, median | wait, longest | lab's slowest answer | "
            "app's memory after | plain decoding alone | summary |", "|---|---|---|---|---|---|---|---|---|"]
    order = list(CLASS_RUNS)
    paths = sorted(BENCH.glob("class-*-*/result.json"),
                   key=lambda p: (next((i for i, k in enumerate(order) if p.parent.name.startswith(k + "-")),
                                       len(order)), p.parent.name))
    for path in paths:
        r = read_json(path)
        bursts, st = r["bursts"], r["settings"]
        served, refused = sum(b["served"] for b in bursts), sum(b["refused"] for b in bursts)
        who = f"{st['clients']} within {st['within_s']:g} s"
        who += f", {len(bursts)} bursts" if len(bursts) > 1 else ""
        rows.append(f"| {class_label(path, r)} ({r['machine']['precision']}) | {who} | {served} / {refused} | "
                    f"{_span(bursts, 'wait_done_median_s')} | {_span(bursts, 'wait_done_max_s')} | "
                    f"{_span(bursts, 'lab_max_s')} | {_span(bursts, 'rss_mb_after', ' MB', ',')} | "
                    f"{r['machine']['plain_tokens_per_second']:g} tokens/s | "
                    f"[summary](bench/{path.parent.name}/summary.md) |")
    return "\n".join(rows if len(rows) > 2 else ["No class check has been run yet (`make class-check`)."])


def replace_block(path: Path, begin: str, end: str, block: str) -> bool:
    """Put `block` between the lines `begin` and `end` of the file at `path`; False when it has no such lines."""
    text = path.read_text() if path.is_file() else ""
    if begin not in text or end not in text:
        return False
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n{block}\n{end}{tail}")
    return True


def multilayer_section() -> list[str]:
    """The A/B of EAGLE-3's fused features (docs/bench/multilayer-features.json: experiments/multilayer_features.py)."""
    run = read_json(BENCH / "multilayer-features.json")
    if not run:
        return []
    arms = run["arms"]
    some = next(iter(arms.values()))
    lines = ["## Would the feature draft gain from reading several layers (EAGLE-3)?", "",
             f"Command: `{run['command']}` ({run['date']}, bfloat16 target states, 1 thread per arm, "
             f"{run['seconds']} s). Both arms start from the shipped feature draft and train alike on the target's "
             f"greedy answers to the training prompts ({some['train_sequences']} sequences, "
             f"{some['train_positions']} positions, {run['epochs']:g} passes, {some['steps']} steps, "
             f"{run['unroll_steps']} unrolled steps); *fused* also reads the states after layers "
             f"{', '.join(map(str, run['layers']))} of 30 through a learned fuse that starts as the final state "
             f"alone. Agreement: the draft's top token equals the target's, on the {some['holdout_sequences']} "
             "held-out prompts' answers, at draft steps 1-3 (steps 2-3 read the draft's own predicted states); "
             "alpha: a lower bound at T=1 from the target's top-32.", "",
             "| arm | step | agreement, step 1 | step 2 | step 3 | alpha (lower bound) |", "|---|---|---|---|---|---|"]
    for arm, r in arms.items():
        for h in (r["history"][0], r["history"][-1]):
            lines.append(f"| {arm} | {h['step']} | {h['top1_agreement']:.3f} | {h['top1_agreement_step2']:.3f} | "
                         f"{h['top1_agreement_step3']:.3f} | {h['alpha_topk_lb']:.3f} |")
    if {"control", "fused"} <= arms.keys():
        c, f = arms["control"]["history"][-1], arms["fused"]["history"][-1]
        p = c["top1_agreement"]
        lines += ["", "Fused minus control at the end: agreement "
                  + ", ".join(f"step {k} {f[key] - c[key]:+.3f}" for k, key in
                              ((1, "top1_agreement"), (2, "top1_agreement_step2"), (3, "top1_agreement_step3")))
                  + f", alpha {f['alpha_topk_lb'] - c['alpha_topk_lb']:+.3f}; one standard error of a step-1 "
                  f"agreement over these {c['positions']} positions is {math.sqrt(p * (1 - p) / c['positions']):.3f}."]
    return lines + [""]


def header() -> list[str]:
    """The page's opening: how the runs are made and read (mechanism only; every figure is below)."""
    return ["# Performance", "",
            "Generated by `scripts/performance_report.py` from the JSON under `docs/bench/`: no figure here is typed "
            "by hand. Speedups are tokens/s ratios within one run, against our own autoregressive decoding in the "
            "same run and precision; the machine is a shared 2-core CPU, so compare runs by their ratios only. "
            "The methods and drafts these rows name: [methods.md](methods.md), [drafts.md](drafts.md); the "
            "one-question measurements behind some sections: [experiments.md](experiments.md).", "",
            "## How the runs are made", "",
            "```bash",
            "python -m decoding bench --prompts benchmarks/spec_bench.jsonl \\",
            "    --draft distilled,feature,hybrid,hybrid:feature,prompt-lookup \\",
            "    --gamma auto --hf-gamma 4 --max-new-tokens 64 --repeats 1 --warmup 1 --threads 1 \\",
            "    --no-memory --no-quality --out docs/bench/spec-bench-bfloat16",
            "python -m decoding verify-cost --threads 1 --json > docs/bench/verify-cost.json",
            "python scripts/performance_report.py",
            "```", "",
            "Each run's own command is in its section. The variants run interleaved per prompt after a warm-up; "
            "timing runs generate a fixed number of tokens (end of sequence ignored, lean traces); `--no-quality` "
            "skips the perplexity runs and reads greedy equality off the timing runs. `--gamma auto` picks γ every "
            "iteration from running estimates of acceptance and of the measured draft and verify costs (γ 0, a "
            "plain step, when drafting does not pay; `decoding/drafters/gamma_policy.py`); `--gamma heuristic` is "
            "transformers' +2/-1 schedule. At a temperature, repeat r samples with seed `--seed` + r: a sampled "
            "text is one draw whose speedup depends on the draw (on the class prompts at temperature 0.7 the hybrid's "
            "mean accepted tokens at γ 4 went from 0.69 to 1.13 when only the draws changed), so repeats average over draws rather than re-timing "
            "one; with `--seed-per-prompt` prompt i of repeat r samples with `--seed` + r x prompts + i (a file of "
            "near-identical prompts, such as the class's, otherwise draws near-identical texts under one seed, and a "
            "repeat is about one draw of the whole file); greedy runs ignore the seed. The class runs in "
            "`docs/bench/classroom-*` made before seeds per repeat timed one draw per prompt three times. The `hf-*` variants are transformers' `generate()` and assisted "
            "generation (a draft model or prompt lookup) at their default settings and at γ 4, in the same process "
            "and precision. "
            "Spec-Bench (`benchmarks/README.md`) is the public yardstick.", "",
            "**Precision.** The target runs in bfloat16 on CPUs with native bfloat16 (AVX512-BF16 or AMX) and on "
            "CUDA, in float32 elsewhere (`--dtype`, the app's Precision control or `SPECDEC_DTYPE` choose another): a "
            "verify pass over several tokens costs little more than a one-token step in bfloat16 and much more in "
            "float32 (\"What a verify pass costs\" below). float32 is the reference: every exactness test runs in "
            "float32, and there greedy speculative text equals greedy autoregressive text. In bfloat16 a pass over "
            "several tokens rounds differently from a one-token pass, so greedy text can part from autoregressive text after "
            "a near-tie (each run's section gives the rate; transformers' assisted generation does the same). On the "
            "CPU a bfloat16 model runs a split attention kernel (`decoding/lm/models/attention.py`), its KV cache "
            "grows in place (`decoding/lm/kv_cache.py`), and its LM head gets freshly laid-out rows after a prefill "
            "(`decoding/lm/models/head_layout.py`). With the automatic γ the pass sizes follow measured times, so in "
            "bfloat16 a speculative variant's greedy text, and with it how much a copy can find, can change from "
            "run to run: compare bfloat16 runs by category with that spread in mind. In float32 it does not.", ""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="spec-bench-bfloat16,spec-bench-corpus-bfloat16,spec-bench-float32,"
                                      "spec-bench-feature-float32,spec-bench-corpus-float32,"
                                      "spec-bench-long-bfloat16,spec-bench-long-feature-bfloat16,"
                                      "spec-bench-tree-bfloat16,spec-bench-tree-quiet-bfloat16,spec-bench-tree63-quiet-bfloat16,spec-bench-tree42-bfloat16,spec-bench-tree-default-bfloat16,"
                                      "spec-bench-tree42-lean-bfloat16,spec-bench-tree-lean-bfloat16")
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    ap.add_argument("--classroom", default=str(DOCS / "classroom.md"))
    args = ap.parse_args(argv)
    results = {name: r for name in args.runs.split(",") if (r := load(name.strip())) is not None}
    if not results:
        print("no benchmark results found under docs/bench/", file=sys.stderr)
        return 2
    doc = header()
    for name, result in results.items():
        doc += run_section(name, result)
    doc += verify_section()
    doc += attention_section()
    doc += draft_head_section()
    doc += feature_draft_section()
    doc += feature_draft_gpu_section()
    doc += multilayer_section()
    doc += continuation_section()
    doc += ceiling_section(results)
    doc += published_section()
    (DOCS / "performance.md").write_text("\n".join(doc).replace("\n\n\n", "\n\n"))
    headline = next(iter(results))
    wrote = [str(DOCS / "performance.md")]
    if replace_block(Path(args.readme), BEGIN, END, readme_block(headline, results[headline])):
        wrote.append("the README's table")
    if replace_block(Path(args.classroom), CLASS_BEGIN, CLASS_END, classroom_block()):
        wrote.append("docs/classroom.md's table")
    print("wrote " + ", ".join(wrote))
    return 0


if __name__ == "__main__":
    sys.exit(main())
