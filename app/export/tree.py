"""The draft tree as a figure: an outline, one node per line, indented by depth, joined to its parent by
elbow lines; nodes on the accepted path in the accepted chip's colour (thick outline), the others grey;
a node's score (e.g. a beam's joint log-likelihood) after it.

Trees larger than `MAX_NODES` are cut (the figure says how many nodes it leaves out): a slide holds
about forty lines.
"""

from __future__ import annotations

from collections import defaultdict

from decoding.trace.record import IterationRecord

from ..html_text import fmt, visible
from ..i18n import t
from .scene import Scene, text_width
from .theme import BODY_SIZE, INK, MUTED, PAD, SMALL_SIZE, finish, kind_colour, start, tint

MAX_NODES = 40
ROW = 44
INDENT = 44


def _order(record: IterationRecord) -> list[tuple[object, int]]:
    """(node, indent level) in depth-first order from the roots, at most MAX_NODES."""
    nodes = {n.index: n for n in record.tree}
    children = defaultdict(list)
    roots = []
    for n in record.tree:
        (children[n.parent] if n.parent in nodes else roots).append(n)
    out, stack = [], [(r, 0) for r in reversed(roots)]
    while stack and len(out) < MAX_NODES:
        n, level = stack.pop()
        out.append((n, level))
        stack.extend((k, level + 1) for k in reversed(children.get(n.index, [])))
    return out


def tree_figure(record: IterationRecord | None, caption: str, lang: str | None = None,
                chosen: set[int] | None = None) -> Scene:
    """The record's draft tree (chain, beams, sparse trees, PPD's candidates and prompt tokens);
    nodes in `chosen` (e.g. MJSD's chosen beam) get a thick black outline."""
    if record is None or not record.tree:
        scene, y = start(t("export.title.tree_none", lang))
        scene.text(PAD, y + BODY_SIZE, t("export.no_tree", lang), BODY_SIZE, MUTED)
        return finish(scene, y + BODY_SIZE + 8, caption)
    scene, y = start(t("export.title.tree", lang, iteration=record.iteration + 1))
    rows = _order(record)
    where: dict[int, tuple[float, float]] = {}
    for n, level in rows:
        x = PAD + level * INDENT
        label = visible(n.text)
        w = text_width(label, BODY_SIZE) + 20
        parent = where.get(n.parent)
        if parent is not None:
            elbow = [(parent[0] + 14, parent[1] + ROW - 6), (parent[0] + 14, y + ROW / 2 - 2), (x, y + ROW / 2 - 2)]
            scene.polyline(elbow, "#666666", 2)
        colour = kind_colour("accepted") if n.accepted else "#777777"
        outline = "#000000" if chosen and n.index in chosen else colour
        scene.rect(x, y + 2, w, ROW - 8, tint(colour, 0.75 if n.accepted else 0.88), outline,
                   4 if (n.accepted or (chosen and n.index in chosen)) else 2, dash=n.kind == "prompt", radius=6)
        scene.text(x + 10, y + ROW / 2 + BODY_SIZE * 0.34, label, BODY_SIZE, INK, bold=n.accepted)
        note = t(f"export.node.{n.kind}", lang) if n.kind in ("root", "prompt", "candidate", "beam") else ""
        if n.score is not None:
            note = (note + " " if note else "") + fmt(n.score, 2)
        if note:
            scene.text(x + w + 12, y + ROW / 2 + SMALL_SIZE * 0.34, note, SMALL_SIZE, MUTED)
        where[n.index] = (x, y)
        y += ROW
    if len(record.tree) > len(rows):
        y += SMALL_SIZE
        scene.text(PAD, y, t("export.more_nodes", lang, n=len(record.tree) - len(rows)), SMALL_SIZE, MUTED)
    y += 12
    x = PAD
    for colour, name, fill in [(kind_colour("accepted"), t("export.tree_accepted", lang), 0.75),
                               ("#777777", t("export.tree_other", lang), 0.88)]:
        w = text_width(name, SMALL_SIZE) + 20
        scene.rect(x, y, w, 34, tint(colour, fill), colour, 3, radius=5)
        scene.text(x + 10, y + 17 + SMALL_SIZE * 0.34, name, SMALL_SIZE, INK)
        x += w + 10
    return finish(scene, y + 34, caption)
