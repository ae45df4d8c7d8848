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
from .render import REJECTED, tree_html
from .rules_text import _final_token, ppd_argmax, ppd_lossy


RULES = {
    "strict-pass": "the coin already passed the strict threshold min(1, p/q): accepted, no search needed",
    "within-bound": "KL(p‖q) ≤ D: even outputting q itself is allowed, so every draft is accepted here",
    "search": "binary search for the largest acceptance whose output keeps KL(p‖output) ≤ D",
    "strict": "D = 0: exactly the strict speculative-sampling rule",
}


def mentored_table_html(record: IterationRecord | None) -> str:
    """Per examined draft position: rule, strict vs mentored threshold, the coin, alphas and KLs."""
    info = MentoredStep.of(record)
    if info is None or not info.positions:
        return ('<div class="methodtable empty">No per-position mentored data in this iteration '
                "(no draft, or a lean trace).</div>")
    draft = {d.position: d for d in record.draft}
    rows = []
    for r in info.positions:
        d = draft.get(r.position)
        rule = r.rule or "?"
        verdict = ('<span class="mark acc">✓ accept</span>' if d is not None and d.accepted
                   else '<span class="mark rej">✗ reject</span>')
        token = f'<span class="chip chip-{ACCEPTED if d is not None and d.accepted else REJECTED}">{token_html(d.text)}</span>' if d else "—"
        rows.append(
            f'<tr><td>{r.position + 1}</td><td>{token}</td>'
            f'<td>{_num(d.coin if d else None)}</td><td>{_num(r.strict_threshold)}</td>'
            f'<td><b>{_num(r.threshold)}</b></td>'
            f'<td><span class="rule" title="{_attr(RULES.get(rule, rule))}">{html.escape(rule)}</span></td>'
            f'<td>{_num(r.strict_alpha)}</td><td><b>{_num(r.alpha)}</b></td>'
            f'<td>{_num(r.kl_draft)}</td><td><b>{_num(r.kl_to_target)}</b></td><td>{verdict}</td></tr>'
        )
    bound = _num(info.kl_bound, 3)
    used = sorted({r.rule for r in info.positions})
    legend = "".join(f"<li><b>{html.escape(u)}</b>: {html.escape(RULES.get(u, u))}</li>" for u in used)
    return (
        f'<div class="methodtable"><div class="tablewrap"><table class="drafttable">'
        f"<caption>Mentored decisions of iteration {record.iteration + 1}, bound D = {bound} on KL(p‖output)</caption>"
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
    info = MjsdStep.of(record)
    if info is None:
        return '<div class="methodtable empty">No MJSD data in this iteration.</div>'
    tau = info.tau
    eta = info.eta or 0
    rows = []
    for i, r in enumerate(info.prefixes):
        j = r.length or i + 1
        d = record.draft[j - 1] if 0 < j <= len(record.draft) else None
        kept = j <= eta
        token = f'<span class="chip chip-{ACCEPTED if kept else "none"}">{token_html(d.text)}</span>' if d else "—"
        ok = bool(r.passes)
        vs = '<span class="mark acc">passes</span>' if ok else '<span class="mark rej">fails</span>'
        rows.append(
            f'<tr class="{"acc" if kept else ""}"><td>{j}</td><td>{token}</td><td>{_num(r.log_q)}</td>'
            f'<td>{_num(r.log_p)}</td><td><b>{_num(r.ratio)}</b></td>'
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
    beams = "?" if info.beams is None else info.beams
    tree = (f'<p class="note">The beams (B = {beams}): every beam kept at every '
            "step, each node with its joint draft log-likelihood log q(x₁..ₜ); green = the kept prefix. "
            "The chosen draft (thick outline) is the best beam of the last step.</p>"
            + tree_html(record, chosen_path(record, info.chosen_beam)))
    return f'<div class="methodtable">{table}{tree}</div>'


NOT_TUNED = ("not measured on this computer yet, so PPD uses its default tree size; the hardware-aware choice "
             "needs a tuning run, which measures the step time at each tree size")
NO_TUNING_DATA = "this saved run does not include the tuning measurements"
CHOSEN_BY = {
    "flag": "set by hand (the Tree size slider)",
    "hardware-aware (tuned)": "hardware-aware: n* = argmax T(n)/L(n), measured on this device",
}


def device_words(device: str | None) -> str:
    """A tuning's device key ("cpu:x86_64:x86_64:2threads:bfloat16", "cuda:NVIDIA L4:float16") in words."""
    parts = str(device or "").split(":")
    if parts[0] == "cuda":
        return f"the GPU {parts[1]}" if len(parts) > 1 and parts[1] else "this GPU"
    if parts[0] == "cpu":
        threads = next((p.removesuffix("threads") for p in parts if p.endswith("threads")), "")
        plural = "" if threads == "1" else "s"
        return f"a CPU, {threads} thread{plural}" if threads.isdigit() else "a CPU"
    return "this device"


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


def ppd_status_html(record: IterationRecord | None, tuning_found: bool = False, tuning: dict | None = None) -> str:
    """The PPD panel's headline block: the verification rule with a lossless / LOSSY badge, whether the
    prompt embeddings are trained, the tree size and how it was chosen, the hardware-aware tuning."""
    info = PPDStep.of(record)
    if info is None:
        return '<div class="ppdstatus empty">No PPD data in this iteration.</div>'
    lines = []
    if ppd_lossy(record):
        eps, delta = info.typical_epsilon, info.typical_delta
        lines.append('<div class="ppdline"><span class="badge lossy" title="the output does not follow the target '
                     'distribution exactly">LOSSY</span> <b>Verification: typical acceptance</b> (temperature &gt; 0): '
                     f"a candidate x is kept when p(x) &gt; min(ε, δ·e<sup>−H(p)</sup>), ε = {_num(eps, 3)}, "
                     f"δ = {_num(delta, 3)}. Any token the target finds plausible enough passes, so the text "
                     "<b>no longer follows the target's distribution exactly</b>.</div>")
    else:
        lines.append('<div class="ppdline"><span class="badge lossless">lossless</span> <b>Verification: exact '
                     "match</b> (temperature 0): a candidate is kept only if it is the target's own argmax, so the "
                     "text is exactly the target's greedy output.</div>")
    source = html.escape(str(info.embeddings or "unknown"))
    if info.trained_embeddings:
        lines.append('<div class="ppdline">Prompt-token embeddings: <b>trained</b> for this target (shipped with the '
                     "app).</div>")
    else:
        source = source.removeprefix("untrained: ").removeprefix("untrained")
        lines.append(f'<div class="ppdline warnbox" role="alert"><b>⚠ The prompt-token embeddings are untrained</b> '
                     f"({'initialised as the ' + source if source else 'not trained'}), so their guesses, and the candidates built from them, are poor: expect few "
                     "accepted candidates and little speed-up. Verification never trusts the guesses, so the output "
                     "rule above still holds.</div>")
    size, how = info.tree_size, str(info.tree_size_chosen_by or "?")
    lines.append(
        f'<div class="ppdline">Tree size <b>n = {html.escape(str(size))}</b>, {html.escape(CHOSEN_BY.get(how, how))}. '
        f"This step: {info.n_candidates or 0} candidates + {info.n_prompt_inputs or 0} "
        f"prompt-token inputs, m = {html.escape(str(info.prompt_tokens))} prompt tokens, "
        f"EPT = {html.escape(str(info.ept))}.</div>")
    if tuning:
        chosen = tuning.get("chosen")
        extra = ""
        if tuning.get("embeddings") and tuning.get("embeddings") != info.embeddings:
            extra = " (tuned with other prompt-token embeddings)"
        device = html.escape(device_words(tuning.get("device")))
        lines.append(f'<div class="ppdline">Hardware-aware choice on {device}: '
                     f"<b>n* = {html.escape(str(chosen))}</b>{extra} (chart below).</div>")
    else:
        why = NOT_TUNED if tuning_found else NO_TUNING_DATA
        lines.append(f'<div class="ppdline notuned">Hardware-aware tree size: {why}.</div>')
    return f'<div class="ppdstatus">{"".join(lines)}</div>'


def ppd_path_html(record: IterationRecord | None) -> str:
    """The path verification walked: the accepted candidates, then the first rejected one."""
    info = PPDStep.of(record)
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
        f"<caption>Verification path of iteration {record.iteration + 1}: the accepted candidates, then the best-ranked "
        "child of the last accepted node (the first rejection)</caption>"
        "<thead><tr><th>depth</th><th>candidate x</th><th>q(x): the prompt token's probability</th>"
        f"<th>target p(x)</th><th>{head}</th><th>verdict</th></tr></thead>"
        f'<tbody>{"".join(rows)}</tbody></table></div>{missing}{tail}'
    )


def ppd_table_html(record: IterationRecord | None) -> str:
    """The PPD panel's details: the verification path table, then the tree with its legend."""
    if PPDStep.of(record) is None:
        return '<div class="methodtable empty">No PPD data in this iteration.</div>'
    tree = ('<p class="note">This step\'s tree: the candidates the target checked in this pass, and under each node '
            "its prompt tokens (+2 = the token two steps after that node, …) whose guesses build the NEXT step's "
            "candidates; only the prompt tokens of the last accepted node are used. A candidate is green (accepted), "
            "dashed vermillion (checked and rejected) or plain blue (not reached: a candidate above it was rejected). "
            "Numbers: the probability the prompt token gave that candidate. Hover a node for details.</p>"
            + tree_html(record))
    return f'<div class="methodtable">{ppd_path_html(record)}{tree}</div>'


def _plain(value) -> str:
    """One field's value in words: numbers short, booleans yes / no, lists and nested data spelled out,
    a missing value as a dash (never a Python repr)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
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


def fields_table_html(record: IterationRecord | None, data) -> str:
    """A method's own trace data of one iteration (a `StepData`), every field as one row: the panel of a
    method the app has no panel for."""
    if record is None or data is None:
        return '<div class="methodtable empty">No method data in this iteration.</div>'
    rows = "".join(f'<tr><td>{html.escape(f.name.replace("_", " "))}</td>'
                   f'<td>{html.escape(_plain(getattr(data, f.name)))}</td></tr>'
                   for f in dataclasses.fields(data))
    return (f'<div class="methodtable"><div class="tablewrap"><table class="drafttable">'
            f"<caption>The method's own data in iteration {record.iteration + 1}</caption>"
            f"<thead><tr><th>field</th><th>value</th></tr></thead><tbody>{rows}</tbody></table></div></div>")
