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

from .html_text import attr as _attr, fmt, special_name, token_html, visible
from .rules_text import (candidates, greedy_rule, mjsd_prefix, ppd_argmax, ppd_caption, ppd_lossy, ppd_rule_text,
                         threshold_label, tree_drafted)

REJECTED = "rejected"

# kind -> (label for the legend, Okabe-Ito colour, short description)
CHIP_KINDS = {
    ACCEPTED: ("accepted draft", "#009E73", "a draft token the target accepted"),
    REJECTED: ("rejected draft", "#D55E00", "a draft token the target rejected (struck, not part of the text)"),
    CORRECTION: ("correction", "#E69F00", "drawn from the residual norm(max(0, p - q)) after a rejection"),
    BONUS: ("bonus", "#0072B2", "all drafts accepted: one extra token drawn from p for free"),
    TARGET: ("target", "#999999", "plain decoding: drawn from p, one target call per token"),
}

MAX_TREE_NODES = 300

# Why a run stopped (the engine's stop_reason), in words.
STOP_REASONS = {"max_new_tokens": "the token limit", "eos": "the model's end-of-text token",
                "context": "the model's longest context", "stopped": "Stop pressed"}


def stop_words(reason: str | None) -> str:
    return STOP_REASONS.get(reason or "", "—" if not reason else str(reason).replace("_", " "))


def special_line(text: str) -> list[str]:
    """A tooltip line for a special token (empty for ordinary text)."""
    name = special_name(text)
    if name is None:
        return []
    if name.startswith("special:"):
        return ["a special token of the tokenizer, not text a reader sees"]
    return [f"a special token of the chat template: it marks the {name}, it is not text a reader sees"]


def _lookup(cands: list[Candidate] | None, token_id: int) -> Candidate | None:
    for c in cands or []:
        if c.token_id == token_id:
            return c
    return None


def legend_html() -> str:
    """The chip kinds, each drawn as its chip and named in words (colour is never the only cue)."""
    items = "".join(
        f'<span class="chip chip-{kind}" role="listitem" aria-label="{_attr(label + ": " + desc)}" '
        f'title="{_attr(desc)}">{html.escape(label)}</span>'
        for kind, (label, _colour, desc) in CHIP_KINDS.items()
    )
    copied = ('<span class="chip chip-accepted from-lookup" role="listitem" title="a draft token copied from the '
              'context" aria-label="copied from the context: a draft token copied from the context">'
              "copied from the context</span>")
    return f'<div class="legend" role="list" aria-label="Legend of the token chips">{items}{copied}</div>'


def _chip(text: str, kind: str, tip: str, current: bool = False, source: str | None = None) -> str:
    cls = f"chip chip-{kind}" + (" cur" if current else "") + (f" from-{source}" if source in COPY_KINDS else "")
    # tabindex -1: a tap focuses the chip and opens its tooltip on a phone, but Tab does not stop at every
    # chip (the list as a whole is one tab stop, `chips_html`); a screen reader reads each item's label
    return (f'<span class="{cls}" role="listitem" tabindex="-1" data-tip="{_attr(tip)}" aria-label="{_attr(tip)}">'
            f"{token_html(text)}</span>")


SOURCES = {"lookup": "copied from the context (n-gram lookup: q is 1 on the copied token)",
           "corpus": "copied from the target's earlier answers to other prompts (q is 1 on the copied token)",
           "model": "proposed by the draft model"}
MATCHED = {"lookup": "; the last {} tokens matched an earlier span",
           "corpus": "; the last {} tokens appear in those answers"}


def _last_tokens(n: int | None) -> str:
    """ "the last 3 tokens", or "the last tokens" where the trace does not say how many."""
    return f"the last {n} tokens" if n else "the last tokens"


