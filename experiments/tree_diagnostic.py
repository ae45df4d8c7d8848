"""Why does the feature draft's tree gain so little over its chain? An offline oracle on Spec-Bench prompts.

For each prompt (chat template, as the benchmark) the target decodes 64 tokens greedily, one step at a
time, keeping its final hidden states (what the feature draft reads). Then, at every position n of that
continuation (the target has read all but the last committed token, as in a run), with the true prefix:

- ranks: the rank of the target's next token in the feature draft's distribution at depth 1, and at depths
  2..8 along the TRUE path (the draft fed the true tokens, its own predicted features, as a tree's node on the
  true path is fed); hit rates top-1/2/4/8 per depth, conditional on the true path so far being in the top-8.
- chain: `FeatureDrafter.propose` with gamma = D; its accepted length = the leading tokens equal to the
  target's continuation (greedy verification).
- tree: `FeatureDrafter.propose_tree` with nodes N and depth D (temperature 0: EAGLE-2's growth and
  reranking); its accepted length = the longest root path whose tokens equal the target's continuation
  (what greedy verification keeps).
- oracle: the best STATIC tree of N nodes and depth <= D chosen in hindsight from the measured rank vectors
  (a node = a tuple of ranks (r1..rd); the N most frequent rank prefixes, which are prefix-closed; its
  expected accepted length = the sum of their frequencies: Sequoia's optimal-tree argument).
- score check: where the tree holds a node of the true path, its path score against the sum of log q along
  the true path from the chain-style passes (a wrong parent feature, row or position would show here).

Times: the target's one-token step (the greedy generation), a target pass over 1 + N tokens (a chain-shaped
mask), each shape's draft seconds per call; all on a shared CPU, so read them as rough ratios.

    PYTHONPATH=. .venv/bin/python experiments/tree_diagnostic.py --per-category 2 --out docs/bench/tree-diagnostic.json

`--positions-out FILE` also writes every position's record (what experiments/tree_ceiling.py replays): per prompt its
output (the prompt and `--max-new-tokens` tokens), and at every position of that output the rank vector, each chain's
and each tree's accepted length. The target then decodes `--max-new-tokens` + 8 tokens, so that every position of the
output has its 8 next tokens known (a copy or draft near the end may propose past the output; the replay caps it).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MAX_DEPTH, MAX_RANK = 8, 8  # ranks measured along the true path; ranks >= MAX_RANK count as a miss
SHAPES = [(16, 6), (8, 4), (6, 3), (12, 5), (24, 7)]
TOPS = (1, 2, 4, 8)


class FixedTarget:
    """What FeatureDrafter reads of the run's target: `length` (tokens it has read) and `features`."""

    def __init__(self, features):
        self.features = features
        self.length = 0


def tree_accepted(tree, truth: list[int]) -> int:
    """The longest root path of `tree` whose tokens equal `truth` (greedy verification's path length)."""
    children = collections.defaultdict(list)
    for c, v in enumerate(tree.parents):
        if v >= 0:
            children[v].append(c)
    v, k = 0, 0
    while k < len(truth):
        nxt = [c for c in children[v] if tree.tokens[c] == truth[k]]
        if not nxt:
            break
        v, k = nxt[0], k + 1
    return k


def true_path_nodes(tree, truth: list[int]) -> list[int]:
    children = collections.defaultdict(list)
    for c, v in enumerate(tree.parents):
        if v >= 0:
            children[v].append(c)
    out, v = [], 0
    for x in truth:
        nxt = [c for c in children[v] if tree.tokens[c] == x]
        if not nxt:
            break
        v = nxt[0]
        out.append(v)
    return out


