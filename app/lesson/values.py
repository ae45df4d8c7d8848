"""The lesson's named engine values: what `{name(arg=value)}` in assets/lesson.yaml stands for.

Every number a chapter shows in a question, an answer or its feedback comes from one of these
functions, each computed by the engine (`decoding.rules.lab`, `decoding.rules.acceptance`, `decoding.rules.theory`,
a shipped trace's records or a shipped race's summaries), so the lesson can never disagree with
the app. No Gradio here. Shipped traces and races are found by a forgiving name (`find_trace`,
`find_race`), which is also how `/?trace=NAME` finds one.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Callable

import torch

from decoding.rules import theory
from decoding.methods.mjsd.joint import joint_verify
from decoding.rules.acceptance import acceptance_threshold, residual_distribution
from decoding.rules.implementations import get_implementation
from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q, EXAMPLE_VOCAB, run_sampling_lab
from decoding.trace.metrics import RunCounts
from decoding.methods.mjsd.generator import MjsdStep
from decoding.trace.record import BONUS, CORRECTION
from decoding.run.trace_file import read_trace

from .. import measured
from ..race_file import read_race, shipped_races
from ..race_result import speedup
from ..session import example_traces, find_named, find_trace  # noqa: F401 (find_trace: the lesson's too)
from . import worked_tree

VALUES: dict[str, Callable[..., object]] = {}

# The words a "where does the next token come from" answer resolves to (the choices must match one).
NEXT_TOKEN_SOURCE = {CORRECTION: "From the residual: a correction token",
                     BONUS: "A bonus token drawn from p"}


def value(name: str):
    """Register a named value (a function of keyword arguments) under `name`."""
    def register(fn):
        VALUES[name] = fn
        return fn
    return register


# --------------------------------------------------------------------------- finding shipped files
def find_race(name: str) -> tuple[str, Path] | None:
    """A shipped race by its file stem ("gallery-writing-3") or its title (`session.find_named`)."""
    return find_named(name, shipped_races(), ".json")


@functools.lru_cache(maxsize=32)
def _trace_at(path: Path):
    return read_trace(path)


def trace(name: str):
    """(records, summary) of a shipped trace; ValueError naming the choices when there is none."""
    found = find_trace(name)
    if found is None:
        raise ValueError(f"no shipped trace called {name!r} (shipped: {', '.join(p.stem for p in example_traces().values())})")
    return _trace_at(found[1])


def race(name: str):
    found = find_race(name)
    if found is None:
        raise ValueError(f"no shipped race called {name!r} (shipped: {', '.join(p.stem for p in shipped_races().values())})")
    return found[0], read_race(found[1])


def _record(name: str, iteration: int):
    records, _ = trace(name)
    if not 0 <= int(iteration) < len(records):
        raise ValueError(f"trace {name!r} has iterations 0 to {len(records) - 1}, not {iteration}")
    return records[int(iteration)]


# --------------------------------------------------------------------------- the worked example (decoding/rules/lab.py)
def _example_index(token: str) -> int:
    if token not in EXAMPLE_VOCAB:
        raise ValueError(f"{token!r} is not in the worked example's vocabulary {EXAMPLE_VOCAB}")
    return EXAMPLE_VOCAB.index(token)


def _pq():
    return torch.tensor(EXAMPLE_P, dtype=torch.float64), torch.tensor(EXAMPLE_Q, dtype=torch.float64)


@value("lab.p")
def lab_p(token: str) -> float:
    return EXAMPLE_P[_example_index(token)]


@value("lab.q")
def lab_q(token: str) -> float:
    return EXAMPLE_Q[_example_index(token)]


@value("lab.keep_chance")
def keep_chance(token: str, lenience: float = 1.0) -> float:
    """min(1, p/(l q)) of one draft token: the chance it is kept (`acceptance_threshold`)."""
    p, q = _pq()
    i = _example_index(token)
    return float(acceptance_threshold(p[i], q[i], float(lenience)))


@value("lab.reject_chance")
def reject_chance(token: str, lenience: float = 1.0) -> float:
    return 1.0 - keep_chance(token, lenience)


@value("lab.alpha")
def lab_alpha() -> float:
    """Σ min(p, q): the chance that a draft of the worked example is accepted."""
    return theory.alpha(EXAMPLE_P, EXAMPLE_Q)


@value("lab.residual")
def lab_residual(token: str) -> float:
    p, q = _pq()
    return float(residual_distribution(p, q)[0][_example_index(token)])


@value("lab.correction_tokens")
def correction_tokens() -> str:
    """The tokens the residual can give, "stock, girl": those where p > q."""
    p, q = _pq()
    residual = residual_distribution(p, q)[0]
    return ", ".join(v for v, r in zip(EXAMPLE_VOCAB, residual.tolist()) if r > 0)


@value("lab.implementation_acceptance")
def implementation_acceptance(name: str) -> float:
    """How often an implementation of the step keeps the worked example's draft, in closed form
    (`decoding.rules.implementations`: exact match keeps it Σ p·q of the time, the correct rule Σ min(p, q))."""
    return get_implementation(name).acceptance_probability(*_pq())


@value("lab.implementation_tv")
def implementation_tv(name: str) -> float:
    """TV(output, p) of an implementation on the worked example, in closed form: 0 for an exact one."""
    p, q = _pq()
    return float(0.5 * (get_implementation(name).output_distribution(p, q) - p).abs().sum())


@value("lab.coin")
def coin(seed: int) -> float:
    """The coin u of one check, drawn as the engine draws it (torch.rand with a seeded generator)."""
    return float(torch.rand(1, generator=torch.Generator().manual_seed(int(seed)), dtype=torch.float64))


@value("mentored.alpha")
def mentored_alpha(kl_bound: float) -> float:
    """Mentored decoding's acceptance on the worked example with KL budget D (`decoding.rules.mentored`)."""
    return run_sampling_lab(EXAMPLE_P, EXAMPLE_Q, n=1, kl_bound=float(kl_bound))["alpha"]