def drafted_note(record: IterationRecord) -> str:
    """Why an iteration drafted more tokens than γ (the hybrid's and prompt lookup's copies), in words;
    "" when it drafted at most γ."""
    k, gamma = len(record.draft), record.gamma
    if not gamma or k <= gamma:
        return ""
    chain = ChainStep.of(record)
    if chain is not None and chain.source == "model" and chain.copied:
        return (f"Drafted {k} with γ = {gamma}: the draft model's {k - chain.copied} tokens, then {chain.copied} "
                "copied from an earlier span (a copy is not limited to γ).")
    if chain is not None and chain.source in ("lookup", "corpus"):
        return (f"Drafted {k} with γ = {gamma}: a copy may run past γ (up to {HYBRID_LOOKUP_TOKENS} tokens), "
                "because where the text repeats, long copies are usually accepted whole.")
    return f"Drafted {k} with γ = {gamma}: this drafter may propose more than γ tokens."


def source_text(record: IterationRecord, d) -> str | None:
    """Where a draft token came from, in words (None where the trace does not say)."""
    if d.source not in SOURCES:
        return None
    chain = ChainStep.of(record)
    match = chain.match_length if chain is not None and d.source in MATCHED and d.source == chain.source else None
    return SOURCES[d.source] + (MATCHED[d.source].format(match) if match else "")


def _draft_tip(d, kind_label: str, record: IterationRecord) -> str:
    lines = [f"{kind_label} {visible(d.text)!r} (iteration {record.iteration + 1}, draft position {d.position + 1})"]
    lines += special_line(d.text)
    source = source_text(record, d)
    if source:
        lines.append(source)
    joint = mjsd_prefix(record, d.position)
    if candidates(record):
        lines.append(f"p(x) = {fmt(d.p)} (target)   q(x) = {fmt(d.q)} (the prompt token's guess probability)")
        lines.append(ppd_rule_text(record, d))
    elif joint is not None:
        prefix, tau = joint
        lines.append(f"p(x) = {fmt(d.p)}   q(x) = {fmt(d.q)}")
        lines.append(f"joint ratio min(1, p(x₁..ⱼ)/q(x₁..ⱼ)) = {fmt(prefix.ratio)} vs τ = {fmt(tau)}"
                     f" → {'passes' if prefix.passes else 'fails'}")
        lines.append("coin u = — (MJSD keeps the longest passing prefix, no coin)")
    elif d.coin is None:  # greedy rule
        lines.append(f"p(x) = {fmt(d.p)} (raw, before the argmax)   q(x) = {fmt(d.q)}")
        lines.append(f"coin u = — (greedy: no coin); accept iff p(x) ≥ threshold l·max p = {fmt(d.threshold)}")
    else:
        lines.append(f"p(x) = {fmt(d.p)}   q(x) = {fmt(d.q)}")
        verdict = "≤" if d.accepted else ">"
        lines.append(f"coin u = {fmt(d.coin)} {verdict} threshold min(1, p/(l·q)) = {fmt(d.threshold)}")
    lines.append("→ accepted" if d.accepted else "→ rejected")
    return "\n".join(lines)


def _final_tip(token, record: IterationRecord) -> str:
    label = CHIP_KINDS[token.kind][0]
    lines = [f"{label} token {visible(token.text)!r} (iteration {record.iteration + 1})"]
    lines += special_line(token.text)
    if token.kind == CORRECTION and record.residual is None:
        c = _lookup(record.next_top, token.token_id)
        lines.append("drawn from the target p after the kept prefix (this method has no residual)")
        lines.append(f"p(x) = {fmt(c.p if c else None)}   q(x) = —")
    elif token.kind == CORRECTION:
        rejected = next((d for d in record.draft if d.accepted is False), None)
        r = _lookup(record.residual.top if record.residual else None, token.token_id)
        pq = _lookup(rejected.top if rejected else None, token.token_id)
        lines.append("drawn from the residual norm(max(0, p − q)) at the rejected position")
        lines.append(f"residual r(x) = {fmt(r.p if r else None)}")
        lines.append(f"p(x) = {fmt(pq.p if pq else None)}   q(x) = {fmt(pq.q if pq else None)}")
        if record.residual and record.residual.fell_back_to_p:
            lines.append("(p ≈ q there: residual mass ~0, so it was drawn from p)")
    else:
        c = _lookup(record.next_top, token.token_id)
        source = "p after all drafts were accepted" if token.kind == BONUS else "p"
        lines.append(f"drawn from {source}")
        lines.append(f"p(x) = {fmt(c.p if c else None)}   q(x) = —")
    lines.append("coin u = —   threshold = — (not a draft token: no coin)")
    return "\n".join(lines)


