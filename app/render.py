"""Trace records -> HTML: token chips, the draft row, the draft tree, run statistics.

Every piece of token text goes through `token_html` (visible whitespace, then HTML escaping) and
every attribute through `_attr`: token text can hold `<`, `&`, quotes, newlines and spaces.
Colours are Okabe-Ito (colour-blind safe) and each kind also differs in border style, so the
chips stay distinguishable without colour.
"""

from __future__ import annotations

import html
from collections import defaultdict

from decoding.trace import ACCEPTED, BONUS, CORRECTION, TARGET, Candidate, IterationRecord, RunSummary

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


# ------------------------------------------------------------------------------------- text
def _attr(text: str) -> str:
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


def _lookup(cands: list[Candidate] | None, token_id: int) -> Candidate | None:
    for c in cands or []:
        if c.token_id == token_id:
            return c
    return None


# ------------------------------------------------------------------------------------- chips
def legend_html() -> str:
    items = "".join(
        f'<span class="chip chip-{kind}" aria-label="{_attr(desc)}">{html.escape(label)}</span>'
        for kind, (label, _colour, desc) in CHIP_KINDS.items()
    )
    return f'<div class="legend" role="note" aria-label="Legend of token colours">{items}</div>'


def _chip(text: str, kind: str, tip: str, current: bool = False) -> str:
    cls = f"chip chip-{kind}" + (" cur" if current else "")
    # tabindex makes the tooltip open on tap (focus) on a phone as well as on hover
    return f'<span class="{cls}" tabindex="0" data-tip="{_attr(tip)}" aria-label="{_attr(tip)}">{token_html(text)}</span>'


def mjsd_prefix(record: IterationRecord, position: int) -> tuple[dict, float] | None:
    """MJSD's joint-likelihood check of the prefix ending at `position`, with tau (from extra)."""
    info = (record.extra or {}).get("mjsd")
    if not isinstance(info, dict):
        return None
    prefixes = info.get("prefixes") or []
    if position < len(prefixes) and isinstance(prefixes[position], dict):
        return prefixes[position], info.get("tau")
    return None


def threshold_label(record: IterationRecord) -> str:
    """What the threshold column means for this record's rule."""
    if record.method == "mentored":
        return "mentored threshold (KL ≤ D)"
    if record.method == "ppd":
        return ("typical threshold min(ε, δ·e^(−H(p)))" if ppd_lossy(record)
                else "exact match: the target's argmax")
    if mjsd_prefix(record, 0) is not None:
        return "joint ratio min(1, p(x₁..ⱼ)/q(x₁..ⱼ)) vs τ"
    if record.draft and all(d.coin is None for d in record.draft if d.accepted is not None):
        return "threshold l·max p_raw"
    return "threshold min(1, p/(l·q))"


def _draft_tip(d, kind_label: str, record: IterationRecord) -> str:
    lines = [f"{kind_label} {visible(d.text)!r} (iteration {record.iteration}, draft position {d.position + 1})"]
    joint = mjsd_prefix(record, d.position)
    if record.method == "ppd":
        lines.append(f"p(x) = {fmt(d.p)} (target)   q(x) = {fmt(d.q)} (the prompt token's guess probability)")
        lines.append(ppd_rule_text(record, d))
    elif joint is not None:
        prefix, tau = joint
        lines.append(f"p(x) = {fmt(d.p)}   q(x) = {fmt(d.q)}")
        lines.append(f"joint ratio min(1, p(x₁..ⱼ)/q(x₁..ⱼ)) = {fmt(prefix.get('ratio'))} vs τ = {fmt(tau)}"
                     f" → {'passes' if prefix.get('passes') else 'fails'}")
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
    lines = [f"{label} token {visible(token.text)!r} (iteration {record.iteration})"]
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
            chips.append(_chip(token.text, ACCEPTED, tip, current))
        else:
            if token.kind == CORRECTION and rejected is not None:
                chips.append(_chip(rejected.text, REJECTED, _draft_tip(rejected, "rejected draft token", record), current))
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
        parts.append(f'<span class="prompt" aria-label="prompt">{token_html(prompt)}</span>')
    for i, record in enumerate(records[: upto + 1]):
        parts.extend(record_chips(record, current=(i == upto)))
    return f'<div class="chips" role="group" aria-label="Generated tokens as chips">{"".join(parts)}</div>'


