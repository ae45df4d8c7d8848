"""Trace records -> HTML: token chips, the draft row, the draft tree, run statistics, captions.

Token text and attributes are escaped by `html_text`. Colours are Okabe-Ito (colour-blind safe)
and each kind also differs in border style, so the chips stay distinguishable without colour.
The method panels' HTML is in `render_methods.py`; the rules in words in `rules_text.py`.
"""

from __future__ import annotations

import html
from collections import defaultdict

from decoding.trace.source import COPY_KINDS
from decoding.drafters.hybrid import HYBRID_LOOKUP_TOKENS
from decoding.trace.metrics import RunCounts
from decoding.methods.ppd.generator import PPDStep
from decoding.methods.registry import method_view
from decoding.methods.speculative import ChainStep
from decoding.trace.record import ACCEPTED, BONUS, CORRECTION, TARGET, Candidate, IterationRecord, RunSummary

from .html_text import attr as _attr, coin_bar, fmt, special_name, token_html, visible
from .i18n import t as _i18n
from .rules_text import (candidates, greedy_rule, mjsd_prefix, ppd_argmax, ppd_caption, ppd_lossy, ppd_rule_text,
                         threshold_label, tree_drafted)

REJECTED = "rejected"


def tr(key: str, lang: str | None = None, **params) -> str:
    """The Explainer's text `explainer.<key>` in `lang` (None: the language of the event being handled,
    `i18n.current()`)."""
    return _i18n("explainer." + key, lang, **params)

# kind -> (label for the legend, Okabe-Ito colour, short description), in English; `chip_kind` gives
# the label and description in a language (catalog keys explainer.chip.<kind>.label and .desc)
CHIP_KINDS = {
    ACCEPTED: ("accepted draft", "#009E73", "a draft token the target accepted"),
    REJECTED: ("rejected draft", "#D55E00", "a draft token the target rejected (struck, not part of the text)"),
    CORRECTION: ("correction", "#E69F00", "drawn from the residual norm(max(0, p - q)) after a rejection"),
    BONUS: ("bonus", "#0072B2", "all drafts accepted: one extra token drawn from p for free"),
    TARGET: ("target", "#999999", "plain decoding: drawn from p, one target call per token"),
}



def chip_kind(kind: str, lang: str | None = None) -> tuple[str, str]:
    """(label, description) of a chip kind in `lang`."""
    return tr(f"chip.{kind}.label", lang), tr(f"chip.{kind}.desc", lang)


MAX_TREE_NODES = 300

# Why a run stopped (the engine's stop_reason), in words: catalog keys explainer.stop.<reason>
STOP_REASONS = ("max_new_tokens", "eos", "context", "stopped")


def stop_words(reason: str | None, lang: str | None = None) -> str:
    if reason in STOP_REASONS:
        return tr(f"stop.{reason}", lang)
    return "—" if not reason else str(reason).replace("_", " ")


def special_line(text: str, lang: str | None = None) -> list[str]:
    """A tooltip line for a special token (empty for ordinary text)."""
    name = special_name(text)
    if name is None:
        return []
    if name.startswith("special:"):
        return [tr("tip.special_tokenizer", lang)]
    return [tr("tip.special_template", lang, name=name)]


def _lookup(cands: list[Candidate] | None, token_id: int) -> Candidate | None:
    for c in cands or []:
        if c.token_id == token_id:
            return c
    return None


def legend_html(lang: str | None = None) -> str:
    """The chip kinds, each drawn as its chip and named in words (colour is never the only cue)."""
    items = "".join(
        f'<span class="chip chip-{kind}" role="listitem" aria-label="{_attr(label + ": " + desc)}" '
        f'title="{_attr(desc)}">{html.escape(label)}</span>'
        for kind, (label, desc) in ((kind, chip_kind(kind, lang)) for kind in CHIP_KINDS)
    )
    label, desc = tr("chip.copied.label", lang), tr("chip.copied.desc", lang)
    copied = (f'<span class="chip chip-accepted from-lookup" role="listitem" title="{_attr(desc)}" '
              f'aria-label="{_attr(label + ": " + desc)}">{html.escape(label)}</span>')
    return f'<div class="legend" role="list" aria-label="{_attr(tr("chip.legend", lang))}">{items}{copied}</div>'


