"""The handlers of the figure export menus and the links (Gradio side of `app/export/` and
`app/links.py`): make a figure file of a panel, make a link to the run or race shown, and open a
link when the page loads.

A link's message (opened, opened on other hardware, or why it could not be opened) shows in the tab's
link notice, a status line above the panels; a link that cannot be opened changes nothing else.
Every text comes from the catalogs (`export.yaml`) in the session's language (`lang`).
"""

from __future__ import annotations

import gradio as gr

from decoding.methods.registry import METHODS

from . import export, links
from .controls import controls_from_settings
from .errors import Status, status_html
from .iterations import position_index, timeline_index
from .i18n import t
from .presets import check_custom_spec, pair_problem, presets
from .race_file import shipped_races
from .session import example_traces
from .settings import PRECISIONS, make_settings

NOTICE_OK, NOTICE_ERROR = "info", "error"


def notice(message: str, kind: str = NOTICE_OK) -> Status:
    """The link notice's HTML (empty for no message)."""
    return status_html(message, kind) if message else Status("")


def _query(request: gr.Request | None) -> dict:
    return dict(request.query_params) if request is not None else {}


# --------------------------------------------------------------------------- figures
def explainer_figure(session, panel, fmt, timeline, position, lang: str | None = None):
    """The Explainer's `panel` at the timeline's iteration as an SVG or PNG file: (the file, the menu's note)."""
    path = export.explainer_file(session, panel, fmt, timeline_index(timeline), position_index(position), lang)
    return gr.update(value=path, visible=True), t("export.menu.made", lang, panel=t(f"export.panel.{panel}", lang),
                                                  fmt=str(fmt).upper())


def race_figure(player_value, figures, fmt, lang: str | None = None):
    """The race shown (the player's value) as an SVG or PNG file."""
    path = export.race_file(player_value if isinstance(player_value, dict) else None,
                            figures if isinstance(figures, dict) else None, fmt, lang)
    return gr.update(value=path, visible=True), t("export.menu.made", lang, panel=t("export.panel.race", lang),
                                                  fmt=str(fmt).upper())


def lab_figure(panel, fmt, table, lenience, n, seed, implementation, lang: str | None = None):
    """One of the lab's charts for the table and settings shown, as an SVG or PNG file."""
    path = export.lab_file(panel, fmt, table, lenience, n, seed, implementation, lang)
    return gr.update(value=path, visible=True), t("export.menu.made", lang, panel=t(f"export.panel.{panel}", lang),
                                                  fmt=str(fmt).upper())


# --------------------------------------------------------------------------- making links
def _device_here() -> str | None:
    from decoding.lm.devices import resolve_device

    try:
        return links.device_kind(resolve_device(None))
    except Exception:  # noqa: BLE001 - no device to name: the link says nothing about it
        return None


def run_link(session, lang: str | None = None):
    """The query of a link to the run shown (`?run=...`, or `?trace=NAME` for a shipped trace) and the
    notice: (query, notice HTML). No query (""), and the reason, where no link can be made."""
    if session is None or not session.records:
        return "", notice(t("export.link.none", lang), NOTICE_ERROR)
    if session.source == "example":
        path = example_traces().get(session.title)
        if path is not None:
            return f"?trace={path.stem}", notice("")
    if session.source != "live" or session.settings is None:
        return "", notice(t("export.link.uploaded", lang), NOTICE_ERROR)
    precision = export.panels.session_precision(session)
    device = links.device_kind(getattr(session.target, "device", None)) if session.target is not None else None
    try:
        return links.run_query(session.settings, precision, device), notice("")
    except links.LinkError as exc:
        return "", notice(t(exc.why, lang, **exc.params), NOTICE_ERROR)


