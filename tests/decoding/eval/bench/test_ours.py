"""The benchmark's runs of our engine (eval/bench/ours.py): a verify pass is binned by the tokens it fed."""

from __future__ import annotations

from decoding.eval.bench.ours import verified_tokens
from decoding.methods.base import RunConfig
from decoding.methods.tree_draft import TreeDraftStep
from decoding.rules.warp import SamplingConfig
from decoding.run.pair import load_draft_value
from decoding.run.runner import decode


def _records(target, draft, tree: str | None):
    extra = {"gamma_schedule": "fixed", **({"draft_tree": tree} if tree else {})}
    config = RunConfig(method="speculative", stop_at_eos=False, gamma=3, max_new_tokens=24,
                       sampling=SamplingConfig(temperature=0.0), extra=extra)
    return list(decode(target, draft, target.encode_prompt("hello world, the cat", chat=False), config))[1:]


def test_a_tree_iteration_counts_every_node_it_verified(tiny_pair, tiny_feature_dir):
    target, _ = tiny_pair
    draft = load_draft_value(str(tiny_feature_dir), target, "float32")
    trees = [r for r in _records(target, draft, "6,3") if TreeDraftStep.of(r).shape == "tree"]
    assert trees
    # the pass fed the root and every drafted node; the record's draft is only the accepted path's view
    assert all(verified_tokens(r) == len(r.tree) for r in trees)
    assert any(len(r.draft) + 1 != len(r.tree) for r in trees)


def test_a_chain_iteration_counts_its_draft(tiny_pair, tiny_feature_dir):
    target, _ = tiny_pair
    draft = load_draft_value(str(tiny_feature_dir), target, "float32")
    records = _records(target, draft, None)
    assert records and all(verified_tokens(r) == len(r.draft) + 1 for r in records)
