"""The app's PPD panel (Chen et al.): the tree view (candidates vs prompt tokens, the accepted path),
the lossless / LOSSY verification badge, the untrained-embeddings notice, the verification path
table and the hardware-aware tuning curves carried in the trace. Synthetic records built by hand,
plus short real PPD runs on the tiny random target."""

import json

import pytest

from app import charts, charts_methods, render, render_methods
from app.explainer.panels import method_panel
from app.explainer.view import view
from app.session import Session, read_trace, write_trace
from decoding.trace.record import (
    ACCEPTED,
    CORRECTION,
    Candidate,
    DraftToken,
    EmittedToken,
    IterationRecord,
    Timings,
    TreeNode,
)

TUNING = {"n": [2, 4, 8, 16], "latency_ms": [10.0, 10.5, 11.0, 16.0], "tokens_per_step": [1.3, 1.6, 1.9, 2.1],
          "speedup_rel": [1.3, 1.52, 1.73, 1.31], "model_tokens_per_step": [1.33, 1.55, 1.71, 1.88], "chosen": 8,
          "embeddings": "assets/ppd/x", "device": "cpu:test"}


def _ppd_record(iteration=1, lossy=False, trained=False, tuning="absent", tree_size=8):
    """Root 'r' with candidates ' a' (accepted) and 'b' (rejected sibling); under ' a' the candidate
    'c' (the first rejection on the path) and under 'b' the candidate 'd' (not reached). Prompt
    tokens: two under ' a' (the last accepted node: they seed the next step), one under 'b'."""
    tree = [
        TreeNode(0, -1, 1, "r", 0, "root", True),
        TreeNode(1, 0, 10, " a", 1, "candidate", True, 0.6),
        TreeNode(2, 0, 11, "b", 1, "candidate", False, 0.2),
        TreeNode(3, 1, 12, "c", 2, "candidate", False, 0.5),
        TreeNode(4, 2, 13, "d", 2, "candidate", False, 0.4),
        TreeNode(5, 1, 14, "<p1>", 2, "prompt", True, 0.7),
        TreeNode(6, 5, 15, "p2", 3, "prompt", True, 0.3),
        TreeNode(7, 2, 16, "q1", 2, "prompt", False, 0.9),
    ]
    top_a = [Candidate(10, " a", 0.8), Candidate(11, "b", 0.1)]
    top_c = [Candidate(17, "e", 0.7), Candidate(12, "c", 0.05)]
    draft = [
        DraftToken(0, 10, " a", q=0.6, p=0.8, coin=None, threshold=0.05 if lossy else None, accepted=True,
                   overlap=0.0, top=top_a),
        DraftToken(1, 12, "c", q=0.5, p=0.05, coin=None, threshold=0.07 if lossy else None, accepted=False,
                   overlap=0.0, top=top_c),
    ]
    emitted = [EmittedToken(10, " a", ACCEPTED), EmittedToken(17, "e", CORRECTION)]
    info = {"tree_size": tree_size, "tree_size_chosen_by": "flag", "prompt_tokens": 3, "ept": 1, "state": 2,
            "n_candidates": 4, "n_prompt_inputs": 3, "tree": {"candidates": [[0], [1], [0, 0], [1, 0]],
                                                              "prompts": [0, 2, 1, 0, 0]},
            "verification": "typical acceptance (lossy)" if lossy else "exact match (lossless)",
            "typical_epsilon": 0.09, "typical_delta": 0.3,
            "embeddings": "assets/ppd/x" if trained else "untrained: embedding of token 40 (' ')",
            "trained_embeddings": trained, "last_accepted_node": 1, "next_predictions": [[17], [18]]}
    if tuning != "absent":
        info["tuning"] = tuning
    return IterationRecord(
        method="ppd", iteration=iteration, context_length=9, gamma=2, draft=draft, accepted_length=1, emitted=emitted,
        residual=None, next_top=[Candidate(17, "e", 0.7)], tree=tree, timings=Timings(0.001, 0.01, 0.0), target_calls=2,
        draft_calls=0, generated=3, elapsed=0.05, energy_joules=None, energy_note="no energy meter attached",
        finished=False, extra={"ppd": info})


