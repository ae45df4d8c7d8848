"""The Gradio Blocks: layout and event wiring. Rendering lives in render.py / charts.py, session
state, limits and presets in session.py; handlers here only glue them to the engine.

Events that touch models share one concurrency group (`concurrency_limit=1`); the queue is
bounded. Per-user state is a `Session` in a gr.State with a time to live.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import gradio as gr

from decoding.lab import EXAMPLE_P, EXAMPLE_Q, EXAMPLE_VOCAB, run_sampling_lab
from decoding.trace import IterationRecord

from . import charts, render, texts
from .session import (
    EXTRA_KNOBS,
    MAX_BEAMS,
    MAX_GAMMA,
    MAX_NEW_TOKENS,
    MAX_PROMPT_CHARS,
    preset_by_label,
    presets,
    PROMPT_LOOKUP,
    SESSION_TTL_SECONDS,
    Session,
    cli_command,
    delete_session,
    example_traces,
    knobs_for,
    make_settings,
    measured_alpha_c,
    method_choices,
    read_trace,
    settings_from_summary,
    uses_drafter,
)

CSS_PATH = Path(__file__).resolve().parent.parent / "assets" / "app.css"
REFRESH_SECONDS = 0.2  # heavy panels refresh at most ~5 times a second when pacing is off
QUEUE_SIZE = 16

# label -> (prompt, chat): prompts of different kinds (prompt lookup shines on copying)
EXAMPLE_PROMPTS = {
    "Copy a list (drafts get accepted)": (
        "Repeat this list exactly, then continue it: apple, banana, cherry, apple, banana, cherry, apple, banana,", True),
    "Question (chat)": ("Explain in two sentences why the sky is blue.", True),
    "Code (chat)": ("Write a Python function that returns the squares of a list of numbers.", True),
    "Story opening (plain text)": ("Once upon a time, in a quiet village by the sea,", False),
    "Fact completion (plain text)": ("The capital of France is", False),
}


# ================================================================================ view
def _upto(session: Session, upto) -> int:
    n = len(session.records)
    if upto is None:
        return n - 1
    try:
        return max(0, min(int(upto), n - 1))
    except (TypeError, ValueError):
        return n - 1


def _position(position) -> int | None:
    """UI draft position (1-based, 0 = auto: first rejection) -> record index or None."""
    try:
        p = int(position)
    except (TypeError, ValueError):
        return None
    return p - 1 if p >= 1 else None


def theory_panel(session: Session, upto: int | None = None):
    records = session.records[: (upto + 1) if upto is not None else None]
    if records and records[-1].method == "ppd":
        msg = ("This panel models a separate draft model (Leviathan et al.: acceptance rate α, cost ratio c). PPD has no "
               "draft model: the target guesses ahead inside its own forward pass, so its trade-off is the tree size n. "
               "See the PPD panel above: tokens per step T(n) against the latency of a step L(n).")
        return charts.empty_figure("PPD has no draft model: see the PPD panel's T(n) vs L(n) chart.", "Theory"), msg
    alpha, c, how = measured_alpha_c(records)
    drafted = [r for r in records if r.draft]
    if alpha is None or c is None or not drafted:
        why = "no draft tokens yet" if alpha is None else how
        msg = f"The theory panel needs a speculative run with drafts ({why})."
        return charts.empty_figure(msg, "Theory"), msg
    from decoding import theory

    gamma = max(r.gamma for r in drafted)
    a = min(max(alpha, 0.0), 1.0)
    best = theory.optimal_gamma(a, c)
    predicted = theory.improvement_factor(a, gamma, c)
    last = records[-1]
    measured_tpc = last.generated / last.target_calls if last.target_calls else 0.0
    tps = last.generated / last.elapsed if last.elapsed > 0 else 0.0
    lines = [
        f"Measured **α = {a:.3f}** (mean overlap Σ min(p, q) over {sum(len(r.draft) for r in drafted)} drafted positions) "
        f"and **c = {c:.4f}** ({how}).",
        f"Theory at γ = {gamma}: **{theory.expected_tokens_per_call(a, gamma):.2f} tokens per target call** "
        f"(of which {theory.expected_accepted_length(a, gamma):.2f} accepted draft tokens), improvement factor "
        f"**×{predicted:.2f}**; optimal γ = {best} (×{theory.improvement_factor(a, best, c):.2f}).",
        f"Measured in this run: **{measured_tpc:.2f} tokens per target call**, {tps:.1f} tokens/s.",
    ]
    baseline = session.baseline_tps()
    method = records[-1].method
    if baseline and method != "autoregressive":
        ratio = tps / baseline if baseline else 0.0
        if ratio < 1:
            lines.append(f"**On this machine {method} decoding is slower than plain decoding: {tps:.1f} vs {baseline:.1f} "
                         f"tokens/s (×{ratio:.2f}).** Verifying γ+1 tokens on a CPU costs more than one step, and a "
                         "tiny target leaves little to save.")
        else:
            lines.append(f"**Measured speedup over plain decoding: ×{ratio:.2f}** ({tps:.1f} vs {baseline:.1f} tokens/s).")
    else:
        lines.append("No autoregressive baseline measured in this session yet: run the *Side by side* tab (or the "
                     "autoregressive method) to see whether speculative decoding is actually faster here. "
                     "On a CPU with a small target it often is **not**.")
    if method not in ("speculative",):
        lines.append(f"These closed forms describe speculative sampling; for {method} they are a reference point, "
                     "with α taken from the same measured overlaps.")
    if predicted < 1:
        lines.append("**Theory predicts a slow-down at this γ (improvement < 1).**")
    return charts.theory_figure(a, c, gamma), "\n\n".join(lines)


def method_panel(record: IterationRecord | None, position=None, records: list[IterationRecord] | None = None) -> tuple:
    """The method-specific panel for a record: (panel visibility, explanation, table/tree HTML,
    chart A, visibility of chart B's column, chart B). Shown only for mentored, MJSD and PPD records.
    `records` (the whole run) supplies PPD's hardware-aware tuning, which only its first record carries."""
    method = record.method if record is not None else None
    if method == "mentored":
        d = charts.mentored_info(record)
        bound = d.get("kl_bound") if d else None
        title = f"### Mentored decoding panel (D = {bound:g})" if isinstance(bound, (int, float)) else "### Mentored decoding panel"
        return (gr.update(visible=True), f"{title}\n{texts.MENTORED}", render.mentored_table_html(record),
                gr.update(value=charts.mentored_acceptance_figure(record), label="Strict vs mentored, per draft position"),
                gr.update(visible=True), charts.mentored_output_figure(record, _position(position)))
    if method == "mjsd":
        d = charts.mjsd_info(record)
        head = (f"### MJSD panel (B = {d.get('beams')}, τ = {d.get('tau'):g})" if d and isinstance(d.get("tau"), (int, float))
                else "### MJSD panel")
        return (gr.update(visible=True), f"{head}\n{texts.MJSD}", render.mjsd_table_html(record),
                gr.update(value=charts.mjsd_ratio_figure(record), label="Joint ratio per prefix length j, against τ"),
                gr.update(visible=False), None)
    if method == "ppd":
        info = render.ppd_info(record) or {}
        found, tuning = render.ppd_tuning(records if records is not None else [record])
        rule = "typical acceptance (lossy)" if render.ppd_lossy(record) else "exact match (lossless)"
        head = f"### PPD panel: {rule}, tree size n = {info.get('tree_size', '?')}"
        status = render.ppd_status_html(record, found, tuning)
        size = info.get("tree_size")
        return (gr.update(visible=True), f"{head}\n\n{status}\n\n{texts.PPD}", render.ppd_table_html(record),
                gr.update(value=charts.ppd_tuning_figure(tuning, size if isinstance(size, int) else None, found),
                          label="Hardware-aware tree size: L(n), T(n) and Speedup(n) on this device"),
                gr.update(visible=False), None)
    return gr.update(visible=False), "", "", None, gr.update(visible=False), None


def view(session: Session, upto=None, position=None, final: bool = False, note: str = ""):
    """Every panel of the explainer for iteration `upto` of the session's run, as a tuple in the
    order of `VIEW_OUTPUTS`."""
    records = session.records
    if not records:
        empty = charts.empty_figure("No run yet.")
        return (render.stats_html([], note=note or "No run yet: press Run or Step."), gr.update(maximum=1, value=0),
                "", render.chips_html([]), "", render.draft_row_html(None), empty, empty, render.tree_html(None),
                charts.running_figure([]), empty, "", "", gr.update(value=None, interactive=False),
                *method_panel(None))
    i = _upto(session, upto)
    record = records[i]
    last = i == len(records) - 1
    text = session.summary.text if (last and session.summary is not None) else render.text_so_far(records, i)
    theory_fig, theory_md = theory_panel(session, i)
    cli = cli_command(session.settings) if session.settings is not None else ""
    download = gr.update(value=session.trace_path(), interactive=True) if final else gr.skip()
    return (
        render.stats_html(records, i, session.summary if last else None, session.models_label(), note),
        gr.update(maximum=max(1, len(records) - 1), value=i),
        render.caption(record),
        render.chips_html(records, i),
        text,
        render.draft_row_html(record),
        charts.pq_figure(record, _position(position)),
        charts.residual_figure(record),
        render.tree_html(record),
        charts.running_figure(records, i, session.baseline_tps(), session.target_bytes, session.draft_bytes),
        theory_fig,
        theory_md,
        cli,
        download,
        *method_panel(record, position, records),
    )


# ================================================================================ engine glue
def _settings(preset, custom_target, custom_draft, prompt, chat, method, gamma, temperature, top_k, top_p,
              lenience, seed, max_new_tokens, kl_bound, beams, tau, tree_budget):
    from .session import resolve_pair

    try:
        target, draft = resolve_pair(preset, custom_target, custom_draft)
        extra = dict(zip(EXTRA_KNOBS, (kl_bound, beams, tau, tree_budget)))
        return make_settings(prompt, chat, method, gamma, temperature, top_k, top_p, lenience, seed,
                             max_new_tokens, target, draft, extra)
    except ValueError as exc:
        raise gr.Error(str(exc), title="Check the settings") from None


def load_pair(target_spec: str, draft_spec: str, need_draft: bool, progress=None):
    """Load (memoized) target and draft; gr.Error with the loader's one-line reason otherwise."""
    from decoding.models import ModelLoadError, check_same_vocabulary, load_draft, load_model_cached
    from .session import MAX_PARAMS

    def reporter(offset, label):
        def report(fraction, message):
            if progress is not None:
                progress(offset + 0.5 * float(fraction), desc=f"{label}: {message}")
        return report

    preset_specs = {p.target for p in presets()} | {p.draft for p in presets()}
    try:
        target = load_model_cached(target_spec, progress=reporter(0.0, "target"))
        draft = PROMPT_LOOKUP
        if need_draft and draft_spec != PROMPT_LOOKUP:
            draft = load_draft(draft_spec, target.device, progress=reporter(0.5, "draft"), cached=True)
            check_same_vocabulary(target, draft)
    except ModelLoadError as exc:
        raise gr.Error(f"Could not load the model pair: {exc}", title="Model pair not loaded") from None
    for m, spec in ((target, target_spec), (draft, draft_spec)):
        if not isinstance(m, str) and spec not in preset_specs and m.n_params > MAX_PARAMS:
            raise gr.Error(f"{m.name} has {m.n_params / 1e9:.1f}B parameters; this app allows at most "
                           f"{MAX_PARAMS / 1e9:.1f}B for custom models.", title="Model too large")
    return target, draft


def _start(session: Session, settings, progress) -> None:
    from decoding.energy import make_meter
    from decoding.runner import decode

    session.reset_run()
    need_draft = uses_drafter(settings.method)
    target, draft = load_pair(settings.target, settings.draft, need_draft, progress)
    try:
        prompt_ids = target.encode_prompt(settings.prompt, settings.chat)
        session.meter = make_meter(target.device)
        session.generator = decode(target, draft, prompt_ids, settings.config(), session.meter)
    except ValueError as exc:
        raise gr.Error(str(exc), title="Cannot start the run") from None
    session.settings = settings
    session.source = "live"
    session.title = ""
    session.target = target
    session.draft_name = draft if isinstance(draft, str) else draft.name
    session.draft = draft
    session.target_bytes = target.weight_bytes
    session.draft_bytes = None if isinstance(draft, str) or not need_draft else draft.weight_bytes


def _advance(session: Session):
    """The next record of the live run, or None when it has ended."""
    try:
        record = next(session.generator)
    except StopIteration:
        _finish(session)
        return None
    except ValueError as exc:
        if "already executing" in str(exc):
            raise gr.Error("The previous iteration is still finishing; try again in a moment.") from None
        raise gr.Error(f"The run stopped: {exc}") from None
    session.records.append(record)
    if record.finished:
        _finish(session)
    return record


def _finish(session: Session, stop_reason: str | None = None) -> None:
    from decoding.runner import summarize

    if not session.records or session.target is None or session.settings is None:
        return
    config = session.settings.config()
    session.summary = summarize(session.records, config, session.settings.prompt, session.target,
                                session.draft or session.draft_name, stop_reason)
    if session.settings.method == "autoregressive" and session.summary.stop_reason != "stopped":
        session.baselines[session.settings.target] = session.summary.tokens_per_second
    meter = getattr(session, "meter", None)
    if meter is not None:
        try:
            meter.close()
        except Exception:  # noqa: BLE001
            pass
    session.generator = None


# ================================================================================ handlers
def generate(session, preset, custom_target, custom_draft, prompt, chat, method, gamma, temperature, top_k,
             top_p, lenience, seed, max_new_tokens, kl_bound, beams, tau, tree_budget, pacing, position,
             progress=gr.Progress()):
    """Run (or continue a stepped run with the same settings) and stream its iterations."""
    session = session if isinstance(session, Session) else Session()
    settings = _settings(preset, custom_target, custom_draft, prompt, chat, method, gamma, temperature, top_k,
                         top_p, lenience, seed, max_new_tokens, kl_bound, beams, tau, tree_budget)
    session.stop_requested = False
    if not (session.live and session.settings is not None and session.settings.key() == settings.key()):
        _start(session, settings, progress)
    try:
        pacing = max(0.0, min(float(pacing or 0.0), 5.0))
    except (TypeError, ValueError):
        pacing = 0.0
    last_yield = 0.0
    while session.generator is not None and not getattr(session, "stop_requested", False):
        record = _advance(session)
        if record is None:
            break
        now = time.monotonic()
        if session.generator is not None and (pacing > 0 or now - last_yield >= REFRESH_SECONDS):
            yield (session, *view(session, None, position))
            last_yield = time.monotonic()
            if pacing > 0:
                time.sleep(pacing)
    if session.stop_requested and session.live:
        yield (session, *view(session, None, position, final=True,
                              note="Stopped. Step continues this run; Run continues it to the end."))
        return
    yield (session, *view(session, None, position, final=True))


def step(session, preset, custom_target, custom_draft, prompt, chat, method, gamma, temperature, top_k,
         top_p, lenience, seed, max_new_tokens, kl_bound, beams, tau, tree_budget, position,
         progress=gr.Progress()):
    """Advance exactly one iteration (starting a run first when none is live with these settings)."""
    session = session if isinstance(session, Session) else Session()
    settings = _settings(preset, custom_target, custom_draft, prompt, chat, method, gamma, temperature, top_k,
                         top_p, lenience, seed, max_new_tokens, kl_bound, beams, tau, tree_budget)
    session.stop_requested = False
    note = ""
    if not (session.live and session.settings is not None and session.settings.key() == settings.key()):
        if session.live:
            note = "Settings changed: a new run started."
        _start(session, settings, progress)
    record = _advance(session)
    if record is None and not session.records:
        note = "The run produced no iteration."
    return (session, *view(session, None, position, final=session.generator is None, note=note))


def stop(session, position):
    """Cancel a streaming run; the iterations so far stay on the timeline and Step continues."""
    session = session if isinstance(session, Session) else Session()
    session.stop_requested = True
    if not session.records:
        return (session, *view(session, None, position, note="Stopped."))
    note = ("Stopped. Step continues this run; Run continues it to the end." if session.live
            else "Stopped (the run had already finished).")
    return (session, *view(session, None, position, final=True, note=note))


def reset(session, position):
    session = session if isinstance(session, Session) else Session()
    session.reset_run()
    session.settings = None
    session.source = "none"
    return (session, *view(session, None, position, note="Cleared. Run or Step starts a new run."))


def show_iteration(session, upto, position):
    session = session if isinstance(session, Session) else Session()
    return view(session, upto, position)


def show_position(session, upto, position):
    session = session if isinstance(session, Session) else Session()
    if not session.records:
        return charts.empty_figure("No run yet."), gr.skip()
    record = session.records[_upto(session, upto)]
    mentored = charts.mentored_output_figure(record, _position(position)) if record.method == "mentored" else gr.skip()
    return charts.pq_figure(record, _position(position)), mentored


def _open_trace(session: Session, path, title: str, source: str, position):
    try:
        records, summary = read_trace(path)
    except (OSError, ValueError) as exc:
        raise gr.Error(f"Could not open the trace: {exc}", title="Not a trace file") from None
    session.reset_run()
    session.records, session.summary = records, summary
    session.settings = settings_from_summary(summary, records)
    session.source, session.title = source, title
    session.target = session.draft = None
    models = summary.models if summary is not None else {}
    session.target_bytes = models.get("target_weight_bytes")
    session.draft_bytes = models.get("draft_weight_bytes")
    return (session, *view(session, None, position, final=True))


def open_trace(session, file, position):
    session = session if isinstance(session, Session) else Session()
    if not file:
        raise gr.Error("No file received.")
    path = file if isinstance(file, str) else getattr(file, "name", None)
    return _open_trace(session, path, Path(path).name, "trace", position)


def open_example(session, title, position):
    session = session if isinstance(session, Session) else Session()
    examples = example_traces()
    if title not in examples:
        return (session, *view(session, None, position, note="No example traces shipped."))
    return _open_trace(session, examples[title], title, "example", position)


CONTROL_ORDER = ("prompt", "chat", "method", "gamma", "lenience", "kl_bound", "beams", "tau", "tree_budget",
                 "temperature", "top_k", "top_p", "seed", "max_new_tokens")


def controls_from_session(session):
    """After a trace is opened: the left-hand controls take that run's settings (CONTROL_ORDER), so
    Run repeats it on the loaded pair. A trace without a summary leaves the controls as they are;
    a knob the run did not use keeps its current value."""
    s = session.settings if isinstance(session, Session) else None
    if s is None:
        return tuple(gr.skip() for _ in CONTROL_ORDER)
    extra = s.extra or {}
    tree = extra.get("tree_budget", extra.get("tree_size"))
    tree = 0 if tree in ("auto", None) and s.method == "ppd" else tree
    values = {"prompt": s.prompt, "chat": s.chat, "method": s.method, "gamma": min(max(s.gamma, 1), MAX_GAMMA),
              "lenience": s.lenience, "kl_bound": extra.get("kl_bound"), "beams": extra.get("beams"),
              "tau": extra.get("tau"), "tree_budget": tree, "temperature": s.temperature, "top_k": s.top_k,
              "top_p": s.top_p, "seed": s.seed, "max_new_tokens": min(max(s.max_new_tokens, 1), MAX_NEW_TOKENS)}
    return tuple(gr.skip() if values[name] is None else values[name] for name in CONTROL_ORDER)


def on_load(session, position):
    """Show the first shipped example trace before any model has been loaded."""
    session = session if isinstance(session, Session) else Session()
    examples = example_traces()
    if not examples or session.records:
        return (session, *view(session, None, position))
    title = next(iter(examples))
    return _open_trace(session, examples[title], title, "example", position)


def load_models(preset, custom_target, custom_draft, method, progress=gr.Progress()):
    from .session import resolve_pair

    try:
        target_spec, draft_spec = resolve_pair(preset, custom_target, custom_draft)
    except ValueError as exc:
        raise gr.Error(str(exc)) from None
    target, draft = load_pair(target_spec, draft_spec, True, progress)
    draft_name = draft if isinstance(draft, str) else f"{draft.name} ({draft.n_params / 1e6:.0f}M parameters)"
    return (f"Loaded target **{target.name}** ({target.n_params / 1e6:.0f}M parameters, {target.device}) and draft "
            f"**{draft_name}**. Run or Step to decode.")


def on_preset(preset):
    p = preset_by_label(preset)
    custom = p is not None and p.key == "custom"
    note = f"{p.note}" if p and p.note else ""
    return gr.update(visible=custom), gr.update(visible=custom), gr.update(value=p.chat if p else True), note


def on_prompt_pick(label):
    prompt, chat = EXAMPLE_PROMPTS.get(label, ("", True))
    return prompt, chat


def on_method(method):
    knobs = knobs_for(method)
    return tuple(gr.update(visible=name in knobs) for name in ("gamma", "lenience", *EXTRA_KNOBS))


# ----------------------------------------------------------------------------- lab
def _lab_inputs(table, lenience, n, seed):
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


def _lab_once(vocab, p, q, lenience, n, seed):
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
    vocab, p, q = _lab_inputs(table, lenience, n, seed)
    result, md = _lab_once(vocab, p, q, lenience, n, seed)
    return charts.lab_figure(vocab, result), charts.lab_residual_figure(vocab, result), \
        charts.tv_figure([(result["n"], result["tv_to_expected"])]), md


def lab_converge(table, lenience, seed):
    vocab, p, q = _lab_inputs(table, lenience, 0, seed)
    history = []
    for n in (100, 1_000, 10_000, 100_000, 1_000_000):
        result, md = _lab_once(vocab, p, q, lenience, n, seed)
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


# ----------------------------------------------------------------------------- side by side
def compare(session, preset, custom_target, custom_draft, prompt, chat, method_a, method_b, gamma, temperature,
            top_k, top_p, lenience, seed, max_new_tokens, kl_bound, beams, tau, tree_budget,
            progress=gr.Progress()):
    """Run two methods one after the other on the same prompt, seed and models."""
    from decoding.runner import decode, summarize

    session = session if isinstance(session, Session) else Session()
    results = []
    for label, method in (("A", method_a), ("B", method_b)):
        s = _settings(preset, custom_target, custom_draft, prompt, chat, method, gamma, temperature, top_k, top_p,
                      lenience, seed, max_new_tokens, kl_bound, beams, tau, tree_budget)
        target, draft = load_pair(s.target, s.draft, uses_drafter(method), progress)
        config = dataclasses.replace(s.config(), lean=True)
        try:
            ids = target.encode_prompt(s.prompt, s.chat)
            records = []
            for record in decode(target, draft, ids, config):
                records.append(record)
                progress(min(0.99, record.generated / s.max_new_tokens), desc=f"{label}: {method}")
        except ValueError as exc:
            raise gr.Error(str(exc)) from None
        summary = summarize(records, config, s.prompt, target, draft)
        if method == "autoregressive":
            session.baselines[s.target] = summary.tokens_per_second
        results.append((label, method, summary))
        yield (session, *_compare_outputs(results))


def _compare_outputs(results):
    texts_ = [r[2].text for r in results] + [""] * (2 - len(results))
    rows = "".join(
        f"<tr><td>{label}</td><td>{render.html.escape(method)}</td><td>{s.tokens_per_second:.1f}</td>"
        f"<td>{len(s.token_ids)}</td><td>{s.target_calls}</td><td>{s.tokens_per_call:.2f}</td>"
        f"<td>{'—' if s.mean_accepted is None else f'{s.mean_accepted:.2f}'}</td><td>{s.wall_seconds:.2f}</td></tr>"
        for label, method, s in results
    )
    verdict = ""
    if len(results) == 2:
        (_, ma, sa), (_, mb, sb) = results
        if sb.tokens_per_second > 0:
            ratio = sa.tokens_per_second / sb.tokens_per_second
            word = "faster" if ratio >= 1 else "slower"
            verdict = (f'<p class="verdict {"good" if ratio >= 1 else "bad"}"><b>{render.html.escape(ma)} is ×{ratio:.2f} '
                       f'({word}) than {render.html.escape(mb)}</b> on this machine, measured.</p>')
    table = ('<table class="cmp"><thead><tr><th></th><th>method</th><th>tokens/s</th><th>tokens</th><th>target calls</th>'
             '<th>tokens per target call</th><th>mean accepted length</th><th>seconds</th></tr></thead>'
             f"<tbody>{rows}</tbody></table>{verdict}")
    return texts_[0], texts_[1], table


# ================================================================================ layout
def build_demo() -> gr.Blocks:
    methods = method_choices()
    default_method = "speculative" if "speculative" in methods else methods[0]
    examples = example_traces()
    PRESETS = presets()
    with gr.Blocks(title="Speculative decoding playground") as demo:
        state = gr.State(None, time_to_live=SESSION_TTL_SECONDS, delete_callback=delete_session)
        with gr.Tabs():
            # ---------------------------------------------------------------- explainer
            with gr.Tab("Explainer", id="explainer"):
                gr.Markdown(texts.INTRO)
                with gr.Row(equal_height=False, elem_classes="mainrow"):
                    with gr.Column(scale=1, min_width=300, elem_classes="controls"):
                        preset = gr.Dropdown([p.label for p in PRESETS], value=PRESETS[0].label,
                                             label="Model pair (draft → target)")
                        preset_note = gr.Markdown(PRESETS[0].note, elem_classes="note")
                        custom_target = gr.Textbox("", label="Custom target (hub id)", visible=False,
                                                   placeholder="HuggingFaceTB/SmolLM2-360M-Instruct")
                        custom_draft = gr.Textbox(label="Custom draft (hub id, or prompt-lookup)", visible=False,
                                                  value=PROMPT_LOOKUP)
                        load_btn = gr.Button("Load models", size="sm")
                        load_msg = gr.Markdown("", elem_classes="note")
                        prompt = gr.Textbox(label="Prompt", lines=3, max_length=MAX_PROMPT_CHARS,
                                            value=next(iter(EXAMPLE_PROMPTS.values()))[0])
                        prompt_pick = gr.Dropdown(list(EXAMPLE_PROMPTS), value=None, label="Example prompts")
                        chat = gr.Checkbox(value=PRESETS[0].chat, label="Apply the chat template (instruct models)")
                        method = gr.Dropdown(methods, value=default_method, label="Method")
                        gamma = gr.Slider(1, MAX_GAMMA, value=4, step=1, label="γ (gamma): draft length")
                        lenience = gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="Lenience l (1 = exact)")
                        kl_bound = gr.Slider(0.0, 2.0, value=0.1, step=0.01, label="KL bound D (mentored)", visible=False)
                        beams = gr.Slider(1, MAX_BEAMS, value=4, step=1, label="Beams B (MJSD)", visible=False)
                        tau = gr.Slider(0.0, 1.0, value=0.1, step=0.01, label="τ: joint-likelihood threshold (MJSD)", visible=False)
                        tree_budget = gr.Slider(0, 64, value=0, step=1, visible=False,
                                                label="Tree size n (PPD): 0 = auto, the n* tuned for this device (else 12)")
                        temperature = gr.Slider(0.0, 2.0, value=0.7, step=0.05, label="Temperature (0 = greedy)")
                        top_k = gr.Slider(0, 100, value=0, step=1, label="Top-k (0 = off)")
                        top_p = gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="Top-p (1 = off)")
                        with gr.Row():
                            seed = gr.Number(value=0, precision=0, label="Seed", minimum=0)
                            max_new = gr.Slider(1, MAX_NEW_TOKENS, value=48, step=1, label="Max new tokens")
                        pacing = gr.Slider(0.0, 2.0, value=0.3, step=0.05,
                                           label="Pacing: seconds per iteration (0 = as fast as it decodes)")
                        with gr.Row():
                            run_btn = gr.Button("▶ Run", variant="primary", elem_id="run-btn")
                            step_btn = gr.Button("⏭ Step", elem_id="step-btn")
                            stop_btn = gr.Button("■ Stop", variant="stop", elem_id="stop-btn")
                            reset_btn = gr.Button("↺ Reset", elem_id="reset-btn")
                        with gr.Accordion("Save, open, reproduce", open=False):
                            download = gr.DownloadButton("Download this run (.jsonl trace)", interactive=False)
                            upload = gr.UploadButton("Open a trace file (.jsonl)", file_types=[".jsonl", ".json", ".txt"])
                            example_pick = gr.Dropdown(list(examples), value=None, label="Example traces (no model needed)")
                            cli = gr.Code(label="Copy as CLI command", language="shell", lines=3, interactive=False)
                    with gr.Column(scale=2, min_width=320, elem_classes="panels"):
                        stats = gr.HTML(label="Run statistics", elem_id="stats")
                        with gr.Row(equal_height=True):
                            timeline = gr.Slider(0, 1, value=0, step=1, label="Timeline: iteration", scale=3)
                            position = gr.Number(value=0, precision=0, minimum=0, maximum=MAX_GAMMA, scale=1,
                                                 label="Draft position for p vs q (0 = first rejection)")
                        iter_caption = gr.Markdown(elem_classes="caption")
                        gr.HTML(render.legend_html(), label="Legend")
                        chips = gr.HTML(label="Text so far, as token chips", elem_id="chips")
                        with gr.Accordion("What do the chips mean?", open=False):
                            gr.Markdown(texts.CHIPS)
                        text = gr.Textbox(label="Generated text", lines=3, interactive=False, buttons=["copy"])
                        draft_row = gr.HTML(label="This iteration's draft", elem_id="draft-row")
                        with gr.Accordion("How to read the draft row", open=False):
                            gr.Markdown(texts.DRAFT_ROW)
                        # the panel of the shown run's method (mentored, MJSD, PPD); hidden for the others
                        with gr.Column(visible=False, elem_id="method-panel", elem_classes="methodpanel") as method_box:
                            method_md = gr.Markdown(elem_classes="explain")
                            with gr.Row(elem_classes="plots"):
                                with gr.Column(min_width=300):
                                    method_plot = gr.Plot(label="Method panel", elem_id="method-plot")
                                with gr.Column(min_width=300, visible=False) as method_col2:
                                    method_plot2 = gr.Plot(label="Output distribution of one mentored step vs p and q",
                                                           elem_id="method-plot2")
                            method_html = gr.HTML(label="Method details", elem_id="method-html")
                        with gr.Row(elem_classes="plots"):
                            with gr.Column(min_width=300):
                                pq_plot = gr.Plot(label="p (target) vs q (draft) at one draft position", elem_id="pq-plot")
                                gr.Markdown(texts.PQ, elem_classes="explain")
                            with gr.Column(min_width=300):
                                residual_plot = gr.Plot(label="Residual distribution", elem_id="residual-plot")
                                gr.Markdown(texts.RESIDUAL, elem_classes="explain")
                        tree = gr.HTML(label="Draft tree", elem_id="tree")
                        gr.Markdown(texts.TREE, elem_classes="explain")
                        running = gr.Plot(label="Running charts", elem_id="running-plot")
                        gr.Markdown(texts.RUNNING, elem_classes="explain")
                        with gr.Accordion("Theory: expected speed-up vs γ", open=True):
                            theory_plot = gr.Plot(label="Theory vs γ", elem_id="theory-plot")
                            theory_md = gr.Markdown()
                            gr.Markdown(texts.THEORY, elem_classes="explain")

            # ---------------------------------------------------------------- lab
            with gr.Tab("Exactness lab", id="lab"):
                gr.Markdown(texts.LAB)
                with gr.Row(equal_height=False):
                    with gr.Column(scale=1, min_width=280):
                        table = gr.Dataframe(
                            value=[[v, p, q] for v, p, q in zip(EXAMPLE_VOCAB, EXAMPLE_P, EXAMPLE_Q)],
                            headers=["token", "p (target)", "q (draft)"], datatype=["str", "number", "number"],
                            type="array", interactive=True, label="Vocabulary, p and q (add or delete rows)",
                        )
                        normalize_btn = gr.Button("Normalise p and q to sum to 1", size="sm")
                        lab_lenience = gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="Lenience l (1 = exact)")
                        lab_n = gr.Dropdown([100, 1_000, 10_000, 100_000, 1_000_000], value=10_000, label="N steps")
                        lab_seed = gr.Number(value=0, precision=0, label="Seed", minimum=0)
                        with gr.Row():
                            lab_btn = gr.Button("Sample N", variant="primary")
                            converge_btn = gr.Button("Watch it converge")
                    with gr.Column(scale=2, min_width=300):
                        lab_md = gr.Markdown()
                        lab_plot = gr.Plot(label="Empirical vs expected distribution", elem_id="lab-plot")
                        with gr.Row():
                            lab_res = gr.Plot(label="Residual", min_width=280)
                            lab_tv = gr.Plot(label="Convergence", min_width=280)

            # ---------------------------------------------------------------- side by side
            with gr.Tab("Side by side", id="side"):
                gr.Markdown(texts.SIDE)
                gr.Markdown("Uses the prompt, models and settings of the Explainer tab.", elem_classes="note")
                with gr.Row():
                    method_a = gr.Dropdown(methods, value=default_method, label="Method A")
                    method_b = gr.Dropdown(methods, value="autoregressive" if "autoregressive" in methods else methods[0],
                                           label="Method B (baseline)")
                compare_btn = gr.Button("Run A, then B", variant="primary")
                cmp_table = gr.HTML(label="Measured comparison")
                with gr.Row():
                    text_a = gr.Textbox(label="Text from method A", lines=6, interactive=False)
                    text_b = gr.Textbox(label="Text from method B", lines=6, interactive=False)

        # ---------------------------------------------------------------- wiring
        view_outputs = [stats, timeline, iter_caption, chips, text, draft_row, pq_plot, residual_plot, tree,
                        running, theory_plot, theory_md, cli, download, method_box, method_md, method_html,
                        method_plot, method_col2, method_plot2]
        run_inputs = [state, preset, custom_target, custom_draft, prompt, chat, method, gamma, temperature, top_k,
                      top_p, lenience, seed, max_new, kl_bound, beams, tau, tree_budget]
        model_events = dict(concurrency_limit=1, concurrency_id="model")
        run_ev = run_btn.click(generate, run_inputs + [pacing, position], [state, *view_outputs],
                               api_name="generate", **model_events)
        step_ev = step_btn.click(step, run_inputs + [position], [state, *view_outputs], api_name="step", **model_events)
        cmp_ev = compare_btn.click(compare, [state, preset, custom_target, custom_draft, prompt, chat, method_a, method_b,
                                             gamma, temperature, top_k, top_p, lenience, seed, max_new, kl_bound, beams,
                                             tau, tree_budget], [state, text_a, text_b, cmp_table],
                                   api_name="compare", **model_events)
        stop_btn.click(stop, [state, position], [state, *view_outputs], cancels=[run_ev, step_ev, cmp_ev],
                       api_name=False, queue=False)
        reset_btn.click(reset, [state, position], [state, *view_outputs], api_name=False)
        timeline.input(show_iteration, [state, timeline, position], view_outputs, api_name=False,
                       show_progress="hidden", trigger_mode="always_last")
        position.change(show_position, [state, timeline, position], [pq_plot, method_plot2], api_name=False,
                        show_progress="hidden")
        controls = [prompt, chat, method, gamma, lenience, kl_bound, beams, tau, tree_budget, temperature, top_k, top_p,
                    seed, max_new]  # CONTROL_ORDER
        upload.upload(open_trace, [state, upload, position], [state, *view_outputs], api_name=False).then(
            controls_from_session, state, controls, api_name=False)
        example_pick.input(open_example, [state, example_pick, position], [state, *view_outputs], api_name=False).then(
            controls_from_session, state, controls, api_name=False)
        load_btn.click(load_models, [preset, custom_target, custom_draft, method], load_msg, api_name=False, **model_events)
        prompt_pick.input(on_prompt_pick, prompt_pick, [prompt, chat], api_name=False)
        preset.change(on_preset, preset, [custom_target, custom_draft, chat, preset_note], api_name=False)
        method.change(on_method, method, [gamma, lenience, kl_bound, beams, tau, tree_budget], api_name=False)
        lab_btn.click(lab_run, [table, lab_lenience, lab_n, lab_seed], [lab_plot, lab_res, lab_tv, lab_md], api_name="lab")
        converge_btn.click(lab_converge, [table, lab_lenience, lab_seed], [lab_plot, lab_res, lab_tv, lab_md],
                           api_name="lab_converge")
        normalize_btn.click(lab_normalize, table, table, api_name=False)
        demo.load(on_load, [state, position], [state, *view_outputs], api_name=False)
        demo.load(lab_run, [table, lab_lenience, lab_n, lab_seed], [lab_plot, lab_res, lab_tv, lab_md], api_name=False)
    demo.queue(max_size=QUEUE_SIZE, default_concurrency_limit=2)
    return demo


def launch_kwargs() -> dict:
    css = CSS_PATH.read_text(encoding="utf-8") if CSS_PATH.exists() else ""
    return dict(css=css, share=False, max_file_size="20mb", show_error=True, footer_links=["api", "gradio"])
