"""Tree or chain for the next model draft: whichever has decoded more tokens per second in this run.

The automatic gamma schedule (gamma_policy.py) already chooses the source (model or copy) and the length,
0 meaning a plain target step. Where it picks the model, `ShapeChooser` decides whether the model draws
a tree (methods/tree_draft.py) or a chain of that length, from the measured speed of each shape so far:
tokens emitted per second of iteration wall time, exponentially weighted (sums of tokens and of seconds,
each decayed by `decay` per update of that shape) so it follows the text. An unmeasured shape is tried
first, and the slower one is probed every `probe_every` model iterations so its estimate keeps moving.
The choice depends on earlier iterations only, never on this iteration's samples, so the rule stays exact.
"""

from __future__ import annotations

SHAPES = ("tree", "chain")


class ShapeChooser:
    def __init__(self, probe_every: int = 8, decay: float = 0.9):
        self.probe_every = probe_every
        self.decay = decay
        self.tokens = dict.fromkeys(SHAPES, 0.0)
        self.seconds = dict.fromkeys(SHAPES, 0.0)
        self.since_probe = 0

    def rate(self, shape: str) -> float | None:
        """Weighted tokens per second of `shape` so far (None before its first iteration)."""
        return self.tokens[shape] / self.seconds[shape] if self.seconds[shape] > 0 else None

    def choose(self) -> str:
        for shape in SHAPES:
            if self.rate(shape) is None:
                return shape
        best = max(SHAPES, key=lambda s: self.rate(s))
        if self.since_probe >= self.probe_every:
            self.since_probe = 0
            return next(s for s in SHAPES if s != best)
        self.since_probe += 1
        return best

    def update(self, shape: str, tokens: int, seconds: float) -> None:
        self.tokens[shape] = self.decay * self.tokens[shape] + tokens
        self.seconds[shape] = self.decay * self.seconds[shape] + seconds

    def snapshot(self) -> dict:
        return {f"{s}_tokens_per_second": self.rate(s) for s in SHAPES}