def _node_classes(html: str) -> dict[str, str]:
    """visible token text -> the class attribute of its tree node (the +k distance tag left out)."""
    from html.parser import HTMLParser

    out: dict[str, str] = {}

    class Nodes(HTMLParser):
        stack: list = []

        def handle_starttag(self, tag, attrs):
            cls = dict(attrs).get("class") or ""
            self.stack.append([cls, ""] if cls.startswith("node ") else None if cls == "dist" else "span")

        def handle_endtag(self, tag):
            top = self.stack.pop() if self.stack else None
            if isinstance(top, list):
                out[top[1]] = top[0][len("node "):]

        def handle_data(self, data):
            if self.stack and None not in self.stack:
                node = next((x for x in reversed(self.stack) if isinstance(x, list)), None)
                if node is not None:
                    node[1] += data

    Nodes().feed(html)
    return out


def test_tree_tells_prompt_tokens_from_candidates_and_marks_the_accepted_path():
    html = render.tree_html(_ppd_record())
    classes = _node_classes(html.split("</div>", 1)[1])  # after the legend
    assert "kind-root" in classes["r"]
    assert classes["·a"].split() == ["acc", "kind-candidate"]  # the accepted path
    assert classes["c"].split() == ["rej", "kind-candidate"]  # checked, rejected
    assert classes["b"].split() == ["rej", "kind-candidate"]  # a sibling of the accepted path: checked too
    assert classes["d"].split() == ["skip", "kind-candidate"]  # under a rejected candidate: not reached
    assert classes["q1"].split() == ["guess", "kind-prompt"]
    assert classes["<p1>"].split() == ["seed", "kind-prompt"] and "<p1>" not in html  # escaped
    # prompt and candidate nodes never share a class list; each kind has its own colour AND border style
    assert {c for t, c in classes.items() if "kind-prompt" in c}.isdisjoint(
        {c for t, c in classes.items() if "kind-candidate" in c})
    css = (render.__file__.rsplit("/app/", 1)[0] + "/assets/app.css")
    rules = open(css, encoding="utf-8").read()
    assert ".tree .node.kind-prompt {" in rules and "dotted" in rules.split(".tree .node.kind-prompt {")[1].split("}")[0]
    assert "solid" in rules.split(".tree .node.kind-candidate {")[1].split("}")[0]
    # prompt tokens hang under their owner as one row (+2, +3: which token ahead they guess)
    owner_a = html.index('<span class="ws">·</span>a')
    row = html.index('class="prow"', owner_a)
    assert row < html.index(">c<") and html.count('class="prow"') == 2
    assert '<span class="dist">+2</span>' in html and '<span class="dist">+3</span>' in html
    assert "seeds the next step" in html  # only the last accepted node's prompt tokens are used
    # the legend: root / candidate / prompt token / accepted path
    legend = html.split("</div>", 1)[0]
    for label in ("root", "candidate", "prompt token", "accepted path"):
        assert f">{label}</span>" in legend
    assert set(render.TREE_KINDS) >= {"root", "candidate", "prompt", "accepted"}
    okabe_ito = {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999", "#000000"}
    assert {c for _l, c, _d in render.TREE_KINDS.values()} <= okabe_ito


def test_lossy_badge_only_for_typical_acceptance():
    lossy = method_panel(_ppd_record(lossy=True), None)
    assert lossy[0].get("visible") is True
    assert 'class="badge lossy"' in lossy[1] and "LOSSY" in lossy[1] and "typical acceptance" in lossy[1]
    assert "PPD panel: typical acceptance (lossy)" in lossy[1]
    greedy = method_panel(_ppd_record(lossy=False), None)
    assert 'class="badge lossy"' not in greedy[1] and "LOSSY" not in greedy[1]
    assert 'class="badge lossless"' in greedy[1] and "PPD panel: exact match (lossless)" in greedy[1]
    assert "tree size n = 8" in greedy[1] and "set by hand" in greedy[1]
    # the explanation for students
    assert "2 ahead" in greedy[1] and "tree attention" in greedy[1]


def test_untrained_embeddings_are_said_plainly():
    untrained = method_panel(_ppd_record(trained=False), None)[1]
    assert "embeddings are untrained" in untrained and "poor" in untrained
    trained = method_panel(_ppd_record(trained=True), None)[1]
    assert "untrained" not in trained.split("**Parallel prompt decoding")[0] and "<b>trained</b>" in trained


def test_verification_path_table():
    for lossy in (False, True):
        html = method_panel(_ppd_record(lossy=lossy), None)[2]
        assert "Verification path of iteration 2" in html  # record 1, counted from 1 as the timeline
        body = html.split("<tbody>")[1].split("</tbody>")[0]
        assert body.count("<tr") == 2 and "✓ accept" in body and "✗ reject" in body
        assert "0.600" in body and "0.800" in body  # q = the prompt token's probability, p = the target's
        if lossy:
            assert "0.050 ≤ 0.070" in body and "typical threshold" in html
        else:
            assert 'chip-target">e</span> ≠ x' in body and "argmax" in html
        assert 'chip chip-correction">e<' in html  # then the target's own token
        assert html.count("kind-prompt") >= 3  # the tree with its prompt tokens
    # the draft row and the caption speak PPD: no coin, no residual
    rec = _ppd_record()
    row = render.draft_row_html(rec)
    assert "norm(max(0, p − q))" not in row and "exact match" in row and "argmax 'e'" in row and "greedy" not in row
    caption = render.caption(rec)
    assert "4 candidates and 3 prompt-token inputs" in caption and "argmax here is 'e'" in caption


def test_step_without_candidates_says_why():
    for iteration, why in ((0, "no guesses yet (the first step)"), (7, "carried no prompt tokens")):
        rec = _ppd_record(iteration=iteration)
        rec.draft = []
        html = render_methods.ppd_path_html(rec)
        assert why in html and "seed the next step" in html


def test_tuning_figure_has_the_three_curves_and_the_chosen_n():
    fig = charts_methods.ppd_tuning_figure(TUNING, run_size=16)
    json.loads(fig.to_json())
    names = [t["name"] for t in fig.data]
    for name in ("L(n) latency (ms)", "T(n) tokens per step", "Speedup(n) = T(n)/L(n)"):
        assert name in names
    assert next(t for t in fig.data if t["name"].startswith("L(n)"))["y"] == TUNING["latency_ms"]
    star = next(t for t in fig.data if t["name"] == "chosen n* = 8")
    assert star["x"] == [8] and star["y"] == [1.73] and star["marker"]["symbol"] == "star"
    assert any(s["x0"] == 8 for s in fig.layout["shapes"])  # the chosen n across the rows
    assert any(s["x0"] == 16 for s in fig.layout["shapes"])  # this run's n (set by hand)
    assert "n* = 8" in fig.layout["title"]["text"]


def test_no_tuning_message():
    fig = charts_methods.ppd_tuning_figure(None)
    text = fig.text().lower().replace("<br>", " ")
    assert "not measured on this computer yet" in text and "python" not in text
    assert fig.data == []
    out = method_panel(_ppd_record(tuning=None), None)
    # in words, with no command; the empty chart is hidden
    assert "not measured on this computer yet" in out[1] and "python" not in out[1] and "`" not in out[1]
    assert out[3]["visible"] is False and out[3]["value"] is None
    old = method_panel(_ppd_record(), None)  # an older trace: no tuning key at all
    assert "this saved run does not include the tuning measurements" in old[1]


def test_the_app_keeps_the_tuning_of_the_first_record():
    """Only the first record carries the curves; every later iteration still shows them."""
    session = Session()
    session.records = [_ppd_record(0, tuning=TUNING)] + [_ppd_record(i) for i in (1, 2, 3)]
    for i in range(4):
        plot = view(session, i, 0)[:-1][-3]["value"]  # [:-1]: the last output is the playback player
        assert any(t["name"] == "chosen n* = 8" for t in plot.data)
    assert render_methods.ppd_tuning(session.records) == (True, TUNING)
    assert render_methods.ppd_tuning([_ppd_record(0, tuning=None), _ppd_record(1)]) == (True, None)


# ------------------------------------------------------------------------ real PPD runs (tiny target)
def _decode(target, temperature=0.0, n=12):
    from decoding.run.runner import decode
    from decoding.methods.base import RunConfig
    from decoding.rules.warp import SamplingConfig

    config = RunConfig(method="ppd", max_new_tokens=n, sampling=SamplingConfig(temperature), stop_at_eos=False,
                       extra={"tree_size": 8})
    return list(decode(target, None, target.encode_prompt("the cat sat", False), config))


@pytest.fixture
def tuned_cache(tiny_pair, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    return tmp_path


def test_engine_records_carry_the_tuning_on_the_first_record_only(tiny_pair, tuned_cache, tmp_path):
    from decoding.methods.ppd.tuning import save_tuning
    from decoding.methods.ppd.prompts import load_prompt_tokens

    target = tiny_pair[0]
    records = _decode(target)
    assert "tuning" in records[0].extra["ppd"] and records[0].extra["ppd"]["tuning"] is None
    assert all("tuning" not in r.extra["ppd"] for r in records[1:])
    out = method_panel(records[-1], None, records)
    assert "not measured on this computer yet" in out[1] and out[3]["visible"] is False
    assert out[1].count("embeddings are untrained") == 1  # the tiny target has no trained embeddings

    source = load_prompt_tokens(target, None).source
    save_tuning(target, {"tree_size": 4, "latency_s": {"2": 0.010, "4": 0.011, "8": 0.015},
                         "tokens_per_step": {"2": 1.2, "4": 1.5, "8": 1.6}, "speedup_rel": {"2": 1.2, "4": 1.36, "8": 1.07},
                         "acceptance": [[0.4] + [0.05] * 9] * 3, "embeddings": source})
    records = _decode(target, temperature=1.0)
    tuning = records[0].extra["ppd"]["tuning"]
    assert tuning["n"] == [2, 4, 8] and tuning["chosen"] == 4
    assert all("tuning" not in r.extra["ppd"] for r in records[1:])
    # a saved trace replays the panel, curves included (uploaded traces render from records only)
    path = tmp_path / "ppd.jsonl"
    write_trace(path, records, None)
    back, _ = read_trace(path)
    session = Session()
    session.records = back
    for i in range(len(back)):
        out = view(session, i, 0)[:-1]  # [:-1]: the last output is the playback player
        fig = out[-3]["value"]
        assert any(t["name"] == "chosen n* = 4" for t in fig.data) and "LOSSY" in out[-5]
        json.loads(fig.to_json())
    # every PPD tree node kind renders with its own class
    html = render.tree_html(back[-1])
    assert "kind-prompt" in html and html.count('class="node') >= len(back[-1].tree)


def test_generic_panels_speak_ppd():
    """p vs q: no draft distribution to compare (only the prompt token's q of the candidate); the
    theory panel (a separate draft model) points to the PPD panel instead of reporting alpha = 0."""
    rec = _ppd_record()
    fig = charts.pq_figure(rec)
    assert [t["name"] for t in fig.data] == ["p (target)"] and "prompt guess q = 0.50" in fig.layout["title"]["text"]
    assert any("candidate: c (rejected)" in a["text"] for a in fig.layout["annotations"])
    session = Session()
    session.records = [rec]
    theory_md = view(session, 0, 0)[11]
    assert "PPD has no draft model" in theory_md and "α =" not in theory_md
