"""The method registry: one entry per decoding method, the single place that says what a method is.

Each `MethodSpec` holds the method's generator (`run`), which common settings it uses (a drafter,
gamma, lenience), its settings dataclass (fields carry default, range, help, CLI flag and app
control: `settings.py`) and the dataclass of its per-iteration trace data. The CLI's flags,
the app's controls and their checks, "copy as CLI command", the benchmark's variants and everything
the app shows of a method (its `view`: the acceptance rule's columns, the method panel's kind, the
baseline, the theory panel's reading; `view.py`) are all derived from `METHODS`; adding a method means
one entry here and its own files (a strategy with its settings and trace data). A method whose panel
kind the app does not know shows its trace data as a plain table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from .settings import MethodSettings
from .autoregressive import AutoregressiveSettings, autoregressive
from .mentored import MentoredSettings, MentoredStep, mentored
from .mjsd.generator import MjsdSettings, MjsdStep, mjsd
from .ppd.generator import PPDSettings, PPDStep, ppd
from .speculative import ChainStep, SpeculativeSettings, speculative
from .tree_draft import TreeDraftStep
from .view import MethodView
from ..trace.record import IterationRecord, StepData

__all__ = ["MethodSpec", "MethodView", "METHODS", "method_spec", "method_view", "baseline_method", "STEP_DATA"]


@dataclass(frozen=True)
class MethodSpec:
    name: str
    run: Callable[..., Iterator[IterationRecord]]  # run(target, drafter, prompt_ids, config, meter)
    settings: type[MethodSettings]
    summary: str  # one line: what the method does
    title: str = ""  # how people write its name ("PPD", "MJSD"); default: the name
    uses_drafter: bool = False  # needs a drafter (a draft model or prompt lookup)
    needs_draft_model: bool = False  # a weight-free drafter will not do (beam search on a model)
    uses_gamma: bool = False
    uses_lenience: bool = False
    lossless: str = "yes"  # "yes", "no" or a condition ("greedy only")
    trace_data: type[StepData] | None = None  # the method's own data in each record (record.extra[KEY])
    view: MethodView = MethodView()  # what the app shows of it
    step_cost: float = 1.0  # GPU time per generated token against plain decoding's (beams and trees cost more)
    # record.draft is the whole proposed chain (position i was drafted iff len(draft) >= i), so acceptance
    # per draft position applies (trace/metrics.py); PPD's lists only the path verification walked in a tree
    chain_draft: bool = True

    def __post_init__(self) -> None:
        if not self.title:
            object.__setattr__(self, "title", self.name)

    def __call__(self, target, drafter, prompt_ids, config, meter=None) -> Iterator[IterationRecord]:
        return self.run(target, drafter, prompt_ids, config, meter)

    @property
    def adaptive_gamma(self) -> bool:
        """Accepts a gamma schedule (fixed / auto / heuristic)."""
        return any(f.name == "gamma_schedule" for f, _ in self.settings.knobs())


METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        MethodSpec("autoregressive", autoregressive, AutoregressiveSettings,
                   "plain decoding: one target call per token (the baseline)",
                   view=MethodView(panel=None, baseline=True)),
        MethodSpec("speculative", speculative, SpeculativeSettings,
                   "speculative sampling: a drafter proposes gamma tokens, the target checks them in one pass",
                   uses_drafter=True, uses_gamma=True, uses_lenience=True, lossless="yes at lenience 1",
                   trace_data=ChainStep, view=MethodView(panel=None, theory="exact", node_verdicts=True)),
        MethodSpec("mentored", mentored, MentoredSettings,
                   "mentored decoding: accept more drafts while KL(p || output) <= D per token",
                   uses_drafter=True, uses_gamma=True, lossless="yes at D = 0", trace_data=MentoredStep,
                   view=MethodView(rule="kl-bound", panel="kl-decisions")),
        MethodSpec("mjsd", mjsd, MjsdSettings,
                   "multi-token joint speculative decoding: beam drafts, joint-likelihood ratio against tau",
                   title="MJSD", uses_drafter=True, needs_draft_model=True, uses_gamma=True, lossless="no",
                   trace_data=MjsdStep, view=MethodView(rule="joint", panel="joint-prefixes"), step_cost=2.0),
        MethodSpec("ppd", ppd, PPDSettings,
                   "parallel prompt decoding: the target guesses ahead with trained prompt tokens, sparse tree",
                   title="PPD", lossless="greedy only", trace_data=PPDStep,
                   view=MethodView(rule="candidates", panel="prompt-tree", theory="tree-size"), step_cost=1.5,
                   chain_draft=False),
    )
}


# every kind of method data a record can carry, by its key in record.extra (the trace reader checks them)
STEP_DATA: dict[str, type[StepData]] = {cls.KEY: cls for cls in (ChainStep, MentoredStep, MjsdStep, PPDStep,
                                                                  TreeDraftStep)}


def method_spec(name: str, methods: dict[str, MethodSpec] | None = None) -> MethodSpec:
    """The registry entry of `name`, or ValueError naming the choices."""
    methods = METHODS if methods is None else methods
    if name not in methods:
        raise ValueError(f"unknown method {name!r}; choose one of: {', '.join(methods)}")
    return methods[name]


def method_view(name: str | None) -> MethodView:
    """What the app shows of method `name`; a method the registry does not hold (a trace written by
    another version) reads with the defaults."""
    spec = METHODS.get(name) if name is not None else None
    return spec.view if spec is not None else MethodView()


def baseline_method(names=None) -> str | None:
    """The first of `names` (default: every registered method) that is the baseline, or None."""
    return next((n for n in (METHODS if names is None else names) if method_view(n).baseline), None)
