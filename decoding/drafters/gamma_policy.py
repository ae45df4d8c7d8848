"""How many tokens to draft next: a fixed gamma, an automatic one, or HF's heuristic schedule.

Selected by the chain methods' `gamma_schedule` setting (CLI: `--gamma-schedule`):

- ``fixed`` (default): always `config.gamma`.
- ``auto``: every iteration, pick the gamma in 0..max_gamma that maximizes expected tokens per
  second from running estimates made in this run:
    alpha      mean draft overlap sum_x min(p, q) over the examined draft positions (Leviathan
               section 3.1; greedy: the share of draft tokens equal to the target's argmax),
               exponentially weighted so it follows the text;
    t_draft    wall time of one draft step (per drafted token), so c = t_draft / t_verify(1);
    t_verify   wall time of one target pass over n tokens, from this run's verify passes: the mean
               single-token pass for n = 1, and a line a + b (n - 2) fitted to the multi-token passes
               for n >= 2 (on a CPU the step from 1 to 2 tokens is a jump, a different kernel path,
               after which the cost grows slowly; Theorem 3.8's c alone misleads there), never
               below t_verify(1) (an early fit over two noisy sizes can clamp a to ~0).
  The score of gamma g is `theory.measured_improvement(alpha, g, t_draft, t_verify(1),
  t_verify(g + 1))`, with alpha split into two rates (see Sources below); before two distinct
  pass sizes have been seen the verify cost is taken flat (t_verify(n) = t_verify(1)) and the
  choice is `theory.optimal_gamma(alpha, c)`. gamma 0 (a plain target step) wins when drafting
  does not pay; while at 0 a one-token probe is drafted every `probe_every` iterations so the
  estimates keep moving.
  gamma is a cap: a model draft also stops early once drafting one more token no longer pays in
  expectation. After token i with unwarped draft confidences c_1..c_i, the next token is reached
  and accepted with probability about alpha * prod(c_1..c_i) (the chain must survive; alpha for the
  next one), worth one target step t_verify(1); it costs a draft step plus the verify-time growth
  of one more token, b. So drafting goes on while alpha * prod(c) >= (t_draft + b) / t_verify(1)
  (the same idea as transformers' assistant confidence threshold, with the threshold derived from
  this run's costs instead of a constant 0.4).
  Trees (methods/tree_draft.py, `--draft-tree`): where the model drafts, it may draft a tree instead
  of a chain. A tree's expected tokens are not a function of one per-position rate, so the model's
  trees keep their own estimate (`TreeEstimate`), measured per tree iteration: tokens emitted and
  seconds spent (draft less the catch-up, plus verify), exponentially weighted, so its score is
  t_verify(1) * tokens / seconds, the same expected tokens per second (over a plain step's) that a
  chain, a copy and a plain step (1) are scored by; `choose_shape` picks the best of all of them.
  A tree iteration also feeds the shared verify-cost fit (its pass is a target pass like a chain's),
  and its per-level acceptance: at each level the path reached (the accepted path's nodes, then the
  level under its end where that node has children), 1 if a child was accepted, else 0.
  The tree stopper (`tree_stopper`, the chain stopper's counterpart): before a level is drawn, it is
  made the last unless rate * P >= (t_level + b) / t_verify(1), where P is the path probability of the
  best node the level can hold (its parent's path probability times the parent's largest q: about the
  chance that node is on the accepted path), rate the chance a reached node gets one of its children
  accepted (the tree's measured per-level rate after the first level; before any tree, the model's
  alpha), t_level the tree's draft seconds per level and b the verify-time growth per token: the next
  level's expected accepted tokens, each worth a plain step, must pay for its draft pass and the wider
  verify pass. A last level gets the whole node budget left (drafters/tree.py's grow_tree).
  The model shape that loses is still drafted every `probe_every` model iterations so its estimate
  keeps moving; an unmeasured tree is tried the first time the model can draft.
  Sources: a drafter that can draft in more than one way (the hybrid: the model, or a copy of the
  continuation of the context's suffix match) offers its sources for each iteration, found from the
  context alone, and auto scores each with that source's own estimates and picks the best source and
  length together. Each source (keyed "model", "lookup" for a match of >= 2 tokens, "lookup-short"
  for a 1-token match, "corpus" for a copy from the target's earlier answers) keeps its own
  acceptance and draft-time estimates; the verify costs are
  shared. Acceptance is kept as two rates, of the first draft position and of a position whose
  predecessor was accepted, since a copy that starts to match tends to go on matching (a copy's
  later positions are accepted far more often than its first: `experiments/copy_acceptance.py` measures
  both on Spec-Bench's summarization and RAG prompts); the expected tokens per pass are then
  `theory.expected_tokens_two_rates`. A copy proposes at most the tokens the context holds after the
  match. Because the choice depends on earlier iterations only, never on this iteration's samples,
  each token's q is still the distribution it was drawn from.
- ``heuristic``: transformers' assisted-generation schedule: start at `config.gamma`, +2 after
  an iteration whose whole draft was accepted, -1 (not below 1) otherwise.

Greedy output never depends on the schedule (every accepted token is the target's argmax), so
all schedules reproduce greedy autoregressive decoding exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..rules import theory
from ..trace.source import COPY_KINDS, MODEL_SOURCE, DraftSource
from ..trace.metrics import c_step

SCHEDULES = ("fixed", "auto", "heuristic")
MAX_GAMMA = 64  # the longest draft any run may ask for


def validate_schedule(name: str) -> str:
    if name not in SCHEDULES:
        raise ValueError(f"gamma schedule must be one of {', '.join(SCHEDULES)} (got {name!r})")
    return name


@dataclass
class SourceEstimate:
    """Running estimates of one draft source, exponentially weighted so they follow the text:
    the overlap of every examined draft position (alpha), of first positions (alpha_first) and of
    positions after an accepted one (alpha_next); plain sums for the draft time per token."""

    decay: float
    prior_alpha: float
    prior_weight: float
    sums: dict = field(default_factory=dict)
    draft_time: float = 0.0
    draft_steps: int = 0

    def _sums(self, name: str) -> tuple[float, float]:
        """(weighted sum, weight) of one rate, starting from the prior."""
        return self.sums.get(name, (self.prior_alpha * self.prior_weight, self.prior_weight))

    def _rate(self, name: str) -> float:
        num, den = self._sums(name)
        return min(1.0, max(0.0, num / den))

    def _add(self, name: str, value: float) -> None:
        num, den = self._sums(name)
        self.sums[name] = (self.decay * num + value, self.decay * den + 1.0)

    @property
    def alpha(self) -> float:
        return self._rate("all")

    @property
    def alpha_first(self) -> float:
        return self._rate("first")

    @property
    def alpha_next(self) -> float:
        return self._rate("next")

    def t_draft(self) -> float | None:
        return self.draft_time / self.draft_steps if self.draft_steps else None

    def learn(self, overlaps: list[float], drafted: int, t_draft: float) -> None:
        for i, value in enumerate(overlaps):
            self._add("all", value)
            self._add("first" if i == 0 else "next", value)
        if drafted:
            self.draft_time += t_draft
            self.draft_steps += drafted

    def to_dict(self) -> dict:
        return {"alpha": self.alpha, "alpha_first": self.alpha_first, "alpha_next": self.alpha_next,
                "t_draft": self.t_draft()}


@dataclass
class TreeEstimate(SourceEstimate):
    """The model's trees (see the module docstring): SourceEstimate's rates hold the per-level
    acceptance (0 or 1 for each level the accepted path reached) and its draft time is per level;
    `tokens` and `seconds` are the emitted tokens and model seconds of tree iterations, both decayed
    by `shape_decay` per tree iteration."""

    shape_decay: float = 0.9
    tokens: float = 0.0
    seconds: float = 0.0
    iterations: int = 0

    def tokens_per_second(self) -> float | None:
        return self.tokens / self.seconds if self.seconds > 0 else None

    def learn_tree(self, emitted: int, accepted: int, examined: int, levels: int, t_draft: float,
                   t_verify: float) -> None:
        self.learn([1.0] * accepted + [0.0] * (examined - accepted), levels, t_draft)
        self.tokens = self.shape_decay * self.tokens + emitted
        self.seconds = self.shape_decay * self.seconds + t_draft + t_verify
        self.iterations += 1

    def to_dict(self) -> dict:
        return {**super().to_dict(), "tokens_per_second": self.tokens_per_second(), "iterations": self.iterations}


class GammaPolicy:
    """Chooses the draft source and length of each iteration and learns from each finished one."""

    def __init__(self, schedule: str, gamma: int, max_gamma: int = 16, decay: float = 0.95,
                 probe_every: int = 8, prior_alpha: float = 0.5, prior_weight: float = 2.0):
        self.schedule = validate_schedule(schedule)
        self.gamma = int(gamma)
        self.max_gamma = max(int(max_gamma), 1)
        self.decay = decay
        self.probe_every = probe_every
        self._prior = (prior_alpha, prior_weight)
        self.sources: dict[str, SourceEstimate] = {}
        # single-token passes: exponentially weighted mean; multi-token passes: least-squares sums
        # for t_verify(n) = a + b (n - 2); prefill passes are left out
        self._t1_num = self._t1_den = 0.0
        self._sn = self._sx = self._sy = self._sxx = self._sxy = 0.0
        self._idle = 0  # iterations in a row at gamma 0
        self.tree = TreeEstimate(self.decay, *self._prior)  # the model's trees (`choose_shape`)
        self._passed_over = {"tree": 0, "chain": 0}  # model iterations since each model shape was drafted

    # --- estimates ---------------------------------------------------------------------------
    def estimate(self, key: str = "model") -> SourceEstimate:
        if key not in self.sources:
            self.sources[key] = SourceEstimate(self.decay, *self._prior)
        return self.sources[key]

    @property
    def alpha(self) -> float:
        """The model source's mean overlap (Leviathan's alpha as this run measures it)."""
        return self.estimate("model").alpha

    def t_draft(self, key: str = "model") -> float | None:
        return self.estimate(key).t_draft()

    def verify_fit(self) -> tuple[float, float] | None:
        """(a, b) of t_verify(n) = a + b (n - 2) for n >= 2, b >= 0; None before any multi-token pass."""
        if self._sn == 0:
            return None
        mean_x, mean_y = self._sx / self._sn, self._sy / self._sn
        var = self._sxx / self._sn - mean_x * mean_x
        if var <= 1e-12:  # one pass size only: flat cost
            return max(mean_y, 1e-9), 0.0
        b = max(0.0, (self._sxy / self._sn - mean_x * mean_y) / var)
        a = max(mean_y - b * mean_x, 1e-9)
        return a, b

    def t_verify(self, n_tokens: int) -> float | None:
        return self._t_verify(n_tokens, self.verify_fit(), self._t1())

    def _t1(self) -> float | None:
        """The mean single-token pass (None before one was seen)."""
        return self._t1_num / self._t1_den if self._t1_den else None

    @staticmethod
    def _t_verify(n_tokens: int, fit: tuple[float, float] | None, t1: float | None) -> float | None:
        """t_verify(n_tokens) from the fit and the single-token mean (see t_verify)."""
        if n_tokens <= 1:
            if t1 is not None:
                return t1
            return None if fit is None else max(fit[0] - fit[1], 1e-9)
        if fit is None:
            return t1  # no multi-token pass seen yet: taken flat (optimistic, so drafting gets tried)
        fitted = fit[0] + fit[1] * (n_tokens - 2)
        # a pass over more tokens never costs less than a one-token step: early in a run two noisy pass
        # sizes can fit a steep slope whose intercept clamps to ~0, which would price a short copy at nothing
        return fitted if t1 is None else max(fitted, t1)

    def _t_verify_table(self, longest: int) -> list[float | None]:
        """[t_verify(0), ..., t_verify(longest)], the fit computed once (an auto choice scores every length)."""
        fit, t1 = self.verify_fit(), self._t1()
        return [self._t_verify(n, fit, t1) for n in range(longest + 1)]

    def stop_threshold(self) -> float | None:
        """(t_draft + b) / t_verify(1): the confidence mass below which one more model-drafted
        token does not pay (auto only; None until both costs were measured)."""
        t_d, t_1 = self.t_draft(), self.t_verify(1)
        if self.schedule != "auto" or t_d is None or t_1 is None:
            return None
        fit = self.verify_fit()
        return (t_d + (fit[1] if fit else 0.0)) / t_1

    def draft_stopper(self):
        """`keep_going(i, confidence)` for ModelDrafter.propose (see the module docstring), or None."""
        threshold = self.stop_threshold()
        if threshold is None:
            return None
        alpha, mass = self.alpha, [1.0]

        def keep_going(i: int, confidence: float) -> bool:
            mass[0] *= confidence
            return alpha * mass[0] >= threshold

        return keep_going

    def tree_threshold(self) -> float | None:
        """(t_level + b) / t_verify(1): the expected accepted tokens below which one more tree level does
        not pay (auto only; None until a level's cost and a plain step's are known). t_level: the trees'
        draft seconds per level, before any tree the model's per-token draft time."""
        t_l, t_1 = self.tree.t_draft() or self.t_draft(), self.t_verify(1)
        if self.schedule != "auto" or t_l is None or t_1 is None:
            return None
        fit = self.verify_fit()
        return (t_l + (fit[1] if fit else 0.0)) / t_1

    def tree_stopper(self):
        """`keep_growing(level, best_score)` for drafters/tree.py's `grow_tree`, or None: asked before
        level `level` (1 = the root's children) is drawn, with the log path probability of the best node
        it can hold; True grows the level after it (see the module docstring for the rule)."""
        threshold = self.tree_threshold()
        if threshold is None:
            return None
        rate = self.tree.alpha_next if self.tree.iterations else self.alpha

        def keep_growing(level: int, best_score: float) -> bool:
            return rate * math.exp(best_score) >= threshold

        return keep_growing

    def c(self) -> float | None:
        """Leviathan's c from this run's estimates (`metrics.c_step`)."""
        return c_step(self.t_draft(), self.t_verify(1))

    # --- choice ------------------------------------------------------------------------------
    def next_gamma(self) -> int:
        """The draft length of the next iteration of a one-source drafter (the model)."""
        return self.choose([MODEL_SOURCE])[1]

    def choose(self, sources: list[DraftSource]) -> tuple[DraftSource | None, int]:
        """(source, gamma) for the next iteration among the drafter's `sources` for this context;
        (None, 0) when there is none. fixed/heuristic: the first source with `self.gamma` (the
        drafter then applies its own fixed rule); auto: the best-scoring source and length."""
        if not sources:
            return None, 0
        if self.schedule != "auto":
            return sources[0], self.gamma
        return self._settle(*self._best_chain(self._scored(sources))[1:])

    def _scored(self, sources: list[DraftSource]) -> list[tuple[tuple[float, int], DraftSource]]:
        """Each source's best chain, `_auto_choice`'s (expected improvement, gamma), beside the source."""
        return [(self._auto_choice(source), source) for source in sources]

    @staticmethod
    def _best_chain(scored: list[tuple[tuple[float, int], DraftSource]]) -> tuple[float, DraftSource, int]:
        """(expected improvement, source, gamma) of the best of `_scored`'s chains (gamma 0: a plain step)."""
        (value, choice), source = max(scored, key=lambda item: item[0][0])
        return value, source, choice

    def _settle(self, source: DraftSource, choice: int) -> tuple[DraftSource, int]:
        """The auto choice, with a one-token probe every `probe_every` iterations in a row at gamma 0."""
        if choice == 0:
            self._idle += 1
            if self._idle >= self.probe_every:
                self._idle = 0
                choice = 1  # probe: keep the estimates alive
        else:
            self._idle = 0
        self.gamma = choice
        return source, choice

    def choose_shape(self, sources: list[DraftSource], trees: bool = True) -> tuple[DraftSource | None, int, str]:
        """(source, gamma, shape) for the next iteration of a drafter whose model can draft trees; shape
        "tree" (the model's tree; gamma is then the model's best chain length, at least 1, which a probe
        of the chain drafts), "chain" or "plain" (gamma 0). fixed/heuristic: a model source is a tree, a
        copy a chain. auto: the best of every source's best chain and, for the model, its tree, by expected
        tokens per second over a plain step's (`tree_value`; a plain step scores 1); an unmeasured tree is
        tried first, and the losing model shape is drafted once every `probe_every` model iterations."""
        if self.schedule != "auto" or not trees or not sources:
            source, gamma = self.choose(sources)
            if source is None or not gamma:
                return source, gamma, "plain"
            return source, gamma, "tree" if trees and source.kind == "model" else "chain"
        scored = self._scored(sources)
        value, source, gamma = self._best_chain(scored)
        model = next(((choice, s) for choice, s in scored if s.kind == "model"), None)
        if model is not None:
            tree = self.tree_value()
            if tree is None or tree > value * (1.0 + 1e-9):
                self._idle = 0
                (_, model_chain), model = model
                model_gamma = max(1, model_chain)
                self.gamma = model_gamma
                return self._drafted(model, "tree", model_gamma)
        source, gamma = self._settle(source, gamma)
        if not gamma:
            return source, 0, "plain"
        return self._drafted(source, "chain", gamma)

    def _drafted(self, source: DraftSource, shape: str, gamma: int) -> tuple[DraftSource, int, str]:
        """`shape` chosen for `source`, or for the model the other shape where it is due a probe."""
        if source.kind == "model":
            other = "chain" if shape == "tree" else "tree"
            self._passed_over[other] += 1
            self._passed_over[shape] = 0
            if self._passed_over[other] >= self.probe_every:
                self._passed_over[other] = 0
                shape = other
        return source, gamma, shape

    def tree_value(self) -> float | None:
        """A model tree's expected tokens per second over a plain step's: t_verify(1) * tokens / seconds
        of this run's tree iterations (None before the first, or before a plain step's cost is known)."""
        rate, t_1 = self.tree.tokens_per_second(), self.t_verify(1)
        return None if rate is None or t_1 is None else rate * t_1

    def _auto_choice(self, source: DraftSource) -> tuple[float, int]:
        """(expected improvement, gamma) of the best draft length from `source`; gamma 0 (plain
        decoding, improvement 1) when no length pays."""
        est = self.estimate(source.key)
        cap = self.max_gamma if source.kind == "model" else max(0, min(self.max_gamma, source.available))
        t_d, t_1 = est.t_draft(), self.t_verify(1)
        if t_d is None and source.kind in COPY_KINDS:
            t_d = 0.0  # a copy costs a search, no model step
        if t_1 is None or t_d is None:
            # nothing measured yet, or this model never drafted yet: the configured gamma, to try it
            return 1.0, max(1, min(self.gamma, cap))
        if self.verify_fit() is None and source.kind == "model":  # verify cost unknown beyond one token
            best = theory.optimal_gamma(est.alpha, t_d / t_1, cap) if cap else 0
            value = theory.improvement_factor(est.alpha, best, t_d / t_1) if best else 1.0
            return (value, best) if value > 1.0 else (1.0, 0)
        best_g, best = 0, 1.0  # gamma 0: plain decoding, improvement 1 by definition
        alpha_first, alpha_next = est.alpha_first, est.alpha_next  # read once: the loop does not move them
        t_verify = self._t_verify_table(cap + 1)
        for g in range(1, cap + 1):
            value = theory.measured_improvement(alpha_first, g, t_d, t_1, t_verify[g + 1], alpha_next=alpha_next)
            if value > best * (1.0 + 1e-9):
                best_g, best = g, value
        return best, best_g

    # --- learning ----------------------------------------------------------------------------
    def update(self, asked: int, drafted: int, accepted: int, overlaps: list[float],
               t_draft: float, t_verify: float, fed_tokens: int, prefill: bool, source: str = "model") -> None:
        """One finished iteration: `asked` gamma, `drafted` tokens proposed from `source` (its
        key), `accepted` of them, the overlaps of the examined positions in draft order, its draft
        and verify wall times, and how many tokens the verify pass fed (the prefill pass is left
        out of the verify fit)."""
        if self.schedule == "heuristic":
            if asked:
                self.gamma = min(self.gamma + 2, MAX_GAMMA) if drafted and accepted == drafted else max(1, self.gamma - 1)
            return
        if self.schedule != "auto":
            return
        self.estimate(source).learn(overlaps, drafted, t_draft)
        if not prefill and fed_tokens == 1:
            self._t1_num = self.decay * self._t1_num + t_verify
            self._t1_den = self.decay * self._t1_den + 1.0
        elif not prefill and fed_tokens >= 2:
            x = float(fed_tokens - 2)
            self._sn += 1
            self._sx += x
            self._sy += t_verify
            self._sxx += x * x
            self._sxy += x * t_verify

    def update_tree(self, emitted: int, accepted: int, examined: int, levels: int, t_draft: float, t_verify: float,
                    fed_tokens: int, prefill: bool) -> None:
        """One finished tree iteration of the model: `emitted` tokens (accepted + 1), `accepted` draft
        tokens on the accepted path, `examined` levels the path reached (accepted, plus 1 where the
        path's end has children), `levels` drafted (the tree's depth), its draft seconds (less the
        catch-up) and verify seconds, and the tokens its verify pass fed."""
        if self.schedule != "auto":
            return
        if not prefill:
            self.tree.learn_tree(emitted, accepted, examined, levels, t_draft, t_verify)
        self.update(0, 0, 0, [], 0.0, t_verify, fed_tokens, prefill, source="model")  # the verify-cost fit only

    def snapshot(self) -> dict:
        """Plain data for the trace: the estimates the next choice rests on."""
        fit = self.verify_fit()
        return {
            "schedule": self.schedule,
            "alpha_hat": self.alpha,
            "c_hat": self.c(),
            "t_verify_1": self.t_verify(1),
            "t_verify_2": self.t_verify(2),
            "t_verify_per_extra_token": None if fit is None else fit[1],
            "stop_threshold": self.stop_threshold(),
            "sources": {key: est.to_dict() for key, est in self.sources.items()},
            "tree": {**self.tree.to_dict(), "value": self.tree_value(), "stop_threshold": self.tree_threshold()},
        }
