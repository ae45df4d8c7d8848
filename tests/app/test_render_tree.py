"""The verified draft tree (app/render_tree.py) on hand-built records: kept, rejected and untried
siblings with their coins and residuals, temperature 0 (no coins), a copied chain inside the tree, and a
tree without verdicts (an older trace, a chain) drawn exactly as before."""

import re

import pytest

from app import render, render_tree, rules_text
from decoding.trace.record import ACCEPTED, BONUS, CORRECTION, EmittedToken, IterationRecord, Residual, TreeNode
from tests._student_text import dev_hits, visible_text
from tests._trees import greedy_tree, node, record, sampled_tree, with_chain

def _text(html: str) -> str:
    """What a reader sees of some HTML, its whitespace collapsed."""
    return " ".join(visible_text(html).split())


def _lines(html: str) -> list[str]:
    return [_text(m) for m in re.findall(r'<div class="vnode[^"]*">.*?<span class="mark[^"]*">[^<]*</span>', html)]


def test_sampled_tree_draws_every_sibling_with_its_coin_and_verdict():
    html = render_tree.tree_panel_html(sampled_tree())
    assert 'class="tree vtree"' in html
    lines = _lines(html)
    cat = next(l for l in lines if "cat" in l)
    assert "1st try" in cat and "q 0.500" in cat and "p 0.400" in cat
    assert "u = 0.930 > min(1, p/q) = 0.800" in cat and "✗ rejected" in cat
    dog = next(l for l in lines if "dog" in l and "try" in l)
    # the 2nd sibling is tested against the residual p₁ and drawn from q₁ (q without ' cat')
    assert "2nd try" in dog and "q₁ 0.500" in dog and "p₁ 0.500" in dog
    assert "u = 0.310 ≤ min(1, p₁/q₁) = 1.000" in dog and "✓ kept" in dog
    cow = next(l for l in lines if "cow" in l)
    assert "— not tried" in cow and "u =" not in cow
    assert html.count('class="coinbar') == 4  # one per tried sibling, none for the untried
    assert 'class="vnode untried"' in html and 'class="vnode acc"' in html


def test_residual_after_each_rejection_and_the_correction_at_the_path_end():
    html = render_tree.tree_panel_html(sampled_tree())
    resid = [_text(m) for m in re.findall(r'<div class="vresid".*?</div>', html)]
    assert len(resid) == 2
    assert "p₁ = norm(max(0, p − q))" in resid[0] and "mass 0.10" in resid[0]
    assert "dog" in resid[0] and "cow" in resid[0]
    # the correction hangs under the last kept node (' ran'), after its tried children
    ran = html.index("ran</span>")
    fast = html.index('<li class="vfinal">')
    assert ran < html.index("away") < fast and "drawn from the last residual" in html
    assert "a tree of 6 draft tokens, 3 deep (at most 6 nodes, its size chosen from this device" in _text(html)


def test_greedy_tree_has_no_coins_and_says_whether_each_matches_the_top_token():
    rec = sampled_tree()
    for n in rec.tree:
        n.coin = n.threshold = n.residual_mass = n.residual_top = None
    rec.extra = {"tree_draft": {"greedy": True}}
    rec.emitted[-1] = EmittedToken(7, " fast", CORRECTION)
    html = render_tree.tree_panel_html(rec)
    text = _text(html)
    assert "coinbar" not in html and "u =" not in text and "vresid" not in html
    assert text.count("matches the target's top token") == 2  # ' dog' and ' ran'
    assert text.count("not the target's top token") == 2  # ' cat' and ' away'
    assert "q₁" not in text and "p₁" not in text  # every child is checked against the same p
    assert "no coins are drawn" in text and "no child was the target's top token" in text


def test_greedy_is_read_from_the_nodes_when_the_tree_data_is_absent():
    rec = sampled_tree()
    for n in rec.tree:
        n.coin = n.threshold = None
    rec.extra = {}
    assert "matches the target's top token" in render_tree.tree_panel_html(rec)


def test_a_copied_chain_inside_the_tree_and_a_bonus_at_a_leaf():
    tree = [node(0, -1, "x", 0, "root"),
            node(1, 0, " one", 1, "lookup", q=1.0, p=0.9, coin=0.4, threshold=0.9, verdict="accepted", sibling_rank=0),
            node(2, 1, " two", 2, "lookup", q=1.0, p=0.95, coin=0.1, threshold=0.95, verdict="accepted",
                 sibling_rank=0)]
    emitted = [EmittedToken(101, " one", ACCEPTED), EmittedToken(102, " two", ACCEPTED),
               EmittedToken(9, " three", BONUS)]
    html = render_tree.tree_panel_html(record(tree, emitted))
    assert html.count("↺ copied") == 2 and "q 1.000" in _text(html)
    assert "a chain of 2 draft tokens copied from the context, checked in one target pass" in _text(html)
    assert "1st try" not in html  # one guess per position: no try order
    assert 'chip chip-bonus">' in html and "reached a leaf" in html
    assert html.index("two</span>") < html.index('<li class="vfinal">')


