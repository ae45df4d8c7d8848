"""Where a draft's tokens come from: `DraftSource`, one way to draft the next iteration, and the
source kinds that copy tokens rather than run a model.

The drafters offer sources, the gamma policy keeps its estimates per source (`DraftSource.key`) and
the run statistics group iterations by it (`metrics.source_key`), so the value sits here, below all
three.
"""

from __future__ import annotations

from dataclasses import dataclass

# The hybrid drafter copies a span only where the context's suffix repeats for at least this many
# tokens: below it, a copied token is right less often than the distilled draft's guess, over the
# target's greedy continuations of the training prompts (`python -m decoding eval-draft
# --match-lengths` measures it per match length: decoding/eval/lookup_eval.py).
HYBRID_MIN_MATCH = 2


@dataclass(frozen=True)
class DraftSource:
    """One way to draft the next iteration, found from the context alone (before anything of the
    iteration is sampled, so choosing among sources keeps the acceptance rule exact)."""

    kind: str  # "model" | "lookup" (a copy from the context) | "corpus" (a copy from the target's earlier answers)
    match_length: int = 0  # a copy: how many tokens of the context's suffix matched
    start: int = 0  # a copy: where the copyable continuation starts (in the sequence; for "corpus" in the corpus)
    available: int = 0  # a copy: how many tokens can be copied from there

    @property
    def key(self) -> str:
        """The bucket the gamma policy keeps separate estimates for: a copy after a 1-token match
        is right far less often than after a longer one (see HYBRID_MIN_MATCH)."""
        if self.kind != "lookup":
            return self.kind
        return "lookup" if self.match_length >= HYBRID_MIN_MATCH else "lookup-short"


MODEL_SOURCE = DraftSource("model")
COPY_KINDS = ("lookup", "corpus")  # sources that copy tokens: no model step, q one-hot
