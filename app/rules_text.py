"""Each method's acceptance rule in words: what a threshold means, why a draft token was kept or
rejected, one caption per PPD step. Read from the records' typed method data
(`decoding.methods.registry`), never guessed from prose."""

from __future__ import annotations

from decoding.methods.mjsd.generator import MjsdPrefix, MjsdStep
from decoding.methods.registry import method_view
from decoding.methods.ppd.generator import PPDStep
from decoding.methods.speculative import ChainStep
from decoding.methods.tree_draft import TreeDraftStep
from decoding.trace.record import ACCEPTED, Candidate, IterationRecord

from .html_text import fmt, visible
from .i18n import t


def _tr(key: str, lang: str | None, **params) -> str:
    return t("explainer.rule." + key, lang, **params)


def tree_drafted(record: IterationRecord) -> int | None:
    """How many tokens an iteration drafted as a tree (several guesses under one token, each with its
    verdict); None for a chain, an older trace or a tree without verdicts (PPD, MJSD)."""
    if not method_view(record.method).node_verdicts or not any(n.sibling_rank for n in record.tree if n.verdict):
        return None
    info = TreeDraftStep.of(record)
    return info.drafted if info is not None and info.drafted is not None else \
        sum(1 for n in record.tree if n.kind != "root")


def mjsd_prefix(record: IterationRecord, position: int) -> tuple[MjsdPrefix, float | None] | None:
    """MJSD's joint-likelihood check of the prefix ending at `position`, with tau."""
    info = MjsdStep.of(record)
    if info is None or position >= len(info.prefixes):
        return None
    return info.prefixes[position], info.tau


def greedy_rule(record: IterationRecord) -> bool:
    """Whether a chain record's drafts were judged by the greedy rule (no coins: p_raw(x) >= l max p_raw).
    Traces written before records said so are read from their coins."""
    chain = ChainStep.of(record)
    if chain is not None and chain.greedy is not None:
        return chain.greedy
    return bool(record.draft) and all(d.coin is None for d in record.draft if d.accepted is not None)


def candidates(record: IterationRecord) -> bool:
    """Whether the record's drafts are a tree's candidates checked against the target (its method's
    rule "candidates"): no coin, and q is the probability of a guess, not a draft distribution."""
    return method_view(record.method).rule == "candidates"


def threshold_label(record: IterationRecord, lang: str | None = None) -> str:
    """What the threshold column means for this record's rule (its method's `view.rule`)."""
    rule = method_view(record.method).rule
    if rule == "kl-bound":
        return _tr("threshold_mentored", lang)
    if rule == "candidates":
        return _tr("threshold_typical" if ppd_lossy(record) else "threshold_argmax", lang)
    if mjsd_prefix(record, 0) is not None:
        return _tr("threshold_joint", lang)
    if greedy_rule(record):
        return _tr("threshold_greedy", lang)
    return _tr("threshold", lang)


def ppd_lossy(record: IterationRecord | None) -> bool:
    """Typical acceptance (sampling) is lossy; exact match (greedy) is lossless."""
    info = PPDStep.of(record)
    return bool(info is not None and info.lossy)


def ppd_argmax(d) -> Candidate | None:
    """The target's most likely token where draft token d was checked (from its top list)."""
    return max(d.top, key=lambda c: c.p) if d.top else None


def ppd_rule_text(record: IterationRecord, d, lang: str | None = None) -> str:
    """One line: why PPD kept or rejected candidate d (the reason, then " → " and the verdict)."""
    verdict = _tr("kept" if d.accepted else "rejected", lang)
    if ppd_lossy(record):
        op = ">" if d.accepted else "≤"
        return _tr("typical", lang, p=fmt(d.p), op=op, threshold=fmt(d.threshold)) + f" → {verdict}"
    top = ppd_argmax(d)
    if top is None:
        return _tr("exact_match", lang) + f" → {verdict}"
    same = "=" if top.token_id == d.token_id else "≠"
    return (_tr("exact_match_here", lang, top=repr(visible(top.text)), same=same, token=repr(visible(d.text)))
            + f" → {verdict}")


def _final_token(record: IterationRecord):
    return next((t for t in reversed(record.emitted) if t.kind != ACCEPTED), None)


def ppd_caption(record: IterationRecord, lang: str | None = None) -> str:
    """One plain sentence for a PPD step."""
    info = PPDStep.of(record) or PPDStep()
    n_cand, n_prompt = info.n_candidates or 0, info.n_prompt_inputs or 0
    final = _final_token(record)
    i = record.iteration + 1
    then = (" " + _tr("ppd_then", lang, token=repr(visible(final.text)))) if final is not None else ""
    if n_cand == 0:
        return _tr("ppd_first", lang, i=i, token=repr(visible(final.text) if final else ""), prompts=n_prompt)
    kept = [d for d in record.draft if d.accepted]
    s = _tr("ppd_step", lang, i=i, candidates=n_cand, prompts=n_prompt, kept=len(kept))
    s += (f" ({', '.join(repr(visible(d.text)) for d in kept)})." if kept else ".")
    rejected = next((d for d in record.draft if d.accepted is False), None)
    if rejected is not None:
        s += " " + _tr("ppd_rejected", lang, token=repr(visible(rejected.text)),
                       why=ppd_rule_text(record, rejected, lang).split(" → ")[0])
    return s + then
