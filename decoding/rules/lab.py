"""The single-step sampling lab: speculative sampling on hand-written distributions, N times.

This is where "lossless means same distribution, not same text" is shown: the empirical
histogram of N steps converges to the analytic output distribution of the rule, which is p
itself for the strict rule (lenience 1). The N steps are drawn in one vectorised batch with the
same pure functions the engine uses (acceptance_threshold, residual_distribution).
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from ..errors import keyed
from .acceptance import acceptance_threshold, lenient_output_distribution, residual_distribution, validate_lenience
from .examples import WORKED
from .implementations import DEFAULT_IMPLEMENTATION, get_implementation
from .mentored import kl_divergence, mentored_one_step_samples, mentored_output_distribution, validate_kl_bound
from .theory import lenient_alpha

# The worked example (docs/papers.md): vocabulary "is", "stock", "girl", "cherry".
# (examples.py holds it with the larger example, as data.)
EXAMPLE_VOCAB = list(WORKED.vocab)
EXAMPLE_P = list(WORKED.p)
EXAMPLE_Q = list(WORKED.q)
MAX_SAMPLES = 10_000_000


def _name_key(name: str) -> str:
    """The catalog key naming a distribution in messages ("p (target)" -> "lab.name_p"), for
    `decoding.errors.Keyed`'s `*_key` parameters."""
    return "lab.name_q" if name.strip().lstrip("-").lower().startswith("q") else "lab.name_p"


def parse_distribution(text: str, name: str) -> list[float]:
    """'0.4,0.3,0.2,0.1' -> floats, with a clear message for anything else."""
    try:
        values = [float(v) for v in text.replace(" ", "").split(",") if v != ""]
    except ValueError:
        raise keyed(f"{name} must be comma-separated numbers, e.g. 0.4,0.3,0.2,0.1 (got {text!r})", "lab.numbers",
                    name_key=_name_key(name), text=repr(text)) from None
    return values


def validate_distribution(values: Sequence[float], name: str) -> torch.Tensor:
    if len(values) < 2:
        raise keyed(f"{name} needs at least 2 probabilities (got {len(values)})", "lab.too_few",
                    name_key=_name_key(name), count=len(values))
    t = torch.tensor(values, dtype=torch.float64)
    if not torch.isfinite(t).all():
        raise keyed(f"{name} has a value that is not a finite number", "lab.finite", name_key=_name_key(name))
    if (t < 0).any():
        raise keyed(f"{name} has a negative probability: {min(values)}", "lab.negative", name_key=_name_key(name),
                    value=min(values))
    if abs(float(t.sum()) - 1.0) > 1e-6:
        raise keyed(f"{name} must sum to 1 within 1e-6 (sums to {float(t.sum()):.9g})", "lab.sum",
                    name_key=_name_key(name), total=f"{float(t.sum()):.9g}")
    return t


def total_variation(a: torch.Tensor, b: torch.Tensor) -> float:
    return 0.5 * float((a - b).abs().sum())


def one_step_samples(
    p: torch.Tensor,
    q: torch.Tensor,
    n: int,
    lenience: float,
    generator: torch.Generator,
    residual_fn: Callable = residual_distribution,
) -> tuple[torch.Tensor, torch.Tensor]:
    """N independent speculative steps: draft x ~ q, accept iff u <= min(1, p(x)/(l q(x))),
    else draw from the residual. Returns (output tokens, accepted mask)."""
    x = torch.multinomial(q, n, replacement=True, generator=generator)
    u = torch.rand(n, generator=generator, dtype=p.dtype)
    accepted = u <= acceptance_threshold(p[x], q[x], lenience)
    residual, _ = residual_fn(p, q)
    n_rejected = int((~accepted).sum())
    out = x.clone()
    if n_rejected:
        out[~accepted] = torch.multinomial(residual, n_rejected, replacement=True, generator=generator)
    return out, accepted