def _chip(text: str, kind: str, tip: str, current: bool = False, source: str | None = None) -> str:
    cls = f"chip chip-{kind}" + (" cur" if current else "") + (f" from-{source}" if source in COPY_KINDS else "")
    # tabindex -1: a tap focuses the chip and opens its tooltip on a phone, but Tab does not stop at every
    # chip (the list as a whole is one tab stop, `chips_html`); a screen reader reads each item's label
    return (f'<span class="{cls}" role="listitem" tabindex="-1" data-tip="{_attr(tip)}" aria-label="{_attr(tip)}">'
            f"{token_html(text)}</span>")


SOURCES = ("lookup", "corpus", "model")  # where a draft token came from: explainer.source.<source>
MATCHED = ("lookup", "corpus")  # ... and how much matched: explainer.source.<source>_matched


def _last_tokens(n: int | None, lang: str | None = None) -> str:
    """ "the last 3 tokens", or "the last tokens" where the trace does not say how many."""
    return tr("draft.last_n_tokens", lang, n=n) if n else tr("draft.last_tokens", lang)


def drafted_note(record: IterationRecord, lang: str | None = None) -> str:
    """Why an iteration drafted more tokens than γ (the hybrid's and prompt lookup's copies), in words;
    "" when it drafted at most γ."""
    k, gamma = len(record.draft), record.gamma
    if not gamma or k <= gamma:
        return ""
    chain = ChainStep.of(record)
    if chain is not None and chain.source == "model" and chain.copied:
        return tr("draft.more_model_copy", lang, k=k, gamma=gamma, model=k - chain.copied, copied=chain.copied)
    if chain is not None and chain.source in ("lookup", "corpus"):
        return tr("draft.more_copy", lang, k=k, gamma=gamma, limit=HYBRID_LOOKUP_TOKENS)
    return tr("draft.more_other", lang, k=k, gamma=gamma)


def source_text(record: IterationRecord, d, lang: str | None = None) -> str | None:
    """Where a draft token came from, in words (None where the trace does not say)."""
    if d.source not in SOURCES:
        return None
    chain = ChainStep.of(record)
    match = chain.match_length if chain is not None and d.source in MATCHED and d.source == chain.source else None
    return tr(f"source.{d.source}", lang) + (tr(f"source.{d.source}_matched", lang, n=match) if match else "")


def _draft_tip(d, kind_label: str, record: IterationRecord, lang: str | None = None) -> str:
    lines = [tr("tip.draft_head", lang, kind=kind_label, token=repr(visible(d.text)), iteration=record.iteration + 1,
                position=d.position + 1)]
    lines += special_line(d.text, lang)
    source = source_text(record, d, lang)
    if source:
        lines.append(source)
    joint = mjsd_prefix(record, d.position)
    if candidates(record):
        lines.append(tr("tip.pq_ppd", lang, p=fmt(d.p), q=fmt(d.q)))
        lines.append(ppd_rule_text(record, d, lang))
    elif joint is not None:
        prefix, tau = joint
        lines.append(f"p(x) = {fmt(d.p)}   q(x) = {fmt(d.q)}")
        lines.append(tr("tip.joint_passes" if prefix.passes else "tip.joint_fails", lang, ratio=fmt(prefix.ratio),
                        tau=fmt(tau)))
        lines.append(tr("tip.mjsd_no_coin", lang))
    elif d.coin is None:  # greedy rule
        lines.append(tr("tip.pq_raw", lang, p=fmt(d.p), q=fmt(d.q)))
        lines.append(tr("tip.greedy_rule", lang, threshold=fmt(d.threshold)))
    else:
        lines.append(f"p(x) = {fmt(d.p)}   q(x) = {fmt(d.q)}")
        verdict = "≤" if d.accepted else ">"
        lines.append(tr("tip.coin_rule", lang, coin=fmt(d.coin), verdict=verdict, threshold=fmt(d.threshold)))
    lines.append("→ " + tr("tip.accepted" if d.accepted else "tip.rejected", lang))
    return "\n".join(lines)


