"""The copy-ceiling replay with the feature draft's measured trees and chains, and what a stronger draft would give.

Reads what `experiments/tree_diagnostic.py --positions-out` recorded on the Spec-Bench prompts (each prompt's greedy
output; at every position the rank vector of the target's next 8 tokens in the draft and each chain's and tree's
accepted length), the costs that script's timing phase measured (each shape's draft time over a target step), the
verify-cost tables and a benchmark run's per-category autoregressive time and prefill share. No model runs here.

Replays each output (`decoding/eval/bench/tree_ceiling.expected_replay`): the copy rule of `copy_ceiling.py`
where it copies, else the draft model's chain or tree at that position, costing the measured draft time plus a
target pass over the drafted tokens + 1. Measured rows use each position's measured accepted length; modelled
rows use the rank vectors (a chain keeps the leading top-1 depths; a static tree keeps the longest prefix of the
rank vector among its nodes) and, for a stronger draft, the miss-scaling model of `tree_ceiling.py`.

    PYTHONPATH=. .venv/bin/python experiments/tree_ceiling.py --out docs/bench/tree-ceiling.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decoding.paths import display_command  # noqa: E402 (after the path insert)

CATEGORIES = ("mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag")
GOAL_OVERALL, GOAL_CATEGORY = 1.6, 1.3


class Prompt:
    """One recorded prompt: its output, its positions' records, and the copy rules' answers, cached per rule."""

    def __init__(self, record: dict):
        self.category = record["category"]
        self.sequence = record["sequence"]
        self.prompt_length = record["prompt_length"]
        self.first = record["first"]  # position index i = t + 1 - first, t = the last committed token
        self.ranks = record["ranks"]
        self.chain = {int(g): v for g, v in record["chain"].items()}
        self.tree = record["tree"]
        self._copies: dict[str, dict[int, tuple[int, int]]] = {}

    def copies(self, key: str, rule):
        if rule is None:
            return None
        if key not in self._copies:
            positions = range(self.prompt_length, len(self.sequence) - 1)
            self._copies[key] = {t: rule(self.sequence, t) for t in positions}
        table = self._copies[key]
        return lambda sequence, t: table[t]

    def index(self, t: int) -> int:
        return t + 1 - self.first


def copy_rules():
    """(key, label, rule): the copying rules the existing `+ model` rows of copy_ceiling.py use."""
    from decoding.eval.bench import ceiling as cl

    return [("none", "model alone", None),
            ("lookup2", "lookup after a 2-token match", cl.hybrid_copy_rule(4, short_copies=False)),
            ("lookup2-8", "lookup after a 2-token match, 8 tokens (the hybrid's)",
             cl.hybrid_copy_rule(8, short_copies=False)),
            ("oracle", "oracle copy", cl.oracle_copy)]


def whole_run(prompts, copy_key, rule, cost, model_for, bench) -> dict:
    """Per category and over all prompts, the whole-run speedup (prefill included at the benchmark's share) of
    `rule` + the model `model_for(prompt)` (a function of t, or None for plain steps)."""
    from decoding.eval.bench.ceiling import Replay
    from decoding.eval.bench.tree_ceiling import expected_replay

    parts = {}
    for category in CATEGORIES:
        parts[category] = Replay()
        for p in prompts:
            if p.category == category:
                parts[category].add(expected_replay(p.sequence, p.prompt_length, p.copies(copy_key, rule), cost,
                                                    model_for(p)))
    return combine(parts, bench)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--positions", default="docs/bench/tree-ceiling/positions.json",
                    help="what experiments/tree_diagnostic.py --positions-out wrote")
    ap.add_argument("--diagnostic", default=",".join(f"docs/bench/tree-ceiling/diagnostic{s}.json"
                                                      for s in ("-short", "", "-long")),
                    help="comma-separated JSON files of experiments/tree_diagnostic.py (--timing-only) on the same "
                         "prompts: each one's timing (draft time over a target step at one cached context)")
    ap.add_argument("--bench", default="docs/bench/spec-bench-tree63-quiet-bfloat16/bench.json",
                    help="a benchmark run: per category the autoregressive time and its prefill share, and the "
                         "measured speedups the replay is checked against")
    ap.add_argument("--verify-cost", default="docs/bench/verify-cost.json,docs/bench/verify-cost-long.json")
    ap.add_argument("--draft-eval", default="docs/bench/feature-draft-gpu-spec-bench.json",
                    help="an eval-draft JSON: the alpha and c of copy_ceiling.py's `+ model` rows, shown for reference")
    ap.add_argument("--top1", default="0.40,0.45,0.50,0.55,0.65",
                    help="top-1 hit rates at depth 1 of the stronger drafts modelled")
    ap.add_argument("--width-scales", default="0.5,0",
                    help="cheaper verify passes modelled: the share kept of what a pass costs beyond a one-token step")
    ap.add_argument("--out", default=None, help="write the JSON here and the tables beside it as .md")
    ap.add_argument("--table", default=None, help="print the markdown of a JSON this script wrote, and stop")
    args = ap.parse_args(argv)
    if args.table:
        print(markdown(json.loads(Path(args.table).read_text())))
        return 0
    try:
        goals = [float(x) for x in args.top1.split(",") if x.strip()]
        widths = [float(x) for x in args.width_scales.split(",") if x.strip()]
    except ValueError:
        print("error: --top1 and --width-scales take comma-separated numbers", file=sys.stderr)
        return 2
    if any(not 0 <= g <= 1 for g in goals) or any(not 0 <= w <= 1 for w in widths):
        print("error: --top1 and --width-scales must lie in [0, 1]", file=sys.stderr)
        return 2
    from decoding.eval.bench import ceiling as cl
    from decoding.eval.bench import tree_ceiling as tc

    try:
        recorded = json.loads(Path(args.positions).read_text())
        timings = [json.loads(Path(f).read_text())["timing"] for f in args.diagnostic.split(",")]
        draft_cost = tc.DraftCost({t["context"]: t["over_step"] for t in timings})
        bench, evaluation, cost = cl.read_replay_inputs(args.bench, args.draft_eval, args.verify_cost,
                                                        recorded["dtype"])
    except (OSError, ValueError, KeyError, IndexError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    prompts = [Prompt(r) for r in recorded["prompts"]]
    missing = sorted({c for c in CATEGORIES if not any(p.category == c for p in prompts)})
    if missing:
        print(f"error: {args.positions} has no prompt of {missing}", file=sys.stderr)
        return 2
    max_rank = recorded["max_rank"]
    shapes = [tuple(int(x) for x in s.split(",")) for s in recorded["shapes"]]
    timed = draft_cost.names()
    gammas = sorted(g for g in prompts[0].chain if f"chain{g}" in timed)
    missing = [s for s in shapes if f"tree{s[0]},{s[1]}" not in timed]
    if missing:
        print(f"error: no timing of the trees {missing} in {args.diagnostic}", file=sys.stderr)
        return 2
    c_name = {**{g: f"chain{g}" for g in gammas}, **{s: f"tree{s[0]},{s[1]}" for s in shapes}}
    positions = sum(len(p.ranks) for p in prompts)
    top1_now = sum(p.ranks[i][0] == 0 for p in prompts for i in range(len(p.ranks))) / positions
    started = time.time()

    def measured(kind, size, c_scale=1.0, cost=cost):
        """model_for(prompt): the draft's measured accepted length at each position, the measured draft cost."""
        nodes = size if kind == "chain" else size[0]
        key = str(size) if kind == "chain" else f"{size[0]},{size[1]}"

        def model_for(p):
            lengths = p.chain[size] if kind == "chain" else p.tree[key]
            def model(t):
                c = c_scale * draft_cost.ratio(c_name[size], t)
                return cost.ms(nodes + 1, t) + c * cost.ms(1, t), tc.point_survival(lengths[p.index(t)])
            return model
        return model_for

    def modelled(kind, size, scale, verify, c_scale=1.0, trees=None):
        """model_for(prompt) from the rank vectors: a chain of `size`, or the static tree `trees[size]`."""
        nodes = size if kind == "chain" else size[0]

        def model_for(p):
            def model(t):
                ranks = p.ranks[p.index(t)]
                if kind == "chain":
                    survival = tc.chain_survival(ranks, size, scale)
                else:
                    survival = tc.tree_survival(probabilities[(id(p), p.index(t), scale)], trees[size])
                c = draft_cost.ratio(c_name[size], t)
                return verify.ms(nodes + 1, t) + c_scale * c * verify.ms(1, t), survival
            return model
        return model_for

    # prefix probabilities per position and draft strength, and the best static tree per shape fitted to them
    deepest = max(d for _, d in shapes)
    if any(g < top1_now for g in goals):
        print(f"error: --top1 goals must be at least today's top-1 ({top1_now:.3f}): the model only lifts a draft",
              file=sys.stderr)
        return 2
    scales = {"today": 1.0, **{f"{g:.2f}": tc.miss_scale_for(top1_now, g) for g in goals}}
    probabilities, static_trees = {}, {}
    for name, scale in scales.items():
        counts = Counter()
        for p in prompts:
            for i, ranks in enumerate(p.ranks):
                probs = tc.prefix_probabilities(ranks, deepest, max_rank, scale)
                probabilities[(id(p), i, scale)] = probs
                counts.update(probs)
        static_trees[name] = {s: tc.best_static_tree(counts, s[0], s[1]) for s in shapes}

    rules = copy_rules()
    alpha_model = cl.ModelDraft(evaluation["alpha"], evaluation["c"])
    rows = []

    def add(section, copy, label, model_for, **extra):
        key, copy_label, rule = copy
        result = whole_run(prompts, key, rule, cost, model_for, bench)
        rows.append({"section": section, "copy": copy_label, "draft": label, **extra, **result})
        return rows[-1]

    # 1. measured: today's draft, each chain and tree, with each copy rule; the alpha row of copy_ceiling.py
    for copy in rules:
        part = {}  # copy_ceiling.py's row: the alpha model charges per token (ceiling.replay)
        for category in CATEGORIES:
            r = cl.Replay()
            for p in prompts:
                if p.category == category:
                    r.add(cl.replay(p.sequence, p.prompt_length, p.copies(copy[0], copy[2]), cost, alpha_model))
            part[category] = r
        rows.append({"section": "measured", "copy": copy[1], "reference": True,
                     "draft": f"chain in expectation (alpha {evaluation['alpha']:.2f}, c {evaluation['c']:.3f}, "
                              "copy_ceiling.py's row)", **combine(part, bench)})
        for g in gammas:
            add("measured", copy, f"chain {g}", measured("chain", g), shape=str(g), kind="chain")
        for s in shapes:
            add("measured", copy, f"tree {s[0]},{s[1]}", measured("tree", s), shape=f"{s[0]},{s[1]}", kind="tree")
    print(f"measured rows: {time.time() - started:.0f} s", file=sys.stderr, flush=True)

    def merged(size, copy):
        """model_for(prompt): where `copy` proposes, its chain and the model's tree of `size` verified in one pass
        (both drafted; greedy keeps the longer accepted branch; the pass over copy + tree nodes + 1, with no prefix
        shared between them counted), else the tree alone."""
        key, nodes = f"{size[0]},{size[1]}", size[0]

        def model_for(p):
            copies = p.copies(copy[0], copy[2])

            def model(t):
                drafted = p.tree[key][p.index(t)]
                c = draft_cost.ratio(c_name[size], t) * cost.ms(1, t)
                accepted, proposed = copies(p.sequence, t)
                return cost.ms(proposed + nodes + 1, t) + c, tc.point_survival(max(accepted, drafted))
            return model
        return model_for

    # 1b. measured: a copy and the model's tree in the same pass, so no rule has to choose between them
    merge_rules = [rules[2], ("lookup2-8-short4", "the hybrid's copy, else 4 tokens after a shorter match",
                              cl.hybrid_copy_rule(cl.by_match_length({1: 4, 2: 8}), short_copies=True))]
    for copy in merge_rules:
        for s in shapes[:3]:
            add("merged", copy, f"tree {s[0]},{s[1]}: the copy or the tree", measured("tree", s),
                shape=f"{s[0]},{s[1]}", kind="tree")
            add("merged", (copy[0], copy[1], None), f"tree {s[0]},{s[1]}: the copy and the tree in one pass",
                merged(s, copy), shape=f"{s[0]},{s[1]}", kind="tree")

    # 2. the models checked against the measurements: today's draft from its rank vectors
    lookup = rules[1]
    for g in gammas:
        add("check", lookup, f"chain {g} from the rank vectors", modelled("chain", g, 1.0, cost), shape=str(g),
            kind="chain")
    for s in shapes:
        add("check", lookup, f"best static tree {s[0]},{s[1]} from the rank vectors",
            modelled("tree", s, 1.0, cost, trees=static_trees["today"]), shape=f"{s[0]},{s[1]}", kind="tree")
    # the replay of the benchmark's variants with the verify times measured in that run (one table for all
    # contexts) in place of the verify-cost files: how much of the gap to the run the pass costs explain
    in_run_verify = {}
    for variant, method in bench["methods"].items():
        if variant.startswith("speculative") and method.get("verify_ms_by_tokens"):
            in_run_verify[variant] = {int(k): v for k, v in method["verify_ms_by_tokens"].items()}
    hybrid = rules[2]
    for variant, table in in_run_verify.items():
        run_cost = cl.VerifyCost({0: table})
        drafts = [("tree", s) for s in shapes if variant.endswith(f"tree{s[0]}x{s[1]}")] or [
            ("chain", g) for g in gammas if g <= 3]
        for kind, size in drafts:
            label = f"chain {size}" if kind == "chain" else f"tree {size[0]},{size[1]}"
            row = add("check-run", hybrid, f"{label}, the verify times of the run {variant}",
                      measured(kind, size, cost=run_cost), kind=kind, variant=variant)
            row["shape"] = str(size) if kind == "chain" else f"{size[0]},{size[1]}"

    # 3. what would close it: a stronger draft, free drafting, a cheaper verify; the best chain and tree of each
    verifies = {1.0: cost, **{w: tc.ScaledVerify(cost, w) for w in widths}}
    for copy in (lookup, rules[3]):
        for name, scale in scales.items():
            for c_scale in (1.0, 0.0):
                for width, verify in verifies.items():
                    for kind, sizes in (("chain", gammas), ("tree", shapes)):
                        best = None
                        for size in sizes:
                            trees = static_trees[name] if kind == "tree" else None
                            result = whole_run(prompts, copy[0], copy[2], verify,
                                               modelled(kind, size, scale, verify, c_scale, trees), bench)
                            if best is None or result["overall"] > best[1]["overall"]:
                                best = (size, result)
                        size, result = best
                        shape = str(size) if kind == "chain" else f"{size[0]},{size[1]}"
                        rows.append({"section": "close", "copy": copy[1], "kind": kind, "shape": shape,
                                     "top1": top1_now if name == "today" else float(name), "miss_scale": scale,
                                     "c_scale": c_scale, "width_scale": width,
                                     "draft": f"best {kind} ({shape})", **result})
    print(f"all rows: {time.time() - started:.0f} s", file=sys.stderr, flush=True)

    top1_by_category = {c: sum(p.ranks[i][0] == 0 for p in prompts if p.category == c for i in range(len(p.ranks)))
                        / sum(len(p.ranks) for p in prompts if p.category == c) for c in CATEGORIES}
    in_run = {v: {"overall": bench["speedup"][v], **{c: bench["categories"][c][v]["speedup"] for c in CATEGORIES},
                  "tokens_per_call": {c: bench["categories"][c][v]["tokens_per_call"] for c in CATEGORIES}}
              for v in bench["speedup"] if v.startswith("speculative")}
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": display_command("python experiments/tree_ceiling.py", argv if argv is not None else sys.argv[1:]),
        "positions_file": args.positions, "diagnostic": args.diagnostic, "bench": args.bench,
        "verify_cost": args.verify_cost, "dtype": recorded["dtype"], "max_new_tokens": recorded["max_new_tokens"],
        "prompts": len(prompts), "positions": positions, "categories": list(CATEGORIES),
        "top1_depth1": top1_now, "top1_depth1_by_category": top1_by_category,
        "draft_c": {f"{context:.0f}": {name: table[name] for name in c_name.values()}
                    for context, table in draft_cost.tables.items()},
        "miss_scales": scales, "static_trees": {n: {f"{s[0]},{s[1]}": t for s, t in v.items()}
                                               for n, v in static_trees.items()},
        "prefill_share": {c: bench["categories"][c]["autoregressive"]["first_pass_share"] for c in CATEGORIES},
        "in_run": in_run, "rows": rows,
    }
    text = markdown(result)
    print(text)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        Path(args.out).with_suffix(".md").write_text(text + "\n")
    return 0


