"""Token text as safe HTML and short number formats, shared by every renderer.

Every piece of token text goes through `token_html` (visible whitespace, then HTML escaping) and
every attribute through `attr`: token text can hold `<`, `&`, quotes, newlines and spaces.
"""

from __future__ import annotations

import html


def attr(text: str) -> str:
    return html.escape(text, quote=True)


def token_html(text: str) -> str:
    """Escaped token text with spaces shown as a faint middle dot, newlines as a return arrow
    and tabs as an arrow; the empty token as an empty-set sign."""
    if text == "":
        return '<span class="ws">∅</span>'
    out = []
    for ch in text:
        if ch == " ":
            out.append('<span class="ws">·</span>')
        elif ch == "\n":
            out.append('<span class="ws">↵</span>')
        elif ch == "\t":
            out.append('<span class="ws">⇥</span>')
        elif ch == "\r":
            out.append('<span class="ws">␍</span>')
        else:
            out.append(html.escape(ch, quote=True))
    return "".join(out)


def visible(text: str) -> str:
    """Plain-text form of a token for labels and tooltips (no HTML): spaces as ·, newlines as ↵."""
    if text == "":
        return "∅"
    return text.replace(" ", "·").replace("\n", "↵").replace("\t", "⇥").replace("\r", "␍")


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "—"
    if x != 0 and abs(x) < 10 ** -digits:
        return f"{x:.1e}"
    return f"{x:.{digits}f}"


def num(x, digits: int = 3) -> str:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return "—"
    if f != f:
        return "—"
    if f in (float("inf"), float("-inf")):
        return "∞" if f > 0 else "−∞"
    return fmt(f, digits)
