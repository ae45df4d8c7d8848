"""The app's rendering of trace records (no model, no server): escaping, chips, tooltips, bars,
replay of the shipped example traces, settings limits and the CLI command."""

import json

import pytest

from app import charts, charts_methods, charts_running, render, render_methods
from app.html_text import num
from app.session import Session, example_traces, read_trace, write_trace
from app.settings import MAX_GAMMA, cli_command, make_settings, settings_from_summary
from decoding.trace.metrics import measured_alpha_c
from decoding.trace.record import (
    ACCEPTED,
    BONUS,
    CORRECTION,
    TARGET,
    Candidate,
    DraftToken,
    EmittedToken,
    IterationRecord,
    Residual,
    Timings,
    TreeNode,
)

EVIL = "<script>alert('x')</script>"


def _record(iteration=0, draft=None, emitted=None, residual=None, next_top=None, tree=None, method="speculative"):
    return IterationRecord(
        method=method, iteration=iteration, context_length=5, gamma=len(draft or []), draft=draft or [],
        accepted_length=sum(1 for d in (draft or []) if d.accepted), emitted=emitted or [], residual=residual,
        next_top=next_top or [], tree=tree or [], timings=Timings(0.001, 0.01, 0.0005), target_calls=iteration + 1,
        draft_calls=0, generated=len(emitted or []), elapsed=0.02 * (iteration + 1), energy_joules=None,
        energy_note="no energy meter attached", finished=False,
    )


@pytest.fixture
def rejected_record():
    """Draft ' a' accepted, '<script>…' rejected, '&amp\\n' not examined; correction ' b'."""
    top0 = [Candidate(10, " a", 0.6, 0.5), Candidate(11, EVIL, 0.1, 0.4)]
    top1 = [Candidate(11, EVIL, 0.05, 0.7), Candidate(12, " b", 0.5, 0.1), Candidate(13, "&amp\n", 0.2, 0.2)]
    draft = [
        DraftToken(0, 10, " a", q=0.5, p=0.6, coin=0.3, threshold=1.0, accepted=True, overlap=0.7, top=top0),
        DraftToken(1, 11, EVIL, q=0.7, p=0.05, coin=0.81, threshold=0.0714, accepted=False, overlap=0.4, top=top1),
        DraftToken(2, 13, "&amp\n", q=0.2, p=0.2, coin=None, threshold=None, accepted=None, overlap=0.9, top=[]),
    ]
    residual = Residual(12, " b", mass=0.6, fell_back_to_p=False,
                        top=[Candidate(12, " b", 0.75), Candidate(13, "&amp\n", 0.25)])
    emitted = [EmittedToken(10, " a", ACCEPTED), EmittedToken(12, " b", CORRECTION)]
    tree = [TreeNode(0, -1, 1, "x", 0, "root", True), TreeNode(1, 0, 10, " a", 1, "draft", True),
            TreeNode(2, 1, 11, EVIL, 2, "draft", False), TreeNode(3, 2, 13, "&amp\n", 3, "draft", False)]
    return _record(1, draft, emitted, residual, [Candidate(12, " b", 0.75)], tree)


@pytest.fixture
def bonus_record():
    draft = [DraftToken(0, 20, "c", q=0.4, p=0.5, coin=0.2, threshold=1.0, accepted=True, overlap=0.8,
                        top=[Candidate(20, "c", 0.5, 0.4)])]
    emitted = [EmittedToken(20, "c", ACCEPTED), EmittedToken(21, "d", BONUS)]
    return _record(2, draft, emitted, None, [Candidate(21, "d", 0.9), Candidate(22, "e", 0.1)])


def test_token_text_is_escaped_and_whitespace_visible():
    out = render.token_html(EVIL + " x\n&")
    assert "<script>" not in out
    assert "&lt;script&gt;" in out
    assert "↵" in out and "·" in out and "&amp;" in out
    assert render.token_html("") != ""


def test_chips_escape_and_kinds(rejected_record, bonus_record):
    html = render.chips_html([rejected_record, bonus_record])
    assert "<script>" not in html and "&lt;script&gt;" in html
    for kind in ("chip-accepted", "chip-rejected", "chip-correction", "chip-bonus"):
        assert kind in html
    # the rejected token is shown struck, before its correction; the unexamined one is not a chip
    assert html.index("chip-rejected") < html.index("chip-correction")
    assert html.count('class="chip ') == 5
    # the selected (last) iteration is outlined
    assert html.count(" cur") == 2