def race_link(player_value, figures, shipped_title, values: dict, lang: str | None = None):
    """The query of a link to the race shown: a shipped race by its title, else the race's controls and
    the Explainer's shared settings (`values`: the race tab's and the Explainer's inputs by name)."""
    lanes = (player_value or {}).get("lanes") if isinstance(player_value, dict) else None
    if not lanes:
        return "", notice(t("export.link.race_none", lang), NOTICE_ERROR)
    try:
        if shipped_title:
            return links.race_query({"shipped": shipped_title}), notice("")
        shared = {name: values.get(name) for name in SHARED_RACE_SETTINGS}
        race = {name: values.get(name) for name in links.RACE_FIELDS}
        return links.race_query({**race, "shared": shared}), notice("")
    except links.LinkError as exc:
        return "", notice(t(exc.why, lang, **exc.params), NOTICE_ERROR)


def race_link_of(player_value, figures, shipped_title, prompt, lane_a, lane_b, lane_a_draft, lane_a_gamma, preset,
                 custom_target, custom_draft, chat, temperature, top_k, top_p, seed, max_new_tokens, dtype):
    """`race_link` with its inputs one by one, in the order the race tab wires them."""
    values = dict(prompt=prompt, lane_a=lane_a, lane_b=lane_b, lane_a_draft=lane_a_draft, lane_a_gamma=lane_a_gamma,
                  preset=preset, custom_target=custom_target, custom_draft=custom_draft, chat=chat,
                  temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, max_new_tokens=max_new_tokens,
                  dtype=dtype)
    return race_link(player_value, figures, shipped_title, values)


# the JavaScript that turns a link's query into the whole address, keeps ?lang= and ?projector=, puts it in
# the link box and on the clipboard (where the browser allows it)
LINK_JS = """(query) => {
  if (!query) return '';
  const here = new URL(window.location.href);
  const url = new URL(here.origin + here.pathname + query);
  for (const keep of ['lang', 'projector']) {
    const v = here.searchParams.get(keep);
    if (v) url.searchParams.set(keep, v);
  }
  if (document.body.classList.contains('projector')) url.searchParams.set('projector', '1');
  const text = url.toString();
  try { navigator.clipboard && navigator.clipboard.writeText(text).catch(() => {}); } catch (e) {}
  return text;
}"""


# --------------------------------------------------------------------------- opening links
SHARED_RACE_SETTINGS = ("preset", "custom_target", "custom_draft", "chat", "temperature", "top_k", "top_p", "seed",
                        "max_new_tokens", "dtype")


def _pair_controls(target: str, draft: str) -> tuple[str, str, str]:
    """(preset label, custom target, custom draft) that load `target` and `draft`; LinkError("pair")
    where this page cannot load them."""
    for p in presets():
        if p.key != "custom" and p.target == target and p.draft == draft:
            return p.label, "", draft
    custom = next((p for p in presets() if p.key == "custom"), None)
    try:
        if custom is None:
            raise ValueError
        check_custom_spec(target)
        check_custom_spec(draft)
    except ValueError:
        raise links.LinkError("export.link.why.pair", pair=f"{draft} → {target}") from None
    return custom.label, target, draft


