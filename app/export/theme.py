"""The exported figures' light theme (for slides and projectors: dark text on white, large type, thick
lines) and the two lines every figure carries: its title at the top and the caption naming the run's
settings at the bottom.

Units are the scene's (`scene.Scene`): a figure is `WIDTH` units wide; its PNG is drawn at 2 px per unit
(1920 px). Type sizes are chosen for a slide: body 22, title 26, caption 17 units, i.e. 44, 52 and 34 px
in the PNG.
"""

from __future__ import annotations

from ..i18n import t
from ..render import CHIP_KINDS
from .scene import Scene, text_width

WIDTH = 960
PAD = 28
TITLE_SIZE = 26
BODY_SIZE = 22
SMALL_SIZE = 18
CAPTION_SIZE = 17
INK = "#111111"
MUTED = "#444444"
GRID = "#d0d0d0"
AXIS = "#222222"
P_COLOUR, Q_COLOUR = "#0072B2", "#E69F00"  # as the live charts (app/charts.py)


def kind_colour(kind: str) -> str:
    """A chip kind's Okabe-Ito colour (as the live chips)."""
    return CHIP_KINDS.get(kind, CHIP_KINDS["target"])[1]


def tint(colour: str, amount: float = 0.78) -> str:
    """`colour` mixed with white (`amount` of white): a chip's fill behind black text."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    mix = [round(c + (255 - c) * amount) for c in (r, g, b)]
    return "#" + "".join(f"{c:02x}" for c in mix)


def wrap(text: str, size: float, width: float, bold: bool = False) -> list[str]:
    """`text` broken at spaces into lines no wider than `width` units at `size` (a word longer than a
    line stays whole on its own line)."""
    lines: list[str] = []
    for paragraph in str(text).split("\n"):
        line = ""
        for word in paragraph.split(" "):
            trial = f"{line} {word}" if line else word
            if line and text_width(trial, size, bold) > width:
                lines.append(line)
                line = word
            else:
                line = trial
        lines.append(line)
    return lines


def start(title: str, width: float = WIDTH) -> tuple[Scene, float]:
    """A scene with `title` drawn at its top; returns the scene and the y where content starts."""
    scene = Scene(width, 0, title=title)
    y = PAD
    for line in wrap(title, TITLE_SIZE, width - 2 * PAD, bold=True):
        y += TITLE_SIZE * 1.2
        scene.text(PAD, y, line, TITLE_SIZE, INK, bold=True)
    return scene, y + 14


def finish(scene: Scene, y: float, caption: str) -> Scene:
    """Draw `caption` below `y` (a rule, then the wrapped caption line) and set the scene's height."""
    y += 16
    scene.line(PAD, y, scene.width - PAD, y, GRID, 1.5)
    for line in wrap(caption, CAPTION_SIZE, scene.width - 2 * PAD):
        y += CAPTION_SIZE * 1.35
        scene.text(PAD, y, line, CAPTION_SIZE, MUTED)
    scene.height = y + PAD * 0.8
    return scene


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def run_caption(settings, precision: str | None = None, iteration: int | None = None,
                iterations: int | None = None, lang: str | None = None, source: str = "live") -> str:
    """The caption line of a run's figure: pair, method, γ, temperature (and top-k, top-p where on),
    seed, precision and the iteration shown. `settings`: an app `Settings` (None: a figure of no run);
    `precision`: the precision the run actually used (the models' dtype), else the setting; `source`:
    "live" or "trace" (a replayed trace file)."""
    if settings is None:
        return t("export.caption.none", lang)
    parts = [t("export.caption.pair", lang, draft=settings.draft, target=settings.target),
             t("export.caption.method", lang, method=settings.method),
             t("export.caption.gamma", lang, gamma=settings.gamma)]
    if settings.lenience != 1.0:
        parts.append(t("export.caption.lenience", lang, lenience=_num(settings.lenience)))
    parts.append(t("export.caption.greedy", lang) if settings.temperature == 0
                 else t("export.caption.temperature", lang, temperature=_num(settings.temperature)))
    if settings.top_k:
        parts.append(t("export.caption.top_k", lang, top_k=settings.top_k))
    if settings.top_p < 1:
        parts.append(t("export.caption.top_p", lang, top_p=_num(settings.top_p)))
    parts.append(t("export.caption.seed", lang, seed=settings.seed))
    parts.append(t("export.caption.precision", lang, precision=precision or settings.dtype))
    if iteration is not None:
        parts.append(t("export.caption.iteration", lang, iteration=iteration + 1,
                       iterations=iterations or iteration + 1))
    if source != "live":
        parts.append(t("export.caption.replay", lang))
    return " · ".join(parts)
