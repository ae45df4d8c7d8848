"""The method panels' HTML: mentored decisions per draft position, MJSD's prefixes against tau with
the beam tree, PPD's verification path, status block and sparse tree. Each reads its method's
typed trace data (`MentoredStep`, `MjsdStep`, `PPDStep`); `fields_table_html` shows any other method's
trace data field by field."""

from __future__ import annotations

import dataclasses
import html

from decoding.methods.mentored import MentoredStep
from decoding.methods.mjsd.generator import MjsdStep
from decoding.methods.ppd.generator import PPDStep
from decoding.trace.record import ACCEPTED, IterationRecord

from .html_text import attr as _attr, fmt, num as _num, token_html
from .render import REJECTED, tr, tree_html
from .rules_text import _final_token, ppd_argmax, ppd_lossy


# the mentored rules' names (as the engine records them) -> explainer.m.rule.<name> says what each means
RULES = ("strict-pass", "within-bound", "search", "strict")


def _rule_words(rule: str, lang: str | None) -> str:
    return tr(f"m.rule.{rule}", lang) if rule in RULES else rule


def _mark(accepted: bool, lang: str | None) -> str:
    return (f'<span class="mark acc">{html.escape(tr("draft.mark_accept", lang))}</span>' if accepted
            else f'<span class="mark rej">{html.escape(tr("draft.mark_reject", lang))}</span>')


def _empty(key: str, lang: str | None, cls: str = "methodtable") -> str:
    return f'<div class="{cls} empty">{html.escape(tr(key, lang))}</div>'


def mentored_table_html(record: IterationRecord | None, lang: str | None = None) -> str:
    """Per examined draft position: rule, strict vs mentored threshold, the coin, alphas and KLs."""
    info = MentoredStep.of(record)
    if info is None or not info.positions:
        return _empty("m.mentored_empty", lang)
    draft = {d.position: d for d in record.draft}
    rows = []
    for r in info.positions:
        d = draft.get(r.position)
        rule = r.rule or "?"
        verdict = _mark(d is not None and d.accepted, lang)
        token = f'<span class="chip chip-{ACCEPTED if d is not None and d.accepted else REJECTED}">{token_html(d.text)}</span>' if d else "—"
        rows.append(
            f'<tr><td>{r.position + 1}</td><td>{token}</td>'
            f'<td>{_num(d.coin if d else None)}</td><td>{_num(r.strict_threshold)}</td>'
            f'<td><b>{_num(r.threshold)}</b></td>'
            f'<td><span class="rule" title="{_attr(_rule_words(rule, lang))}">{html.escape(rule)}</span></td>'
            f'<td>{_num(r.strict_alpha)}</td><td><b>{_num(r.alpha)}</b></td>'
            f'<td>{_num(r.kl_draft)}</td><td><b>{_num(r.kl_to_target)}</b></td><td>{verdict}</td></tr>'
        )
    bound = _num(info.kl_bound, 3)
    used = sorted({r.rule for r in info.positions})
    legend = "".join(f"<li><b>{html.escape(u)}</b>: {html.escape(_rule_words(u, lang))}</li>" for u in used)
    head = "".join(f"<th>{html.escape(tr(f'm.mentored_col.{c}', lang))}</th>"
                   for c in ("token", "coin", "strict", "mentored", "rule", "strict_alpha", "mentored_alpha"))
    caption = html.escape(tr("m.mentored_caption", lang, i=record.iteration + 1, bound=bound))
    return (
        f'<div class="methodtable"><div class="tablewrap"><table class="drafttable">'
        f"<caption>{caption}</caption>"
        f"<thead><tr><th>#</th>{head}<th>KL(p‖q)</th><th>{html.escape(tr('m.mentored_col.kl_out', lang))}</th>"
        f'<th>{html.escape(tr("draft.col_verdict", lang))}</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
        f'<ul class="rules">{legend}</ul></div>'
    )