@value("mentored.kl_draft")
def kl_draft() -> float:
    """KL(p ‖ q) of the worked example: at or below D, every draft is kept."""
    return run_sampling_lab(EXAMPLE_P, EXAMPLE_Q, n=1, kl_bound=1.0)["kl_draft"]


# --------------------------------------------------------------------------- the worked draft tree (worked_tree.py)
@value("tree.threshold")
def tree_threshold(rank: int) -> float:
    """min(1, p_i/q_i) of the worked tree's sibling of that rank (0: tried first), given that the earlier
    ones were rejected."""
    p, q = worked_tree.distributions(int(rank))
    x = worked_tree.index(worked_tree.SIBLINGS[int(rank)])
    return float(acceptance_threshold(p[x], q[x]))


@value("tree.p")
def tree_p(rank: int) -> float:
    """p_i(x_i): the worked tree's sibling under the target's distribution after the earlier rejections."""
    p, _ = worked_tree.distributions(int(rank))
    return float(p[worked_tree.index(worked_tree.SIBLINGS[int(rank)])])


@value("tree.q")
def tree_q(rank: int) -> float:
    """q_i(x_i): the worked tree's sibling under q without the earlier siblings."""
    _, q = worked_tree.distributions(int(rank))
    return float(q[worked_tree.index(worked_tree.SIBLINGS[int(rank)])])


@value("tree.keep_chance")
def tree_keep_chance(siblings: int) -> float:
    """The chance one of `siblings` guesses drawn from q without replacement is kept (one: Σ min(p, q))."""
    return worked_tree.keep_chance(int(siblings))


@value("tree.rescue_chance")
def tree_rescue_chance() -> float:
    """Given that the first guess was rejected, the chance the second one is kept."""
    one = worked_tree.keep_chance(1)
    return (worked_tree.keep_chance(2) - one) / (1 - one)


# --------------------------------------------------------------------------- measured (docs/bench)
@value("measured.pass_cost")
def pass_cost(tokens: int, dtype: str = "bfloat16", context: int = 200) -> float:
    """One target pass over `tokens` new tokens relative to a one-token step, as measured on this project's
    machine (`app.measured.pass_cost`)."""
    return measured.pass_cost(int(tokens), str(dtype), int(context))


@value("measured.speedup")
def measured_speedup(run: str, variant: str) -> float:
    """A variant's speedup over plain decoding in a committed benchmark run (docs/bench/<run>/bench.json)."""
    return measured.speedup(str(run), str(variant))


# --------------------------------------------------------------------------- theory (decoding/rules/theory.py)
@value("theory.tokens_per_call")
def tokens_per_call(alpha: float, gamma: int) -> float:
    return theory.expected_tokens_per_call(float(alpha), int(gamma))


@value("theory.accepted_length")
def accepted_length(alpha: float, gamma: int) -> float:
    return theory.expected_accepted_length(float(alpha), int(gamma))


@value("theory.improvement")
def improvement(alpha: float, gamma: int, c: float) -> float:
    return theory.improvement_factor(float(alpha), int(gamma), float(c))


@value("theory.lenient_alpha")
def lenient_alpha(lenience: float) -> float:
    """Σ min(p/l, q) on the worked example."""
    return theory.lenient_alpha(EXAMPLE_P, EXAMPLE_Q, float(lenience))


# --------------------------------------------------------------------------- shipped traces
@value("trace.target_calls")
def trace_target_calls(name: str, iteration: int | None = None) -> int:
    """Target calls of the whole run, or so far at `iteration`."""
    records, summary = trace(name)
    if iteration is None and summary is not None:
        return summary.target_calls
    return _record(name, len(records) - 1 if iteration is None else iteration).target_calls


@value("trace.tokens")
def trace_tokens(name: str) -> int:
    records, summary = trace(name)
    return len(summary.token_ids) if summary is not None else records[-1].generated


@value("trace.tokens_per_call")
def trace_tokens_per_call(name: str) -> float:
    return RunCounts.from_records(trace(name)[0]).tokens_per_call


@value("trace.iterations")
def trace_iterations(name: str) -> int:
    return len(trace(name)[0])


@value("trace.accepted_length")
def trace_accepted_length(name: str, iteration: int) -> int:
    return _record(name, iteration).accepted_length


