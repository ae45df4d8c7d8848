"""Speculative sampling with a draft TREE: several guesses per position, verified in one target pass.

(The decoding loop follows in this module; this part is the trace contract.)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..trace.record import StepData

TUNED, DEFAULT, SET = "tuned", "default", "set"  # how an iteration's tree size was chosen


@dataclass
class TreeDraftStep(StepData):
    """One tree iteration's shape and rule (record.extra["tree_draft"]).

    The record's `tree` holds every node with its verdict (TreeNode's q, p, coin, threshold, verdict,
    sibling_rank, residual_mass, residual_top); `record.draft` is the accepted path's chain view: one
    DraftToken per node on the accepted path, then the first rejected child tried under its last node (if
    any), so per-position acceptance reads "position i accepted given 1..i-1 were" along the accepted path.
    """

    KEY = "tree_draft"
    nodes: int | None = None  # N: the most draft nodes the tree may hold (root excluded)
    depth: int | None = None  # D: the deepest level drafted
    chosen: str | None = None  # how N and D were chosen: "tuned" (measured costs) | "default" | "set" (by the user)
    source: str | None = None  # "model" (a tree of the draft's guesses) | "lookup" (a copied chain)
    drafted: int | None = None  # draft nodes actually in this iteration's tree (<= nodes)
    greedy: bool | None = None  # temperature 0: no coins, a child is accepted iff it is the target's argmax
    shape: str | None = None  # what the schedule drafted this iteration: "tree" | "chain" | "plain"
