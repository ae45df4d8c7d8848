"""The exactness lab's handlers: one speculative step on hand-written p and q, sampled N times
(`decoding.rules.lab`), against the distribution the rule should produce."""

from __future__ import annotations

import time

import gradio as gr

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


def _lab_once(p, q, lenience, n, seed):
    try:
        result = run_sampling_lab(p, q, lenience=float(lenience), n=int(n), seed=int(seed))
    except ValueError as exc:
        raise gr.Error(str(exc), title="Check p, q and lenience") from None
    md = (f"**α = {result['alpha']:.4f}** (the chance a draft is accepted, Σ min(p/l, q)); measured acceptance rate "
          f"**{result['acceptance_rate']:.4f}** over N = {result['n']:,} steps.  \n"
          f"TV(empirical, p) = **{result['tv_to_target']:.4f}**, TV(empirical, expected) = "
          f"**{result['tv_to_expected']:.4f}**"
          + ("" if result["lenience"] == 1 else f"  \nWith lenience l = {result['lenience']:g} the output is no longer p: "
             "it is min(q, p/l) + the leftover mass × residual."))
    return result, md


def lab_run(table, lenience, n, seed):
    vocab, p, q = _lab_inputs(table)
    result, md = _lab_once(p, q, lenience, n, seed)
    return charts.lab_figure(vocab, result), charts.lab_residual_figure(vocab, result), \
        charts.tv_figure([(result["n"], result["tv_to_expected"])]), md


def lab_converge(table, lenience, seed):
    vocab, p, q = _lab_inputs(table)
    history = []
    for n in (100, 1_000, 10_000, 100_000, 1_000_000):
        result, md = _lab_once(p, q, lenience, n, seed)
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