def _final_tip(token, record: IterationRecord, lang: str | None = None) -> str:
    label = chip_kind(token.kind, lang)[0]
    lines = [tr("tip.final_head", lang, kind=label, token=repr(visible(token.text)), iteration=record.iteration + 1)]
    lines += special_line(token.text, lang)
    if token.kind == CORRECTION and record.residual is None:
        c = _lookup(record.next_top, token.token_id)
        lines.append(tr("tip.from_target_no_residual", lang))
        lines.append(f"p(x) = {fmt(c.p if c else None)}   q(x) = —")
    elif token.kind == CORRECTION:
        rejected = next((d for d in record.draft if d.accepted is False), None)
        r = _lookup(record.residual.top if record.residual else None, token.token_id)
        pq = _lookup(rejected.top if rejected else None, token.token_id)
        lines.append(tr("tip.from_residual", lang))
        lines.append(tr("tip.residual_value", lang, r=fmt(r.p if r else None)))
        lines.append(f"p(x) = {fmt(pq.p if pq else None)}   q(x) = {fmt(pq.q if pq else None)}")
        if record.residual and record.residual.fell_back_to_p:
            lines.append(tr("tip.residual_fell_back", lang))
    else:
        c = _lookup(record.next_top, token.token_id)
        lines.append(tr("tip.from_p_bonus" if token.kind == BONUS else "tip.from_p", lang))
        lines.append(f"p(x) = {fmt(c.p if c else None)}   q(x) = —")
    lines.append(tr("tip.no_coin", lang))
    return "\n".join(lines)


def record_chips(record: IterationRecord, current: bool = False, lang: str | None = None) -> list[str]:
    """The chips one iteration adds: accepted drafts, the struck rejected draft, the final token."""
    chips = []
    accepted_drafts = [d for d in record.draft if d.accepted]
    rejected = next((d for d in record.draft if d.accepted is False), None)
    n_acc = 0
    accepted_label, rejected_label = tr("tip.accepted_draft", lang), tr("tip.rejected_draft", lang)
    for token in record.emitted:
        if token.kind == ACCEPTED:
            d = accepted_drafts[n_acc] if n_acc < len(accepted_drafts) else None
            n_acc += 1
            tip = _draft_tip(d, accepted_label, record, lang) if d else accepted_label
            chips.append(_chip(token.text, ACCEPTED, tip, current, d.source if d else None))
        else:
            if token.kind == CORRECTION and rejected is not None:
                chips.append(_chip(rejected.text, REJECTED, _draft_tip(rejected, rejected_label, record, lang), current,
                                   rejected.source))
                rejected = None
            kind = token.kind if token.kind in CHIP_KINDS else TARGET
            chips.append(_chip(token.text, kind, _final_tip(token, record, lang), current))
    if rejected is not None:  # the run stopped before the correction token was kept
        chips.append(_chip(rejected.text, REJECTED, _draft_tip(rejected, rejected_label, record, lang), current))
    return chips


def chips_html(records: list[IterationRecord], upto: int | None = None, prompt: str | None = None,
               lang: str | None = None) -> str:
    """The text so far (through iteration `upto`, default: the last) as token chips."""
    if not records:
        return f'<div class="chips empty">{html.escape(tr("chips.empty", lang))}</div>'
    upto = len(records) - 1 if upto is None else max(0, min(upto, len(records) - 1))
    parts = []
    if prompt:
        parts.append(f'<span class="prompt" role="listitem" aria-label="{_attr(tr("chips.prompt", lang))}">'
                     f'{token_html(prompt)}</span>')
    for i, record in enumerate(records[: upto + 1]):
        parts.extend(record_chips(record, current=(i == upto), lang=lang))
    return (f'<div class="chips" role="list" tabindex="0" aria-label="{_attr(tr("chips.aria", lang))}">'
            f'{"".join(parts)}</div>')