def record_chips(record: IterationRecord, current: bool = False) -> list[str]:
    """The chips one iteration adds: accepted drafts, the struck rejected draft, the final token."""
    chips = []
    accepted_drafts = [d for d in record.draft if d.accepted]
    rejected = next((d for d in record.draft if d.accepted is False), None)
    n_acc = 0
    for token in record.emitted:
        if token.kind == ACCEPTED:
            d = accepted_drafts[n_acc] if n_acc < len(accepted_drafts) else None
            n_acc += 1
            tip = _draft_tip(d, "accepted draft token", record) if d else "accepted draft token"
            chips.append(_chip(token.text, ACCEPTED, tip, current, d.source if d else None))
        else:
            if token.kind == CORRECTION and rejected is not None:
                chips.append(_chip(rejected.text, REJECTED, _draft_tip(rejected, "rejected draft token", record), current,
                                   rejected.source))
                rejected = None
            kind = token.kind if token.kind in CHIP_KINDS else TARGET
            chips.append(_chip(token.text, kind, _final_tip(token, record), current))
    if rejected is not None:  # the run stopped before the correction token was kept
        chips.append(_chip(rejected.text, REJECTED, _draft_tip(rejected, "rejected draft token", record), current))
    return chips


def chips_html(records: list[IterationRecord], upto: int | None = None, prompt: str | None = None) -> str:
    """The text so far (through iteration `upto`, default: the last) as token chips."""
    if not records:
        return '<div class="chips empty">No run yet: press Run or Step, or open an example trace.</div>'
    upto = len(records) - 1 if upto is None else max(0, min(upto, len(records) - 1))
    parts = []
    if prompt:
        parts.append(f'<span class="prompt" role="listitem" aria-label="prompt">{token_html(prompt)}</span>')
    for i, record in enumerate(records[: upto + 1]):
        parts.extend(record_chips(record, current=(i == upto)))
    return (f'<div class="chips" role="list" tabindex="0" aria-label="Generated tokens as chips: hover or tap a chip '
            f'for its figures">{"".join(parts)}</div>')


def coin_bar(coin: float | None, threshold: float | None, accepted: bool | None) -> str:
    if coin is None or threshold is None:
        return ""
    t = max(0.0, min(1.0, threshold)) * 100
    u = max(0.0, min(1.0, coin)) * 100
    state = "acc" if accepted else "rej"
    return (
        f'<div class="coinbar {state}" role="img" aria-label="coin u={fmt(coin)} against threshold {fmt(threshold)}">'
        f'<div class="thr" style="width:{t:.1f}%"></div><div class="u" style="left:{u:.1f}%"></div></div>'
    )