def chosen_path(record: IterationRecord, tokens) -> set[int]:
    """Tree node indices of the beam whose tokens are `tokens` (root to leaf), empty if none matches."""
    if not tokens or not record.tree:
        return set()
    nodes = {n.index: n for n in record.tree}
    for leaf in (n for n in record.tree if n.depth == len(tokens)):
        path, n = [], leaf
        while n is not None and n.depth > 0:
            path.append(n)
            n = nodes.get(n.parent)
        if [x.token_id for x in reversed(path)] == list(tokens):
            return {x.index for x in path}
    return set()


def mjsd_table_html(record: IterationRecord | None, lang: str | None = None) -> str:
    """Every prefix of the chosen beam against tau, then the beam tree with its joint log q."""
    info = MjsdStep.of(record)
    if info is None:
        return _empty("m.mjsd_empty", lang)
    tau = info.tau
    eta = info.eta or 0
    rows = []
    for i, r in enumerate(info.prefixes):
        j = r.length or i + 1
        d = record.draft[j - 1] if 0 < j <= len(record.draft) else None
        kept = j <= eta
        token = f'<span class="chip chip-{ACCEPTED if kept else "none"}">{token_html(d.text)}</span>' if d else "—"
        ok = bool(r.passes)
        vs = (f'<span class="mark acc">{html.escape(tr("m.passes", lang))}</span>' if ok
              else f'<span class="mark rej">{html.escape(tr("m.fails", lang))}</span>')
        rows.append(
            f'<tr class="{"acc" if kept else ""}"><td>{j}</td><td>{token}</td><td>{_num(r.log_q)}</td>'
            f'<td>{_num(r.log_p)}</td><td><b>{_num(r.ratio)}</b></td>'
            f'<td>{vs}</td>'
            f'<td>{html.escape(tr("rule.kept", lang)) if kept else ""}</td></tr>'
        )
    table = (
        '<div class="tablewrap"><table class="drafttable">'
        f"<caption>{html.escape(tr('m.mjsd_caption', lang, tau=_num(tau, 3), eta=eta))}</caption>"
        f"<thead><tr><th>j</th><th>{html.escape(tr('m.mjsd_col.token', lang))}</th><th>log q(x₁..ⱼ)</th>"
        f"<th>log p(x₁..ⱼ)</th><th>{html.escape(tr('m.mjsd_col.ratio', lang))}</th>"
        f"<th>{html.escape(tr('m.mjsd_col.vs', lang))}</th><th></th></tr></thead>"
        f'<tbody>{"".join(rows)}</tbody></table></div>'
    ) if rows else f"<p>{html.escape(tr('m.no_draft', lang))}</p>"
    beams = "?" if info.beams is None else info.beams
    tree = (f'<p class="note">{html.escape(tr("m.mjsd_beams", lang, beams=beams))}</p>'
            + tree_html(record, chosen_path(record, info.chosen_beam), lang=lang))
    return f'<div class="methodtable">{table}{tree}</div>'


# how PPD's tree size was chosen (as the engine records it) -> explainer.m.ppd_chosen.<key>
CHOSEN_BY = {"flag": "flag", "hardware-aware (tuned)": "tuned"}


def device_words(device: str | None, lang: str | None = None) -> str:
    """A tuning's device key ("cpu:x86_64:x86_64:2threads:bfloat16", "cuda:NVIDIA L4:float16") in words."""
    parts = str(device or "").split(":")
    if parts[0] == "cuda":
        return (tr("m.device.gpu_named", lang, name=parts[1]) if len(parts) > 1 and parts[1]
                else tr("m.device.gpu", lang))
    if parts[0] == "cpu":
        threads = next((p.removesuffix("threads") for p in parts if p.endswith("threads")), "")
        if not threads.isdigit():
            return tr("m.device.cpu", lang)
        return tr("m.device.cpu_one_thread" if threads == "1" else "m.device.cpu_threads", lang, threads=threads)
    return tr("m.device.other", lang)