# ------------------------------------------------------------------------------------- draft row
def _coin_bar(coin: float | None, threshold: float | None, accepted: bool | None) -> str:
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
    head = f'<div class="iterhead">Iteration {record.iteration} · context {record.context_length} tokens · γ = {record.gamma}</div>'
    if not record.draft:
        if record.method == "autoregressive" or record.gamma == 0:
            why = "Plain (autoregressive) decoding: no draft, one target call gives one token."
        else:
            why = "The drafter proposed nothing this time (e.g. prompt lookup found no matching n-gram), so the target produced one token itself."
        final = "".join(record_chips(record))
        return f'<div class="draftrow">{head}<p>{why}</p><div class="chips">{final}</div></div>'
    greedy = (all(d.coin is None for d in record.draft if d.accepted is not None) and mjsd_prefix(record, 0) is None
              and record.method != "ppd")
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
        if record.method == "ppd":
            coin = "—"
            if not ppd_lossy(record):
                top = ppd_argmax(d)
                threshold = f"argmax {visible(top.text)!r}" if top is not None else "—"
        elif joint is not None:
            threshold = f"{fmt(joint[0].get('ratio'))} vs τ = {fmt(joint[1])}"
        rows.append(
            f'<tr class="{cls}"><td>{d.position + 1}</td>'
            f'<td><span class="chip chip-{ACCEPTED if d.accepted else (REJECTED if d.accepted is False else "none")}">{token_html(d.text)}</span></td>'
            f"<td>{fmt(d.q)}</td><td>{fmt(d.p)}</td><td>{fmt(ratio, 2)}</td>"
            f"<td>{coin}</td><td>{threshold}</td><td>{_coin_bar(d.coin, d.threshold, d.accepted)}</td><td>{mark}</td></tr>"
        )
    thr = html.escape(threshold_label(record))
    table = (
        '<table class="drafttable"><caption>Draft tokens of this iteration, left to right</caption>'
        f'<thead><tr><th>#</th><th>token</th><th>q(x)</th><th>{"p_raw(x)" if greedy else "p(x)"}</th><th>p/q</th>'
        f'<th>coin u</th><th>{thr}</th><th>u vs threshold</th><th>verdict</th></tr></thead>'
        f'<tbody>{"".join(rows)}</tbody></table>'
    )
    final = [t for t in record.emitted if t.kind in (CORRECTION, BONUS)]
    if final:
        t = final[0]
        how = (
            "drawn from the residual norm(max(0, p − q)) at the first rejected position"
            if t.kind == CORRECTION and record.residual is not None
            else "the target's own token after the kept prefix (this method has no residual)"
            if t.kind == CORRECTION else "a bonus token drawn from p after all drafts were accepted"
        )
        tail = f'<p>Then: <span class="chip chip-{t.kind}">{token_html(t.text)}</span> — {how}.</p>'
    else:
        tail = "<p>The run ended inside this iteration's accepted drafts.</p>"
    summary = (
        f"<p>Accepted length {record.accepted_length} of {len(record.draft)} drafted; "
        f"this target call produced {len(record.emitted)} token(s) (accepted + 1 correction/bonus).</p>"
    )
    return f'<div class="draftrow">{head}<div class="tablewrap">{table}</div>{tail}{summary}</div>'


# ------------------------------------------------------------------------------------- tree
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
    return f'<div class="{cls}" role="tree" aria-label="Draft tree">{legend}<ul>{body}</ul>{more}</div>'