def draft_row_html(record: IterationRecord | None) -> str:
    if record is None:
        return '<div class="draftrow empty">No iteration to show yet.</div>'
    head = (f'<div class="iterhead">Iteration {record.iteration + 1} · context {record.context_length} tokens · '
            f'γ = {record.gamma}</div>')
    if not record.draft:
        if method_view(record.method).baseline or record.gamma == 0:
            why = "Plain (autoregressive) decoding: no draft, one target call gives one token."
        else:
            why = "The drafter proposed nothing this time (e.g. prompt lookup found no matching n-gram), so the target produced one token itself."
        final = "".join(record_chips(record))
        return (f'<div class="draftrow">{head}<p>{why}</p><div class="chips" role="list" aria-label="The token of '
                f'this iteration">{final}</div></div>')
    greedy = greedy_rule(record) and mjsd_prefix(record, 0) is None and not candidates(record)
    chain = ChainStep.of(record)
    if chain is not None and chain.source in SOURCES:
        last = _last_tokens(chain.match_length)
        origin = {"lookup": f"<b>Copied from the context</b>: {last} repeat an "
                            "earlier span, so the drafter proposed what followed it (q = 1 on each copied token)",
                  "corpus": f"<b>Copied from the target's earlier answers</b>: {last} appear in its answers to "
                            "other prompts, so the drafter proposed what most often followed them there "
                            "(q = 1 on each copied token)"}.get(chain.source, "<b>Proposed by the draft model</b>")
        if chain.source == "model" and chain.copied:
            origin += (f", then <b>continued by a copy</b>: with its tokens {last} "
                       f"repeat an earlier span, so the {chain.copied} tokens that followed it were added "
                       "(q = 1 on each)")
        more = drafted_note(record)
        origin += "." + (f" {html.escape(more)}" if more else "")
        head += f'<p class="origin from-{chain.source}">{origin}</p>'
    tree = tree_drafted(record)
    if tree is not None:
        head += (f'<p class="origin">A <b>tree</b> of {tree} guesses: the rows below are its kept path, then the '
                 "first guess rejected under it. The draft tree panel below shows every guess, in the order the "
                 "target tried them.</p>")
    rows = []
    for d in record.draft:
        ratio = (d.p / d.q) if d.q else None
        if d.accepted is None:
            mark, cls = '<span class="mark none">— not examined</span>', "none"
        elif d.accepted:
            mark, cls = '<span class="mark acc">✓ accept</span>', "acc"
        else:
            mark, cls = '<span class="mark rej">✗ reject</span>', "rej"
        joint = mjsd_prefix(record, d.position)
        coin = fmt(d.coin) if d.coin is not None else ("greedy" if d.accepted is not None and joint is None else "—")
        threshold = fmt(d.threshold)
        if candidates(record):
            coin = "—"
            if not ppd_lossy(record):
                top = ppd_argmax(d)
                threshold = f"argmax {visible(top.text)!r}" if top is not None else "—"
        elif joint is not None:
            threshold = f"{fmt(joint[0].ratio)} vs τ = {fmt(joint[1])}"
        rows.append(
            f'<tr class="{cls}"><td>{d.position + 1}</td>'
            f'<td><span class="chip chip-{ACCEPTED if d.accepted else (REJECTED if d.accepted is False else "none")}">{token_html(d.text)}</span></td>'
            f'<td>{fmt(d.q)}</td><td>{fmt(d.p)}</td><td class="opt">{fmt(ratio, 2)}</td>'
            f'<td>{coin}</td><td>{threshold}</td><td class="opt">{coin_bar(d.coin, d.threshold, d.accepted)}</td>'
            f"<td>{mark}</td></tr>"
        )
    thr = html.escape(threshold_label(record))
    table = (
        '<table class="drafttable"><caption>Draft tokens of this iteration, left to right</caption>'
        f'<thead><tr><th>#</th><th>token</th><th>q(x)</th><th>{"p_raw(x)" if greedy else "p(x)"}</th>'
        f'<th class="opt">p/q</th><th>coin u</th><th>{thr}</th><th class="opt">u vs threshold</th><th>verdict</th>'
        "</tr></thead>"
        f'<tbody>{"".join(rows)}</tbody></table>'
    )
    final = [t for t in record.emitted if t.kind in (CORRECTION, BONUS)]
    if final:
        t = final[0]
        how = (
            "no guess under the last kept token was the target's top token: the target's top token"
            if t.kind == CORRECTION and tree is not None and greedy
            else "every guess under the last kept token was rejected: drawn from the residual their rejections left"
            if t.kind == CORRECTION and tree is not None
            else "a bonus token drawn from p: the kept path reached a leaf of the tree"
            if tree is not None
            else "drawn from the residual norm(max(0, p − q)) at the first rejected position"
            if t.kind == CORRECTION and record.residual is not None
            else "the target's own token after the kept prefix (this method has no residual)"
            if t.kind == CORRECTION else "a bonus token drawn from p after all drafts were accepted"
        )
        tail = f'<p>Then: <span class="chip chip-{t.kind}">{token_html(t.text)}</span> — {how}.</p>'
    else:
        tail = "<p>The run ended inside this iteration's accepted drafts.</p>"
    drafted = f"a tree of {tree} guesses" if tree is not None else f"{len(record.draft)} drafted"
    summary = (
        f"<p>Accepted length {record.accepted_length} of {drafted}; "
        f"this target call produced {len(record.emitted)} token(s) (accepted + 1 correction/bonus).</p>"
    )
    return f'<div class="draftrow">{head}<div class="tablewrap">{table}</div>{tail}{summary}</div>'

