"""Draft trees (methods/tree_draft.py): greedy output equal to plain decoding in float32 (distilled and
feature drafts, inside the hybrid, with the automatic schedule), the two-token chi-square at temperature
0.8 and 1.2 with trees whose siblings cover tokens where p < q and p > q, a wrong sibling rule caught by
the same test, and the target's compacted cache equal to a fresh pass over the accepted path."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.stats import chisquare

from decoding.drafters.model import ModelDrafter
from decoding.drafters.tree import gumbel_top_k
from decoding.lm.cached_lm import CachedLM
from decoding.lm.tree_pass import compact
from decoding.methods import tree_draft
from decoding.methods.base import RunConfig
from decoding.methods.tree_draft import TreeDraftStep, _target_pass
from decoding.rules import tree_acceptance
from decoding.rules.tree_acceptance import SiblingStep, recursive_rejection_step
from decoding.rules.warp import SamplingConfig, warp_logits
from decoding.run.pair import load_draft_value
from decoding.run.runner import decode

from _siblings import load_test_module

test_speculative = load_test_module("decoding/methods/test_speculative.py")
REPEATING = load_test_module("decoding/drafters/test_hybrid.py").REPEATING
GREEDY = SamplingConfig(temperature=0.0)
PROMPT = test_speculative.PROMPT


@pytest.fixture(scope="module")
def feature(tiny_feature_dir, tiny_pair):
    return load_draft_value(str(tiny_feature_dir), tiny_pair[0], "float32")


def _tree_config(tree: str = "6,3", schedule: str = "fixed", **kw) -> RunConfig:
    kw.setdefault("sampling", GREEDY)
    return RunConfig(method="speculative", stop_at_eos=False, gamma=4,
                     extra={"draft_tree": tree, "gamma_schedule": schedule}, **kw)


def _emitted(records) -> list[int]:
    return [t.token_id for r in records for t in r.emitted]


def test_greedy_trees_equal_plain_decoding(tiny_pair, feature):
    """float32, greedy: the distilled and feature drafts as trees, inside the hybrid, fixed and auto."""
    target, draft = tiny_pair
    accepted_somewhere = False
    for prompt in (PROMPT, REPEATING):
        ids = target.encode_prompt(prompt, chat=False)
        base = RunConfig(method="autoregressive", max_new_tokens=30, sampling=GREEDY, stop_at_eos=False)
        expected = _emitted(decode(target, None, ids, base))
        for d, tree, schedule in ((draft, "6,3", "fixed"), (feature, "8,4", "fixed"), (feature.hybrid(), "6,3", "fixed"),
                                  (feature.hybrid(), "6,3", "auto"), (draft, "3,2", "auto")):
            records = list(decode(target, d, ids, _tree_config(tree, schedule, max_new_tokens=30)))
            assert _emitted(records) == expected, (d, tree, schedule, prompt)
            steps = [TreeDraftStep.of(r) for r in records]
            assert any(s.shape == "tree" and s.drafted > s.depth for s in steps)  # real branching
            accepted_somewhere |= any(r.accepted_length > 0 and TreeDraftStep.of(r).shape == "tree" for r in records)
    assert accepted_somewhere
    # the hybrid's copies stay chains next to the model's trees
    shapes = {TreeDraftStep.of(r).shape for r in decode(target, feature.hybrid(), target.encode_prompt(REPEATING, chat=False),
                                                     _tree_config("6,3", max_new_tokens=30))}
    assert {"tree", "chain"} <= shapes, shapes


def test_a_tree_record_carries_every_node_verdict(tiny_close_pair):
    target, draft = tiny_close_pair
    ids = target.encode_prompt(PROMPT, chat=False)
    config = _tree_config("8,3", max_new_tokens=12, sampling=SamplingConfig(temperature=0.8), seed=1)
    for r in decode(target, draft, ids, config):
        step = TreeDraftStep.of(r)
        assert step.nodes == 8 and step.depth == 3 and step.chosen == "set"
        nodes = r.tree[1:]
        assert all(n.verdict in ("accepted", "rejected", "untried") for n in nodes)
        path = [n for n in nodes if n.accepted]
        assert len(path) == r.accepted_length == sum(1 for d in r.draft if d.accepted)
        for n in nodes:
            if n.verdict != "untried":
                assert n.coin is not None and n.threshold == pytest.approx(min(1.0, n.p / n.q))
            if n.verdict == "rejected":
                assert n.residual_mass is not None and n.residual_top
        for sibs in _siblings(nodes).values():
            assert [n.sibling_rank for n in sibs] == list(range(len(sibs)))
            # tried siblings are a prefix of the draw order, one accepted at most, and it ends the trying
            verdicts = [n.verdict for n in sibs]
            assert verdicts.count("accepted") <= 1
            tried = [v for v in verdicts if v != "untried"]
            assert verdicts[: len(tried)] == tried and "accepted" not in tried[:-1]


def _siblings(nodes):
    out = {}
    for n in nodes:
        out.setdefault(n.parent, []).append(n)
    return out


# ---- exactness at temperature > 0 -----------------------------------------------------------------------

def _independent(p, q, x, u):
    """WRONG: every sibling tested as if it were the first (against the untouched p and q), the
    correction drawn from p after all fail."""
    out = recursive_rejection_step(p, q, x, u)
    if not out.accepted:
        out.p_next, out.q_next = p, q
    return out


def _keep_q_step(p, q, x, u):
    """WRONG: the residual is updated, but tried siblings are not removed from q."""
    out = recursive_rejection_step(p, q, x, u)
    if not out.accepted:
        out.q_next = q
    return out


def _keep_p_step(p, q, x, u):
    """WRONG: q loses the tried sibling, but p is never replaced by the residual."""
    out = recursive_rejection_step(p, q, x, u)
    if not out.accepted:
        out.p_next = p
    return out


def _two_token_counts(target, draft, sampling, runs, tree="5,2"):
    prompt_ids = target.encode_prompt(PROMPT, chat=False)
    counts, rejected, siblings_tried = {}, 0, 0
    sides = set()
    for seed in range(runs):
        config = _tree_config(tree, max_new_tokens=2, sampling=sampling, seed=seed, lean=True)
        records = list(decode(target, draft, prompt_ids, config))
        ids = _emitted(records)[:2]
        counts[tuple(ids)] = counts.get(tuple(ids), 0) + 1
        for r in records:
            for n in r.tree[1:]:
                rejected += n.verdict == "rejected"
                siblings_tried += n.verdict != "untried" and n.sibling_rank > 0
                if n.verdict != "untried" and n.sibling_rank > 0:
                    sides.add(n.p < n.q)
    return counts, rejected, siblings_tried, sides


def _chi_square_pvalue(counts, exact, runs):
    outcomes = sorted(exact)
    obs_m, exp_m, rest_o, rest_e = [], [], 0, 0.0
    for o in outcomes:
        e, c = exact[o] * runs, counts.get(o, 0)
        if e >= 5:
            obs_m.append(c)
            exp_m.append(e)
        else:
            rest_o, rest_e = rest_o + c, rest_e + e
    rest_o += sum(c for o, c in counts.items() if o not in exact)
    if rest_e > 0:
        obs_m.append(rest_o)
        exp_m.append(rest_e)
    scale = sum(obs_m) / sum(exp_m)
    return chisquare(obs_m, [e * scale for e in exp_m]).pvalue


RULES = {"recursive rejection": recursive_rejection_step, "independent siblings": _independent,
         "tried siblings kept in q": _keep_q_step, "residual not updated": _keep_p_step}


@pytest.mark.parametrize("temperature", [0.8, 1.2])
@pytest.mark.parametrize("rule", list(RULES))
def test_two_token_chi_square_with_trees(tiny_close_pair, monkeypatch, temperature, rule):
    """The first two tokens of seeded tree runs (root with up to 4 children drawn without replacement,
    depth 2) against the target's exact two-token distribution: the correct rule passes, each wrong
    sibling rule is rejected by the same test. Second and later siblings are tried both where p < q and
    where p > q."""
    target, draft = tiny_close_pair
    sampling = SamplingConfig(temperature=temperature, top_k=6)
    monkeypatch.setattr(tree_acceptance.verify_tree, "__defaults__", (None, RULES[rule]))
    exact = test_speculative._exact_two_token_distribution(target, target.encode_prompt(PROMPT, chat=False), sampling)
    runs = 1500
    counts, rejected, tried, sides = _two_token_counts(target, draft, sampling, runs)
    assert rejected > 200 and tried > 100 and sides == {True, False}, (rejected, tried, sides)
    pvalue = _chi_square_pvalue(counts, exact, runs)
    if rule == "recursive rejection":
        assert pvalue > 1e-3, pvalue
    else:
        assert pvalue < 1e-4, (rule, pvalue)


def test_trees_cut_by_the_stopper_keep_the_target_distribution(tiny_close_pair, monkeypatch):
    """The chi-square of the first two tokens when a tree's second level is made its last (so it gets the whole
    budget left, one more child, and no third level) wherever the best path it can hold is unlikely (the
    stopper's form, gamma_policy.tree_stopper, with a fixed threshold): that depends on the drawn first level,
    never on a node's own value."""
    from decoding.drafters.gamma_policy import GammaPolicy

    target, draft = tiny_close_pair
    sampling = SamplingConfig(temperature=1.2, top_k=6)
    monkeypatch.setattr(GammaPolicy, "tree_stopper",
                        lambda self: (lambda level, best_score: math.exp(best_score) >= 0.2))
    prompt_ids = target.encode_prompt(PROMPT, chat=False)
    exact = test_speculative._exact_two_token_distribution(target, prompt_ids, sampling)
    runs, counts, depths = 1500, {}, {1: 0, 2: 0, 3: 0}
    for seed in range(runs):
        config = _tree_config("6,3", max_new_tokens=4, sampling=sampling, seed=seed, lean=True)
        records = list(decode(target, draft, prompt_ids, config))
        depths[records[0].gamma] += 1
        ids = tuple(_emitted(records)[:2])
        counts[ids] = counts.get(ids, 0) + 1
    assert depths[2] >= 30 and depths[3] >= 30, depths  # cut and grown trees both
    assert _chi_square_pvalue(counts, exact, runs) > 1e-3


def test_greedy_trees_cut_by_the_stopper_equal_plain_decoding(tiny_pair, feature, monkeypatch):
    """float32, greedy, the automatic schedule, with trees cut wherever the best new node's path probability is
    below a half: the text is plain decoding's, and trees of one level and deeper ones both occur."""
    from decoding.drafters.gamma_policy import GammaPolicy

    target, draft = tiny_pair
    monkeypatch.setattr(GammaPolicy, "tree_stopper",
                        lambda self: (lambda level, best_score: math.exp(best_score) >= 0.5))
    depths = set()
    for prompt in (PROMPT, REPEATING):
        ids = target.encode_prompt(prompt, chat=False)
        base = RunConfig(method="autoregressive", max_new_tokens=30, sampling=GREEDY, stop_at_eos=False)
        expected = _emitted(decode(target, None, ids, base))
        for d in (draft, feature.hybrid()):
            records = list(decode(target, d, ids, _tree_config("6,3", "auto", max_new_tokens=30)))
            assert _emitted(records) == expected, (d, prompt)
            depths |= {r.gamma for r in records if TreeDraftStep.of(r).shape == "tree"}
    assert 1 in depths and max(depths) >= 2, depths


# ---- the target's cache after compaction -------------------------------------------------------------

def test_compacted_cache_equals_a_fresh_pass(tiny_pair):
    """After a tree pass and compaction to a branch, the next logits (and the kept hidden states) equal those
    of a fresh cache fed the committed sequence plus that branch."""
    target, draft = tiny_pair
    ids = target.encode_prompt(PROMPT, chat=False)
    drafter = ModelDrafter(draft.model, draft.device, target.vocab_size, draft.name)
    tree = drafter.propose_tree(ids, 10, 4, SamplingConfig(temperature=1.0), torch.Generator().manual_seed(0))
    assert tree.size == 10 and tree.depth >= 2
    lm = CachedLM(target.model, target.device, target.vocab_size)
    lm.keep_features()
    lm.forward(ids[:-3])  # a partly cached prompt: the pass feeds 3 committed tokens, then the tree
    logits = _target_pass(lm, ids, tree)
    deepest = max(range(1, tree.size + 1), key=lambda c: (tree.depths[c], -c))
    fresh = CachedLM(target.model, target.device, target.vocab_size)
    fresh.keep_features()
    for leaf in (deepest, 1):
        branch = tree.path_to(leaf)
        expected_rows = fresh.forward(ids + [tree.tokens[c] for c in branch])[len(ids) - 1:]
        assert torch.allclose(logits[[0] + branch], expected_rows, atol=1e-4)
        if leaf == deepest:
            compact(lm, len(ids), [len(ids) - 1 + c for c in branch])
            assert lm.length == len(ids) + len(branch)
            nxt = lm.forward([5])
            want = fresh.forward([5])
            assert torch.allclose(nxt, want, atol=1e-4)
            assert torch.allclose(lm.features[: lm.length], fresh.features[: fresh.length], atol=1e-4)
        fresh = CachedLM(target.model, target.device, target.vocab_size)
        fresh.keep_features()


def test_a_chain_shaped_tree_runs_the_causal_pass_with_the_tree_pass_rows(tiny_pair, monkeypatch):
    """A chain (a copy, or a model chain under the automatic schedule) goes through the LM's causal pass, not a
    masked tree pass (on the CPU SDPA's causal kernel: a copy from the prompt makes the first iteration's pass the
    prefill); its rows, kept hidden states and cache length equal the tree pass's over the same chain."""
    from decoding.drafters.tree import chain_tree

    target, _ = tiny_pair
    ids = target.encode_prompt(PROMPT, chat=False)
    chain = chain_tree(ids[-1], [7, 9, 11], torch.zeros(3, target.vocab_size))
    assert chain.is_chain and not tree_draft.DraftTree([-1, 0, 0], [1, 2, 3], [0, 1, 1], torch.zeros(3, 4)).is_chain
    outputs, real = [], tree_draft.tree_pass
    for causal in (True, False):
        if not causal:  # the same chain forced through the tree pass
            monkeypatch.setattr(tree_draft.DraftTree, "is_chain", property(lambda self: False))
        passes = []
        monkeypatch.setattr(tree_draft, "tree_pass", lambda *a, **k: passes.append(1) or real(*a, **k))
        for cached in (0, len(ids) - 3):  # the prefill itself, and a partly cached prompt
            lm = CachedLM(target.model, target.device, target.vocab_size)
            lm.keep_features()
            if cached:
                lm.forward(ids[:cached])
            logits = _target_pass(lm, ids, chain)
            outputs.append((logits, lm.features[: lm.length].clone(), lm.length))
        assert (len(passes) == 0) == causal
    for (a, fa, la), (b, fb, lb) in zip(outputs[:2], outputs[2:]):
        assert la == lb == len(ids) + 3 and a.shape == b.shape == (4, target.vocab_size)
        assert torch.allclose(a, b, atol=1e-4) and torch.allclose(fa, fb, atol=1e-4)


def test_draft_tree_setting_is_checked():
    for bad in ("0", "many", "16,0", "4,9", "100"):
        with pytest.raises(ValueError, match="draft tree"):
            tree_draft.parse_draft_tree(bad)
    assert tree_draft.parse_draft_tree("16") == (16, tree_draft.DEFAULT_DEPTH)
    assert tree_draft.parse_draft_tree("auto") == "auto"


def test_the_default_size_is_one_the_tune_measures():
    """`auto` before a tune takes the default; the tune's candidates include it, so a tune can confirm or replace it."""
    from decoding.eval.tree_tune import SIZES

    sizes = [tree_draft.parse_draft_tree(s) for s in SIZES.split(";")]
    for default in [(tree_draft.DEFAULT_NODES, tree_draft.DEFAULT_DEPTH), *tree_draft.MEASURED_DEFAULTS.values()]:
        assert default in sizes
        assert tree_draft.parse_draft_tree(f"{default[0]},{default[1]}") == default


def test_the_untuned_size_is_the_one_measured_for_the_device_and_precision(tmp_path, monkeypatch):
    """A bfloat16 target on a CPU takes the shape measured best there (4,2); any other device or precision 16,6;
    a tune, or a size set by hand, comes first."""
    from types import SimpleNamespace

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))  # no tune stored
    drafter = SimpleNamespace(name="draft")
    for device, dtype, expected in (("cpu", torch.bfloat16, (4, 2, tree_draft.DEFAULT)),
                                    ("cpu", torch.float32, (16, 6, tree_draft.DEFAULT)),
                                    ("cuda", torch.bfloat16, (16, 6, tree_draft.DEFAULT))):
        target = SimpleNamespace(device=device, dtype=dtype, name="target")
        if device == "cuda":  # device_key asks CUDA for the card's name: only the default's lookup is checked
            assert tree_draft.default_size(target) == expected[:2]
            continue
        assert tree_draft.tree_size("auto", target, drafter) == expected
        assert tree_draft.tree_size("6,3", target, drafter) == (6, 3, tree_draft.SET)


