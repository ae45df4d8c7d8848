"""How long must the context repeat itself before copying beats the draft model?

Over the target's greedy continuations of a prompt file, at every position: the longest earlier
match of the context's suffix (`drafters.lookup.suffix_match`), whether the token after that match is the
target's greedy token (what lookup would propose), and whether the draft model's argmax is (what
the model would propose, teacher-forced). Grouped by match length, this gives the hybrid drafter's
minimum match N: the shortest match from which copying is right at least as often as the model.
`python -m decoding eval-draft --match-lengths` prints the table.
"""

from __future__ import annotations

import torch

from ..drafters.hybrid import HYBRID_MAX_MATCH
from ..drafters.lookup import suffix_match
from ..lm.scoring import teacher_forced_probs

BUCKETS = ((1, 1), (2, 2), (3, 3), (4, 4), (5, 7), (8, 15), (16, HYBRID_MAX_MATCH))


def match_length_rows(target, side, draft_model=None, head=None, max_length: int = HYBRID_MAX_MATCH) -> dict:
    """{match length: [positions, lookup right, model right]} over `side`'s greedy continuations
    (length 0: no earlier occurrence of the last token). Model counts are 0 without a draft model."""
    rows: dict[int, list[int]] = {}
    width = min(target.vocab_size, draft_model.vocab_size) if draft_model is not None else target.vocab_size
    for prompt, greedy in zip(side.prompt_ids, side.greedy):
        if not greedy:
            continue
        model_right = None
        if draft_model is not None:
            q = teacher_forced_probs(draft_model, prompt, greedy, width, head)
            model_right = (q.argmax(-1) == torch.tensor(greedy)).tolist()
        sequence = list(prompt)
        for j, y in enumerate(greedy):
            found = suffix_match(sequence, max_length)
            n = found[1] if found else 0
            row = rows.setdefault(n, [0, 0, 0])
            row[0] += 1
            row[1] += int(bool(found) and sequence[found[0]] == y)
            row[2] += int(model_right[j]) if model_right is not None else 0
            sequence.append(y)
    return rows


def bucket_table(rows: dict) -> list[dict]:
    """The rows grouped into match-length buckets (1, 2, 3, 4, 5-7, 8-15, 16+), plus "none"."""
    out = []
    for label, (lo, hi) in [("none", (0, 0))] + [(f"{lo}" if lo == hi else f"{lo}-{hi}", (lo, hi)) for lo, hi in BUCKETS]:
        pos = sum(r[0] for n, r in rows.items() if lo <= n <= hi)
        lookup = sum(r[1] for n, r in rows.items() if lo <= n <= hi)
        model = sum(r[2] for n, r in rows.items() if lo <= n <= hi)
        out.append({"match": label, "positions": pos, "lookup_right": lookup / pos if pos else None,
                    "model_right": model / pos if pos else None})
    return out


def minimum_match(rows: dict, min_positions: int = 20) -> int | None:
    """The smallest match length N at which a copied token is right at least as often as the model's
    guess at the same positions (lengths seen fewer than `min_positions` times are skipped): the
    hybrid's threshold (None: lookup never wins)."""
    for n in sorted(n for n in rows if n > 0):
        positions, lookup, model = rows[n]
        if positions >= min_positions and lookup >= model:
            return n
    return None


def markdown(rows: dict) -> str:
    total = sum(r[0] for r in rows.values()) or 1
    lines = ["| longest suffix match | share of positions | copied token right | draft model right |",
             "|---|---|---|---|"]
    for b in bucket_table(rows):
        fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
        lines.append(f"| {b['match']} | {b['positions'] / total:.3f} | {fmt(b['lookup_right'])} | {fmt(b['model_right'])} |")
    lines.append(f"\nminimum match N where copying is right at least as often as the model: {minimum_match(rows)}")
    return "\n".join(lines)
