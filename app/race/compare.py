"""The side-by-side tab: two methods on the same prompt, seed and models, one after the other,
with their measured speeds and the ratio."""

from __future__ import annotations

import dataclasses
import html

import gradio as gr

from decoding.methods.registry import METHODS, method_view

from ..controls import with_run_inputs
from ..texts import greedy_texts_note
from ..i18n import t
from ..live import load_models, settings_from_values
from ..race_result import method_title
from ..session import Session
from ..zerogpu import on_zerogpu, whole_run


@with_run_inputs(method_inputs=("method_a", "method_b"))
def compare(session, values: dict, progress):
    """Run two methods one after the other on the same prompt, seed and models."""
    from decoding.run.runner import decode, summarize

    session = session if isinstance(session, Session) else Session()
    results = []
    for label, method in (("A", values["method_a"]), ("B", values["method_b"])):
        s = settings_from_values(values, method)
        target, draft = load_models(s.target, s.draft, METHODS[method].uses_drafter, progress, s.dtype)
        config = dataclasses.replace(s.config(), lean=True)
        try:
            if on_zerogpu():  # one GPU call decodes the run; its records come back whole
                records = list(whole_run(s, True))
            else:
                ids = target.encode_prompt(s.prompt, s.chat)
                records = []
                for record in decode(target, draft, ids, config):
                    records.append(record)
                    progress(min(0.99, record.generated / s.max_new_tokens), desc=f"{label}: {method}")
        except ValueError as exc:
            raise gr.Error(str(exc)) from None
        summary = summarize(records, config, s.prompt, target, draft)
        if method_view(method).baseline:
            session.baselines[s.target] = summary.tokens_per_second
        results.append((label, method, summary))
        yield (session, *_compare_outputs(results))


def _compare_outputs(results):
    texts_ = [r[2].text for r in results] + [""] * (2 - len(results))
    rows = "".join(
        f"<tr><td>{label}</td><td>{html.escape(method_title(method))}</td><td>{s.tokens_per_second:.1f}</td>"
        f"<td>{len(s.token_ids)}</td><td>{s.target_calls}</td><td>{s.tokens_per_call:.2f}</td>"
        f"<td>{'—' if s.mean_accepted is None else f'{s.mean_accepted:.2f}'}</td><td>{s.wall_seconds:.2f}</td></tr>"
        for label, method, s in results
    )
    verdict = ""
    if len(results) == 2:
        (_, ma, sa), (_, mb, sb) = results
        if sb.tokens_per_second > 0:
            ratio = sa.tokens_per_second / sb.tokens_per_second
            word = t("race.cmp.faster") if ratio >= 1 else t("race.cmp.slower")
            said = t("race.cmp.verdict", a=method_title(ma), ratio=f"{ratio:.2f}", word=word, b=method_title(mb))
            verdict = (f'<p class="verdict {"good" if ratio >= 1 else "bad"}"><b>{html.escape(said)}</b>'
                       f'{html.escape(t("race.cmp.measured"))}</p>')
        verdict += greedy_texts_note(sa, sb)
    heads = "".join(f"<th>{html.escape(t('race.cmp.' + key))}</th>"
                    for key in ("method", "tps", "tokens", "calls", "tpc", "accepted", "seconds"))
    table = (f'<table class="cmp"><thead><tr><th></th>{heads}</tr></thead>'
             f"<tbody>{rows}</tbody></table>{verdict}")
    return texts_[0], texts_[1], table
