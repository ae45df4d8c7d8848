"""The lab's shipped examples: hand-written target p and draft q over a small vocabulary, as data.

- "worked": the worked example (docs/papers.md), four tokens; the draft proposes "is" more often than
  the target writes it.
- "larger": 47 places that could follow "After school the children went to the ...". The target p is
  Zipf-like (p(k) proportional to 1/k over its ranks, rounded to 5 decimals); the draft q is flatter
  (1/k^0.8) and ranks "beach" first. Its top 20 tokens hold 81% of p, so a rule that verifies against
  a target cut to its top 20 log-probabilities visibly drifts from p here (on four tokens it cannot).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    """One shipped example: a title for the menu, the tokens, p and q (each summing to 1 within 1e-6)."""

    title: str
    vocab: tuple[str, ...]
    p: tuple[float, ...]
    q: tuple[float, ...]


WORKED = Example(
    title="Worked example (4 tokens)",
    vocab=("is", "stock", "girl", "cherry"),
    p=(0.4, 0.3, 0.2, 0.1),
    q=(0.5, 0.25, 0.15, 0.1),
)

LARGER = Example(
    title="Larger vocabulary (47 tokens, Zipf-like)",
    vocab=tuple(
        "park beach library shop pool cinema museum zoo market farm river lake forest garden station bakery "
        "castle harbour church school playground stadium theatre circus fair village city hospital bridge hill "
        "island mountain cave field square palace tower gallery aquarium cafe restaurant airport port canal "
        "meadow orchard valley".split()),
    p=(0.22533, 0.11266, 0.07511, 0.05633, 0.04507, 0.03755, 0.03219, 0.02817, 0.02504, 0.02253, 0.02048,
       0.01878, 0.01733, 0.01609, 0.01502, 0.01408, 0.01325, 0.01252, 0.01186, 0.01127, 0.01073, 0.01024,
       0.0098, 0.00939, 0.00901, 0.00867, 0.00835, 0.00805, 0.00777, 0.00751, 0.00727, 0.00704, 0.00683,
       0.00663, 0.00644, 0.00626, 0.00609, 0.00593, 0.00578, 0.00563, 0.0055, 0.00536, 0.00524, 0.00512,
       0.00501, 0.0049, 0.00479),
    q=(0.08996, 0.15663, 0.06504, 0.03736, 0.04322, 0.05167, 0.03302, 0.02968, 0.02701, 0.02482, 0.023,
       0.02145, 0.02012, 0.01897, 0.01795, 0.01704, 0.01624, 0.01551, 0.01485, 0.01426, 0.01371, 0.01321,
       0.01275, 0.01232, 0.01193, 0.01156, 0.01121, 0.01089, 0.01059, 0.01031, 0.01004, 0.00979, 0.00955,
       0.00933, 0.00911, 0.00891, 0.00872, 0.00853, 0.00836, 0.00819, 0.00803, 0.00788, 0.00773, 0.00759,
       0.00745, 0.00732, 0.00719),
)

EXAMPLES = {"worked": WORKED, "larger": LARGER}