def test_a_tree_without_verdicts_renders_as_before():
    old = [TreeNode(0, -1, 1, "x", 0, "root", True), TreeNode(1, 0, 10, " a", 1, "draft", True),
           TreeNode(2, 1, 11, " b", 2, "draft", False)]
    rec = record(old, [EmittedToken(10, " a", ACCEPTED), EmittedToken(12, " c", CORRECTION)])
    assert not render_tree.is_verified_tree(rec)
    assert render_tree.tree_panel_html(rec) == render.tree_html(rec)
    assert render_tree.tree_panel_html(None) == render.tree_html(None)
    other = sampled_tree()
    other.method = "mjsd"  # a method whose view does not draw node verdicts: its tree as before
    assert render_tree.tree_panel_html(other) == render.tree_html(other)


def test_token_text_is_escaped_and_no_developer_text_shows():
    rec = sampled_tree()
    rec.tree[1].text = "<script>alert('x')</script>"
    html = render_tree.tree_panel_html(rec)
    assert "<script>" not in html
    assert dev_hits(visible_text(html)) == []


def test_a_saved_tree_replays_the_same():
    rec = sampled_tree()
    back = IterationRecord.from_dict(rec.to_dict())
    assert render_tree.tree_panel_html(back) == render_tree.tree_panel_html(rec)


def test_the_caption_and_the_draft_row_say_it_was_a_tree():
    rec = with_chain(sampled_tree(), 2)
    caption = render.caption(rec)
    assert caption.startswith("Iteration 3: drafted a tree of 6, accepted 2 along one path.")
    assert "At depth 3 no guess was kept (the first tried, '·away', was rejected)" in caption
    row = _text(render.draft_row_html(rec))
    assert "A tree of 6 guesses: the rows below are its kept path" in row
    assert "every guess under the last kept token was rejected: drawn from the residual" in row
    assert "Accepted length 2 of a tree of 6 guesses;" in row
    chain = [TreeNode(0, -1, 1, "x", 0, "root", True), TreeNode(1, 0, 10, " a", 1, "draft", True)]
    assert rules_text.tree_drafted(record(chain, [])) is None  # a chain (no verdicts) reads as before


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_the_engines_tree_records_draw(tiny_close_pair, temperature):
    """Records of a real tree run (the tiny pair, work-42a's engine): every tried guess is drawn with its
    coin (or, at temperature 0, whether it is the target's top token), every untried one says so, and no
    developer text shows in the tree, the caption or the draft row."""
    from decoding.methods.base import RunConfig
    from decoding.rules.warp import SamplingConfig
    from decoding.run.runner import decode

    target, draft = tiny_close_pair
    config = RunConfig(method="speculative", stop_at_eos=False, gamma=4, max_new_tokens=12, seed=1,
                       sampling=SamplingConfig(temperature=temperature), extra={"draft_tree": "8,3"})
    records = list(decode(target, draft, target.encode_prompt("The cat sat on the", chat=False), config))
    trees = [r for r in records if render_tree.is_verified_tree(r)]
    assert trees
    for r in trees:
        html = render_tree.tree_panel_html(r)
        text = _text(html)
        tried = sum(1 for n in r.tree if n.verdict in ("accepted", "rejected"))
        untried = sum(1 for n in r.tree if n.verdict == "untried")
        if temperature:
            assert html.count('class="coinbar') == tried
        else:
            assert "coinbar" not in html
            assert text.count("matches the target's top token") + text.count("not the target's top token") == tried
        assert text.count("— not tried") == untried
        assert dev_hits(_text(html + render.draft_row_html(r)) + render.caption(r)) == [], r.iteration


def test_at_temperature_0_the_draft_row_says_the_target_added_its_top_token():
    rec = with_chain(greedy_tree(), 1)
    rec.residual = Residual(7, " fast", 0.2, False, [])  # the engine records one; greedy does not draw from it
    row = _text(render.draft_row_html(rec))
    assert "no guess under the last kept token was the target's top token: the target's top token" in row