# Legend of the draft tree, kind -> (label, Okabe-Ito colour, description). As for the chips, each
# kind also has its own border style (assets/app.css), so the tree reads without colour too.
TREE_KINDS = {
    "root": ("root", "#000000", "the last committed token: the tree grows from it (solid black border)"),
    "candidate": ("candidate", "#0072B2", "a guessed token the target checks in this pass (solid blue border)"),
    "prompt": ("prompt token", "#CC79A7", "a prompt token: its top guess of a token further ahead, checked in "
                                         "a LATER step (dotted purple border, italic)"),
    "accepted": ("accepted path", "#009E73", "the candidates the target accepted (green, thick border)"),
    "rejected": ("rejected", "#D55E00", "checked by the target and not kept (dashed vermillion border)"),
}


def tree_legend_html(kinds=None) -> str:
    """A small legend of the tree's node styles (all of TREE_KINDS, or only `kinds`)."""
    items = []
    for key, (label, _colour, desc) in TREE_KINDS.items():
        if kinds is not None and key not in kinds:
            continue
        cls = {"accepted": "acc kind-candidate", "rejected": "rej kind-candidate", "prompt": "guess kind-prompt"}.get(
            key, f"kind-{key}")
        items.append(f'<span class="legenditem" title="{_attr(desc)}"><span class="node {cls}">{html.escape(label)}</span></span>')
    return f'<div class="treelegend" role="note" aria-label="Legend of the draft tree">{"".join(items)}</div>'


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


def tree_html(record: IterationRecord | None, chosen: set[int] | None = None) -> str:
    """Render the record's draft-tree nodes generically (chain, beams, sparse trees); node indices
    in `chosen` (e.g. MJSD's chosen beam) get a thick outline.

    PPD trees (kinds root / candidate / prompt): a node's prompt tokens hang under it as one row
    (+2, +3, ...: which token ahead each one guesses), before its candidate children; a candidate
    is accepted (green), rejected (checked and not kept: its parent was accepted) or not reached."""
    if record is None or not record.tree:
        return '<div class="tree empty">No draft tree in this iteration (no draft tokens).</div>'
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
                return "acc", "accepted: on the accepted path"
            parent = nodes.get(n.parent)
            if parent is None or parent.accepted:
                return "rej", "checked by the target and rejected"
            return "skip", "not reached (a candidate above it was rejected)"
        return ("acc", "on the accepted path") if n.accepted else ("rej", "not accepted")

    def prompt_row(owner, chain) -> str:
        parts = []
        for k, p in enumerate(chain, start=1):
            tip = (f"prompt token {k} of {visible(owner.text)!r}: its top guess for the token {k + 1} steps after "
                   f"{visible(owner.text)!r} is {visible(p.text)!r}" + (f" (probability {fmt(p.score, 2)})" if p.score is not None else "")
                   + ("; these guesses seed the next step's candidates" if p.accepted else "; not used (its owner was not the last accepted node)"))
            parts.append(f'<span class="node {"seed" if p.accepted else "guess"} kind-prompt" title="{_attr(tip)}">'
                         f'<span class="dist">+{k + 1}</span>{token_html(p.text)}</span>')
        seed = '<span class="seednote">→ seeds the next step</span>' if chain and chain[0].accepted else ""
        return f'<li class="prow"><span class="plabel">prompt tokens:</span> {" ".join(parts)}{seed}</li>'

    def node(n, depth_guard=0):
        st, why = state(n)
        st += " chosen" if chosen and n.index in chosen else ""
        score = f' <span class="score">{fmt(n.score, 2)}</span>' if n.score is not None else ""
        if n.kind == "candidate":
            tip = f"candidate at depth {n.depth}" + (f", guessed with probability {fmt(n.score, 2)}" if n.score is not None else "") + f": {why}"
        elif n.kind == "root":
            tip = f"root (depth {n.depth}): the last committed token"
        else:
            tip = f"{n.kind}, depth {n.depth}, " + ("on the accepted path" if n.accepted else "not accepted")
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
    more = f"<p>({len(record.tree) - MAX_TREE_NODES} more nodes not shown)</p>" if len(record.tree) > MAX_TREE_NODES else ""
    legend = tree_legend_html() if ppd else ""
    cls = "tree ppdtree" if ppd else "tree"
    return f'<div class="{cls}" role="group" aria-label="Draft tree">{legend}<ul>{body}</ul>{more}</div>'