def _origin(chain: ChainStep, record: IterationRecord, lang: str | None) -> str:
    """Where this iteration's draft came from (HTML; the catalog texts hold <b> only)."""
    last = _last_tokens(chain.match_length, lang)
    origin = tr(f"draft.origin_{chain.source}", lang, last=last)
    if chain.source == "model" and chain.copied:
        origin += tr("draft.origin_continued", lang, last=last, copied=chain.copied)
    more = drafted_note(record, lang)
    return origin + "." + (f" {html.escape(more)}" if more else "")


def draft_row_html(record: IterationRecord | None, lang: str | None = None) -> str:
    if record is None:
        return f'<div class="draftrow empty">{html.escape(tr("draft.empty", lang))}</div>'
    words = tr("draft.head", lang, iteration=record.iteration + 1, context=record.context_length, gamma=record.gamma)
    head = f'<div class="iterhead">{html.escape(words)}</div>'
    if not record.draft:
        if method_view(record.method).baseline or record.gamma == 0:
            why = tr("draft.plain", lang)
        else:
            why = tr("draft.nothing", lang)
        final = "".join(record_chips(record, lang=lang))
        return (f'<div class="draftrow">{head}<p>{html.escape(why)}</p><div class="chips" role="list" '
                f'aria-label="{_attr(tr("draft.token_aria", lang))}">{final}</div></div>')
    greedy = greedy_rule(record) and mjsd_prefix(record, 0) is None and not candidates(record)
    chain = ChainStep.of(record)
    if chain is not None and chain.source in SOURCES:
        head += f'<p class="origin from-{chain.source}">{_origin(chain, record, lang)}</p>'
    tree = tree_drafted(record)
    if tree is not None:
        head += f'<p class="origin">{tr("draft.tree_origin", lang, n=tree)}</p>'
    rows = []
    marks = {None: ("none", tr("draft.mark_none", lang)), True: ("acc", tr("draft.mark_accept", lang)),
             False: ("rej", tr("draft.mark_reject", lang))}
    for d in record.draft:
        ratio = (d.p / d.q) if d.q else None
        cls, word = marks[d.accepted]
        mark = f'<span class="mark {cls}">{html.escape(word)}</span>'
        joint = mjsd_prefix(record, d.position)
        coin = (fmt(d.coin) if d.coin is not None
                else (html.escape(tr("draft.greedy", lang)) if d.accepted is not None and joint is None else "—"))
        threshold = fmt(d.threshold)
        if candidates(record):
            coin = "—"
            if not ppd_lossy(record):
                top = ppd_argmax(d)
                threshold = html.escape(f"argmax {visible(top.text)!r}", quote=False) if top is not None else "—"
        elif joint is not None:
            threshold = f"{fmt(joint[0].ratio)} vs τ = {fmt(joint[1])}"
        rows.append(
            f'<tr class="{cls}"><td>{d.position + 1}</td>'
            f'<td><span class="chip chip-{ACCEPTED if d.accepted else (REJECTED if d.accepted is False else "none")}">'
            f'{token_html(d.text)}</span></td>'
            f'<td>{fmt(d.q)}</td><td>{fmt(d.p)}</td><td class="opt">{fmt(ratio, 2)}</td>'
            f'<td>{coin}</td><td>{threshold}</td>'
            f'<td class="opt">{coin_bar(d.coin, d.threshold, d.accepted, lang)}</td>'
            f"<td>{mark}</td></tr>"
        )
    thr = html.escape(threshold_label(record, lang))
    col = {k: html.escape(tr(f"draft.col_{k}", lang)) for k in ("token", "coin", "u_vs", "verdict")}
    table = (
        f'<table class="drafttable"><caption>{html.escape(tr("draft.caption", lang))}</caption>'
        f'<thead><tr><th>#</th><th>{col["token"]}</th><th>q(x)</th><th>{"p_raw(x)" if greedy else "p(x)"}</th>'
        f'<th class="opt">p/q</th><th>{col["coin"]}</th><th>{thr}</th><th class="opt">{col["u_vs"]}</th>'
        f'<th>{col["verdict"]}</th></tr></thead>'
        f'<tbody>{"".join(rows)}</tbody></table>'
    )
    final = [t for t in record.emitted if t.kind in (CORRECTION, BONUS)]
    if final:
        t = final[0]
        how = tr(("draft.then_tree_greedy" if greedy else "draft.then_tree_residual") if t.kind == CORRECTION
                 and tree is not None else "draft.then_tree_bonus" if tree is not None
                 else "draft.then_residual" if t.kind == CORRECTION and record.residual is not None
                 else "draft.then_target" if t.kind == CORRECTION else "draft.then_bonus", lang)
        chip = f'<span class="chip chip-{t.kind}">{token_html(t.text)}</span>'
        tail = f'<p>{html.escape(tr("draft.then", lang))} {chip} — {html.escape(how)}.</p>'
    else:
        tail = f'<p>{html.escape(tr("draft.ended_inside", lang))}</p>'
    summary = (tr("draft.summary", lang, accepted=record.accepted_length, drafted=len(record.draft),
                  emitted=len(record.emitted)) if tree is None else
               tr("draft.summary_tree", lang, accepted=record.accepted_length, n=tree, emitted=len(record.emitted)))
    summary = f'<p>{html.escape(summary)}</p>'
    return f'<div class="draftrow">{head}<div class="tablewrap">{table}</div>{tail}{summary}</div>'