def run_sampling_lab(p: Sequence[float], q: Sequence[float], lenience: float = 1.0, n: int = 100_000,
                     seed: int = 0, residual_fn: Callable = residual_distribution,
                     kl_bound: float | None = None, implementation: str = DEFAULT_IMPLEMENTATION) -> dict:
    """Everything the CLI's `sample` prints and the app's exactness lab draws, as plain data.

    With `kl_bound` D the rule is mentored decoding (`decoding.rules.mentored`) instead of the strict /
    lenient one: "expected", "empirical", "alpha", "acceptance_rate" and "residual" then describe
    the mentored rule, "strict_alpha" is the strict rule's alpha for comparison, and
    "kl_to_target" is KL(p || expected), the divergence that D bounds.

    With `implementation` other than "correct" (`decoding.rules.implementations`) the step is that
    implementation at lenience 1: "expected" is its closed-form output, "alpha" its acceptance
    probability, "residual" what it draws after a rejection, plus "correct_alpha" (the correct rule's
    alpha, for the speed comparison) and "exact". Every result carries "implementation" and
    "expected_tv_to_target", TV(expected, p): how far the rule itself is from p, whatever N.
    """
    p_t, q_t = validate_distribution(p, "p (target)"), validate_distribution(q, "q (draft)")
    if len(p_t) != len(q_t):
        raise keyed(f"p and q differ in length ({len(p_t)} vs {len(q_t)})", "lab.lengths", p=len(p_t), q=len(q_t))
    validate_lenience(lenience)
    if kl_bound is not None:
        validate_kl_bound(kl_bound)
        if lenience != 1.0:
            raise keyed("choose either a lenience or a KL bound, not both (the KL bound replaces the lenient rule)",
                        "lab.lenience_or_kl")
    if int(n) != n or not (1 <= n <= MAX_SAMPLES):
        raise keyed(f"n must be a whole number from 1 to {MAX_SAMPLES} (got {n})", "lab.n", limit=MAX_SAMPLES, value=n)
    impl = get_implementation(implementation)
    if impl.name != DEFAULT_IMPLEMENTATION and (lenience != 1.0 or kl_bound is not None):
        raise keyed("the implementations are compared at lenience 1 without a KL bound: "
                    "choose the correct rule to use a lenience or a KL bound", "lab.implementations_lenience")
    generator = torch.Generator().manual_seed(seed)
    if kl_bound is not None:
        return {**_mentored_lab(p_t, q_t, kl_bound, n, seed, generator), "implementation": impl.name}
    if impl.name != DEFAULT_IMPLEMENTATION:
        return _implementation_lab(impl, p_t, q_t, n, seed, generator)
    tokens, accepted = one_step_samples(p_t, q_t, n, lenience, generator, residual_fn)
    empirical = torch.bincount(tokens, minlength=len(p_t)).double() / n
    expected = lenient_output_distribution(p_t, q_t, lenience)
    residual, mass = residual_fn(p_t, q_t)
    alpha = lenient_alpha(p_t, q_t, lenience)
    return {
        "target": p_t.tolist(),
        "draft": q_t.tolist(),
        "lenience": lenience,
        "n": n,
        "seed": seed,
        "expected": expected.tolist(),
        "empirical": empirical.tolist(),
        "alpha": alpha,
        "acceptance_rate": float(accepted.double().mean()),
        "residual": None if alpha >= 1 - 1e-12 else residual.tolist(),
        "residual_mass": mass,
        "cap": (p_t / lenience).clamp(max=1.0).tolist(),  # no token may exceed p/l
        "tv_to_target": total_variation(empirical, p_t),
        "tv_to_expected": total_variation(empirical, expected),
        "expected_tv_to_target": total_variation(expected, p_t),  # 0 at lenience 1: the rule is exact
        "implementation": impl.name,
    }


def _implementation_lab(impl, p_t: torch.Tensor, q_t: torch.Tensor, n: int, seed: int,
                        generator: torch.Generator) -> dict:
    """One of the implementations (p_t, q_t: (V,) float64): the strict lab's keys, read for that implementation."""
    tokens, accepted = impl.sample(p_t, q_t, n, generator)
    empirical = torch.bincount(tokens, minlength=len(p_t)).double() / n
    kept, after = impl.parts(p_t, q_t)
    expected = kept + (1.0 - kept.sum()) * after
    alpha = float(kept.sum())
    return {
        "target": p_t.tolist(),
        "draft": q_t.tolist(),
        "lenience": 1.0,
        "implementation": impl.name,
        "exact": impl.exact,
        "n": n,
        "seed": seed,
        "expected": expected.tolist(),
        "empirical": empirical.tolist(),
        "alpha": alpha,
        "correct_alpha": float(torch.minimum(p_t, q_t).sum()),
        "acceptance_rate": float(accepted.double().mean()),
        "residual": None if alpha >= 1 - 1e-12 else after.tolist(),  # what a rejection draws from
        "residual_mass": 1.0 - alpha,
        "cap": None,
        "expected_tv_to_target": total_variation(expected, p_t),
        "tv_to_target": total_variation(empirical, p_t),
        "tv_to_expected": total_variation(empirical, expected),
    }


def _mentored_lab(p_t: torch.Tensor, q_t: torch.Tensor, kl_bound: float, n: int, seed: int,
                  generator: torch.Generator) -> dict:
    """The mentored rule's lab: same keys as the strict lab plus kl_bound, kl_to_target, strict_alpha."""
    tokens, accepted, sol = mentored_one_step_samples(p_t, q_t, kl_bound, n, generator)
    empirical = torch.bincount(tokens, minlength=len(p_t)).double() / n
    expected = mentored_output_distribution(p_t, q_t, kl_bound)
    return {
        "target": p_t.tolist(),
        "draft": q_t.tolist(),
        "lenience": 1.0,
        "rule": "mentored",
        "kl_bound": kl_bound,
        "n": n,
        "seed": seed,
        "expected": expected.tolist(),
        "empirical": empirical.tolist(),
        "alpha": sol.acceptance,
        "strict_alpha": float(torch.minimum(p_t, q_t).sum()),
        "acceptance_rate": float(accepted.double().mean()),
        "acceptance_probabilities": sol.r.tolist(),  # r(x): probability of accepting draft token x
        "residual": None if sol.acceptance >= 1 - 1e-12 else sol.s.tolist(),
        "residual_mass": 1.0 - sol.acceptance,
        "kl_to_target": kl_divergence(p_t, expected),  # KL(p || expected) <= kl_bound
        "kl_draft": kl_divergence(p_t, q_t),  # KL(p || q): at or below D everything is accepted
        "cap": None,
        "tv_to_target": total_variation(empirical, p_t),
        "tv_to_expected": total_variation(empirical, expected),
        "expected_tv_to_target": total_variation(expected, p_t),
    }
