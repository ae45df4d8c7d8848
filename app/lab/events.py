"""The exactness lab's handlers: one speculative step on hand-written p and q, sampled N times
(`decoding.rules.lab`), against the distribution the rule should produce."""

from __future__ import annotations

import time

import gradio as gr

from decoding.rules.examples import EXAMPLES
from decoding.rules.implementations import DEFAULT_IMPLEMENTATION, IMPLEMENTATIONS
from decoding.rules.lab import run_sampling_lab

from .. import charts


def _lab_inputs(table):
    rows = _table_rows(table)
    vocab = [str(r[0]) for r in rows]
    try:
        p = [float(r[1]) for r in rows]
        q = [float(r[2]) for r in rows]
    except (TypeError, ValueError):
        raise gr.Error("p and q must be numbers in every row.") from None
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
        raise gr.Error(f"There is no implementation called “{name}”. Choose one from the Implementation menu.")
    return IMPLEMENTATIONS[name]


def implementation_words(name) -> str:
    """What the picked implementation does (wrong) and where it happened, for under the menu."""
    impl = _implementation(name)
    return f"{impl.what}  \n*Where:* {impl.where}"


def lab_example(key):
    """The table of a shipped example (`decoding.rules.examples`)."""
    if key not in EXAMPLES:
        raise gr.Error("Choose one of the examples in the menu.")
    e = EXAMPLES[key]
    return [[v, p, q] for v, p, q in zip(e.vocab, e.p, e.q)]


def _verdict(impl, result) -> str:
    """How this implementation reads against the correct rule: exact or not (TV(expected, p) in closed
    form), and how often it keeps drafts beside the correct rule's α (its speed)."""
    measured = (f"measured acceptance rate **{result['acceptance_rate']:.4f}**; TV(empirical, p) = "
                f"**{result['tv_to_target']:.4f}**, TV(empirical, expected) = **{result['tv_to_expected']:.4f}** "
                f"over N = {result['n']:,} steps.")
    keeps = (f"It keeps a draft with probability **{result['alpha']:.4f}**, the correct rule "
             f"**{result['correct_alpha']:.4f}**")
    if impl.exact:
        head = (f"**{impl.label}: exact but slower.** Its output is p (TV(expected, p) = 0). "
                if result["alpha"] < result["correct_alpha"] - 1e-9 else f"**{impl.label}: exact.** ")
        return head + keeps + f"; {measured}"
    gap = result["expected_tv_to_target"]
    if gap < 1e-9:
        return (f"**{impl.label}: no difference on this example** (TV(expected, p) = 0; try the larger "
                f"vocabulary). {keeps}; {measured}")
    return (f"**{impl.label}: fast but wrong.** Its output is not p: TV(expected, p) = **{gap:.4f}**, a gap that "
            f"does not shrink as N grows. {keeps}; {measured}")


def _lab_once(p, q, lenience, n, seed, implementation=DEFAULT_IMPLEMENTATION):
    impl = _implementation(implementation)
    if impl.name != DEFAULT_IMPLEMENTATION and float(lenience) != 1.0:
        raise gr.Error("The implementations are compared at lenience 1: set the lenience slider to 1, "
                       "or choose the correct rule.", title="Check the lenience")
    try:
        result = run_sampling_lab(p, q, lenience=float(lenience), n=int(n), seed=int(seed), implementation=impl.name)
    except ValueError as exc:
        raise gr.Error(str(exc), title="Check p, q and lenience") from None
    if impl.name != DEFAULT_IMPLEMENTATION:
        return result, _verdict(impl, result)
    md = (f"**α = {result['alpha']:.4f}** (the chance a draft is accepted, Σ min(p/l, q)); measured acceptance rate "
          f"**{result['acceptance_rate']:.4f}** over N = {result['n']:,} steps.  \n"
          f"TV(empirical, p) = **{result['tv_to_target']:.4f}**, TV(empirical, expected) = "
          f"**{result['tv_to_expected']:.4f}**"
          + ("" if result["lenience"] == 1 else f"  \nWith lenience l = {result['lenience']:g} the output is no longer p: "
             "it is min(q, p/l) + the leftover mass × residual."))
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
            raise gr.Error("p and q must be numbers in every row.") from None
        if total <= 0:
            raise gr.Error("a column sums to 0: cannot normalise it.")
        out.append(total)
    return [[r[0], round(max(0.0, float(r[1])) / out[0], 6), round(max(0.0, float(r[2])) / out[1], 6)] for r in rows]