# Legend of the draft tree, kind -> (label, Okabe-Ito colour, description), in English (in a language:
# explainer.tree.<kind>.label and .desc). As for the chips, each kind also has its own border style
# (assets/app.css), so the tree reads without colour too.
TREE_KINDS = {
    "root": ("root", "#000000", "the last committed token: the tree grows from it (solid black border)"),
    "candidate": ("candidate", "#0072B2", "a guessed token the target checks in this pass (solid blue border)"),
    "prompt": ("prompt token", "#CC79A7", "a prompt token: its top guess of a token further ahead, checked in "
                                         "a LATER step (dotted purple border, italic)"),
    "accepted": ("accepted path", "#009E73", "the candidates the target accepted (green, thick border)"),
    "rejected": ("rejected", "#D55E00", "checked by the target and not kept (dashed vermillion border)"),
}


def tree_legend_html(kinds=None, lang: str | None = None) -> str:
    """A small legend of the tree's node styles (all of TREE_KINDS, or only `kinds`)."""
    items = []
    for key in TREE_KINDS:
        if kinds is not None and key not in kinds:
            continue
        label, desc = tr(f"tree.{key}.label", lang), tr(f"tree.{key}.desc", lang)
        cls = {"accepted": "acc kind-candidate", "rejected": "rej kind-candidate", "prompt": "guess kind-prompt"}.get(
            key, f"kind-{key}")
        items.append(f'<span class="legenditem" title="{_attr(desc)}"><span class="node {cls}">{html.escape(label)}</span></span>')
    return (f'<div class="treelegend" role="note" aria-label="{_attr(tr("tree.legend", lang))}">'
            f'{"".join(items)}</div>')


def _prompt_chains(children, n) -> list[list]:
    """The chains of prompt tokens owned by node n: each starts at a prompt child of n and follows
    the prompt child of each prompt token (distance 1, 2, ... from its owner)."""
    chains = []
    for first in (k for k in children.get(n.index, []) if k.kind == "prompt"):
        chain, cur = [], first
        while cur is not None and len(chain) < 64:
            chain.append(cur)
            cur = next((k for k in children.get(cur.index, []) if k.kind == "prompt"), None)
        chains.append(chain)
    return chains