def ppd_tuning(records: list[IterationRecord] | None) -> tuple[bool, dict | None]:
    """The latest hardware-aware tuning a run's records carry (the engine puts it on the first PPD
    record only): (found, curves). found False: no record carries the key (an older trace);
    curves None: the run's device was not tuned."""
    for r in reversed(records or []):
        info = PPDStep.of(r)
        if info is not None and info.carries_tuning:
            curves = info.tuning
            return True, curves if curves and curves.get("n") else None
    return False, None


def ppd_status_html(record: IterationRecord | None, tuning_found: bool = False, tuning: dict | None = None,
                    lang: str | None = None) -> str:
    """The PPD panel's headline block: the verification rule with a lossless / LOSSY badge, whether the
    prompt embeddings are trained, the tree size and how it was chosen, the hardware-aware tuning."""
    info = PPDStep.of(record)
    if info is None:
        return _empty("m.ppd_empty", lang, "ppdstatus")
    lines = []
    if ppd_lossy(record):
        eps, delta = info.typical_epsilon, info.typical_delta
        lines.append(f'<div class="ppdline"><span class="badge lossy" title="{_attr(tr("m.ppd_lossy_tip", lang))}">'
                     f'{html.escape(tr("m.ppd_lossy_badge", lang))}</span> '
                     f'{tr("m.ppd_typical", lang, eps=_num(eps, 3), delta=_num(delta, 3))}</div>')
    else:
        badge = html.escape(tr("m.ppd_lossless_badge", lang))
        lines.append(f'<div class="ppdline"><span class="badge lossless">{badge}</span> {tr("m.ppd_exact", lang)}</div>')
    source = html.escape(str(info.embeddings or "unknown"))
    if info.trained_embeddings:
        lines.append(f'<div class="ppdline">{tr("m.ppd_trained", lang)}</div>')
    else:
        source = source.removeprefix("untrained: ").removeprefix("untrained")
        how = tr("m.ppd_initialised", lang, source=source) if source else tr("m.ppd_not_trained", lang)
        lines.append(f'<div class="ppdline warnbox" role="alert">{tr("m.ppd_untrained", lang, how=how)}</div>')
    size, how = info.tree_size, str(info.tree_size_chosen_by or "?")
    chosen_by = tr(f"m.ppd_chosen.{CHOSEN_BY[how]}", lang) if how in CHOSEN_BY else how
    lines.append('<div class="ppdline">' + tr(
        "m.ppd_size", lang, n=html.escape(str(size)), how=html.escape(chosen_by), candidates=info.n_candidates or 0,
        prompts=info.n_prompt_inputs or 0, m=html.escape(str(info.prompt_tokens)), ept=html.escape(str(info.ept)))
        + "</div>")
    if tuning:
        chosen = tuning.get("chosen")
        extra = ""
        if tuning.get("embeddings") and tuning.get("embeddings") != info.embeddings:
            extra = tr("m.ppd_other_embeddings", lang)
        device = html.escape(device_words(tuning.get("device"), lang))
        tuned = tr("m.ppd_tuned", lang, device=device, n=html.escape(str(chosen)), extra=extra)
        lines.append(f'<div class="ppdline">{tuned}</div>')
    else:
        why = tr("m.ppd_not_tuned" if tuning_found else "m.ppd_no_tuning_data", lang)
        lines.append(f'<div class="ppdline notuned">{html.escape(tr("m.ppd_size_why", lang, why=why))}</div>')
    return f'<div class="ppdstatus">{"".join(lines)}</div>'


