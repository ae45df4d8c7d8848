"""Token panels as figures: the text so far as chips, one iteration's draft row, and its coins.

They read the same records and the same chip list (`render.chip_entries`) as the live panels; a chip's
kind is told by its colour, its border (dashed for a rejected draft, which is also struck through)
and the legend drawn under the chips, so the figure reads in black and white too.
"""

from __future__ import annotations

from decoding.trace.record import IterationRecord

from ..html_text import fmt, visible
from ..i18n import t
from decoding.trace.record import ACCEPTED, CORRECTION, TARGET

from ..render import CHIP_KINDS, REJECTED
from .scene import Scene, text_width
from .theme import BODY_SIZE, INK, MUTED, PAD, SMALL_SIZE, finish, kind_colour, start, tint, wrap

def chip_entries(record: IterationRecord) -> list[tuple[str, str, object, object]]:
    """The chips one iteration adds, as data: (text, kind, draft token or None, emitted token or None), in
    the order `render.record_chips` draws them: accepted drafts, the struck rejected draft, the final token
    (tests/app/export check that both agree)."""
    entries = []
    accepted_drafts = [d for d in record.draft if d.accepted]
    rejected = next((d for d in record.draft if d.accepted is False), None)
    n_acc = 0
    for token in record.emitted:
        if token.kind == ACCEPTED:
            d = accepted_drafts[n_acc] if n_acc < len(accepted_drafts) else None
            n_acc += 1
            entries.append((token.text, ACCEPTED, d, token))
        else:
            if token.kind == CORRECTION and rejected is not None:
                entries.append((rejected.text, REJECTED, rejected, None))
                rejected = None
            entries.append((token.text, token.kind if token.kind in CHIP_KINDS else TARGET, None, token))
    if rejected is not None:  # the run stopped before the correction token was kept
        entries.append((rejected.text, REJECTED, rejected, None))
    return entries


CHIP_H = 40
CHIP_GAP = 8
MAX_PROMPT_CHARS = 400  # a longer prompt is cut (with an ellipsis) so the chips stay on the slide
MAX_CHIPS = 400


def draw_chip(scene: Scene, x: float, y: float, text: str, kind: str, size: float = BODY_SIZE) -> float:
    """One chip with its top-left corner at (x, y); returns its width."""
    label = visible(text)
    w = text_width(label, size) + 20
    colour = kind_colour(kind)
    rejected = kind == REJECTED
    scene.rect(x, y, w, CHIP_H, tint(colour), colour, 2.5, dash=rejected, radius=6)
    scene.text(x + 10, y + CHIP_H / 2 + size * 0.36, label, size, INK, strike=rejected)
    return w


def flow_chips(scene: Scene, y: float, chips: list[tuple[str, str]], left: float = PAD) -> float:
    """Chips laid out in lines across the scene from `y`; returns the y below the last line."""
    x, right = left, scene.width - PAD
    for text, kind in chips:
        w = text_width(visible(text), BODY_SIZE) + 20
        if x > left and x + w > right:
            x, y = left, y + CHIP_H + CHIP_GAP
        x += draw_chip(scene, x, y, text, kind) + CHIP_GAP
    return y + CHIP_H


def legend(scene: Scene, y: float, kinds, lang: str) -> float:
    """The chip kinds in `kinds`, each drawn as a small chip with its name; returns the y below."""
    x = PAD
    for kind in kinds:
        name = t(f"export.kind.{kind}", lang)
        w = text_width(name, SMALL_SIZE) + 20
        if x > PAD and x + w > scene.width - PAD:
            x, y = PAD, y + CHIP_H + 4
        colour = kind_colour(kind)
        scene.rect(x, y, w, CHIP_H - 6, tint(colour), colour, 2, dash=kind == REJECTED, radius=5)
        scene.text(x + 10, y + (CHIP_H - 6) / 2 + SMALL_SIZE * 0.36, name, SMALL_SIZE, INK, strike=kind == REJECTED)
        x += w + CHIP_GAP
    return y + CHIP_H


def chips_figure(records: list[IterationRecord], upto: int | None, prompt: str | None, caption: str,
                 lang: str | None = None) -> Scene:
    """The text so far (iterations 0..`upto`) as chips, the prompt before them in grey."""
    scene, y = start(t("export.title.chips", lang))
    if not records:
        scene.text(PAD, y + BODY_SIZE, t("export.no_run", lang), BODY_SIZE, MUTED)
        return finish(scene, y + BODY_SIZE + 8, caption)
    upto = len(records) - 1 if upto is None else max(0, min(upto, len(records) - 1))
    if prompt:
        shown = prompt if len(prompt) <= MAX_PROMPT_CHARS else prompt[:MAX_PROMPT_CHARS] + "…"
        for line in wrap(t("export.prompt", lang, prompt=shown.replace("\n", " ")), SMALL_SIZE, scene.width - 2 * PAD):
            y += SMALL_SIZE * 1.35
            scene.text(PAD, y, line, SMALL_SIZE, MUTED)
        y += 14
    chips = [(text, kind) for record in records[: upto + 1] for text, kind, _, _ in chip_entries(record)]
    more = len(chips) - MAX_CHIPS
    y = flow_chips(scene, y, chips[:MAX_CHIPS])
    if more > 0:
        y += SMALL_SIZE * 1.4
        scene.text(PAD, y, t("export.more_chips", lang, n=more), SMALL_SIZE, MUTED)
    kinds = [k for k in CHIP_KINDS if any(kind == k for _, kind in chips)]
    y = legend(scene, y + 18, kinds, lang)
    return finish(scene, y, caption)


