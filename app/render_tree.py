"""A verified draft tree -> HTML: each node's q and p, the coin of each tried sibling, the residual
after each rejection, the accepted path and the token the target added at its end.

Token trees verified with recursive rejection over siblings (SpecInfer, Miao et al., arXiv:2305.09781;
EAGLE-2, Li et al., arXiv:2406.16858): under a kept node, its children are tried in order. Child i was
drawn from q_i (q without the earlier siblings) and is kept when its coin u_i <= min(1, p_i(x)/q_i(x)),
where p_i is the target's distribution after the earlier siblings' rejections: p_0 = p, and
p_{i+1} = norm(max(0, p_i - q_i)) (the residual). At temperature 0 there is no coin: the kept path is the
longest one that matches the target's top token at each step.

The engine records all of it on the tree's nodes (`TreeNode.q`, `p`, `coin`, `threshold`, `verdict`,
`sibling_rank`, `residual_mass`, `residual_top`) and the tree's shape in `TreeDraftStep`
(`record.extra["tree_draft"]`); nothing is computed here. The node fields are optional: a tree without
verdicts (a chain, PPD, MJSD, an older trace) is drawn by `render.tree_html` as before.

Layout: an indented list (children under their parent, one line per node, wrapping on a phone), so the
tree reads at any width and scrolls inside its own box rather than the page when it is very deep.
"""

from __future__ import annotations

import html
from collections import defaultdict

from decoding.methods.registry import method_view
from decoding.methods.tree_draft import DEFAULT, SET, TUNED, TreeDraftStep
from decoding.trace.record import BONUS, CORRECTION, IterationRecord

from .html_text import attr as _attr, coin_bar, fmt, token_html
from .render import MAX_TREE_NODES, chip_kind, tr, tree_html

ACC, REJ, UNTRIED = "accepted", "rejected", "untried"
RESIDUAL_TOP = 3  # tokens of a residual shown under a rejected sibling
SUB = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")

# the legend's classes: explainer.vtree.<class>.label and .desc; each style also differs in border and text,
# not only colour
VTREE_KINDS = ("acc", "rej", "untried")
# how the tree's size was chosen: explainer.vtree.chosen.<how>
CHOSEN = (TUNED, DEFAULT, SET)


def _h(text: str) -> str:
    """Text as HTML (quotes kept as they are: the text is not an attribute)."""
    return html.escape(text, quote=False)


def is_verified_tree(record: IterationRecord | None) -> bool:
    """Whether the record's tree carries the verdict of each node (a tree verified sibling by sibling): its
    method's view says its records may (`MethodView.node_verdicts`) and this record's nodes do."""
    return (record is not None and method_view(record.method).node_verdicts
            and any(n.verdict is not None for n in record.tree or []))


def _tree_info(record: IterationRecord) -> TreeDraftStep:
    """The record's tree data (N, depth, how they were chosen, greedy); empty where it carries none."""
    return TreeDraftStep.of(record) or TreeDraftStep()


def _greedy(record: IterationRecord) -> bool:
    """Temperature 0: the tree data says so, or no tried node has a coin."""
    greedy = _tree_info(record).greedy
    if greedy is not None:
        return bool(greedy)
    tried = [n for n in record.tree if n.verdict in (ACC, REJ)]
    return bool(tried) and all(n.coin is None for n in tried)


def _sub(rank: int | None) -> str:
    """The subscript of the i-th sibling's distributions: p, p₁, p₂ ... (after i rejections)."""
    return "" if not rank else str(rank).translate(SUB)


def _ordinal(rank: int, lang: str | None = None) -> str:
    """The `ordinal` parameter of explainer.vtree.try: 1st, 2nd, ... in English; the number alone in the
    other languages, whose catalogs word the order around it ("intento 2", "essai 2", "第 2 次尝试")."""
    from .i18n import current

    n = rank + 1
    if (lang or current()) != "en":
        return str(n)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _bar(value: float | None, which: str) -> str:
    """A small bar of a probability (q or p) with its number; the number is the text, the bar a picture."""
    if value is None:
        return ""
    width = max(0.0, min(1.0, value)) * 100
    return f'<span class="vbar {which}" aria-hidden="true"><span style="width:{width:.1f}%"></span></span>'