def test_chip_colours_are_okabe_ito_and_distinct():
    colours = [c for _label, c, _d in render.CHIP_KINDS.values()]
    assert len(set(colours)) == len(colours)
    okabe_ito = {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999", "#000000"}
    assert set(colours) <= okabe_ito
    legend = render.legend_html()
    for label, _c, _d in render.CHIP_KINDS.values():
        assert label in legend


def test_tooltips_carry_p_q_coin_threshold(rejected_record):
    chips = render.record_chips(rejected_record)
    accepted, rejected, correction = chips
    assert "p(x) = 0.600" in accepted and "q(x) = 0.500" in accepted
    assert "coin u = 0.300" in accepted and "threshold" in accepted and "1.000" in accepted
    assert "coin u = 0.810" in rejected and "0.071" in rejected and "rejected" in rejected
    assert "residual r(x) = 0.750" in correction and "p(x) = 0.500" in correction and "q(x) = 0.100" in correction
    assert "<script>" not in rejected  # escaped inside the attribute too
    # a tap focuses a chip and opens its tooltip on a phone, but Tab does not stop at each chip
    assert 'tabindex="-1"' in accepted and 'role="listitem"' in accepted


def test_draft_row_marks_accept_reject_and_unexamined(rejected_record):
    html = render.draft_row_html(rejected_record)
    assert "✓ accept" in html and "✗ reject" in html and "not examined" in html
    assert "<script>" not in html
    assert "coinbar" in html
    assert "correction" not in html or "residual" in html


def test_draft_row_without_draft():
    rec = _record(0, [], [EmittedToken(5, "z", TARGET)], method="autoregressive")
    assert "no draft" in render.draft_row_html(rec).lower()


def test_tree_renders_nodes_generically(rejected_record):
    html = render.tree_html(rejected_record)
    assert html.count('class="node') == 4
    assert "node acc" in html and "node rej" in html
    assert "<script>" not in html
    # a branching tree (beams) nests children under their parent
    branching = _record(0, tree=[TreeNode(0, -1, 1, "r", 0, "root", True), TreeNode(1, 0, 2, "a", 1, "beam", True),
                                 TreeNode(2, 0, 3, "b", 1, "beam", False, score=-1.5)])
    html = render.tree_html(branching)
    assert html.count("<li>") == 3 and "kind-beam" in html and "-1.50" in html


def _bar_text(fig):
    return fig.text()


def test_pq_figure_highlights_drafted_token(rejected_record):
    fig = charts.pq_figure(rejected_record)  # default: the first rejection (position 2)
    assert [t["name"] for t in fig.data] == ["p (target)", "q (draft)"]
    labels = list(fig.data[0]["x"])
    i = labels.index(render.visible(EVIL))
    assert fig.data[0]["marker"]["line"]["width"][i] == 3
    assert sum(1 for w in fig.data[0]["marker"]["line"]["width"] if w) == 1
    assert any("drafted" in a["text"] and "rejected" in a["text"] for a in fig.layout["annotations"])
    json.loads(fig.to_json())  # what gr.Plot sends to plotly.js
    # a chosen position
    fig0 = charts.pq_figure(rejected_record, 0)
    assert "position 1" in fig0.layout["title"]["text"]


def test_residual_figure_highlights_drawn_token(rejected_record, bonus_record):
    fig = charts.residual_figure(rejected_record)
    labels = list(fig.data[0]["x"])
    assert fig.data[0]["marker"]["line"]["width"][labels.index("·b")] == 3
    assert any("drawn: ·b" in a["text"] for a in fig.layout["annotations"])
    assert "bonus" in _bar_text(charts.residual_figure(bonus_record)).lower()


def test_running_and_theory_figures(rejected_record, bonus_record):
    fig = charts_running.running_figure([rejected_record, bonus_record], 0, baseline_tps=40.0, target_bytes=10_000_000)
    names = [t["name"] for t in fig.data]
    assert "tokens/s" in names and "accepted length" in names and "MB/token (proxy)" in names
    assert "autoregressive baseline" in names
    assert "Energy is not measured" in _bar_text(fig)
    alpha, c, how = measured_alpha_c([rejected_record, bonus_record])
    assert alpha == pytest.approx((0.7 + 0.4 + 0.9 + 0.8) / 4)
    assert c is not None and c > 0
    theory = charts.theory_figure(alpha, c, 3)
    assert "optimal" in _bar_text(theory)


def _acceptance_traces(fig):
    return {t["xaxis"]: t for t in fig.data if t.get("xaxis") in ("x4", "x5") and t.get("type") == "bar"}


def test_running_charts_show_acceptance_per_position_beside_alpha_power_i(rejected_record, bonus_record):
    records = [rejected_record, bonus_record]
    fig = charts_running.running_figure(records)
    rows = _acceptance_traces(fig)
    # drafted 3 (accepted 1) and 1 (accepted 1): position 1 2 of 2, positions 2 and 3 0 of 1
    assert rows["x4"]["y"] == [1.0, 0.0, 0.0] and rows["x4"]["customdata"] == [[2, 2], [0, 1], [0, 1]]
    assert rows["x5"]["y"] == [0, 2, 0, 0]  # both iterations accepted one draft token
    alpha = measured_alpha_c(records)[0]
    iid = next(t for t in fig.data if t.get("mode") == "lines+markers" and t.get("xaxis") == "x4")
    assert iid["y"] == pytest.approx([alpha, alpha ** 2, alpha ** 3])
    words = _bar_text(fig)
    assert "drafted at least i tokens" in words and "mean acceptance length 2.00 tokens" in words
    # only the iterations up to the one shown count
    assert _acceptance_traces(charts_running.running_figure(records, 0))["x5"]["y"] == [0, 1, 0, 0]


@pytest.mark.parametrize("name, words", [("04_list_copy_autoregressive", "Plain decoding drafts nothing"),
                                         ("07_list_ppd_tree16", "checks a tree of guesses")])
def test_running_charts_of_a_run_without_draft_positions_say_why_in_a_sentence(name, words):
    records, _ = read_trace(example_traces()[next(k for k, v in example_traces().items() if v.stem == name)])
    for upto in (0, len(records) - 1):
        fig = charts_running.running_figure(records, upto)
        assert _acceptance_traces(fig) == {}  # no bars
        assert not any(t.get("mode") == "lines+markers" and t.get("xaxis") == "x4" for t in fig.data)  # no α^i
        notes = [a["text"] for a in fig.layout["annotations"] if a.get("xref") in ("x4 domain", "x5 domain")]
        assert len(notes) == 2 and all(words in n.replace("<br>", " ") for n in notes)


def test_example_traces_replay_without_a_model():
    examples = example_traces()
    assert examples, "assets/examples must hold precomputed traces"
    from app.explainer.handlers import open_trace_file as _open_trace
    from app.explainer.view import view

    for title, path in examples.items():
        assert path.stat().st_size < 300_000
        session = Session()
        out = _open_trace(session, path, title, "example", 0)
        assert session.records and session.summary is not None
        assert session.target is None  # no model was loaded
        stats, chips = out[1], out[4]
        assert "Replay" in stats and "chip" in chips
        # every iteration of the timeline renders
        for i in range(len(session.records)):
            view(session, i, 0)
        # the trace can be downloaded again and reread, and reproduced headless
        path2 = session.trace_path()
        records, summary = read_trace(path2)
        assert len(records) == len(session.records) and summary.text == session.summary.text
        assert cli_command(session.settings).startswith("python -m decoding generate --prompt")


def test_trace_round_trip_and_bad_file(tmp_path, rejected_record, bonus_record):
    path = tmp_path / "run.jsonl"
    write_trace(path, [rejected_record, bonus_record], None)
    records, summary = read_trace(path)
    assert [r.iteration for r in records] == [1, 2] and summary is None
    assert records[0].draft[1].text == EVIL
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    with pytest.raises(ValueError, match="not JSON"):
        read_trace(bad)


def test_settings_limits_give_readable_errors():
    ok = dict(prompt="hi", chat=False, method="speculative", gamma=4, temperature=0.7, top_k=0, top_p=1.0,
              lenience=1.0, seed=0, max_new_tokens=16, target="default", draft="prompt-lookup")
    s = make_settings(**ok)
    assert s.config().gamma == 4
    for change, pattern in [
        (dict(prompt="  "), "prompt is empty"),
        (dict(prompt="x" * 100_000), "at most"),
        (dict(gamma=0), "gamma"),
        (dict(gamma=MAX_GAMMA + 1), "gamma"),
        (dict(max_new_tokens=10_000), "max new tokens"),
        (dict(temperature=-1), "temperature"),
        (dict(method="nope"), "Unknown method"),
        (dict(lenience=0), "lenience"),
    ]:
        with pytest.raises(ValueError, match=pattern):
            make_settings(**{**ok, **change})
    # autoregressive ignores gamma and lenience
    make_settings(**{**ok, "method": "autoregressive", "lenience": 1.0})
    cmd = cli_command(s)
    assert "--method speculative" in cmd and "--gamma 4" in cmd and "--draft prompt-lookup" in cmd
    assert "'hi'" in cmd or " hi " in cmd


def test_settings_from_summary_of_example():
    examples = example_traces()
    path = next(iter(examples.values()))
    records, summary = read_trace(path)
    s = settings_from_summary(summary)
    assert s is not None and s.method == summary.method and s.prompt == summary.prompt


def test_joint_likelihood_records_render_ratio_vs_tau():
    """MJSD-style records: no coin; each prefix's joint ratio against tau comes from extra["mjsd"]."""
    draft = [DraftToken(0, 30, "x", q=0.5, p=0.4, coin=None, threshold=None, accepted=True, overlap=0.6),
             DraftToken(1, 31, "y", q=0.6, p=0.01, coin=None, threshold=None, accepted=False, overlap=0.2)]
    rec = _record(0, draft, [EmittedToken(30, "x", ACCEPTED), EmittedToken(33, "z", CORRECTION)],
                  next_top=[Candidate(33, "z", 0.5)], method="mjsd",
                  tree=[TreeNode(0, -1, 1, "r", 0, "root", True), TreeNode(1, 0, 30, "x", 1, "beam", True, -0.7),
                        TreeNode(2, 0, 32, "w", 1, "beam", False, -1.1), TreeNode(3, 1, 31, "y", 2, "beam", False, -2.0)])
    rec.extra = {"mjsd": {"tau": 0.1, "prefixes": [{"length": 1, "ratio": 0.8, "passes": True},
                                                  {"length": 2, "ratio": 0.02, "passes": False}]}}
    row = render.draft_row_html(rec)
    assert "0.800 vs τ = 0.100" in row and "greedy" not in row
    chips = render.record_chips(rec)
    assert "joint ratio" in chips[0] and "passes" in chips[0] and "fails" in chips[1]
    assert "no residual" in chips[2]
    assert "itself" in charts.residual_figure(rec).text()
    assert render.tree_html(rec).count("kind-beam") == 3
    caption = render.caption(rec)  # MJSD's own rule and source of the next token, not the greedy rule's or a residual
    assert "Draft 2 'y' was not kept" in caption and "0.020 ≤ τ = 0.100" in caption, caption
    assert "Next token 'z' drawn from the target's p (MJSD uses no residual)" in caption, caption
    assert not any(word in caption for word in ("greedy", "p_raw", "—", "from the residual")), caption
    rec.emitted[-1] = EmittedToken(33, "z", BONUS)  # every prefix kept: the usual bonus sentence
    rec.draft[1].accepted, rec.extra["mjsd"]["prefixes"][1]["passes"] = True, True
    assert "All accepted: bonus token 'z' drawn from p." in render.caption(rec)


def test_numeric_token_texts_stay_categories():
    draft = [DraftToken(0, 8, "8", q=1.0, p=0.1, coin=0.5, threshold=0.1, accepted=False, overlap=0.1,
                        top=[Candidate(8, "8", 0.1, 1.0), Candidate(4, "4", 0.9, 0.0)])]
    rec = _record(0, draft, [EmittedToken(4, "4", CORRECTION)],
                  Residual(4, "4", 0.9, False, [Candidate(4, "4", 1.0)]))
    assert charts.pq_figure(rec).layout["xaxis"]["type"] == "category"
    assert charts.residual_figure(rec).layout["xaxis"]["type"] == "category"


def test_uploaded_trace_opens_and_a_bad_one_is_refused(tmp_path):
    import gradio as gr

    from app.explainer.handlers import open_trace
    from app.presets import presets

    path = next(iter(example_traces().values()))
    out = open_trace(None, str(path), 0, presets()[0].label, "")
    assert out[0].source == "trace" and out[0].records and "Replay" in out[1]
    assert "press ▶ Run" in out[-1]  # the status line says what Run does now
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n')
    with pytest.raises(gr.Error, match="not a trace record"):
        open_trace(None, str(bad), 0, presets()[0].label, "")


# ------------------------------------------------------------------ method panels (mentored, MJSD)
def _strict_json(fig):
    """What plotly.js can parse: no Infinity / NaN anywhere in the figure."""
    def refuse(constant):
        raise ValueError(f"{constant} in a figure")
    return json.loads(fig.to_json(), parse_constant=refuse)


def _engine_records(pair, method, extra, seed=0):
    from decoding.run.runner import decode
    from decoding.methods.base import RunConfig
    from decoding.rules.warp import SamplingConfig

    target, draft = pair
    config = RunConfig(method=method, max_new_tokens=12, sampling=SamplingConfig(1.0, 20, 0.9), gamma=4, seed=seed,
                       extra=extra)
    return list(decode(target, draft, target.encode_prompt("the cat sat", False), config))


def _panel_shown(out) -> bool:
    return out[0].get("visible") is True


def test_mentored_panel_renders_from_engine_records(tiny_pair):
    from app.explainer.panels import method_panel

    records = _engine_records(tiny_pair, "mentored", {"kl_bound": 0.3})
    rec = next(r for r in records if r.extra.get("mentored", {}).get("positions"))
    rows = rec.extra["mentored"]["positions"]
    out = method_panel(rec, None)
    assert _panel_shown(out) and "D = 0.3" in out[1] and "D = 0 is exactly speculative sampling" in out[1]
    html = out[2]
    assert "mentored r(x)" in html and "KL(p‖output)" in html and rows[0]["rule"] in html
    assert num(rows[0]["kl_to_target"]) in html  # the KL value itself
    acc = out[3]["value"]
    _strict_json(acc)
    names = [t["name"] for t in acc.data]
    assert "strict min(1, p/q)" in names and "mentored r(x)" in names and "coin u" in names
    strict = acc.data[names.index("strict min(1, p/q)")]["y"]
    mentored = acc.data[names.index("mentored r(x)")]["y"]
    assert all(m >= s - 1e-9 for s, m in zip(strict, mentored))  # never below strict
    assert any(s.get("yref") == "y2" and s["y0"] == pytest.approx(0.3) for s in acc.layout["shapes"])  # the D line
    kl_out = acc.data[names.index("KL(p‖output) of mentored")]["y"]
    assert all(k <= 0.3 + 1e-6 for k in kl_out)
    assert acc.layout["xaxis"]["ticktext"] == [f"<i>{r['rule']}</i>" for r in rows]  # which rule fired
    # the output distribution vs p and q at the chosen position, with KL(p || output) against D
    assert out[4]["visible"] is True  # the column of the second chart
    dist = out[5]
    _strict_json(dist)
    assert [t["name"] for t in dist.data] == ["p (target)", "q (draft)", "output of one mentored step"]
    row = charts_methods.mentored_position(rec, None)
    assert f"KL(p‖output) = {row['kl_to_target']:.3f} ≤ D = 0.3" in dist.layout["title"]["text"]
    first = charts_methods.mentored_output_figure(rec, rows[0]["position"])
    assert f"Draft position {rows[0]['position'] + 1}" in first.layout["title"]["text"]


def test_mentored_panel_survives_infinite_kl_and_lean_records():
    from app.explainer.panels import method_panel

    draft = [DraftToken(0, 8, "8", q=0.9, p=0.0, coin=0.4, threshold=0.35, accepted=True, overlap=0.1)]
    rec = _record(0, draft, [EmittedToken(8, "8", ACCEPTED), EmittedToken(4, "4", BONUS)], method="mentored")
    rec.extra = {"mentored": {"kl_bound": 0.5, "positions": [{
        "position": 0, "strict_threshold": 0.0, "threshold": 0.35, "rule": "search", "strict_alpha": 0.1,
        "alpha": 0.4, "kl_draft": float("inf"), "kl_to_target": 0.5,
        "output_top": [{"token_id": 8, "text": "8", "p": 0.0, "q": 0.9, "output": 0.3},
                       {"token_id": 4, "text": "4", "p": 1.0, "q": 0.1, "output": 0.7}]}]}}
    out = method_panel(rec, 0)
    acc = _strict_json(out[3]["value"])
    assert "∞" in json.dumps(acc, ensure_ascii=False)
    assert "∞" in out[2] and "0.500" in out[2]
    _strict_json(out[5])
    rec.extra = {}  # a lean trace: the panel still shows, with a reason instead of numbers
    out = method_panel(rec, 0)
    assert _panel_shown(out) and "lean" in out[2] and "lean" in out[3]["value"].text()


def test_mjsd_panel_renders_from_engine_records(tiny_pair):
    from app.explainer.panels import method_panel

    records = _engine_records(tiny_pair, "mjsd", {"beams": 3, "tau": 0.1})
    rec = next(r for r in records if r.draft)
    info = rec.extra["mjsd"]
    out = method_panel(rec, None)
    assert _panel_shown(out) and "B = 3" in out[1] and "τ = 0.1" in out[1] and "Temperature 0" in out[1]
    assert "every j is checked" in out[1]
    fig = out[3]["value"]
    _strict_json(fig)
    assert any(s.get("yref") == "y" and s["y0"] == pytest.approx(0.1) and s["y1"] == pytest.approx(0.1)
               for s in fig.layout["shapes"])  # the tau line
    assert any(a["text"] == "τ = 0.1" for a in fig.layout["annotations"])
    assert any(f"η = {info['eta']}" in a["text"] for a in fig.layout["annotations"])
    ratio = next(t for t in fig.data if t["name"] == "joint ratio")
    assert ratio["x"] == list(range(1, len(rec.draft) + 1))
    assert ratio["y"] == pytest.approx([pr["ratio"] for pr in info["prefixes"]])
    html = out[2]
    assert html.count("kind-beam") == sum(1 for n in rec.tree if n.kind == "beam")  # the beam tree
    assert "log q" in html and f"η = {info['eta']}" in html
    assert html.count("node acc chosen") + html.count("node rej chosen") == len(rec.draft)  # the chosen beam
    assert out[4]["visible"] is False  # MJSD uses one chart


def test_mjsd_panel_marks_the_longest_passing_prefix_not_the_first_failure():
    """The joint ratio is not monotone: j = 2 fails, j = 3 passes again, so eta = 3."""
    from app.explainer.panels import method_panel

    draft = [DraftToken(i, 30 + i, t, q=0.5, p=0.4, coin=None, threshold=None, accepted=True, overlap=0.5)
             for i, t in enumerate("abc")]
    rec = _record(0, draft, [EmittedToken(30 + i, t, ACCEPTED) for i, t in enumerate("abc")]
                  + [EmittedToken(40, "d", BONUS)], method="mjsd",
                  tree=[TreeNode(0, -1, 1, "r", 0, "root", True)]
                  + [TreeNode(i + 1, i, 30 + i, t, i + 1, "beam", True, -0.5 * (i + 1)) for i, t in enumerate("abc")])
    rec.extra = {"mjsd": {"tau": 0.1, "beams": 2, "eta": 3, "prefixes": [
        {"length": 1, "log_p": -1.0, "log_q": -0.3, "ratio": 0.5, "passes": True},
        {"length": 2, "log_p": -4.0, "log_q": -1.0, "ratio": 0.05, "passes": False},
        {"length": 3, "log_p": -4.2, "log_q": -3.0, "ratio": 0.3, "passes": True}]}}
    out = method_panel(rec, None)
    fig = out[3]["value"]
    assert any("η = 3" in a["text"] and "LONGEST" in a["text"] for a in fig.layout["annotations"])
    passes = next(t for t in fig.data if t["name"] == "prefix passes (> τ)")
    fails = next(t for t in fig.data if t["name"] == "prefix fails (≤ τ)")
    assert passes["x"] == [1, 3] and fails["x"] == [2]
    assert out[2].count(">kept<") == 3 and "fails" in out[2]


@pytest.mark.parametrize("method", ["speculative", "autoregressive"])
def test_method_panel_hidden_for_other_methods(method, rejected_record):
    from app.explainer.panels import method_panel
    from app.explainer.view import view

    rejected_record.method = method
    out = method_panel(rejected_record, 0)
    assert out[0].get("visible") is False and out[1] == "" and out[4]["visible"] is False
    session = Session()
    session.records = [rejected_record]
    assert view(session, 0, 0)[:-1][-6].get("visible") is False  # the panel: the six outputs before the player
    assert view(Session())[:-1][-6].get("visible") is False  # no run yet


def test_view_shows_the_panel_of_a_mentored_run(tiny_pair):
    from app.explainer.view import view

    session = Session()
    session.records = _engine_records(tiny_pair, "mentored", {"kl_bound": 0.3})
    i = next(i for i, r in enumerate(session.records) if r.draft)
    panel = view(session, i, 0)[-7:-1]
    assert panel[0].get("visible") is True and "Mentored" in panel[1] and "coin u" in panel[2]


def test_cli_command_of_a_replayed_mjsd_run_writes_switches_as_flags():
    ok = dict(prompt="hi", chat=False, method="mjsd", gamma=4, temperature=0.0, top_k=20, top_p=0.9, lenience=1.0,
              seed=0, max_new_tokens=8, target="default", draft="d")
    s = make_settings(**ok, extra={"beams": 4, "tau": 0.1})
    s.extra["beam_sample"] = False  # what settings_from_summary reads back from an MJSD trace
    cmd = cli_command(s)
    assert "--beams 4 --tau 0.1" in cmd and "beam-sample" not in cmd and "False" not in cmd
    s.extra["beam_sample"] = True
    assert "--beam-sample " in cli_command(s) and "True" not in cli_command(s)


def test_the_optimal_gamma_stays_within_the_sliders_range_and_says_so():
    alpha, c = 0.95, 0.001  # Theorem 3.8's optimum lies far beyond the γ slider
    best, words = charts.optimal_gamma_words(alpha, c)
    assert best == MAX_GAMMA and f"optimal γ = {MAX_GAMMA}" in words and "slider's largest" in words
    fig = charts.theory_figure(alpha, c, 4)
    star = next(t for t in fig.data if t["name"].startswith("optimal"))
    assert star["x"] == [MAX_GAMMA] and "without that limit" in fig.layout["title"]["text"]
    assert charts.optimal_gamma_words(0.8, 0.1) == (6, "optimal γ = 6 (×2.47)")  # within range: one figure


def test_every_chart_exports_at_least_1600_px_wide(rejected_record, bonus_record):
    from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q, EXAMPLE_VOCAB, run_sampling_lab

    lab = run_sampling_lab(EXAMPLE_P, EXAMPLE_Q, lenience=0.8, n=100, seed=0)
    figures = [charts.pq_figure(rejected_record), charts.residual_figure(rejected_record),
               charts_running.running_figure([rejected_record, bonus_record]), charts.theory_figure(0.8, 0.1, 4),
               charts.lab_figure(EXAMPLE_VOCAB, lab), charts.lab_residual_figure(EXAMPLE_VOCAB, lab),
               charts.tv_figure([(10, 0.1)]), charts.empty_figure("nothing"),
               charts_methods.mentored_acceptance_figure(rejected_record), charts_methods.ppd_tuning_figure(None)]
    for fig in figures:
        options = fig["config"]["toImageButtonOptions"]
        assert options["width"] * options["scale"] >= 1600 and options["format"] == "png"
        assert options["height"] == fig.layout["height"]  # the shape on screen, twice the pixels


def test_the_labs_expected_and_empirical_bars_differ_by_more_than_colour():
    from decoding.rules.lab import EXAMPLE_P, EXAMPLE_Q, EXAMPLE_VOCAB, run_sampling_lab

    fig = charts.lab_figure(EXAMPLE_VOCAB, run_sampling_lab(EXAMPLE_P, EXAMPLE_Q, n=100, seed=0))
    expected = next(t for t in fig.data if t["name"].startswith("expected"))
    empirical = next(t for t in fig.data if t["name"].startswith("empirical"))
    assert "pattern" not in expected["marker"] and empirical["marker"]["pattern"]["shape"]
    assert empirical["marker"]["line"]["width"] >= 2 and "(dotted, outlined)" in empirical["name"]