def stats_html(records: list[IterationRecord], upto: int | None = None, summary: RunSummary | None = None,
               models: str = "", note: str = "") -> str:
    if not records:
        return f'<div class="stats">{html.escape(note) if note else "No run yet."}</div>'
    upto = len(records) - 1 if upto is None else max(0, min(upto, len(records) - 1))
    r = records[upto]
    counts = RunCounts.from_records(records[: upto + 1])
    mean_acc, tok_per_call, tps = counts.mean_accepted, counts.tokens_per_call, counts.tokens_per_second
    items = [
        ("method", r.method),
        ("iteration", f"{upto + 1} of {len(records)}"),
        ("tokens generated", str(r.generated)),
        ("target calls", str(r.target_calls)),
        ("tokens per target call", fmt(tok_per_call, 2)),
        ("mean accepted length (draft tokens)", fmt(mean_acc, 2) if mean_acc is not None else "—"),
        ("tokens/s", fmt(tps, 1)),
    ]
    if r.finished or (summary is not None and upto == len(records) - 1):
        items.append(("stopped by", stop_words(summary.stop_reason if summary else r.stop_reason)))
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


def caption(record: IterationRecord | None) -> str:
    """One plain sentence saying what happened in an iteration (for the classroom)."""
    if record is None:
        return ""
    if candidates(record) and PPDStep.of(record) is not None:
        return ppd_caption(record)
    if not record.draft:
        tok = record.emitted[0].text if record.emitted else ""
        return f"Iteration {record.iteration + 1}: one target call produced {visible(tok)!r}."
    k = len(record.draft)
    rejected = next((d for d in record.draft if d.accepted is False), None)
    final = next((t for t in record.emitted if t.kind in (CORRECTION, BONUS)), None)
    tree = tree_drafted(record)
    s = (f"Iteration {record.iteration + 1}: drafted {k}, accepted {record.accepted_length}." if tree is None else
         f"Iteration {record.iteration + 1}: drafted a tree of {tree}, accepted {record.accepted_length} along one "
         "path.")
    if rejected is not None and tree is not None:
        s += (f" At depth {rejected.position + 1} no guess was kept (the first tried, {visible(rejected.text)!r}, "
              "was rejected).")
    elif rejected is not None:
        if rejected.coin is None:
            s += f" Draft {rejected.position + 1} {visible(rejected.text)!r} was rejected (greedy: p_raw {fmt(rejected.p)} < {fmt(rejected.threshold)})."
        else:
            s += (f" Draft {rejected.position + 1} {visible(rejected.text)!r} was rejected "
                  f"(coin u = {fmt(rejected.coin)} > threshold {fmt(rejected.threshold)}).")
    if final is not None:
        s += (f" Correction {visible(final.text)!r} drawn from the residual." if final.kind == CORRECTION
              else f" All accepted: bonus token {visible(final.text)!r} drawn from p.")
    more = drafted_note(record) if tree is None else ""
    if more:
        s += f" ({more})"
    return s