def tree_html(record: IterationRecord | None, chosen: set[int] | None = None, lang: str | None = None) -> str:
    """Render the record's draft-tree nodes generically (chain, beams, sparse trees); node indices
    in `chosen` (e.g. MJSD's chosen beam) get a thick outline.

    PPD trees (kinds root / candidate / prompt): a node's prompt tokens hang under it as one row
    (+2, +3, ...: which token ahead each one guesses), before its candidate children; a candidate
    is accepted (green), rejected (checked and not kept: its parent was accepted) or not reached."""
    if record is None or not record.tree:
        return f'<div class="tree empty">{html.escape(tr("tree.empty", lang))}</div>'
    nodes = {n.index: n for n in record.tree[:MAX_TREE_NODES]}
    children = defaultdict(list)
    roots = []
    for n in nodes.values():
        if n.parent in nodes:
            children[n.parent].append(n)
        else:
            roots.append(n)
    kinds = {n.kind for n in nodes.values()}
    ppd = "prompt" in kinds or "candidate" in kinds

    def state(n) -> tuple[str, str]:
        if n.kind == "candidate":
            if n.accepted:
                return "acc", tr("tree.state_candidate_accepted", lang)
            parent = nodes.get(n.parent)
            if parent is None or parent.accepted:
                return "rej", tr("tree.state_candidate_rejected", lang)
            return "skip", tr("tree.state_not_reached", lang)
        return ("acc", tr("tree.state_accepted", lang)) if n.accepted else ("rej", tr("tree.state_not_accepted", lang))

    def prompt_row(owner, chain) -> str:
        parts = []
        for k, p in enumerate(chain, start=1):
            tip = (tr("tree.prompt_tip", lang, k=k, owner=repr(visible(owner.text)), ahead=k + 1,
                      guess=repr(visible(p.text)))
                   + (tr("tree.probability", lang, p=fmt(p.score, 2)) if p.score is not None else "")
                   + tr("tree.prompt_seeds" if p.accepted else "tree.prompt_unused", lang))
            parts.append(f'<span class="node {"seed" if p.accepted else "guess"} kind-prompt" title="{_attr(tip)}">'
                         f'<span class="dist">+{k + 1}</span>{token_html(p.text)}</span>')
        seed = (f'<span class="seednote">{html.escape(tr("tree.seeds_next", lang))}</span>'
                if chain and chain[0].accepted else "")
        return (f'<li class="prow"><span class="plabel">{html.escape(tr("tree.prompt_tokens", lang))}</span> '
                f'{" ".join(parts)}{seed}</li>')

    def node(n, depth_guard=0):
        st, why = state(n)
        st += " chosen" if chosen and n.index in chosen else ""
        score = f' <span class="score">{fmt(n.score, 2)}</span>' if n.score is not None else ""
        if n.kind == "candidate":
            tip = (tr("tree.candidate_tip", lang, depth=n.depth)
                   + (tr("tree.guessed_with", lang, p=fmt(n.score, 2)) if n.score is not None else "") + f": {why}")
        elif n.kind == "root":
            tip = tr("tree.root_tip", lang, depth=n.depth)
        else:
            tip = tr("tree.node_tip", lang, depth=n.depth,
                     state=tr("tree.state_accepted" if n.accepted else "tree.state_not_accepted", lang))
        label = (
            f'<span class="node {st} kind-{_attr(n.kind)}" title="{_attr(tip)}">'
            f"{token_html(n.text)}</span>{score}"
        )
        rows = [prompt_row(n, chain) for chain in _prompt_chains(children, n)] if n.kind != "prompt" else []
        kids = [k for k in children.get(n.index, []) if k.kind != "prompt" or n.kind == "prompt"]
        if depth_guard < 200:
            rows += [f"<li>{node(k, depth_guard + 1)}</li>" for k in kids]
        if rows:
            label += "<ul>" + "".join(rows) + "</ul>"
        return label

    body = "".join(f"<li>{node(r)}</li>" for r in roots)
    more = (f"<p>{html.escape(tr('tree.more', lang, n=len(record.tree) - MAX_TREE_NODES))}</p>"
            if len(record.tree) > MAX_TREE_NODES else "")
    legend = tree_legend_html(lang=lang) if ppd else ""
    cls = "tree ppdtree" if ppd else "tree"
    return (f'<div class="{cls}" role="group" aria-label="{_attr(tr("tree.aria", lang))}">{legend}<ul>{body}</ul>'
            f'{more}</div>')