# ------------------------------------------------------------------------------------- stats
def stats_html(records: list[IterationRecord], upto: int | None = None, summary: RunSummary | None = None,
               models: str = "", note: str = "") -> str:
    if not records:
        return f'<div class="stats">{html.escape(note) if note else "No run yet."}</div>'
    upto = len(records) - 1 if upto is None else max(0, min(upto, len(records) - 1))
    r = records[upto]
    drafted = [x for x in records[: upto + 1] if x.draft]
    mean_acc = sum(x.accepted_length for x in drafted) / len(drafted) if drafted else None
    tok_per_call = r.generated / r.target_calls if r.target_calls else 0.0
    tps = r.generated / r.elapsed if r.elapsed > 0 else 0.0
    items = [
        ("method", r.method),
        ("iteration", f"{upto} of {len(records) - 1}"),
        ("tokens generated", str(r.generated)),
        ("target calls", str(r.target_calls)),
        ("tokens per target call", fmt(tok_per_call, 2)),
        ("mean accepted length (draft tokens)", fmt(mean_acc, 2) if mean_acc is not None else "—"),
        ("tokens/s", fmt(tps, 1)),
    ]
    if r.finished or (summary is not None and upto == len(records) - 1):
        items.append(("stopped by", (summary.stop_reason if summary else r.stop_reason) or "—"))
    cells = "".join(f'<div class="stat"><span class="k">{html.escape(k)}</span><span class="v">{html.escape(v)}</span></div>' for k, v in items)
    extra = f'<div class="note">{html.escape(note)}</div>' if note else ""
    mdl = f'<div class="models">{html.escape(models)}</div>' if models else ""
    return f'<div class="stats" role="status">{mdl}<div class="statgrid">{cells}</div>{extra}</div>'


def text_so_far(records: list[IterationRecord], upto: int | None = None) -> str:
    """The plain text of the emitted tokens (concatenated token texts, as the CLI streams it)."""
    if not records:
        return ""
    upto = len(records) - 1 if upto is None else max(0, min(upto, len(records) - 1))
    return "".join(t.text for r in records[: upto + 1] for t in r.emitted)


def caption(record: IterationRecord | None) -> str:
    """One plain sentence saying what happened in an iteration (for the classroom)."""
    if record is None:
        return ""
    if record.method == "ppd" and ppd_info(record) is not None:
        return ppd_caption(record)
    if not record.draft:
        tok = record.emitted[0].text if record.emitted else ""
        return f"Iteration {record.iteration}: one target call produced {visible(tok)!r}."
    k = len(record.draft)
    rejected = next((d for d in record.draft if d.accepted is False), None)
    final = next((t for t in record.emitted if t.kind in (CORRECTION, BONUS)), None)
    s = f"Iteration {record.iteration}: drafted {k}, accepted {record.accepted_length}."
    if rejected is not None:
        if rejected.coin is None:
            s += f" Draft {rejected.position + 1} {visible(rejected.text)!r} was rejected (greedy: p_raw {fmt(rejected.p)} < {fmt(rejected.threshold)})."
        else:
            s += (f" Draft {rejected.position + 1} {visible(rejected.text)!r} was rejected "
                  f"(coin u = {fmt(rejected.coin)} > threshold {fmt(rejected.threshold)}).")
    if final is not None:
        s += (f" Correction {visible(final.text)!r} drawn from the residual." if final.kind == CORRECTION
              else f" All accepted: bonus token {visible(final.text)!r} drawn from p.")
    return s


# ------------------------------------------------------------------------------------- method panels
RULES = {
    "strict-pass": "the coin already passed the strict threshold min(1, p/q): accepted, no search needed",
    "within-bound": "KL(p‖q) ≤ D: even outputting q itself is allowed, so every draft is accepted here",
    "search": "binary search for the largest acceptance whose output keeps KL(p‖output) ≤ D",
    "strict": "D = 0: exactly the strict speculative-sampling rule",
}


def _num(x, digits: int = 3) -> str:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return "—"
    if f != f:
        return "—"
    if f in (float("inf"), float("-inf")):
        return "∞" if f > 0 else "−∞"
    return fmt(f, digits)