def _residual_line(node, lang: str | None = None) -> str:
    """Under a rejected sibling: the residual its rejection left (mass and top tokens), which the next
    sibling (or the correction token) is drawn against."""
    mass, top = node.residual_mass, node.residual_top or []
    if mass is None and not top:
        return ""
    rank = node.sibling_rank or 0
    tokens = " · ".join(f'<span class="rtok">{token_html(c.text)}</span> {fmt(c.p, 2)}' for c in top[:RESIDUAL_TOP])
    name = f"p{_sub(rank + 1)}"
    mass_words = _h(tr("vtree.residual_mass", lang, mass=fmt(mass, 2))) if mass is not None else ""
    top_words = _h(tr("vtree.residual_top", lang, tokens="\x00")).replace("\x00", tokens) if tokens else ""
    body = _h(tr("vtree.sep", lang)).join(x for x in (mass_words, top_words) if x)
    said = _h(tr("vtree.residual", lang, name=name, formula=f"norm(max(0, p{_sub(rank)} − q{_sub(rank)}))",
                 body="\x00")).replace("\x00", body)
    return f'<div class="vresid" role="note">↳ {said}</div>'


def _node_line(node, greedy: bool, siblings: int = 2, lang: str | None = None) -> str:
    """One node: try order (where it has siblings), token, q and p, the coin against its threshold (or the
    greedy check), verdict."""
    verdict = node.verdict
    rank = node.sibling_rank
    cls = {ACC: "acc", REJ: "rej"}.get(verdict, "untried")
    parts = []
    if rank is not None and siblings > 1:
        parts.append(f'<span class="vtry" title="{_attr(tr("vtree.try_tip", lang))}">'
                     f'{_h(tr("vtree.try", lang, ordinal=_ordinal(rank, lang)))}</span>')
    copied = (f' <span class="vcopy" title="{_attr(tr("vtree.copied_tip", lang))}">'
              f'{_h(tr("vtree.copied", lang))}</span>') if node.kind == "lookup" else ""
    parts.append(f'<span class="node {cls}">{token_html(node.text)}</span>{copied}')
    # sampling: sibling i is drawn from q_i and tested against p_i; greedy: every child against the same p
    q, p, sub = node.q, node.p, "" if greedy else _sub(rank)
    if q is not None or p is not None:
        parts.append(f'<span class="vpq"><span class="vlab">q{sub}</span> {_bar(q, "q")}{fmt(q)} '
                     f'<span class="vlab">p{sub}</span> {_bar(p, "p")}{fmt(p)}</span>')
    coin, threshold = node.coin, node.threshold
    if verdict in (ACC, REJ) and greedy:
        words = tr("vtree.greedy_match", lang) if verdict == ACC else tr("vtree.greedy_miss", lang) + (
            tr("vtree.greedy_top", lang, p=fmt(threshold)) if threshold is not None else "")
        parts.append(f'<span class="vrule">{_h(words)}</span>')
    elif verdict in (ACC, REJ) and coin is not None and threshold is not None:
        sign = "≤" if verdict == ACC else ">"
        parts.append(f'<span class="vrule">{coin_bar(coin, threshold, verdict == ACC)}'
                     f" u = {fmt(coin)} {sign} min(1, p{sub}/q{sub}) = {fmt(threshold)}</span>")
    mark = {ACC: ("acc", "vtree.mark_kept"), REJ: ("rej", "vtree.mark_rejected")}.get(verdict,
                                                                                     ("none", "vtree.mark_untried"))
    parts.append(f'<span class="mark {mark[0]}">{_h(tr(mark[1], lang))}</span>')
    return f'<div class="vnode {cls}">{" ".join(parts)}</div>'


def _final_line(record: IterationRecord, greedy: bool, lang: str | None = None) -> str:
    """The token the target added at the end of the accepted path: the correction (from the residual after
    the last rejection) or the bonus (from p, when the path ended at a leaf)."""
    final = next((t for t in record.emitted if t.kind in (CORRECTION, BONUS)), None)
    if final is None:
        return ""
    if final.kind == BONUS:
        how = tr("vtree.final_bonus", lang)
    elif greedy:
        how = tr("vtree.final_greedy", lang)
    elif record.residual is not None:
        how = tr("vtree.final_residual", lang, mass=fmt(record.residual.mass, 2))
    else:
        how = tr("vtree.final_target", lang)
    return (f'<li class="vfinal"><div class="vnode"><span class="chip chip-{final.kind}">{token_html(final.text)}'
            f"</span> <span>{_h(how)}</span></div></li>")


