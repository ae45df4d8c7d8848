"""The token player: a gr.HTML that plays one or more lanes of tokens on one clock in the browser.

The server sends the whole run(s) once; the browser animates them (`assets/player.js`, styled by
`assets/player.css`, both read when the component is built), so nothing streams while it plays and
Replay or slow motion (0.25x to 1x) cost the server nothing. The race shows two lanes; an Explainer
run played at a chosen pace is one lane.

The player's value (plain JSON data):

    {"title": str, "prompt": str, "result": str, "verdict": "faster" | "slower" | "same" | "",
     "paced": bool,                   # times are a chosen pace, not measured (tokens/s shown at the end)
     "nonce": float,                  # changes on every open, so opening the same race replays it
     "sync": "explainer", "rest": 7, "current": 7 | None,   # optional: one lane tied to panels
                                      # (player_data: the panels follow the iteration it shows)
     "lanes": [{"label": "A", "name": "speculative (prompt-lookup, γ 4)", "method": "speculative",
                "tokens": [{"text": " the", "kind": "accepted", "time": 0.41, "lookup": true,
                            "calls": 3, "it": 2}, ...], "iterations": 24,
                "summary": {"tokens": 64, "seconds": 2.1, "tokens_per_second": 30.5,
                            "target_calls": 41, "tokens_per_call": 1.56}}, ...]}

`time` is when the token appears, in seconds from the start (a record's measured `elapsed`, or any
pace a caller chooses); `kind` is a chip kind of the explainer (accepted, correction, bonus,
target); a special token of the chat template arrives as its marker ("⟨end of turn⟩"); `lookup` marks a draft token copied from the context, `corpus` one copied from the target's
earlier answers (optional); `calls` is the cumulative number of
target calls once the token is out (optional); `it` the iteration (from 0) that emitted it.
`summary` holds the run's own figures (RunSummary),
shown when the lane finishes. With two or more lanes the first to finish gets the finish flag.
"""

from __future__ import annotations

import json
import time

import gradio as gr

from decoding.paths import ASSETS
from decoding.trace.record import ACCEPTED, IterationRecord, RunSummary

from .html_text import special_name
from .i18n import DEFAULT, catalog, t

PLAYER_JS = ASSETS / "player.js"
PLAYER_CSS = ASSETS / "player.css"
TEMPLATE = '<div class="rp" data-state="empty"></div>'


def record_tokens(record: IterationRecord, time_s: float | None = None, index: int | None = None) -> list[dict]:
    """The tokens one iteration emits, each scheduled at `time_s` (default: the record's `elapsed`)
    and marked with `index`, the iteration's place in its run (default: the record's own number)."""
    at = record.elapsed if time_s is None else time_s
    accepted = [d for d in record.draft if d.accepted]
    out, n_acc = [], 0
    for token in record.emitted:
        source = None
        if token.kind == ACCEPTED and n_acc < len(accepted):
            source = accepted[n_acc].source
            n_acc += 1
        special = special_name(token.text)  # a chat template's marker reads as one, not as "<|im_end|>"
        out.append({"text": token.text if special is None else f"⟨{special}⟩", "kind": token.kind, "time": at,
                    "lookup": source == "lookup",
                    "corpus": source == "corpus", "calls": record.target_calls,
                    "it": record.iteration if index is None else index})
    return out


def summary_figures(summary: RunSummary) -> dict:
    """The figures a lane shows when it finishes, as the engine computed them."""
    return {"tokens": len(summary.token_ids), "seconds": summary.wall_seconds,
            "tokens_per_second": summary.tokens_per_second, "target_calls": summary.target_calls,
            "tokens_per_call": summary.tokens_per_call}


def lane_data(label: str, records: list[IterationRecord], summary: RunSummary | None = None, name: str = "",
              times: list[float] | None = None) -> dict:
    """One lane of the player from a run's records: each iteration's tokens at its `elapsed`
    (or at `times[i]`, one time per record, for a chosen pace)."""
    if times is not None and len(times) != len(records):
        raise ValueError(f"{len(times)} times for {len(records)} records")
    tokens = []
    for i, record in enumerate(records):
        tokens.extend(record_tokens(record, None if times is None else times[i], i))
    method = summary.method if summary is not None else (records[0].method if records else "")
    return {"label": label, "name": name or method, "method": method, "tokens": tokens,
            "iterations": len(records), "summary": summary_figures(summary) if summary is not None else None}


def player_data(lanes: list[dict], title: str = "", prompt: str = "", result: str = "", verdict: str = "",
                paced: bool = False, sync: str = "", rest: int | None = None, current: int | None = None) -> dict:
    """The player's value: lanes (from `lane_data`) and the words shown at the end; `paced` when the
    tokens' times are a chosen pace rather than measured ones.

    One lane tied to panels (the Explainer): `sync` names the panels it drives (the player then
    reports each iteration it shows, from 0, with its nonce, as a "select" event, and obeys the
    page's "specdec-seek" and "specdec-pause" events for that name); `rest` is the iteration it
    comes to rest on when it ends; `current` not None shows the run at rest on that iteration at
    once, with no playback (Replay plays it)."""
    data = {"title": title, "prompt": prompt, "result": result, "verdict": verdict, "lanes": lanes,
            "paced": paced, "nonce": time.time(), "words": player_words()}
    if sync:
        data.update(sync=sync, rest=rest, current=current)
    return data


def empty_data(message: str) -> dict:
    """A value that shows `message` instead of a race."""
    return {"title": "", "prompt": "", "result": "", "verdict": "", "lanes": [], "message": message,
            "nonce": time.time(), "words": player_words()}


def player_words() -> dict[str, str]:
    """The player's own words (buttons, legend, figures' names, status lines) in the current language
    (`i18n.current`), keyed as player.js reads them: the catalog's `player.<key>` entries."""
    return {key[len("player."):]: t(key) for key in catalog(DEFAULT) if key.startswith("player.")}


def relabel(value) -> dict | None:
    """A player value with its words in the current language: the same lanes and figures, a new nonce
    (the browser shows a value with a new nonce afresh, so the words change); None for no value."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict):
        return None
    return {**value, "words": player_words(), "nonce": time.time()}


def _asset(path) -> str:
    text = path.read_text(encoding="utf-8")
    # gr.HTML evaluates its css_template as a JS template string: a backtick, "${" or "{{" would break it
    if path.suffix == ".css" and any(s in text for s in ("`", "${", "{{", "\\")):
        raise ValueError(f"{path.name} must not contain a backtick, '${{', '{{{{' or a backslash")
    return text


def player(value: dict | None = None, **kwargs) -> gr.HTML:
    """The player component (call inside a Blocks context); `kwargs` go to gr.HTML (elem_id, label...)."""
    kwargs.setdefault("label", t("player.label"))
    kwargs.setdefault("shown", None)  # the panels' answer to a player tied to them ({nonce, iteration})
    return gr.HTML(value, html_template=TEMPLATE, css_template=_asset(PLAYER_CSS), js_on_load=_asset(PLAYER_JS),
                   apply_default_css=False, container=False, padding=False, **kwargs)