def stats_html(records: list[IterationRecord], upto: int | None = None, summary: RunSummary | None = None,
               models: str = "", note: str = "", lang: str | None = None) -> str:
    if not records:
        return f'<div class="stats">{html.escape(note) if note else html.escape(tr("stats.no_run", lang))}</div>'
    upto = len(records) - 1 if upto is None else max(0, min(upto, len(records) - 1))
    r = records[upto]
    counts = RunCounts.from_records(records[: upto + 1])
    mean_acc, tok_per_call, tps = counts.mean_accepted, counts.tokens_per_call, counts.tokens_per_second
    items = [
        (tr("stats.method", lang), r.method),
        (tr("stats.iteration", lang), tr("stats.of", lang, i=upto + 1, n=len(records))),
        (tr("stats.tokens", lang), str(r.generated)),
        (tr("stats.target_calls", lang), str(r.target_calls)),
        (tr("stats.tokens_per_call", lang), fmt(tok_per_call, 2)),
        (tr("stats.mean_accepted", lang), fmt(mean_acc, 2) if mean_acc is not None else "—"),
        (tr("stats.tokens_per_second", lang), fmt(tps, 1)),
    ]
    if r.finished or (summary is not None and upto == len(records) - 1):
        items.append((tr("stats.stopped_by", lang), stop_words(summary.stop_reason if summary else r.stop_reason,
                                                                 lang)))
    cells = "".join(f'<div class="stat"><span class="k">{html.escape(k)}</span><span class="v">{html.escape(v)}</span></div>' for k, v in items)
    extra = f'<div class="note">{html.escape(note)}</div>' if note else ""
    mdl = f'<div class="models">{html.escape(models)}</div>' if models else ""
    return f'<div class="stats" role="status">{mdl}<div class="statgrid">{cells}</div>{extra}</div>'


def text_so_far(records: list[IterationRecord], upto: int | None = None) -> str:
    """The plain text of the emitted tokens (concatenated token texts, as the CLI streams it), without
    special tokens (as the run's final text, decoded with skip_special_tokens)."""
    if not records:
        return ""
    upto = len(records) - 1 if upto is None else max(0, min(upto, len(records) - 1))
    return "".join(t.text for r in records[: upto + 1] for t in r.emitted if special_name(t.text) is None)


def caption(record: IterationRecord | None, lang: str | None = None) -> str:
    """One plain sentence saying what happened in an iteration (for the classroom)."""
    if record is None:
        return ""
    if candidates(record) and PPDStep.of(record) is not None:
        return ppd_caption(record, lang)
    i = record.iteration + 1
    if not record.draft:
        tok = record.emitted[0].text if record.emitted else ""
        return tr("caption.plain", lang, i=i, token=repr(visible(tok)))
    k = len(record.draft)
    rejected = next((d for d in record.draft if d.accepted is False), None)
    final = next((t for t in record.emitted if t.kind in (CORRECTION, BONUS)), None)
    tree = tree_drafted(record)
    s = (tr("caption.head", lang, i=i, k=k, accepted=record.accepted_length) if tree is None
         else tr("caption.head_tree", lang, i=i, n=tree, accepted=record.accepted_length))
    joint = mjsd_prefix(record, rejected.position) if rejected is not None else None
    if rejected is not None and tree is not None and joint is None:
        s += " " + tr("caption.rejected_tree", lang, position=rejected.position + 1, token=repr(visible(rejected.text)))
    elif joint is not None:  # MJSD: no coin, a joint-likelihood ratio against tau (its beams make a tree too)
        prefix, tau = joint
        s += " " + tr("caption.rejected_mjsd", lang, position=rejected.position + 1,
                      token=repr(visible(rejected.text)), ratio=fmt(prefix.ratio), tau=fmt(tau))
    elif rejected is not None:
        params = dict(position=rejected.position + 1, token=repr(visible(rejected.text)), p=fmt(rejected.p),
                      coin=fmt(rejected.coin), threshold=fmt(rejected.threshold))
        if rejected.coin is None:
            params.pop("coin")
            s += " " + tr("caption.rejected_greedy", lang, **params)
        else:
            params.pop("p")
            s += " " + tr("caption.rejected", lang, **params)
    if final is not None:  # MJSD draws its next token from p itself (lossy, no residual)
        key = "caption.bonus" if final.kind != CORRECTION else "caption.next_mjsd" if joint else "caption.correction"
        s += " " + tr(key, lang, token=repr(visible(final.text)))
    more = drafted_note(record, lang) if tree is None else ""
    if more:
        s += f" ({more})"
    return s