def _verdict(accepted: bool | None, lang: str) -> str:
    return t({True: "export.accepted", False: "export.rejected", None: "export.not_examined"}[accepted], lang)


def draft_row_figure(record: IterationRecord | None, caption: str, lang: str | None = None) -> Scene:
    """One iteration's draft: a row per draft position (the token, q, p, the coin against
    min(1, p/q), the verdict), then the token the target added."""
    if record is None:
        scene, y = start(t("export.title.draft_row_none", lang))
        scene.text(PAD, y + BODY_SIZE, t("export.no_run", lang), BODY_SIZE, MUTED)
        return finish(scene, y + BODY_SIZE + 8, caption)
    scene, y = start(t("export.title.draft_row", lang, iteration=record.iteration + 1, gamma=record.gamma))
    cols = [PAD, PAD + 70, PAD + 330, PAD + 460, PAD + 590]
    heads = [t("export.col.position", lang), t("export.col.token", lang), "q", "p", t("export.col.verdict", lang)]
    y += SMALL_SIZE
    for x, head in zip(cols, heads):
        scene.text(x, y, head, SMALL_SIZE, MUTED, bold=True)
    y += 10
    for d in record.draft:  # accepted, rejected, or grey: not examined (after an earlier rejection)
        draw_chip(scene, cols[1], y, d.text, {True: "accepted", False: REJECTED, None: "target"}[d.accepted])
        mid = y + CHIP_H / 2 + BODY_SIZE * 0.36
        scene.text(cols[0], mid, str(d.position + 1), BODY_SIZE, INK)
        scene.text(cols[2], mid, fmt(d.q), BODY_SIZE, INK)
        scene.text(cols[3], mid, fmt(d.p), BODY_SIZE, INK)
        scene.text(cols[4], mid, _verdict(d.accepted, lang), BODY_SIZE, INK, bold=d.accepted is False)
        y += CHIP_H + CHIP_GAP
    if not record.draft:
        y += BODY_SIZE
        scene.text(PAD, y, t("export.no_draft", lang), BODY_SIZE, INK)
        y += 12
    finals = [(text, kind) for text, kind, _, token in chip_entries(record) if token is not None and kind != "accepted"]
    if finals:
        y += 12
        scene.text(PAD, y + CHIP_H / 2 + SMALL_SIZE * 0.36, t("export.target_added", lang), SMALL_SIZE, MUTED)
        x = PAD + text_width(t("export.target_added", lang), SMALL_SIZE) + 14
        for text, kind in finals:
            x += draw_chip(scene, x, y, text, kind) + CHIP_GAP
        y += CHIP_H
    return finish(scene, y, caption)


def coin_figure(record: IterationRecord | None, caption: str, lang: str | None = None) -> Scene:
    """The coins of one iteration: for each examined draft position a bar from 0 to 1, the part
    below the threshold min(1, p/q) (the part where the coin u accepts) shaded, and u marked."""
    if record is None:
        scene, y = start(t("export.title.coin_none", lang))
        scene.text(PAD, y + BODY_SIZE, t("export.no_run", lang), BODY_SIZE, MUTED)
        return finish(scene, y + BODY_SIZE + 8, caption)
    scene, y = start(t("export.title.coin", lang, iteration=record.iteration + 1))
    tossed = [d for d in record.draft if d.coin is not None and d.threshold is not None]
    if not tossed:
        y += BODY_SIZE
        for line in wrap(t("export.no_coin", lang), BODY_SIZE, scene.width - 2 * PAD):
            scene.text(PAD, y, line, BODY_SIZE, INK)
            y += BODY_SIZE * 1.3
        return finish(scene, y, caption)
    left, right = PAD + 200, scene.width - PAD
    span = right - left
    for d in tossed:
        y += 16
        draw_chip(scene, PAD, y, d.text, "accepted" if d.accepted else REJECTED)
        bar_y = y + 6
        threshold = max(0.0, min(1.0, d.threshold))
        coin = max(0.0, min(1.0, d.coin))
        scene.rect(left, bar_y, span, 28, "#f4f4f4", "#222222", 1.5)
        scene.rect(left, bar_y, span * threshold, 28, tint(kind_colour("accepted"), 0.55))
        scene.line(left + span * threshold, bar_y - 6, left + span * threshold, bar_y + 34, "#222222", 2.5, dash=True)
        scene.line(left + span * coin, bar_y - 8, left + span * coin, bar_y + 36, kind_colour(REJECTED)
                   if not d.accepted else "#000000", 4)
        scene.circle(left + span * coin, bar_y - 12, 7, "#000000")
        y += CHIP_H + 8
        rule = t("export.coin_accepts" if d.accepted else "export.coin_rejects", lang, u=fmt(d.coin),
                 threshold=fmt(d.threshold))
        y += SMALL_SIZE
        scene.text(left, y, rule, SMALL_SIZE, INK)
        y += 10
    for line in wrap(t("export.coin_key", lang), SMALL_SIZE, scene.width - 2 * PAD):
        y += SMALL_SIZE * 1.35
        scene.text(PAD, y, line, SMALL_SIZE, MUTED)
    return finish(scene, y, caption)