def mentored_table_html(record: IterationRecord | None) -> str:
    """Per examined draft position: rule, strict vs mentored threshold, the coin, alphas and KLs."""
    info = (record.extra or {}).get("mentored") if record is not None else None
    if not isinstance(info, dict) or not info.get("positions"):
        return ('<div class="methodtable empty">No per-position mentored data in this iteration '
                "(no draft, or a lean trace).</div>")
    draft = {d.position: d for d in record.draft}
    rows = []
    for r in info["positions"]:
        if not isinstance(r, dict):
            continue
        d = draft.get(r.get("position"))
        rule = str(r.get("rule", "?"))
        verdict = ('<span class="mark acc">✓ accept</span>' if d is not None and d.accepted
                   else '<span class="mark rej">✗ reject</span>')
        token = f'<span class="chip chip-{ACCEPTED if d is not None and d.accepted else REJECTED}">{token_html(d.text)}</span>' if d else "—"
        rows.append(
            f'<tr><td>{int(r.get("position", 0)) + 1}</td><td>{token}</td>'
            f'<td>{_num(d.coin if d else None)}</td><td>{_num(r.get("strict_threshold"))}</td>'
            f'<td><b>{_num(r.get("threshold"))}</b></td>'
            f'<td><span class="rule" title="{_attr(RULES.get(rule, rule))}">{html.escape(rule)}</span></td>'
            f'<td>{_num(r.get("strict_alpha"))}</td><td><b>{_num(r.get("alpha"))}</b></td>'
            f'<td>{_num(r.get("kl_draft"))}</td><td><b>{_num(r.get("kl_to_target"))}</b></td><td>{verdict}</td></tr>'
        )
    bound = _num(info.get("kl_bound"), 3)
    used = sorted({str(r.get("rule")) for r in info["positions"] if isinstance(r, dict)})
    legend = "".join(f"<li><b>{html.escape(u)}</b>: {html.escape(RULES.get(u, u))}</li>" for u in used)
    return (
        f'<div class="methodtable"><div class="tablewrap"><table class="drafttable">'
        f"<caption>Mentored decisions of iteration {record.iteration}, bound D = {bound} on KL(p‖output)</caption>"
        "<thead><tr><th>#</th><th>token</th><th>coin u</th><th>strict min(1, p/q)</th><th>mentored r(x)</th>"
        "<th>rule</th><th>strict α (Σ min(p, q))</th><th>mentored α</th><th>KL(p‖q)</th><th>KL(p‖output) ≤ D</th>"
        f'<th>verdict</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
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


def mjsd_table_html(record: IterationRecord | None) -> str:
    """Every prefix of the chosen beam against tau, then the beam tree with its joint log q."""
    info = (record.extra or {}).get("mjsd") if record is not None else None
    if not isinstance(info, dict):
        return '<div class="methodtable empty">No MJSD data in this iteration.</div>'
    tau = info.get("tau")
    eta = int(info.get("eta") or 0)
    rows = []
    for i, r in enumerate(info.get("prefixes") or []):
        if not isinstance(r, dict):
            continue
        j = int(r.get("length", i + 1))
        d = record.draft[j - 1] if 0 < j <= len(record.draft) else None
        kept = j <= eta
        token = f'<span class="chip chip-{ACCEPTED if kept else "none"}">{token_html(d.text)}</span>' if d else "—"
        ok = bool(r.get("passes"))
        vs = '<span class="mark acc">passes</span>' if ok else '<span class="mark rej">fails</span>'
        rows.append(
            f'<tr class="{"acc" if kept else ""}"><td>{j}</td><td>{token}</td><td>{_num(r.get("log_q"))}</td>'
            f'<td>{_num(r.get("log_p"))}</td><td><b>{_num(r.get("ratio"))}</b></td>'
            f'<td>{vs}</td>'
            f'<td>{"kept" if kept else ""}</td></tr>'
        )
    table = (
        '<div class="tablewrap"><table class="drafttable">'
        f"<caption>Every prefix x₁..xⱼ of the chosen beam against τ = {_num(tau, 3)}; η = {eta} "
        "(the longest passing prefix) is kept</caption>"
        "<thead><tr><th>j</th><th>token xⱼ</th><th>log q(x₁..ⱼ)</th><th>log p(x₁..ⱼ)</th>"
        "<th>ratio min(1, p/q)</th><th>vs τ</th><th></th></tr></thead>"
        f'<tbody>{"".join(rows)}</tbody></table></div>'
    ) if rows else "<p>No draft in this iteration.</p>"
    tree = (f'<p class="note">The beams (B = {html.escape(str(info.get("beams", "?")))}): every beam kept at every '
            "step, each node with its joint draft log-likelihood log q(x₁..ₜ); green = the kept prefix. "
            "The chosen draft (thick outline) is the best beam of the last step.</p>"
            + tree_html(record, chosen_path(record, info.get("chosen_beam"))))
    return f'<div class="methodtable">{table}{tree}</div>'


# ------------------------------------------------------------------------------------- PPD
NOT_TUNED = "not tuned on this device: run `python -m decoding.ppd tune`"
CHOSEN_BY = {
    "flag": "set by hand (the Tree size slider, or --tree-size)",
    "hardware-aware (tuned)": "hardware-aware: n* = argmax T(n)/L(n), measured on this device",
}


def ppd_info(record: IterationRecord | None) -> dict | None:
    info = (record.extra or {}).get("ppd") if record is not None else None
    return info if isinstance(info, dict) else None


def ppd_lossy(record: IterationRecord | None) -> bool:
    """Typical acceptance (sampling) is lossy; exact match (greedy) is lossless."""
    info = ppd_info(record) or {}
    return "typical" in str(info.get("verification", "")) or "lossy" in str(info.get("verification", ""))


def ppd_tuning(records: list[IterationRecord] | None) -> tuple[bool, dict | None]:
    """The latest hardware-aware tuning a run's records carry (the engine puts it on the first PPD
    record only): (found, curves). found False: no record carries the key (an older trace);
    curves None: the run's device was not tuned."""
    for r in reversed(records or []):
        info = ppd_info(r)
        if info is not None and "tuning" in info:
            curves = info["tuning"]
            return True, curves if isinstance(curves, dict) and curves.get("n") else None
    return False, None


def ppd_argmax(d) -> Candidate | None:
    """The target's most likely token where draft token d was checked (from its top list)."""
    return max(d.top, key=lambda c: c.p) if d.top else None


def ppd_rule_text(record: IterationRecord, d) -> str:
    """One line: why PPD kept or rejected candidate d."""
    if ppd_lossy(record):
        op = ">" if d.accepted else "≤"
        return (f"typical acceptance: p(x) = {fmt(d.p)} {op} min(ε, δ·e^(−H(p))) = {fmt(d.threshold)}"
                f" → {'kept' if d.accepted else 'rejected'}")
    top = ppd_argmax(d)
    if top is None:
        return f"exact match with the target's argmax → {'kept' if d.accepted else 'rejected'}"
    same = "=" if top.token_id == d.token_id else "≠"
    return (f"exact match: the target's argmax here is {visible(top.text)!r} {same} {visible(d.text)!r}"
            f" → {'kept' if d.accepted else 'rejected'}")


def _final_token(record: IterationRecord):
    return next((t for t in reversed(record.emitted) if t.kind != ACCEPTED), None)


def ppd_caption(record: IterationRecord) -> str:
    info = ppd_info(record) or {}
    n_cand, n_prompt = int(info.get("n_candidates") or 0), int(info.get("n_prompt_inputs") or 0)
    final = _final_token(record)
    then = f" Then the target's own token {visible(final.text)!r}." if final is not None else ""
    if n_cand == 0:
        return (f"Iteration {record.iteration}: no candidates yet (no guesses before the first step): one target pass "
                f"gave {visible(final.text) if final else ''!r}, and its {n_prompt} prompt token(s) guessed the next tokens.")
    kept = [d for d in record.draft if d.accepted]
    s = (f"Iteration {record.iteration}: one target pass over the root, {n_cand} candidates and {n_prompt} "
         f"prompt-token inputs; accepted {len(kept)} candidate(s)"
         + (f" ({', '.join(repr(visible(d.text)) for d in kept)})." if kept else "."))
    rejected = next((d for d in record.draft if d.accepted is False), None)
    if rejected is not None:
        s += f" Candidate {visible(rejected.text)!r} was rejected ({ppd_rule_text(record, rejected).split(' → ')[0]})."
    return s + then


def ppd_status_html(record: IterationRecord | None, tuning_found: bool = False, tuning: dict | None = None) -> str:
    """The PPD panel's headline block: the verification rule with a lossless / LOSSY badge, whether the
    prompt embeddings are trained, the tree size and how it was chosen, the hardware-aware tuning."""
    info = ppd_info(record)
    if info is None:
        return '<div class="ppdstatus empty">No PPD data in this iteration.</div>'
    lines = []
    if ppd_lossy(record):
        eps, delta = info.get("typical_epsilon"), info.get("typical_delta")
        lines.append('<div class="ppdline"><span class="badge lossy" title="the output does not follow the target '
                     'distribution exactly">LOSSY</span> <b>Verification: typical acceptance</b> (temperature &gt; 0): '
                     f"a candidate x is kept when p(x) &gt; min(ε, δ·e<sup>−H(p)</sup>), ε = {_num(eps, 3)}, "
                     f"δ = {_num(delta, 3)}. Any token the target finds plausible enough passes, so the text "
                     "<b>no longer follows the target's distribution exactly</b>.</div>")
    else:
        lines.append('<div class="ppdline"><span class="badge lossless">lossless</span> <b>Verification: exact '
                     "match</b> (temperature 0): a candidate is kept only if it is the target's own argmax, so the "
                     "text is exactly the target's greedy output.</div>")
    source = html.escape(str(info.get("embeddings") or "unknown"))
    if info.get("trained_embeddings"):
        lines.append(f'<div class="ppdline">Prompt-token embeddings: <b>trained</b> ({source}).</div>')
    else:
        source = source.removeprefix("untrained: ").removeprefix("untrained")
        lines.append(f'<div class="ppdline warnbox" role="alert"><b>⚠ The prompt-token embeddings are untrained</b> '
                     f"({'initialised as the ' + source if source else 'not trained'}), so their guesses, and the candidates built from them, are poor: expect few "
                     "accepted candidates and little speed-up. Verification never trusts the guesses, so the output "
                     "rule above still holds.</div>")
    size, how = info.get("tree_size"), str(info.get("tree_size_chosen_by") or "?")
    lines.append(
        f'<div class="ppdline">Tree size <b>n = {html.escape(str(size))}</b>, {html.escape(CHOSEN_BY.get(how, how))}. '
        f"This step: {int(info.get('n_candidates') or 0)} candidates + {int(info.get('n_prompt_inputs') or 0)} "
        f"prompt-token inputs, m = {html.escape(str(info.get('prompt_tokens')))} prompt tokens, "
        f"EPT = {html.escape(str(info.get('ept')))}.</div>")
    if tuning:
        chosen = tuning.get("chosen")
        extra = ""
        if tuning.get("embeddings") and tuning.get("embeddings") != info.get("embeddings"):
            extra = f" (tuned with other embeddings: {html.escape(str(tuning.get('embeddings')))})"
        lines.append(f'<div class="ppdline">Hardware-aware choice on {html.escape(str(tuning.get("device", "this device")))}: '
                     f"<b>n* = {html.escape(str(chosen))}</b>{extra} (chart below).</div>")
    else:
        why = "" if tuning_found else " (this trace carries no tuning data)"
        lines.append(f'<div class="ppdline notuned">Hardware-aware tree size: {html.escape(NOT_TUNED.split("`")[0])}'
                     f"<code>python -m decoding.ppd tune</code>{why}.</div>")
    return f'<div class="ppdstatus">{"".join(lines)}</div>'


def ppd_path_html(record: IterationRecord | None) -> str:
    """The path verification walked: the accepted candidates, then the first rejected one."""
    info = ppd_info(record)
    if info is None:
        return '<div class="methodtable empty">No PPD data in this iteration.</div>'
    if not record.draft:
        final = _final_token(record)
        tok = f'<span class="chip chip-{final.kind}">{token_html(final.text)}</span>' if final else "—"
        why = ("there were no guesses yet (the first step)" if record.iteration == 0 else
               "the previous step's last accepted node carried no prompt tokens (a tree of this size gives them to "
               "its likeliest nodes only), so nothing had been guessed")
        return (f"<p>No candidates in this step: {why}. The target produced "
                f"{tok}, and its prompt tokens guessed the tokens after it: they seed the next step's tree.</p>")
    lossy = ppd_lossy(record)
    rows = []
    for d in record.draft:
        if lossy:
            rule = f"{fmt(d.p)} {'&gt;' if d.accepted else '≤'} {fmt(d.threshold)}"
        else:
            top = ppd_argmax(d)
            rule = (f'<span class="chip chip-target">{token_html(top.text)}</span> '
                    f"{'=' if top.token_id == d.token_id else '≠'} x") if top is not None else "—"
        verdict = '<span class="mark acc">✓ accept</span>' if d.accepted else '<span class="mark rej">✗ reject</span>'
        token = f'<span class="chip chip-{ACCEPTED if d.accepted else REJECTED}">{token_html(d.text)}</span>'
        rows.append(f'<tr class="{"acc" if d.accepted else "rej"}"><td>{d.position + 1}</td><td>{token}</td>'
                    f"<td>{fmt(d.q)}</td><td>{fmt(d.p)}</td><td>{rule}</td><td>{verdict}</td></tr>")
    head = ("p(x) &gt; typical threshold min(ε, δ·e<sup>−H(p)</sup>)?" if lossy
            else "target's argmax at the parent = x?")
    final = _final_token(record)
    tail = (f'<p>Then the target adds its own token at the last accepted node: <span class="chip chip-{final.kind}">'
            f'{token_html(final.text)}</span>. This step produced {len(record.emitted)} token(s) from one target pass.</p>'
            if final is not None else "")
    missing = "" if any(d.accepted is False for d in record.draft) else (
        "<p>Every candidate on this path was accepted, down to a leaf of the tree.</p>")
    return (
        '<div class="tablewrap"><table class="drafttable">'
        f"<caption>Verification path of iteration {record.iteration}: the accepted candidates, then the best-ranked "
        "child of the last accepted node (the first rejection)</caption>"
        "<thead><tr><th>depth</th><th>candidate x</th><th>q(x): the prompt token's probability</th>"
        f"<th>target p(x)</th><th>{head}</th><th>verdict</th></tr></thead>"
        f'<tbody>{"".join(rows)}</tbody></table></div>{missing}{tail}'
    )


def ppd_table_html(record: IterationRecord | None) -> str:
    """The PPD panel's details: the verification path table, then the tree with its legend."""
    if ppd_info(record) is None:
        return '<div class="methodtable empty">No PPD data in this iteration.</div>'
    tree = ('<p class="note">This step\'s tree: the candidates the target checked in this pass, and under each node '
            "its prompt tokens (+2 = the token two steps after that node, …) whose guesses build the NEXT step's "
            "candidates; only the prompt tokens of the last accepted node are used. A candidate is green (accepted), "
            "dashed vermillion (checked and rejected) or plain blue (not reached: a candidate above it was rejected). "
            "Numbers: the probability the prompt token gave that candidate. Hover a node for details.</p>"
            + tree_html(record))
    return f'<div class="methodtable">{ppd_path_html(record)}{tree}</div>'
