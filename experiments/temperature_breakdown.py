"""Where a sampled run's time and tokens go: per configuration (fixed gamma, the automatic gamma, draft trees) of
the hybrid drafter at a temperature, per draft source (lookup, lookup-short, model, a tree, none), the
iterations, draft tokens, accepted tokens and emitted tokens per iteration, draft and verify milliseconds per
iteration, each chain position's acceptance given the positions before it were accepted, the prefill's share of
the time, the gammas chosen, and the measured mean overlap alpha beside the tokens per iteration Leviathan et al.'s
formula predicts from it (decoding/rules/theory.py). Plain decoding runs in the same loop, so the speedups are
ratios from one session: the benchmark's (median of the repeats per prompt) and the ratio of all runs' summed
seconds, with its bootstrap spread over the sampled texts.

A sampled text is one draw: the benchmark's seed + r for every prompt draws near-identical texts for the class's
near-identical prompts (at seed 0 fixed gamma 1 echoes "Here are three animals that start with the letter X:" on
most of them), so a repeat is about one sample; --seed-per-prompt gives each (prompt, repeat) its own seed. A
configuration ending in "!" (e.g. "auto!") carries the automatic gamma's estimates from run to run.

    PYTHONPATH=. .venv/bin/python experiments/temperature_breakdown.py --configs 1,2,auto,auto/4,2 \
        --repeats 10 --seed-per-prompt
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _config(name: str):
    """"3" -> fixed gamma 3; "auto"; "auto/4,2" -> auto with a 4,2 tree; "4/4,2" -> fixed 4 with the tree;
    a trailing "!" (e.g. "auto!"): the automatic gamma's estimates carried from run to run (`_carried`)."""
    gamma, _, tree = name.rstrip("!").partition("/")
    extra = {"gamma_schedule": "auto" if gamma == "auto" else "fixed"}
    if tree:
        extra["draft_tree"] = tree
    return (4 if gamma == "auto" else int(gamma)), extra


_POLICIES: dict = {}


def _carried(key):
    """Make the run's GammaPolicy the one kept under `key` (its estimates carried from earlier runs; the
    per-run counters reset), or restore the plain class (key None)."""
    import decoding.methods.speculative as spec_mod
    import decoding.methods.tree_draft as tree_mod
    from decoding.drafters.gamma_policy import GammaPolicy

    if key is None:
        spec_mod.GammaPolicy = tree_mod.GammaPolicy = GammaPolicy
        return

    def make(schedule, gamma, max_gamma=16):
        policy = _POLICIES.get(key)
        if policy is None:
            policy = _POLICIES[key] = GammaPolicy(schedule, gamma, max_gamma=max_gamma)
        policy.gamma, policy._idle, policy._passed_over = int(gamma), 0, {"tree": 0, "chain": 0}
        return policy

    spec_mod.GammaPolicy = tree_mod.GammaPolicy = make


