"""How fast could copying make greedy decoding: replay a fixed output under drafting rules, real and oracle.

Greedy speculative decoding emits exactly the autoregressive output, so for any rule that proposes
tokens at each iteration, how many the target accepts follows from that output alone: the leading
proposed tokens equal to what comes next. Replaying the output under a rule, with the measured
time of a target pass over n new tokens (`VerifyCost`), gives that rule's speed without running
it. Rules that know the answer (oracles) bound what any copying drafter can reach:

- `lookup_rule`: the engine's prompt lookup (`drafters.lookup.suffix_match`: the most recent longest
  suffix match), a fixed number of copied tokens. It checks the replay against the benchmark.
- `oracle_gate`: the same copy, proposed only where its first token is right.
- `oracle_length`: the same occurrence, exactly as many tokens as will be accepted.
- `oracle_choice`: the occurrence (of the last token) whose copy runs longest, a fixed length.
- `oracle_copy`: the best occurrence and exactly its accepted length: no copying drafter does better.
- `copy_tree`: the continuations of several occurrences verified together in one pass.
- `hybrid_copy_rule`: the context's copy after a long match, else a copy from a corpus of the
  target's earlier answers (`corpus.py`), else the short copy or nothing; its copy length may grow
  with the match length (`by_match_length`), since a longer match is followed by a longer run.

Positions where a rule copies nothing can be given to a draft model in expectation (`ModelDraft`:
acceptance alpha per token, independent, at its best gamma; Leviathan et al. eq. 1 with the measured
verify cost), so the bound for "perfect copying plus today's model" is one replay too.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path

from ...drafters.lookup import match_length, suffix_match
from ...drafters.lookup import occurrences as positions_of
from ...rules.theory import expected_tokens_per_call

MAX_RUN = 64  # the longest copy any rule proposes


class VerifyCost:
    """Milliseconds of one target pass over n new tokens after `context` cached ones, interpolated
    linearly in n between the measured sizes and in the context between the measured contexts
    (clamped outside both): `python -m decoding verify-cost --json` files, one per context."""

    def __init__(self, tables: dict[int, dict[int, float]]):
        if not tables:
            raise ValueError("VerifyCost needs at least one measured context")
        self.contexts = sorted(tables)
        self.tables = {c: dict(sorted(tables[c].items())) for c in self.contexts}
        for c, table in self.tables.items():
            if 1 not in table:
                raise ValueError(f"the verify-cost table at context {c} lacks a one-token pass")

    @classmethod
    def from_files(cls, paths: list[str | Path], dtype: str) -> "VerifyCost":
        tables = {}
        for path in paths:
            data = json.loads(Path(path).read_text())
            if dtype not in data.get("rows", {}):
                raise ValueError(f"{path} has no {dtype} row (it has {sorted(data.get('rows', {}))})")
            tables[int(data["context"])] = {int(n): float(ms) for n, ms in data["rows"][dtype]["ms"].items()}
        return cls(tables)

    @staticmethod
    def _along(points: dict[int, float], x: float) -> float:
        xs = list(points)
        if x <= xs[0]:
            return points[xs[0]]
        if x >= xs[-1]:
            return points[xs[-1]]
        i = bisect_left(xs, x)
        x0, x1 = xs[i - 1], xs[i]
        return points[x0] + (points[x1] - points[x0]) * (x - x0) / (x1 - x0)

    def ms(self, n_tokens: int, context: int) -> float:
        by_context = {c: self._along(self.tables[c], n_tokens) for c in self.contexts}
        return self._along(by_context, context)


def read_replay_inputs(bench: str | Path, draft_eval: str | Path, verify_costs: str, dtype: str):
    """What a replay experiment reads beside its own data: the benchmark run's JSON (per category the
    autoregressive time and its prefill share), the last result of an eval-draft JSON (today's model's alpha and
    c) and the VerifyCost of the comma-separated verify-cost files in `dtype`. Raises OSError, ValueError,
    KeyError or IndexError on a missing or malformed file."""
    return (json.loads(Path(bench).read_text()), json.loads(Path(draft_eval).read_text())["results"][-1],
            VerifyCost.from_files(verify_costs.split(","), dtype))


def run_length(sequence: list[int], source: int, start: int, cap: int = MAX_RUN) -> int:
    """How many tokens from `source` on equal those from `start` on (at most `cap`; the copy never
    reads at or past `start`, which is not yet known when the copy is made)."""
    n = 0
    while n < cap and start + n < len(sequence) and source + n < start and sequence[source + n] == sequence[start + n]:
        n += 1
    return n


def occurrences(sequence: list[int], t: int) -> list[int]:
    """Where the continuation of every earlier occurrence of sequence[t] starts, most recent first."""
    return [i + 1 for i in reversed(positions_of(sequence, sequence[t], t))]


# A rule sees the output and the index t of the last committed token; it returns
# (tokens the target accepts, tokens proposed). Rules marked oracle read the future.

def context_copy(sequence: list[int], t: int, start: int, tokens: int) -> tuple[int, int]:
    """(accepted, proposed) of a copy of up to `tokens` known tokens from `start` on."""
    proposed = min(tokens, t + 1 - start)
    return run_length(sequence, start, t + 1, proposed), proposed


def lookup_rule(tokens: int, max_match: int = 32):
    def rule(sequence: list[int], t: int) -> tuple[int, int]:
        found = suffix_match(sequence[: t + 1], max_match)
        return (0, 0) if found is None else context_copy(sequence, t, found[0], tokens)
    return rule


def by_match_length(lengths: dict[int, int]):
    """A copy length that grows with the match: `lengths` maps the shortest match of each step to its
    copy length ({2: 4, 8: 12}: 4 tokens after a 2-7-token match, 12 after 8 or more)."""
    steps = sorted(lengths.items())

    def tokens(match: int) -> int:
        return max((n for shortest, n in steps if match >= shortest), default=steps[0][1])
    return tokens


def hybrid_copy_rule(tokens, corpus=None, short_copies: bool = True, min_match: int = 2, max_match: int = 32):
    """The hybrid's copies: the context's copy after a match of at least `min_match` tokens, else
    (with a `corpus`, `corpus.TextCorpus`) the corpus's continuation, else the copy after a shorter
    match (`short_copies`) or nothing (positions left to a model). `tokens`: the copy length, or a
    function of the match length (`by_match_length`)."""
    length = tokens if callable(tokens) else (lambda match: tokens)

    def rule(sequence: list[int], t: int) -> tuple[int, int]:
        context = sequence[: t + 1]
        found = suffix_match(context, max_match)
        if found is not None and found[1] >= min_match:
            return context_copy(sequence, t, found[0], length(found[1]))
        match = corpus.find(context) if corpus is not None else None
        if match is not None:
            copy = corpus.continuation(match, length(match.length))
            return leading_equal(copy, sequence[t + 1:]), len(copy)
        if found is None or not short_copies:
            return 0, 0
        return context_copy(sequence, t, found[0], length(found[1]))
    return rule


def oracle_gate(tokens: int, max_match: int = 32):
    copy = lookup_rule(tokens, max_match)

    def rule(sequence: list[int], t: int) -> tuple[int, int]:
        accepted, proposed = copy(sequence, t)
        return (accepted, proposed) if accepted else (0, 0)
    return rule


def oracle_length(sequence: list[int], t: int, max_match: int = 32, min_match: int = 1) -> tuple[int, int]:
    found = suffix_match(sequence[: t + 1], max_match)
    accepted = run_length(sequence, found[0], t + 1) if found and found[1] >= min_match else 0
    return accepted, accepted


def oracle_choice(tokens: int):
    def rule(sequence: list[int], t: int) -> tuple[int, int]:
        starts = occurrences(sequence, t)
        if not starts:
            return 0, 0
        return max(run_length(sequence, s, t + 1, tokens) for s in starts), tokens
    return rule


def oracle_copy(sequence: list[int], t: int) -> tuple[int, int]:
    best = max((run_length(sequence, s, t + 1) for s in occurrences(sequence, t)), default=0)
    return best, best


def copy_tree(branches: int, tokens: int, max_match: int = 32):
    """The continuations (`tokens` long) of up to `branches` occurrences of the last token, longest
    suffix match first (most recent among equals), distinct; one pass over their prefix tree."""
    def rule(sequence: list[int], t: int) -> tuple[int, int]:
        ranked = []
        for s in occurrences(sequence, t):
            ranked.append((-match_length(sequence, s - 1, t, max_match), len(ranked), s))
        ranked.sort()
        paths, nodes = [], set()
        for _, _, s in ranked:
            path = tuple(sequence[s: min(s + tokens, t + 1)])
            if path and path not in paths:
                paths.append(path)
                nodes.update(path[:i] for i in range(1, len(path) + 1))
            if len(paths) == branches:
                break
        if not paths:
            return 0, 0
        accepted = max(leading_equal(path, sequence[t + 1:]) for path in paths)
        return accepted, len(nodes)
    return rule


def runs_by_match(outputs: list[tuple[list[int], int]], shortest: list[int], max_match: int = 32,
                  cap: int = 32) -> list[dict]:
    """How long a copy after each match length runs: at every position of every output (sequence,
    prompt length) whose suffix matches earlier, the match length and the run of tokens the copy of
    its continuation would get accepted (at most `cap`), grouped by the match-length steps in
    `shortest` (each step holds matches from its value up to the next one's)."""
    steps = sorted(shortest)
    groups = {s: [] for s in steps}
    for sequence, prompt_length in outputs:
        for t in range(prompt_length, len(sequence) - 1):
            found = suffix_match(sequence[: t + 1], max_match)
            if found is None or found[1] < steps[0]:
                continue
            step = max(s for s in steps if found[1] >= s)
            groups[step].append(run_length(sequence, found[0], t + 1, cap))
    return [{"shortest_match": s, "positions": len(runs), "mean_run": sum(runs) / len(runs) if runs else 0.0,
             "share_first_right": sum(r >= 1 for r in runs) / len(runs) if runs else 0.0}
            for s, runs in groups.items()]


def leading_equal(a, b) -> int:
    """How many leading tokens of a and b are equal."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@dataclass(frozen=True)
class ModelDraft:
    """A draft model in expectation: each token accepted with probability `alpha`, independently;
    a draft step costs `c` target steps. Used where a copying rule proposes nothing."""

    alpha: float
    c: float
    max_gamma: int = 8

    def ms_per_token(self, cost: VerifyCost, context: int) -> float:
        """Expected milliseconds per emitted token at the best gamma (0: a plain step)."""
        step = cost.ms(1, context)
        best = step
        for gamma in range(1, self.max_gamma + 1):
            ms = (cost.ms(gamma + 1, context) + gamma * self.c * step) / expected_tokens_per_call(self.alpha, gamma)
            best = min(best, ms)
        return best


@dataclass
class Replay:
    """One output replayed under one rule: emitted tokens, iterations, and milliseconds of the
    decoding after the prefill, for the rule and for autoregressive decoding."""

    tokens: int = 0
    iterations: int = 0
    rule_ms: float = 0.0
    autoregressive_ms: float = 0.0

    def add(self, other: "Replay") -> None:
        self.tokens += other.tokens
        self.iterations += other.iterations
        self.rule_ms += other.rule_ms
        self.autoregressive_ms += other.autoregressive_ms

    @property
    def speedup(self) -> float:
        return self.autoregressive_ms / self.rule_ms if self.rule_ms else 0.0

    @property
    def tokens_per_iteration(self) -> float:
        return self.tokens / self.iterations if self.iterations else 0.0


def replay(sequence: list[int], prompt_length: int, rule, cost: VerifyCost, model: ModelDraft | None = None) -> Replay:
    """Replay the output `sequence[prompt_length:]` (the prefill pass emitted its first token) under
    `rule`; where the rule proposes nothing and `model` is given, the model's expected cost per token."""
    out = Replay()
    t = prompt_length
    last = len(sequence) - 1
    while t < last:
        accepted, proposed = rule(sequence, t) if rule is not None else (0, 0)
        if proposed == 0 and model is not None:
            out.rule_ms += model.ms_per_token(cost, t)
            out.tokens += 1
            out.iterations += 1
            t += 1
            continue
        accepted = min(accepted, last - t - 1)  # the output ends: the last pass emits what is left
        out.rule_ms += cost.ms(proposed + 1, t)
        out.tokens += accepted + 1
        out.iterations += 1
        t += accepted + 1
    out.autoregressive_ms = sum(cost.ms(1, u) for u in range(prompt_length, last))
    return out


def with_prefill(decode_speedup: float, prefill_share: float) -> float:
    """The whole run's speedup when a share of autoregressive time is the prefill, which both pay."""
    return 1.0 / (prefill_share + (1.0 - prefill_share) / decode_speedup)


def whole_runs(parts: dict, bench: dict) -> dict:
    """Per-category Replays (category -> Replay) -> {"overall", "categories"}: each category's speedup after
    the prefill and over its whole run (prefill included at the benchmark's share), and the overall whole-run
    speedup weighted by each category's autoregressive seconds in `bench` (a benchmark JSON)."""
    ar_total = rule_total = 0.0
    per_category = {}
    for category, part in parts.items():
        measured = bench["categories"][category]["autoregressive"]
        whole = with_prefill(part.speedup, measured["first_pass_share"])
        ar_total += measured["seconds"]
        rule_total += measured["seconds"] / whole
        per_category[category] = {"after_prefill": part.speedup, "whole_run": whole,
                                  "tokens_per_iteration": part.tokens_per_iteration}
    return {"overall": ar_total / rule_total, "categories": per_category}


def needed_decode_speedup(goal: float, prefill_share: float) -> float | None:
    """The speedup after the prefill that makes the whole run `goal` times faster (None: unreachable)."""
    rest = 1.0 / goal - prefill_share
    return (1.0 - prefill_share) / rest if rest > 0 else None


def markdown(result: dict, labels: dict | None = None) -> str:
    """The table of a `experiments/copy_ceiling.py` result: whole-run speedup per rule, over all prompts
    and per category (`labels` names the categories)."""
    labels = labels or {}
    cats = result["categories"]
    lines = ["| rule | all " + str(result["prompts"]) + " | " + " | ".join(labels.get(c, c) for c in cats) + " |",
             "|" + "---|" * (len(cats) + 2)]
    for row in result["rows"]:
        cells = [f"{row['categories'][c]['whole_run']:.2f}x" for c in cats]
        lines.append(f"| {row['rule']} | **{row['overall']:.2f}x** | " + " | ".join(cells) + " |")
    needed = ", ".join(f"{labels.get(c, c)} {v:.2f}x" if v else f"{labels.get(c, c)}: unreachable"
                       for c, v in result["needed_after_prefill_for_1_7x"].items())
    lines += ["", "Whole-run speedups over autoregressive decoding, the prefill included at each category's "
              f"measured share. A whole run at 1.7x needs, after the prefill: {needed}."]
    runs = result.get("runs_by_match")
    if runs:
        lines += ["", "How long the engine's copy runs after each match length (every output position whose suffix "
                  "repeats earlier; the run is capped at 32):", "",
                  "| suffix match (tokens) | positions | first copied token right | mean accepted run |",
                  "|---|---|---|---|"]
        for i, row in enumerate(runs):
            upper = runs[i + 1]["shortest_match"] - 1 if i + 1 < len(runs) else None
            low = row["shortest_match"]
            span = f"{low}+" if upper is None else (str(low) if upper == low else f"{low}-{upper}")
            lines.append(f"| {span} | {row['positions']} | {row['share_first_right']:.2f} | {row['mean_run']:.2f} |")
    return "\n".join(lines)