def vtree_legend_html(lang: str | None = None) -> str:
    items = "".join(f'<span class="legenditem"><span class="node {cls}" title="{_attr(tr(f"vtree.{cls}.desc", lang))}">'
                    f'{_h(tr(f"vtree.{cls}.label", lang))}</span></span>' for cls in VTREE_KINDS)
    chips = {k: f'<span class="chip chip-{k}">{_h(chip_kind(k, lang)[0])}</span>' for k in (CORRECTION, BONUS)}
    said = _h(tr("vtree.legend_final", lang, correction="\x00", bonus="\x01"))
    items += f'<span class="legenditem">{said.replace(chr(0), chips[CORRECTION]).replace(chr(1), chips[BONUS])}</span>'
    return f'<div class="treelegend" role="note" aria-label="{_attr(tr("vtree.legend_aria", lang))}">{items}</div>'


def _head(record: IterationRecord, greedy: bool, shown: list, lang: str | None = None) -> str:
    info = _tree_info(record)
    drafted = info.drafted if info.drafted is not None else sum(1 for n in shown if n.kind != "root")
    depth = max((n.depth for n in shown), default=0)
    kept = sum(1 for n in shown if n.kind != "root" and n.verdict == ACC)
    chosen = tr(f"vtree.chosen.{info.chosen}", lang) if info.chosen in CHOSEN else ""
    size = tr("vtree.size", lang, nodes=info.nodes, chosen=chosen) if info.nodes and chosen else ""
    branched = info.shape == "tree" or (info.shape is None and any(n.sibling_rank for n in shown))
    if branched:
        what = tr("vtree.what_tree", lang, n=drafted, depth=depth, size=size)
    else:  # one guess per position: a copy from the context (the hybrid's copies stay chains), or a thin tree
        copied = info.source == "lookup" or any(n.kind == "lookup" for n in shown)
        what = tr("vtree.what_chain_copied" if copied else "vtree.what_chain", lang, n=drafted)
    final = any(t.kind in (CORRECTION, BONUS) for t in record.emitted)
    line = tr("vtree.line_final" if final else "vtree.line", lang, i=record.iteration + 1, what=what, kept=kept)
    rule = tr("vtree.rule_greedy" if greedy else "vtree.rule", lang)
    return f'<p class="vhead">{_h(line)}</p><p class="note">{_h(rule)}</p>'


def verified_tree_html(record: IterationRecord, head: str | None = None, lang: str | None = None) -> str:
    """The verified tree of one iteration as nested lists: children in the order they were tried, each
    node with q, p, the coin against its threshold (none at temperature 0) and its verdict, the residual
    after each rejection, and the target's own token at the end of the kept path. `head`: HTML said
    above it instead of the iteration's summary and the rule (the lesson's worked tree)."""
    shown = list(record.tree[:MAX_TREE_NODES])
    nodes = {n.index: n for n in shown}
    children = defaultdict(list)
    roots = []
    for n in shown:
        (children[n.parent] if n.parent in nodes else roots).append(n)
    for kids in children.values():
        kids.sort(key=lambda k: (k.sibling_rank is None, k.sibling_rank or 0, k.index))
    greedy = _greedy(record)
    kept = [n for n in shown if n.kind == "root" or n.verdict == ACC]
    end = max(kept, key=lambda n: n.depth).index if kept else None
    final = _final_line(record, greedy, lang)

    def item(n, guard=0) -> str:
        if n.kind == "root":
            line = (f'<div class="vnode root"><span class="node kind-root">{token_html(n.text)}</span> '
                    f'<span>{_h(tr("vtree.root", lang))}</span></div>')
        else:
            line = _node_line(n, greedy, len(children.get(n.parent, [])), lang)
            if n.verdict == REJ and not greedy:
                line += _residual_line(n, lang)
        rows = [item(k, guard + 1) for k in children.get(n.index, [])] if guard < 200 else []
        if n.index == end and final:
            rows.append(final)
        sub = f'<ul>{"".join(rows)}</ul>' if rows else ""
        return f"<li>{line}{sub}</li>"

    body = "".join(item(r) for r in roots)
    if end is None and final:  # no root in the trace: the final token after the tree
        body += final
    more = (f"<p>{_h(tr('tree.more', lang, n=len(record.tree) - MAX_TREE_NODES))}</p>"
            if len(record.tree) > MAX_TREE_NODES else "")
    head = _head(record, greedy, shown, lang) if head is None else head
    return (f'<div class="tree vtree" role="group" aria-label="{_attr(tr("vtree.aria", lang))}">{head}'
            f'{vtree_legend_html(lang)}<div class="vscroll"><ul>{body}</ul></div>{more}</div>')


def tree_panel_html(record: IterationRecord | None, lang: str | None = None) -> str:
    """The Explainer's draft-tree panel: a verified tree with its verdicts, any other tree as before."""
    return verified_tree_html(record, lang=lang) if is_verified_tree(record) else tree_html(record, lang=lang)
