"""The race as a figure: each lane's name, its tokens as chips (in the order they arrived) and its own
figures (tokens, seconds, tokens/s, target calls), then the race's result sentence. It reads the race
player's value (`player.player_data`), the same data the browser plays.
"""

from __future__ import annotations

import re

from ..i18n import t
from .scene import Scene
from .theme import BODY_SIZE, INK, MUTED, PAD, SMALL_SIZE, finish, start, wrap
from .tokens import flow_chips, legend

MAX_LANE_CHIPS = 160


def _plain(text) -> str:
    return re.sub(r"<[^>]+>", "", str(text or ""))


def race_figure(data: dict | None, caption: str, lang: str | None = None) -> Scene:
    """Both (all) lanes of a race from the player's value; a figure saying so when there is no race."""
    lanes = (data or {}).get("lanes") or []
    scene, y = start(t("export.title.race", lang))
    if not lanes:
        scene.text(PAD, y + BODY_SIZE, t("export.no_race", lang), BODY_SIZE, MUTED)
        return finish(scene, y + BODY_SIZE + 8, caption)
    kinds = []
    for lane in lanes:
        y += BODY_SIZE * 1.4
        head = f"{lane.get('label', '')} · {_plain(lane.get('name'))}"
        for line in wrap(head, BODY_SIZE, scene.width - 2 * PAD, bold=True):
            scene.text(PAD, y, line, BODY_SIZE, INK, bold=True)
            y += BODY_SIZE * 1.3
        tokens = lane.get("tokens") or []
        chips = [(tok.get("text", ""), tok.get("kind", "target")) for tok in tokens[:MAX_LANE_CHIPS]]
        for _, kind in chips:
            if kind not in kinds:
                kinds.append(kind)
        y = flow_chips(scene, y - BODY_SIZE * 0.6, chips)
        if len(tokens) > MAX_LANE_CHIPS:
            y += SMALL_SIZE * 1.4
            scene.text(PAD, y, t("export.more_chips", lang, n=len(tokens) - MAX_LANE_CHIPS), SMALL_SIZE, MUTED)
        s = lane.get("summary") or {}
        if s:
            y += SMALL_SIZE * 1.6
            scene.text(PAD, y, t("export.lane_figures", lang, tokens=s.get("tokens", 0),
                                 seconds=f"{float(s.get('seconds') or 0):.2f}",
                                 tps=f"{float(s.get('tokens_per_second') or 0):.1f}",
                                 calls=s.get("target_calls", 0)), SMALL_SIZE, INK)
        y += 16
    result = _plain(data.get("result"))
    if result:
        for line in wrap(result, BODY_SIZE, scene.width - 2 * PAD, bold=True):
            y += BODY_SIZE * 1.3
            scene.text(PAD, y, line, BODY_SIZE, INK, bold=True)
    y = legend(scene, y + 14, kinds, lang)
    return finish(scene, y, caption)