def static_oracle(rank_vectors: list[list[int]], nodes: int, depth: int) -> float:
    """Expected accepted length of the best static tree of `nodes` rank-tuples of depth <= `depth`."""
    counts = collections.Counter()
    for ranks in rank_vectors:
        for d in range(1, min(depth, len(ranks)) + 1):
            if ranks[d - 1] >= MAX_RANK:
                break
            counts[tuple(ranks[:d])] += 1
    best = sorted(counts.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0]))[:nodes]
    return sum(c for _, c in best) / max(1, len(rank_vectors))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default="benchmarks/spec_bench.jsonl")
    ap.add_argument("--per-category", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--shapes", default=";".join(f"{n},{d}" for n, d in SHAPES))
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    ap.add_argument("--timing-rounds", type=int, default=40,
                    help="interleaved rounds of the timing phase (medians: a target step, passes, each shape's draft)")
    ap.add_argument("--timing-only", action="store_true",
                    help="only the timing phase (on the first prompt), written into the existing --out JSON")
    ap.add_argument("--positions-out", default=None,
                    help="also write every position's ranks and accepted lengths here (compact JSON)")
    ap.add_argument("--timing-prompt", type=int, default=0,
                    help="with --timing-only: which of the picked prompts (0: the first) the timing runs on")
    ap.add_argument("--table", default=None, help="print the markdown tables of a JSON this script wrote, and stop")
    args = ap.parse_args(argv)
    if args.table:
        print(tables(json.loads(Path(args.table).read_text())))
        return 0
    import torch

    from decoding.lm.cached_lm import CachedLM
    from decoding.lm.prompt_files import read_prompt_rows
    from decoding.lm.tree_pass import tree_pass
    from decoding.rules.warp import SamplingConfig
    from decoding.run.pair import load_pair

    torch.set_num_threads(args.threads)
    shapes = [tuple(int(x) for x in s.split(",")) for s in args.shapes.split(";")]
    rows = read_prompt_rows(args.prompts)
    picked, seen = [], collections.Counter()
    for r in rows:
        if seen[r.category] < args.per_category:
            picked.append(r)
            seen[r.category] += 1
    if args.timing_only:
        if not args.out or not Path(args.out).is_file():
            print("error: --timing-only needs --out, a JSON this script wrote", file=sys.stderr)
            return 2
        picked = picked[args.timing_prompt: args.timing_prompt + 1]
        if not picked:
            print(f"error: --timing-prompt {args.timing_prompt}: only {sum(seen.values())} prompts picked",
                  file=sys.stderr)
            return 2
    target, draft = load_pair("default", "feature", dtype=args.dtype)
    greedy = SamplingConfig(0.0)
    deepest = max([MAX_DEPTH] + [d for _, d in shapes])

    rank_vectors: list[list[int]] = []
    full_vectors: list[list[int]] = []  # the same ranks under the target's whole head (no token subset)
    worse = collections.Counter()  # shape -> positions where the tree accepted fewer than the chain of its depth
    chain_acc = collections.defaultdict(list)  # gamma -> accepted lengths
    chain_sec = collections.defaultdict(float)
    tree_acc = collections.defaultdict(list)  # (N, D) -> accepted lengths
    tree_sec = collections.defaultdict(float)
    tree_depth1 = collections.defaultdict(int)  # depth-1 children, summed
    score_err = []  # |tree score - true-path log q sum| where the tree holds the true node
    step_sec, step_n, pass_sec = 0.0, 0, collections.defaultdict(list)
    per_category = collections.defaultdict(lambda: collections.defaultdict(list))
    started = time.time()
    records = []  # --positions-out: one per prompt
    extra = deepest if args.positions_out else 0  # decoded past the output so its last positions have a truth
    for prompt in picked:
        ids = target.encode_prompt(prompt.prompt, True)
        lm = CachedLM(target.model, target.device, min(target.vocab_size, draft.drafter(target).vocab_width))
        lm.keep_features()
        seq = list(ids)
        logits = lm.extend(seq, keep=1)
        seq.append(int(logits[-1].argmax()))
        for _ in range(args.max_new_tokens + extra - 1):
            t0 = time.perf_counter()
            logits = lm.extend(seq, keep=1)
            step_sec += time.perf_counter() - t0
            step_n += 1
            seq.append(int(logits[-1].argmax()))
        # target passes over 1 + N tokens (a chain-shaped tree mask) after the whole continuation
        base = lm.length
        for m in sorted({1} | {n + 1 for n, _ in shapes}):
            mask = torch.ones(m, base + m, dtype=torch.bool).tril(base)  # a chain: each sees the prefix and before
            lm.rollback(base)
            t0 = time.perf_counter()
            tree_pass(lm, seq[base - m + 1: base + 1], list(range(base, base + m)), mask, keep=m)
            pass_sec[m].append(time.perf_counter() - t0)
        lm.rollback(base)

        drafter = draft.drafter(target)
        fixed = FixedTarget(lm.features)
        drafter.target = fixed
        first = len(ids) + 1  # sequence = seq[:n]; the target has read n - 1 tokens; truth = seq[n:]
        record = {"id": prompt.id, "category": prompt.category, "prompt_length": len(ids),
                  "sequence": seq[: len(ids) + args.max_new_tokens], "first": first, "ranks": [],
                  "chain": collections.defaultdict(list), "tree": collections.defaultdict(list)}
        records.append(record)
        for n in range(first, len(seq) - deepest + 1) if not args.timing_only else ():
            fixed.length = n - 1
            sequence, truth = seq[:n], seq[n: n + deepest]
            # ranks along the true path, and the true path's log q
            feature, _ = drafter._catch_up(sequence)
            ranks, logq, full = [], [], []
            with torch.inference_mode():
                for d in range(MAX_DEPTH):
                    row = drafter.head.logits(feature, drafter.vocab_width)[-1]
                    x = truth[d]
                    ranks.append(int((row > row[x]).sum()) if row[x] > -math.inf else MAX_RANK + 1000)
                    whole = lm._logits(feature.to(lm.features.dtype))[-1]  # the target's whole head
                    full.append(int((whole > whole[x]).sum()))
                    logq.append(float(torch.log_softmax(row.float(), -1)[x]))
                    if d + 1 < MAX_DEPTH:
                        feature = drafter._pass(feature, [x], n - 1 + d)[-1:]
            drafter._crop(drafter.length)
            rank_vectors.append(ranks)
            record["ranks"].append(ranks)
            full_vectors.append(full)
            cat = per_category[prompt.category]
            cat["ranks"].append(ranks)
            cat["outside_head"].append(int(ranks[0] > MAX_RANK + 999))
            for gamma in sorted({d for _, d in shapes}):
                t0 = time.perf_counter()
                proposal = drafter.propose(sequence, gamma, greedy, None)
                chain_sec[gamma] += time.perf_counter() - t0
                k = 0
                while k < len(proposal.tokens) and proposal.tokens[k] == truth[k]:
                    k += 1
                chain_acc[gamma].append(k)
                record["chain"][gamma].append(k)
                cat[f"chain{gamma}"].append(k)
            for shape in shapes:
                t0 = time.perf_counter()
                tree = drafter.propose_tree(sequence, shape[0], shape[1], greedy, None)
                tree_sec[shape] += time.perf_counter() - t0
                k = tree_accepted(tree, truth)
                tree_acc[shape].append(k)
                record["tree"][f"{shape[0]},{shape[1]}"].append(k)
                worse[shape] += k < chain_acc[shape[1]][-1]
                cat[f"tree{shape[0]}x{shape[1]}"].append(k)
                tree_depth1[shape] += sum(1 for d in tree.depths if d == 1)
                for i, c in enumerate(true_path_nodes(tree, truth)):
                    score_err.append(abs(tree.scores[c] - sum(logq[: i + 1])))
        print(f"{prompt.category}: {len(rank_vectors)} positions so far, {time.time() - started:.0f} s", flush=True)

    if args.timing_only:
        result = json.loads(Path(args.out).read_text())
        result["timing"] = timing(target, draft, lm, seq, len(ids), shapes, args.timing_rounds)
        Path(args.out).write_text(json.dumps(result, indent=1, default=str) + "\n")
        print(tables(result))
        return 0
    positions = len(rank_vectors)
    step = step_sec / step_n
    if args.positions_out:
        Path(args.positions_out).write_text(json.dumps({
            "max_new_tokens": args.max_new_tokens, "dtype": args.dtype, "threads": args.threads,
            "max_rank": MAX_RANK, "shapes": [f"{n},{d}" for n, d in shapes], "prompts": records,
            "note": "per prompt: sequence = prompt + output; at position n (from `first`: the sequence so far is "
                    "sequence[:n], the target has read n - 1 tokens) ranks[i] = the rank of each next true token "
                    "at depths 1..8 along the true path (>= max_rank: outside the top 8 or the head), "
                    "chain[gamma][i] and tree['N,D'][i] = the accepted lengths"}) + "\n")

    def hit_rates(vectors):
        """Per depth d: top-k hit share among positions whose true path to depth d - 1 is in the top-8."""
        out = {}
        for d in range(MAX_DEPTH):
            live = [r for r in vectors if all(x < MAX_RANK for x in r[:d])]
            if not live:
                break
            out[d + 1] = {"positions": len(live), **{f"top{k}": sum(r[d] < k for r in live) / len(live) for k in TOPS}}
        return out

    result = {
        "prompts": [{"id": p.id, "category": p.category} for p in picked],
        "positions": positions, "max_new_tokens": args.max_new_tokens, "dtype": args.dtype, "threads": args.threads,
        "target_step_ms": 1000 * step,
        "target_pass_ms_by_tokens": {m: 1000 * sum(v) / len(v) for m, v in sorted(pass_sec.items())},
        "hit_rates_by_depth": hit_rates(rank_vectors),
        "hit_rates_by_depth_full_head": hit_rates(full_vectors),
        "outside_head_depth1": sum(r[0] > MAX_RANK + 999 for r in rank_vectors) / positions,
        "chain": {g: {"accepted": sum(v) / len(v), "tokens_per_call": 1 + sum(v) / len(v),
                      "draft_ms_per_call": 1000 * chain_sec[g] / len(v), "c_per_call": chain_sec[g] / len(v) / step}
                  for g, v in sorted(chain_acc.items())},
        "chain_unbounded_top1": sum(next((i for i, r in enumerate(v) if r != 0), len(v))
                                    for v in rank_vectors) / positions,
        "trees": {}, "score_check": {"nodes": len(score_err), "mean_abs": sum(score_err) / max(1, len(score_err)),
                                     "max_abs": max(score_err, default=0.0)},
    }
    for shape in shapes:
        v = tree_acc[shape]
        n_nodes, depth = shape
        passes = 1000 * sum(pass_sec[n_nodes + 1]) / len(pass_sec[n_nodes + 1])
        result["trees"][f"{n_nodes},{depth}"] = {
            "accepted": sum(v) / len(v), "tokens_per_call": 1 + sum(v) / len(v),
            "oracle_static_accepted": static_oracle(rank_vectors, n_nodes, depth),
            "oracle_static_accepted_full_head": static_oracle(full_vectors, n_nodes, depth),
            "chain_same_depth_accepted": sum(chain_acc[depth]) / len(chain_acc[depth]),
            "positions_tree_below_chain": worse[shape],
            "depth1_children": tree_depth1[shape] / len(v),
            "draft_ms_per_call": 1000 * tree_sec[shape] / len(v), "c_per_call": tree_sec[shape] / len(v) / step,
            "verify_ms": passes, "verify_over_step": passes / (1000 * step),
        }
    result["per_category"] = {
        cat: {"positions": len(d["ranks"]), "top1_depth1": sum(r[0] < 1 for r in d["ranks"]) / len(d["ranks"]),
              "top8_depth1": sum(r[0] < 8 for r in d["ranks"]) / len(d["ranks"]),
              **{k: sum(v) / len(v) for k, v in d.items() if k != "ranks"}}
        for cat, d in sorted(per_category.items())}
    result["timing"] = timing(target, draft, lm, seq, len(ids), shapes, args.timing_rounds)
    text = json.dumps(result, indent=1, default=str)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(tables(json.loads(text)))
    return 0


def timing(target, draft, lm, seq: list[int], prompt_length: int, shapes, rounds: int) -> dict:
    """Medians over `rounds` interleaved rounds, each timing once: a target one-token step, a target pass over
    m tokens (m = 1 + every shape's N and 1 + every chain's gamma), every tree shape's and chain's draft, at
    positions cycling through the last prompt's continuation (the load of a shared machine then falls on every
    item alike). Returns ms and ratios to the step."""
    import statistics

    import torch

    from decoding.lm.tree_pass import tree_pass
    from decoding.rules.warp import SamplingConfig

    greedy = SamplingConfig(0.0)
    gammas = sorted({d for _, d in shapes} | {2})
    sizes = sorted({1} | {n + 1 for n, _ in shapes} | {g + 1 for g in gammas})
    drafter = draft.drafter(target)
    fixed = FixedTarget(lm.features)
    drafter.target = fixed
    samples = collections.defaultdict(list)
    spots = list(range(prompt_length + 8, len(seq) - MAX_DEPTH))
    for i in range(rounds):
        n = spots[i % len(spots)]
        for m in sizes:
            lm.rollback(n - 1)
            if lm.length < n - 1:
                lm.extend(seq[: n - 1])
            mask = torch.ones(m, n - 1 + m, dtype=torch.bool).tril(n - 1)
            t0 = time.perf_counter()
            tree_pass(lm, (seq[n - 1:] + seq)[:m], list(range(n - 1, n - 1 + m)), mask, keep=m)  # tokens: any
            samples[f"pass{m}"].append(time.perf_counter() - t0)
        lm.rollback(n - 1)
        fixed.length, fixed.features = n - 1, lm.features
        for g in gammas:
            t0 = time.perf_counter()
            drafter.propose(seq[:n], g, greedy, None)
            samples[f"chain{g}"].append(time.perf_counter() - t0)
        for nodes, depth in shapes:
            t0 = time.perf_counter()
            drafter.propose_tree(seq[:n], nodes, depth, greedy, None)
            samples[f"tree{nodes},{depth}"].append(time.perf_counter() - t0)
    ms = {k: 1000 * statistics.median(v) for k, v in samples.items()}
    step = ms["pass1"]
    used = [spots[i % len(spots)] - 1 for i in range(rounds)]  # the cached tokens before each round's pass
    return {"rounds": rounds, "context": sum(used) / len(used), "ms": ms,
            "over_step": {k: v / step for k, v in ms.items()}}


# docs/performance.md, "What a verify pass costs": bfloat16, 1 thread, a cache of 200 tokens (k new tokens: ratio)
DOC_VERIFY = {1: 1.00, 2: 1.05, 3: 1.06, 5: 1.11, 9: 1.23, 17: 1.49, 33: 2.00}


def interpolate(table: dict[int, float], k: int) -> float:
    """The ratio of a pass over k tokens, linear between the sizes measured."""
    sizes = sorted(table)
    if k in table:
        return table[k]
    lo = max([s for s in sizes if s < k], default=sizes[0])
    hi = min([s for s in sizes if s > k], default=sizes[-1])
    if lo == hi:
        return table[lo]
    return table[lo] + (table[hi] - table[lo]) * (k - lo) / (hi - lo)


def tables(r: dict) -> str:
    """Markdown: hit rates by depth, then per shape accepted lengths, costs and the cost model's speed."""
    step = r["target_step_ms"]
    measured = {int(k): v / step for k, v in r["target_pass_ms_by_tokens"].items()}
    timed = r.get("timing")
    if timed:  # the interleaved timing phase's medians
        measured = {int(k[4:]): v for k, v in timed["over_step"].items() if k.startswith("pass")}
    lines = ["| depth | positions | top-1 | top-2 | top-4 | top-8 | top-8, whole head |",
             "|---|---|---|---|---|---|---|"]
    for d, v in r["hit_rates_by_depth"].items():
        full = r["hit_rates_by_depth_full_head"].get(d, {})
        lines.append(f"| {d} | {v['positions']} | " + " | ".join(f"{v[f'top{k}']:.3f}" for k in TOPS)
                     + f" | {full.get('top8', float('nan')):.3f} |")
    lines += ["", "| shape | accepted (tree) | accepted (chain, same depth) | oracle static tree | tokens/call "
              "| draft ms/call | c/call | verify/step (here) | speed (here) | verify/step (doc) | speed (doc) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = []
    for shape, v in r["trees"].items():
        n = int(shape.split(",")[0])
        ms, c = v["draft_ms_per_call"], v["c_per_call"]
        if timed:
            ms, c = timed["ms"][f"tree{shape}"], timed["over_step"][f"tree{shape}"]
        rows.append((f"tree {shape}", v["accepted"], v["chain_same_depth_accepted"], v["oracle_static_accepted"],
                     v["tokens_per_call"], ms, c, interpolate(measured, n + 1),
                     interpolate(DOC_VERIFY, n + 1)))
    for g, v in r["chain"].items():
        g = int(g)
        ms, c = v["draft_ms_per_call"], v["c_per_call"]
        if timed and f"chain{g}" in timed["ms"]:
            ms, c = timed["ms"][f"chain{g}"], timed["over_step"][f"chain{g}"]
        rows.append((f"chain {g}", v["accepted"], v["accepted"], None, v["tokens_per_call"], ms, c,
                     interpolate(measured, g + 1), interpolate(DOC_VERIFY, g + 1)))
    for name, acc, chain, oracle, tau, ms, c, here, doc in rows:
        lines.append(f"| {name} | {acc:.3f} | {chain:.3f} | {'' if oracle is None else f'{oracle:.3f}'} | {tau:.3f} "
                     f"| {ms:.1f} | {c:.3f} | {here:.2f} | {tau / (here + c):.2f}x | {doc:.2f} "
                     f"| {tau / (doc + c):.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
