"""What a method shows, as plain data on its registry entry (`MethodSpec.view`).

The app reads these fields instead of comparing method names: each field names a kind of display,
and the app keys its renderers by that kind (a dict from kind to renderer, with a generic fallback),
so a new method shows with one registry entry and no app change. Plain strings and booleans only:
nothing here knows Gradio or HTML.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MethodView", "RULES", "PANEL_FIELDS", "THEORIES"]

# how a draft token is judged, which sets the draft table's threshold and coin columns, its tooltips and
# the iteration's caption: "chain" a coin u against min(1, p/(l·q)) (or the greedy rule p_raw >= l·max p_raw),
# "kl-bound" the mentored threshold that keeps KL(p‖output) <= D, "joint" the joint ratio of each prefix
# against tau (no coin), "candidates" a tree's candidates checked against the target (exact match with its
# argmax, or typical acceptance; no coin, and q is a guess's probability, not a draft distribution)
RULES = ("chain", "kl-bound", "joint", "candidates")

# the panel kind that shows every field of the method's trace data as a plain table (the app's fallback)
PANEL_FIELDS = "fields"

# how the theory panel (Leviathan et al.'s closed forms) reads a run: "exact" they describe this method,
# "reference" a reference point at the run's measured alpha, "tree-size" the method has no draft model (the
# trade-off is its tree size: its panel charts tokens per step against the step's latency)
THEORIES = ("exact", "reference", "tree-size")


@dataclass(frozen=True)
class MethodView:
    """How the app shows one method's runs.

    rule      how a draft token is judged (one of `RULES`; an unknown kind reads as "chain")
    panel     the method panel's kind: the app's panel renderer for it, `PANEL_FIELDS` (every field of
              the method's trace data as a table, also the fallback for a kind the app does not know), or
              None: no method panel
    baseline  the plain-decoding baseline the others are measured against (speedups, the race's lane B)
    theory    how the theory panel reads a run (one of `THEORIES`; an unknown kind reads as "reference")
    node_verdicts  its records may hold a draft tree whose nodes carry their own verdicts (TreeNode's q, p,
              coin, threshold, verdict, sibling_rank, residual; record.extra["tree_draft"] says so per record):
              draw them where a record has them (speculative with --draft-tree)
    """

    rule: str = "chain"
    panel: str | None = PANEL_FIELDS
    baseline: bool = False
    theory: str = "reference"
    node_verdicts: bool = False