def ppd_path_html(record: IterationRecord | None, lang: str | None = None) -> str:
    """The path verification walked: the accepted candidates, then the first rejected one."""
    info = PPDStep.of(record)
    if info is None:
        return _empty("m.ppd_empty", lang)
    if not record.draft:
        final = _final_token(record)
        tok = f'<span class="chip chip-{final.kind}">{token_html(final.text)}</span>' if final else "—"
        why = tr("m.ppd_first_step" if record.iteration == 0 else "m.ppd_no_prompts", lang)
        return f"<p>{tr('m.ppd_no_candidates', lang, why=html.escape(why), token=tok)}</p>"
    lossy = ppd_lossy(record)
    rows = []
    for d in record.draft:
        if lossy:
            rule = f"{fmt(d.p)} {'&gt;' if d.accepted else '≤'} {fmt(d.threshold)}"
        else:
            top = ppd_argmax(d)
            rule = (f'<span class="chip chip-target">{token_html(top.text)}</span> '
                    f"{'=' if top.token_id == d.token_id else '≠'} x") if top is not None else "—"
        token = f'<span class="chip chip-{ACCEPTED if d.accepted else REJECTED}">{token_html(d.text)}</span>'
        rows.append(f'<tr class="{"acc" if d.accepted else "rej"}"><td>{d.position + 1}</td><td>{token}</td>'
                    f"<td>{fmt(d.q)}</td><td>{fmt(d.p)}</td><td>{rule}</td><td>{_mark(d.accepted, lang)}</td></tr>")
    head = tr("m.ppd_col.typical" if lossy else "m.ppd_col.argmax", lang)
    final = _final_token(record)
    tail = ""
    if final is not None:
        chip = f'<span class="chip chip-{final.kind}">{token_html(final.text)}</span>'
        tail = f"<p>{tr('m.ppd_then', lang, token=chip, n=len(record.emitted))}</p>"
    missing = ("" if any(d.accepted is False for d in record.draft)
               else f"<p>{html.escape(tr('m.ppd_all_accepted', lang))}</p>")
    cols = "".join(f"<th>{html.escape(tr(f'm.ppd_col.{c}', lang))}</th>" for c in ("depth", "candidate", "q", "p"))
    return (
        '<div class="tablewrap"><table class="drafttable">'
        f"<caption>{html.escape(tr('m.ppd_path_caption', lang, i=record.iteration + 1))}</caption>"
        f"<thead><tr>{cols}<th>{head}</th><th>{html.escape(tr('draft.col_verdict', lang))}</th></tr></thead>"
        f'<tbody>{"".join(rows)}</tbody></table></div>{missing}{tail}'
    )


def ppd_table_html(record: IterationRecord | None, lang: str | None = None) -> str:
    """The PPD panel's details: the verification path table, then the tree with its legend."""
    if PPDStep.of(record) is None:
        return _empty("m.ppd_empty", lang)
    tree = f'<p class="note">{html.escape(tr("m.ppd_tree_note", lang))}</p>' + tree_html(record, lang=lang)
    return f'<div class="methodtable">{ppd_path_html(record, lang)}{tree}</div>'


def _plain(value, lang: str | None = None) -> str:
    """One field's value in words: numbers short, booleans yes / no, lists and nested data spelled out,
    a missing value as a dash (never a Python repr)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return tr("m.yes" if value else "m.no", lang)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, dict):
        return "; ".join(f"{str(k).replace('_', ' ')}: {_plain(v)}" for k, v in value.items()) or "—"
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value) or "—"
    if dataclasses.is_dataclass(value):
        return _plain({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    return str(value)


def fields_table_html(record: IterationRecord | None, data, lang: str | None = None) -> str:
    """A method's own trace data of one iteration (a `StepData`), every field as one row: the panel of a
    method the app has no panel for."""
    if record is None or data is None:
        return _empty("m.fields_empty", lang)
    rows = "".join(f'<tr><td>{html.escape(f.name.replace("_", " "))}</td>'
                   f'<td>{html.escape(_plain(getattr(data, f.name), lang))}</td></tr>'
                   for f in dataclasses.fields(data))
    return (f'<div class="methodtable"><div class="tablewrap"><table class="drafttable">'
            f"<caption>{html.escape(tr('m.fields_caption', lang, i=record.iteration + 1))}</caption>"
            f"<thead><tr><th>{html.escape(tr('m.field', lang))}</th><th>{html.escape(tr('m.value', lang))}</th></tr>"
            f"</thead><tbody>{rows}</tbody></table></div></div>")