def open_run_link(request: gr.Request | None, n: int, lang: str | None = None) -> tuple:
    """`?run=...` on page load: the Explainer's controls (in `controls.control_order`), the pair
    (preset, custom target, custom draft), the autorun flag, the tabs and the link notice. Nothing
    changes but the notice when the link cannot be opened; nothing at all without a run link. `n`: the
    number of controls."""
    token = _query(request).get("run")
    if token is None:
        return (*(gr.skip(),) * (n + 5), gr.skip())
    try:
        link = links.read_run(token)
        s = link.settings
        label, custom_target, custom_draft = _pair_controls(s["target"], s["draft"])
        if s.get("method") not in METHODS:
            raise links.LinkError("export.link.why.settings", problem=f"method {s.get('method')!r}")
        if pair_problem(s["method"], s["draft"]):
            raise links.LinkError("export.link.why.settings", problem=pair_problem(s["method"], s["draft"]))
        dtype = link.precision if link.precision in PRECISIONS else s.get("dtype", "auto")
        try:
            settings = make_settings(s["prompt"], s["chat"], s["method"], s["gamma"], s["temperature"], s["top_k"],
                                     s["top_p"], s["lenience"], s["seed"], s["max_new_tokens"], s["target"],
                                     s["draft"], s["extra"], dtype=dtype)
        except (TypeError, ValueError) as exc:
            raise links.LinkError("export.link.why.settings", problem=str(exc)) from None
    except links.LinkError as exc:
        why = t(exc.why, lang, **exc.params)
        return (*(gr.skip(),) * (n + 4), gr.Tabs(selected="explainer"),
                notice(t("export.link.bad", lang, why=why), NOTICE_ERROR))
    message = t("export.link.opened", lang, method=settings.method, seed=settings.seed)
    here = _device_here()
    if (link.device and here and link.device != here) or (link.precision and link.precision not in PRECISIONS):
        message += " " + t("export.link.differs", lang,
                           then=t("export.link.made_on", lang, device=link.device or "?",
                                  precision=link.precision or settings.dtype),
                           now=t("export.link.made_on", lang, device=here or "?", precision=dtype))
    return (*controls_from_settings(settings), label, custom_target, custom_draft, True,
            gr.Tabs(selected="explainer"), notice(message))


def open_race_link(request: gr.Request | None, lang: str | None = None) -> tuple:
    """`?race=...` on page load: for a live race, the Explainer's shared settings (SHARED_RACE_SETTINGS),
    the race tab's controls (links.RACE_FIELDS) and True for the race's autorun flag (the race runs
    next, `race.handlers.race_if_asked`); a shipped race opens in `race_on_load`
    (`shipped_race_in_link`). Then the tabs and the race's link notice."""
    token = _query(request).get("race")
    n = len(SHARED_RACE_SETTINGS) + len(links.RACE_FIELDS) + 1  # and the race's autorun flag
    if token is None:
        return (*(gr.skip(),) * n, gr.skip(), gr.skip())
    try:
        race = links.read_race(token)
        if "shipped" in race:
            if race["shipped"] not in shipped_races():
                raise links.LinkError("export.link.why.race", name=race["shipped"])
            return (*(gr.skip(),) * n, gr.Tabs(selected="race"), notice(""))
        for lane in ("lane_a", "lane_b"):
            if race[lane] not in METHODS:
                raise links.LinkError("export.link.why.lane", method=str(race[lane]))
        shared = race["shared"]
        label = shared.get("preset")
        custom_target, custom_draft = shared.get("custom_target"), shared.get("custom_draft")
        if not any(p.label == label for p in presets()):
            raise links.LinkError("export.link.why.pair", pair=str(label))
        values = [shared.get(name) for name in SHARED_RACE_SETTINGS]
        values[:3] = [label, custom_target or "", custom_draft or ""]
        race_values = [race[name] for name in links.RACE_FIELDS]
        return (*values, *race_values, True, gr.Tabs(selected="race"), notice(t("export.link.opened_race", lang)))
    except links.LinkError as exc:
        why = t(exc.why, lang, **exc.params)
        return (*(gr.skip(),) * n, gr.Tabs(selected="race"), notice(t("export.link.bad", lang, why=why), NOTICE_ERROR))


def shipped_race_in_link(request: gr.Request | None) -> str | None:
    """The title of the shipped race a `?race=` link names, if it names one that ships; else None."""
    token = _query(request).get("race")
    if token is None:
        return None
    try:
        race = links.read_race(token)
    except links.LinkError:
        return None
    return race.get("shipped") if race.get("shipped") in shipped_races() else None


def live_race_in_link(request: gr.Request | None) -> bool:
    """Whether the page's `?race=` link is a live race's (its controls are the link's, not a shipped race's)."""
    token = _query(request).get("race")
    try:
        return token is not None and "shipped" not in links.read_race(token)
    except links.LinkError:
        return False