def test_trees_refuse_lenience(tiny_pair):
    target, draft = tiny_pair
    config = RunConfig(method="speculative", max_new_tokens=4, lenience=0.5, extra={"draft_tree": "4,2"})
    with pytest.raises(ValueError, match="lenience"):
        list(decode(target, draft, target.encode_prompt(PROMPT, chat=False), config))


def test_gumbel_top_k_draws_without_replacement_in_order():
    """The first of Gumbel-top-k is a draw from q; the second, given the first, a draw from q without it."""
    q = torch.tensor([0.5, 0.3, 0.15, 0.05])
    gen = torch.Generator().manual_seed(0)
    firsts, seconds = torch.zeros(4), torch.zeros(4)
    n = 20000
    for _ in range(n):
        a, b = gumbel_top_k(q, 2, gen)
        firsts[a] += 1
        if a == 0:
            seconds[b] += 1
    assert torch.allclose(firsts / n, q, atol=0.015)
    assert torch.allclose(seconds / seconds.sum(), torch.tensor([0, 0.6, 0.3, 0.1]), atol=0.02)


def test_the_tune_picks_a_measured_size_that_auto_then_uses(tiny_pair, monkeypatch, tmp_path):
    from decoding.eval import tree_tune as measure
    from decoding.methods import tree_tune

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    target, draft = tiny_pair
    ids = [target.encode_prompt(p, chat=False) for p in (PROMPT, REPEATING)]
    entry = measure.tune(target, draft, ids, ["4,2", "6,3"], max_new_tokens=8)
    assert (entry["nodes"], entry["depth"]) in ((4, 2), (6, 3))
    assert set(entry["tokens_per_second"]) == {"off", "4,2", "6,3"} and all(
        v > 0 for v in entry["tokens_per_call"].values())
    from decoding.run.pair import as_draft

    drafter = as_draft(draft).drafter(target)
    assert tree_tune.tuned_size(target, drafter) is None
    tree_tune.save_tuning(target, drafter, entry)
    assert tree_tune.tuned_size(target, drafter) == (entry["nodes"], entry["depth"])
    records = list(decode(target, draft, ids[0], _tree_config("auto", max_new_tokens=6)))
    step = TreeDraftStep.of(records[0])
    assert step.chosen == "tuned" and (step.nodes, step.depth) == (entry["nodes"], entry["depth"])


def test_feature_draft_trees_keep_the_target_distribution(tiny_pair, feature):
    """The same chi-square with the feature draft's trees (its head leaves out the target's likeliest
    first tokens, so the residual must supply them)."""
    target, _ = tiny_pair
    sampling = SamplingConfig(temperature=1.2, top_k=6)
    prompt_ids = target.encode_prompt(PROMPT, chat=False)
    exact = test_speculative._exact_two_token_distribution(target, prompt_ids, sampling)
    runs = 1200
    counts = {}
    for seed in range(runs):
        config = _tree_config("5,2", max_new_tokens=3, sampling=sampling, seed=seed, lean=True)
        ids = tuple(_emitted(decode(target, feature, prompt_ids, config))[:2])
        counts[ids] = counts.get(ids, 0) + 1
    assert _chi_square_pvalue(counts, exact, runs) > 1e-3