def combine(parts: dict, bench: dict) -> dict:
    """Per-category Replays -> ceiling.whole_runs' figures and the lowest category's whole-run speedup."""
    from decoding.eval.bench.ceiling import whole_runs

    out = whole_runs(parts, bench)
    return {**out, "lowest_category": min(v["whole_run"] for v in out["categories"].values())}


def markdown(r: dict) -> str:
    """The tables of a result: measured rows, the models' check, the in-run check, what would close the goals."""
    cats = r["categories"]
    head = "| copy | draft | all " + str(r["prompts"]) + " | " + " | ".join(cats) + " | tokens/iteration |"
    rule = "|" + "---|" * (len(cats) + 4)

    def line(row):
        cells = " | ".join(f"{row['categories'][c]['whole_run']:.2f}x" for c in cats)
        tokens = sum(row["categories"][c]["tokens_per_iteration"] for c in cats) / len(cats)
        tokens = "n/a" if row.get("reference") else f"{tokens:.2f}"  # the alpha model counts a token per iteration
        return f"| {row['copy']} | {row['draft']} | **{row['overall']:.2f}x** | {cells} | {tokens} |"

    out = ["# Tree ceiling: the copy-ceiling replay with the feature draft's trees", "",
           f"Generated by `{r['command']}` ({r['date']}; this file is its `--out` table). {r['prompts']} Spec-Bench "
           f"prompts, greedy, {r['max_new_tokens']} new tokens, {r['dtype']}, 1 thread. Inputs: the positions "
           f"`{r['positions_file']}` (each prompt's greedy output and, at each of its {r['positions']} positions, "
           "the draft's rank vector and each chain's and tree's accepted length: "
           "`experiments/tree_diagnostic.py --positions-out`), the draft costs of that run's timing phase "
           f"(`{r['diagnostic']}`: draft time per call over a target step, at the mean cached context of each "
           "file's timing, linear in the context between them: "
           + "; ".join(f"{context} tokens: " + ", ".join(f"{k} {v:.2f}" for k, v in table.items())
                       for context, table in r["draft_c"].items())
           + f"), the verify costs `{r['verify_cost']}` and each category's autoregressive time and prefill share "
           f"from `{r['bench']}`.", "",
           "**Measured** rows replay each position's measured accepted length with measured costs (the only model "
           "is the replay itself: no overhead outside the target and draft passes, a fixed rule for when to copy "
           "and when to draft). **Modelled** rows replace the measured accepted lengths with ones computed from "
           "the rank vectors (static trees, a scaled-up draft) or scale the costs.", "",
           "### Measured: today's feature draft, its chains and trees, with the copy rules", "",
           "Each position's measured accepted length (chain: `propose` with gamma tokens, fixed length; tree: "
           "`propose_tree`, EAGLE-2's growth), the measured draft time per call and the measured verify time of a "
           "pass over the drafted tokens + 1. Whole-run speedups over autoregressive decoding, the prefill included. "
           "tokens/iteration: the mean over categories.", "", head, rule]
    out += [line(row) for row in r["rows"] if row["section"] == "measured"]
    merged = [row for row in r["rows"] if row["section"] == "merged"]
    if merged:
        out += ["", "### Measured: the copy and the model's tree verified in one pass", "",
                "Where the copy rule proposes, the model's tree is drafted too and both go into one target pass (the "
                "copy as one more branch of the root); greedy keeps whichever branch the target accepts further. The "
                "pass costs copy + tree nodes + 1 tokens (a prefix the two share is not merged: an upper bound on its "
                "cost) and the draft's time is paid at every position. Beside each, the same copy rule "
                "drafting either the copy or the tree at each position.", "", head, rule]
        out += [line(row) for row in merged]
    out += ["", "### Check: the rank-vector models against the measured accepted lengths", "",
            "Today's draft (no scaling), lookup after a 2-token match + model. A chain from the rank vectors should "
            "equal the measured chain (bfloat16 ties aside); the best static tree chosen in hindsight from the rank "
            "vectors is what the stronger-draft rows below use in place of the dynamic tree.", "", head, rule]
    out += [line(row) for row in r["rows"] if row["section"] == "check"]
    out += ["", "### Check: the replay against the benchmark run", "",
            f"`{r['bench']}` (measured, same prompts, greedy, 64 tokens): speedup per category / tokens per target "
            "call.", "", "| variant | all | " + " | ".join(cats) + " |", "|" + "---|" * (len(cats) + 2)]
    for variant, v in r["in_run"].items():
        out.append(f"| {variant} (measured) | **{v['overall']:.2f}x** | "
                   + " | ".join(f"{v[c]:.2f}x / {v['tokens_per_call'][c]:.2f}" for c in cats) + " |")
    for row in r["rows"]:
        if row["section"] == "measured" and row["copy"].startswith("lookup after a 2-token match, 8") and (
                row["draft"] in ("tree 6,3", "chain 2", "chain 3") or row.get("reference")) or (
                row["section"] == "check-run"):
            out.append(f"| replay: {row['copy']} + {row['draft']} | **{row['overall']:.2f}x** | " + " | ".join(
                f"{row['categories'][c]['whole_run']:.2f}x / {row['categories'][c]['tokens_per_iteration']:.2f}"
                for c in cats) + " |")
    out += ["", "### What would close it (modelled)", "",
            f"Today's draft: top-1 {r['top1_depth1']:.3f} at depth 1 over {r['positions']} positions. A stronger "
            "draft keeps each of today's top-1 misses (at every depth) with probability s and otherwise hits: every "
            "top-k miss rate is multiplied by s = (1 - top-1 goal) / (1 - top-1 today). Trees: the best static tree "
            "of each shape fitted to the scaled rank vectors; chains: fixed gamma. The best shape over all "
            f"{r['prompts']} prompts is kept. Draft cost: measured (x1) or free (x0). Verify: a pass over n tokens "
            "costs a step plus the stated share of what it costs beyond a step (1 = measured). "
            f"Goal: all {GOAL_OVERALL}x, every category {GOAL_CATEGORY}x (both: yes).", ""]
    for copy in dict.fromkeys(row["copy"] for row in r["rows"] if row["section"] == "close"):
        out += [f"{copy} + model:", "",
                "| top-1 | draft cost | verify width | best chain | all | lowest category | goals | best tree | all "
                "| lowest category | goals |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        close = [row for row in r["rows"] if row["section"] == "close" and row["copy"] == copy]
        for i in range(0, len(close), 2):
            chain, tree = close[i], close[i + 1]
            cells = []
            for row in (chain, tree):
                lowest = min(cats, key=lambda c: row["categories"][c]["whole_run"])
                met = row["overall"] >= GOAL_OVERALL and row["lowest_category"] >= GOAL_CATEGORY
                cells.append(f"{row['shape']} | {row['overall']:.2f}x | {row['lowest_category']:.2f}x ({lowest}) | "
                             + ("yes" if met else "no"))
            out.append(f"| {chain['top1']:.2f} | x{chain['c_scale']:g} | {chain['width_scale']:g} | "
                       + " | ".join(cells) + " |")
        out += ["", f"Per category, {copy} + model (modelled):", "", head.replace("| draft |", "| draft, top-1, "
                "draft cost, verify width |"), rule]
        for row in close:
            if (row["c_scale"], row["width_scale"]) in ((1.0, 1.0), (0.0, 1.0), (1.0, 0.0)):
                out.append(line({**row, "draft": f"{row['draft']}, top-1 {row['top1']:.2f}, x{row['c_scale']:g}, "
                                 f"{row['width_scale']:g}"}))
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