def _bootstrap_sd(seconds: dict, base: str, name: str, prompts: int, repeats: int, draws: int = 2000) -> float:
    """The spread (standard deviation) of the speedup of sums over bootstrap resamples of the (prompt, repeat) runs:
    how much the figure moves with the texts sampled (each run is one sampled text)."""
    import random

    runs = [(i, r) for i in range(prompts) for r in range(repeats)]
    rng, values = random.Random(0), []
    for _ in range(draws):
        pick = [runs[rng.randrange(len(runs))] for _ in runs]
        values.append(sum(seconds[(base, i)][r] for i, r in pick) / sum(seconds[(name, i)][r] for i, r in pick))
    mean = sum(values) / len(values)
    return round((sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5, 3)


def _bucket(record) -> str:
    """The iteration's source as the policy keys it: model, lookup, lookup-short, tree, none."""
    step = record.extra.get("tree_draft")
    if step is not None:
        if step["shape"] == "tree":
            return "tree"
        if step["shape"] == "plain":
            return "none"
        return step.get("source_key") or step["source"]
    chain = record.extra.get("chain", {})
    if not record.draft:
        return "none"
    source = chain.get("source") or "model"
    if source == "lookup" and (chain.get("match_length") or 0) < 2:
        return "lookup-short"
    return source


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default="benchmarks/classroom.jsonl")
    ap.add_argument("--draft", default="hybrid:feature")
    ap.add_argument("--configs", default="1,2,3,4,auto,auto/4,2", help="comma list; a tree as gamma/N,D (the last)")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seed-per-prompt", action="store_true",
                    help="repeat r of prompt i samples with seed --seed + 1000 r + i (the benchmark's seed + r for "
                         "every prompt draws near-identical texts for the class's near-identical prompts, so 8 "
                         "prompts are about one sample a repeat)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--out", default=None, help="write the JSON here too")
    args = ap.parse_args(argv)
    import torch

    from decoding.lm.prompt_files import read_prompt_rows
    from decoding.methods.base import RunConfig
    from decoding.rules import theory
    from decoding.rules.warp import SamplingConfig
    from decoding.run.pair import load_pair
    from decoding.run.runner import decode

    torch.set_num_threads(args.threads)
    configs = []
    for part in args.configs.split(","):  # "auto/4,2" splits as "auto/4", "2": glue a tree's depth back on
        if configs and "/" in configs[-1] and "," not in configs[-1].partition("/")[2]:
            configs[-1] += "," + part
        else:
            configs.append(part)
    prompts = [r.prompt for r in read_prompt_rows(args.prompts)]
    target, draft = load_pair("default", args.draft, dtype=args.dtype)
    sampling = SamplingConfig(args.temperature)
    ids_of = [target.encode_prompt(p, True) for p in prompts]

    def run(method, gamma, extra, ids, seed, carry=None):
        if carry is not None:
            _carried(carry)
        config = RunConfig(method=method, max_new_tokens=args.max_new_tokens, sampling=sampling, gamma=gamma,
                           seed=seed, stop_at_eos=False, lean=True, extra=extra)
        t0 = time.perf_counter()
        try:
            records = list(decode(target, draft, ids, config))
        finally:
            _carried(None)
        return records, time.perf_counter() - t0

    for ids in ids_of[:2]:  # warm-up
        run("autoregressive", 1, {}, ids, 0)
        run("speculative", 4, {"gamma_schedule": "auto"}, ids, 0)

    seconds = collections.defaultdict(list)  # (config, prompt) -> seconds per repeat
    tally = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    gammas = collections.defaultdict(collections.Counter)
    ctx_tally = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    for r in range(args.repeats):
        for i, ids in enumerate(ids_of):
            seed = args.seed + (1000 * r + i if args.seed_per_prompt else r)
            for name in ["plain"] + configs:  # interleaved: every config sees the same machine state
                if name == "plain":
                    records, sec = run("autoregressive", 1, {}, ids, seed)
                else:
                    gamma, extra = _config(name)
                    records, sec = run("speculative", gamma, extra, ids, seed,
                                       carry=name if name.endswith("!") else None)
                seconds[(name, i)].append(sec)
                t = tally[name]
                t["all"]["seconds"] += sec
                t["all"]["prefill_s"] += records[0].timings.draft + records[0].timings.verify
                for rec in records[1:]:
                    b = "plain" if name == "plain" else _bucket(rec)
                    n_acc = sum(1 for d in rec.draft if d.accepted)
                    for key in (b, "all"):
                        c = t[key]
                        c["iterations"] += 1
                        c["drafted"] += len(rec.draft) if rec.extra.get("tree_draft") is None else \
                            (rec.extra["tree_draft"]["drafted"] or 0)
                        c["accepted"] += n_acc
                        c["emitted"] += len(rec.emitted)
                        c["draft_ms"] += 1000 * rec.timings.draft
                        c["verify_ms"] += 1000 * rec.timings.verify
                        c["other_ms"] += 1000 * rec.timings.other
                        examined = [d.overlap for d in rec.draft if d.accepted is not None and d.overlap is not None]
                        c["overlap_sum"] += sum(examined)
                        c["overlap_n"] += len(examined)
                        if b != "tree":
                            for j, d in enumerate(rec.draft[:8]):  # position j reached: examined; accepted?
                                if d.accepted is not None:
                                    c[f"reach{j}"] += 1
                                    c[f"acc{j}"] += int(bool(d.accepted))
                            c["pos1_examined"] += int(bool(examined))
                            c["pos1_accepted"] += int(bool(rec.draft) and bool(rec.draft[0].accepted))
                    if name != "plain":
                        gammas[name][f"{b}:{rec.gamma}"] += 1
                        band = "gen<8" if rec.context_length - len(ids) < 8 else \
                            ("gen<16" if rec.context_length - len(ids) < 16 else "gen>=16")
                        cb = ctx_tally[name][f"{band}:{b}"]
                        cb["iterations"] += 1
                        cb["emitted"] += len(rec.emitted)
                        cb["ms"] += 1000 * (rec.timings.draft + rec.timings.verify + rec.timings.other)

    def med_total(name):
        return sum(statistics.median(seconds[(name, i)]) for i in range(len(ids_of)))

    def t_all(name):
        return sum(sum(seconds[(name, i)]) for i in range(len(ids_of)))

    plain_total = med_total("plain")
    out = {"temperature": args.temperature, "prompts": len(ids_of), "repeats": args.repeats, "configs": {}}
    for name in ["plain"] + configs:
        t = tally[name]
        rows = {}
        for key, c in sorted(t.items()):
            if key == "all" and not c["iterations"]:
                continue
            it = max(c["iterations"], 1)
            alpha = c["overlap_sum"] / c["overlap_n"] if c["overlap_n"] else None
            g = c["drafted"] / it
            rows[key] = {
                "iterations": c["iterations"], "drafted_per_it": round(g, 2),
                "accepted_per_it": round(c["accepted"] / it, 3), "emitted_per_it": round(c["emitted"] / it, 3),
                "draft_ms_per_it": round(c["draft_ms"] / it, 2), "verify_ms_per_it": round(c["verify_ms"] / it, 2),
                "other_ms_per_it": round(c["other_ms"] / it, 2),
                "alpha": None if alpha is None else round(alpha, 3),
                # the acceptance of draft position j given positions < j were accepted (chains)
                "conditional_accept": [round(c[f"acc{j}"] / c[f"reach{j}"], 2) for j in range(8) if c[f"reach{j}"]],
                "reached": [c[f"reach{j}"] for j in range(8) if c[f"reach{j}"]],
                "first_pos_accept": round(c["pos1_accepted"] / c["pos1_examined"], 3) if c["pos1_examined"] else None,
                # Leviathan's E[tokens] = (1 - alpha^(g+1)) / (1 - alpha) at the mean draft length (a rough check)
                "predicted_emitted_per_it": (round(theory.expected_tokens_per_call(alpha, round(g)), 3)
                                             if alpha is not None and key not in ("tree", "plain", "none") else None),
            }
        total = med_total(name)
        out["configs"][name] = {
            "speedup": round(plain_total / total, 3), "median_total_s": round(total, 3),
            # every run's seconds summed (a sampled text differs from seed to seed: with many repeats this is the
            # expected time, where the median of 3 is the benchmark's figure)
            "speedup_of_sums": round(t_all("plain") / t_all(name), 3),
            "speedup_of_sums_bootstrap_sd": _bootstrap_sd(seconds, "plain", name, len(ids_of), args.repeats),
            "prefill_share": round(t["all"]["prefill_s"] / t["all"]["seconds"], 3),
            "sources": rows, "gammas": dict(sorted(gammas[name].items())),
            "by_context": {k: {"iterations": c["iterations"],
                               "emitted_per_it": round(c["emitted"] / c["iterations"], 2),
                               "ms_per_token": round(c["ms"] / max(c["emitted"], 1), 2)}
                           for k, c in sorted(ctx_tally[name].items())},
        }
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
