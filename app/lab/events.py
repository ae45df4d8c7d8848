"""The exactness lab's handlers: one speculative step on hand-written p and q, sampled N times
(`decoding.rules.lab`), against the distribution the rule should produce."""

from __future__ import annotations

import time

import gradio as gr

from decoding.rules.examples import EXAMPLES
from decoding.rules.implementations import DEFAULT_IMPLEMENTATION, IMPLEMENTATIONS
from decoding.rules.lab import run_sampling_lab

from .. import charts
from ..i18n import t


def example_choices() -> list[tuple[str, str]]:
    """The example menu's (title, key) pairs in the current language."""
    return [(t(f"lab.example.{key}"), key) for key in EXAMPLES]


def implementation_choices() -> list[tuple[str, str]]:
    """The implementation menu's (label, key) pairs in the current language."""
    return [(impl_text(key, "label"), key) for key in IMPLEMENTATIONS]


def impl_text(key: str, part: str) -> str:
    """An implementation's label, "what" or "where" in the current language (the figures it names are the
    engine's: the wrong-q draft temperature, the top-k cut)."""
    from decoding.rules.implementations import TOP_K_TARGET, WRONG_Q_TEMPERATURE

    return t(f"lab.impl.{key}.{part}", temperature=f"{WRONG_Q_TEMPERATURE:g}", k=TOP_K_TARGET) \
        if part == "what" else t(f"lab.impl.{key}.{part}")


def lab_headers() -> list[str]:
    return [t("lab.col.token"), t("lab.col.p"), t("lab.col.q")]


def lab_table(table):
    """The table with its rows as they are and its headers in the current language."""
    return _framed([list(r[:3]) for r in _table_rows(table)])


def _framed(rows: list[list]):
    """Rows as the table's value with the headers in the current language (a plain list would take the
    headers the table was built with, in English)."""
    import pandas as pd

    return pd.DataFrame(rows, columns=lab_headers())


def _lab_inputs(table):
    rows = _table_rows(table)
    vocab = [str(r[0]) for r in rows]
    try:
        p = [float(r[1]) for r in rows]
        q = [float(r[2]) for r in rows]
    except (TypeError, ValueError):
        raise gr.Error(t("lab.error.numbers")) from None
    return vocab, p, q


def _table_rows(table) -> list[list]:
    if table is None:
        return []
    if hasattr(table, "values") and hasattr(table, "columns"):  # pandas
        rows = table.values.tolist()
    elif isinstance(table, dict) and "data" in table:
        rows = table["data"]
    else:
        rows = list(table)
    return [list(r) for r in rows if r is not None and len(r) >= 3 and str(r[0]).strip() != ""]


def _implementation(name):
    """The implementation picked (the correct rule when the input is left empty), or a clear error."""
    name = name or DEFAULT_IMPLEMENTATION
    if name not in IMPLEMENTATIONS:
        raise gr.Error(t("lab.error.no_implementation", name=name))
    return IMPLEMENTATIONS[name]


def implementation_words(name) -> str:
    """What the picked implementation does (wrong) and where it happened, for under the menu."""
    impl = _implementation(name)
    return f"{impl_text(impl.name, 'what')}  \n{t('lab.where', where=impl_text(impl.name, 'where'))}"


def lab_example(key):
    """The table of a shipped example (`decoding.rules.examples`)."""
    if key not in EXAMPLES:
        raise gr.Error(t("lab.error.example"))
    e = EXAMPLES[key]
    return [[v, p, q] for v, p, q in zip(e.vocab, e.p, e.q)]


def _verdict(impl, result) -> str:
    """How this implementation reads against the correct rule: exact or not (TV(expected, p) in closed
    form), and how often it keeps drafts beside the correct rule's α (its speed)."""
    measured = t("lab.measured", rate=f"{result['acceptance_rate']:.4f}", tv_p=f"{result['tv_to_target']:.4f}",
                 tv_e=f"{result['tv_to_expected']:.4f}", n=f"{result['n']:,}")
    keeps = t("lab.keeps", alpha=f"{result['alpha']:.4f}", correct=f"{result['correct_alpha']:.4f}")
    label = impl_text(impl.name, "label")
    if impl.exact:
        head = (t("lab.verdict.slower", label=label) if result["alpha"] < result["correct_alpha"] - 1e-9
                else t("lab.verdict.exact", label=label))
        return head + keeps + f"; {measured}"
    gap = result["expected_tv_to_target"]
    if gap < 1e-9:
        return t("lab.verdict.same", label=label, keeps=keeps, measured=measured)
    return t("lab.verdict.wrong", label=label, gap=f"{gap:.4f}", keeps=keeps, measured=measured)


def _lab_once(p, q, lenience, n, seed, implementation=DEFAULT_IMPLEMENTATION):
    impl = _implementation(implementation)
    if impl.name != DEFAULT_IMPLEMENTATION and float(lenience) != 1.0:
        raise gr.Error(t("lab.error.lenience"), title=t("lab.error.lenience_title"))
    try:
        result = run_sampling_lab(p, q, lenience=float(lenience), n=int(n), seed=int(seed), implementation=impl.name)
    except ValueError as exc:
        raise gr.Error(str(exc), title=t("lab.error.inputs_title")) from None
    if impl.name != DEFAULT_IMPLEMENTATION:
        return result, _verdict(impl, result)
    md = (t("lab.result", alpha=f"{result['alpha']:.4f}", rate=f"{result['acceptance_rate']:.4f}",
            n=f"{result['n']:,}") + "  \n"
          + t("lab.result.tv", tv_p=f"{result['tv_to_target']:.4f}", tv_e=f"{result['tv_to_expected']:.4f}")
          + ("" if result["lenience"] == 1 else "  \n" + t("lab.result.lenient", l=f"{result['lenience']:g}")))
    return result, md


def lab_run(table, lenience, n, seed, implementation=DEFAULT_IMPLEMENTATION):
    """Sample N steps of the picked implementation (the API's last input; default the correct rule)."""
    vocab, p, q = _lab_inputs(table)
    result, md = _lab_once(p, q, lenience, n, seed, implementation)
    return charts.lab_figure(vocab, result), charts.lab_residual_figure(vocab, result), \
        charts.tv_figure([(result["n"], result["tv_to_expected"])]), md


def lab_converge(table, lenience, seed, implementation=DEFAULT_IMPLEMENTATION):
    vocab, p, q = _lab_inputs(table)
    history = []
    for n in (100, 1_000, 10_000, 100_000, 1_000_000):
        result, md = _lab_once(p, q, lenience, n, seed, implementation)
        history.append((n, result["tv_to_expected"]))
        yield charts.lab_figure(vocab, result), charts.lab_residual_figure(vocab, result), charts.tv_figure(history), md
        time.sleep(0.6)


def lab_normalize(table):
    rows = _table_rows(table)
    out = []
    for col in (1, 2):
        try:
            total = sum(max(0.0, float(r[col])) for r in rows)
        except (TypeError, ValueError):
            raise gr.Error(t("lab.error.numbers")) from None
        if total <= 0:
            raise gr.Error(t("lab.error.zero_column"))
        out.append(total)
    return [[r[0], round(max(0.0, float(r[1])) / out[0], 6), round(max(0.0, float(r[2])) / out[1], 6)] for r in rows]