@value("trace.drafted")
def trace_drafted(name: str, iteration: int) -> int:
    return len(_record(name, iteration).draft)


@value("trace.emitted")
def trace_emitted(name: str, iteration: int) -> int:
    return len(_record(name, iteration).emitted)


@value("trace.setting")
def trace_setting(name: str, key: str):
    """A setting of the run (gamma, temperature, seed) or of its method (kl_bound, tau, beams, tree_size)."""
    settings = (trace(name)[1].settings or {}) if trace(name)[1] is not None else {}
    for source in (settings, settings.get("extra") or {}, settings.get("sampling") or {}):
        if source.get(key) is not None:
            return source[key]
    raise ValueError(f"trace {name!r} has no setting {key!r}")


@value("trace.rejected_token")
def trace_rejected_token(name: str, iteration: int) -> str:
    d = next((d for d in _record(name, iteration).draft if d.accepted is False), None)
    if d is None:
        raise ValueError(f"iteration {iteration} of {name!r} rejects no draft")
    return d.text.strip() or repr(d.text)


@value("trace.next_token_source")
def next_token_source(name: str, iteration: int) -> str:
    """Where the token after the drafts of an iteration came from, in NEXT_TOKEN_SOURCE's words."""
    final = next((t for t in _record(name, iteration).emitted if t.kind in NEXT_TOKEN_SOURCE), None)
    if final is None:
        raise ValueError(f"iteration {iteration} of {name!r} has no correction or bonus token")
    return NEXT_TOKEN_SOURCE[final.kind]


def _positions(name: str) -> RunCounts:
    return RunCounts.from_records(trace(name)[0])


@value("trace.position_rate")
def position_rate(name: str, position: int) -> float:
    """Of a shipped run's iterations that drafted at least `position` tokens, the share whose first
    `position` drafts were all kept (`RunCounts.acceptance_per_position`, positions counted from 1)."""
    rates = _positions(name).acceptance_per_position
    if not 1 <= int(position) <= len(rates):
        raise ValueError(f"{name!r} drafted at most {len(rates)} tokens in an iteration (asked for {position})")
    return rates[int(position) - 1]


@value("trace.iid_rate")
def iid_rate(name: str, position: int) -> float:
    """α^i for a shipped run: the share position i would reach if each draft token were kept
    independently with the run's α (`RunCounts.iid_acceptance`)."""
    return _positions(name).iid_acceptance[int(position) - 1]


@value("trace.alpha")
def trace_alpha(name: str) -> float:
    """The run's α (`RunCounts.alpha`): the expected acceptance Σ min(p, q) averaged over its draft tokens."""
    return _positions(name).alpha


@value("trace.mjsd_kept")
def mjsd_kept(name: str, iteration: int, tau: float) -> int:
    """How many drafts an MJSD iteration keeps at threshold `tau`: the engine's `joint_verify` on the
    recorded joint likelihoods (at the run's own tau it is what the run kept)."""
    info = MjsdStep.of(_record(name, iteration))
    if info is None or not info.prefixes:
        raise ValueError(f"iteration {iteration} of {name!r} is not an MJSD step")
    probs, before = [], 0.0
    for prefix in info.prefixes:  # per-token p from the running joint log p
        probs.append(0.0 if prefix.log_p == -math.inf or before == -math.inf else math.exp(prefix.log_p - before))
        before = prefix.log_p
    return joint_verify(probs, [prefix.log_q for prefix in info.prefixes], float(tau)).eta


# --------------------------------------------------------------------------- shipped races
@value("race.title")
def race_title(name: str) -> str:
    return race(name)[0]


@value("race.drafter")
def race_drafter(name: str) -> str:
    """Lane A's drafter in words ("hybrid: copying + feature draft")."""
    from ..race_result import drafter_words

    return drafter_words((race(name)[1].lanes[0].summary.models or {}).get("draft") or "none")


@value("race.gamma")
def race_gamma(name: str) -> int:
    """Lane A's γ."""
    gamma = (race(name)[1].lanes[0].summary.settings or {}).get("gamma")
    if gamma is None:
        raise ValueError(f"race {name!r}: lane A has no γ")
    return gamma


@value("race.speedup")
def race_speedup(name: str) -> float:
    """Lane A's tokens/s over lane B's, as measured when the race was recorded."""
    lanes = race(name)[1].lanes
    ratio = speedup(lanes[0].summary, lanes[1].summary)
    if ratio is None:
        raise ValueError(f"race {name!r} has no measurable speed in lane B")
    return ratio


@value("race.more_speedup")
def more_speedup(a: str, b: str) -> str:
    """The title of whichever of two races measured the larger speedup."""
    return race_title(a) if race_speedup(a) >= race_speedup(b) else race_title(b)


@value("race.c_verify")
def race_c_verify(name: str) -> float:
    """c of lane A: one draft step over one verify pass, both timed in the recorded run."""
    c = RunCounts.from_records(race(name)[1].lanes[0].records).c_verify
    if c is None:
        raise ValueError(f"race {name!r}: lane A timed no draft step (a prompt-lookup drafter costs almost nothing)")
    return c
