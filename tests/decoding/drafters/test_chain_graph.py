"""Greedy draft chains captured as one graph (`drafters/chain_graph.py` over `lm/chain_graphs.py`), on the CPU with
the fake graphs of tests/decoding/lm/test_static_lm.py (recording runs the chain once, a replay runs it again into
the same outputs): the plumbing (static inputs, the base position, the mask made on the device, the cut, the
rollback, the call count) is checked here; tests/decoding/test_cuda.py replays real graphs.

Three ways of drafting must agree exactly, proposal after proposal: the step loop (a `keep_going` that always says
yes), today's eager chain (switch off) and the chain graph (switch on): tokens, q rows, what `stop_after` was asked,
the draft cache's length and the call count, for the feature draft, the draft model (also with a restricted
output head, "headed", as the shipped distilled draft has) and the hybrid, gamma 1..5, cut by `stop_after` or not;
and whole runs give the same records."""

from __future__ import annotations

import pytest
import torch

from decoding.drafters import base
from decoding.lm import backend, chain_graphs, cuda_graphs
from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig
from decoding.run.runner import decode

from _siblings import load_test_module

_static = load_test_module("decoding/lm/test_static_lm.py")
_greedy = load_test_module("decoding/drafters/test_greedy_chain.py")
fake_graphs = _static.fake_graphs  # the fixtures, used here by name
feature = _greedy.feature
GREEDY = SamplingConfig(temperature=0.0)
MODES = ("loop", "chain", "graph")  # the step loop, today's eager chain, the chain graph


@pytest.fixture(autouse=True)
def static_with_fake_graphs(monkeypatch, fake_graphs):
    """The static backend with (fake) graphs, greedy chains on the CPU, no failure left from another test."""
    monkeypatch.setattr(base, "GREEDY_CHAIN", True)
    backend.set_backend("static")
    cuda_graphs.reset_counts()
    yield fake_graphs
    backend.set_backend(None)
    monkeypatch.setattr(chain_graphs, "ENABLED", None)
    chain_graphs._failures.clear()


def _mode(monkeypatch, mode: str):
    """Switch chain graphs for `mode`; the keep_going that makes the step loop run."""
    monkeypatch.setattr(chain_graphs, "ENABLED", mode == "graph")
    return _greedy._always if mode == "loop" else None


def _proposals(drafter, ids, gamma, stop, keep_going, iterations=4):
    """`iterations` proposals, each followed by a rollback that accepts the whole draft plus one token (the draft's
    last, repeated): per proposal (tokens, q rows, what stop_after was asked, draft cache length, calls)."""
    seq, out = list(ids), []
    for _ in range(iterations):
        asked = []

        def stop_after(tokens):
            asked.append(list(tokens))
            return stop is not None and len(tokens) >= stop

        proposal = drafter.propose(seq, gamma, GREEDY, torch.Generator(), keep_going, stop_after=stop_after)
        out.append((proposal.tokens, proposal.q_rows, asked, drafter.lm.length, drafter.calls))
        seq = seq + proposal.tokens + [proposal.tokens[-1]]
        drafter.rollback(len(seq) - 1)
    return out


def _same(runs: dict) -> None:
    want = runs["loop"]
    for mode in ("chain", "graph"):
        got = runs[mode]
        assert len(got) == len(want)
        for (tokens, q, asked, length, calls), (w_tokens, w_q, w_asked, w_length, w_calls) in zip(got, want):
            assert tokens == w_tokens and asked == w_asked and (length, calls) == (w_length, w_calls), mode
            assert torch.equal(q, w_q), mode


def _a_drafter(kind, tiny_pair, feature):
    """test_greedy_chain's drafters, and "headed": the draft model with a restricted head (every other token)."""
    if kind != "headed":
        return _greedy._drafter(kind, tiny_pair, feature)
    from decoding.drafters.model import ModelDrafter
    from decoding.drafters.output_head import subset_head

    drafter, ids = _greedy._drafter("model", tiny_pair, feature)
    model = tiny_pair[1]
    head = subset_head(model.model, range(0, drafter.vocab_width, 2))
    return ModelDrafter(model.model, model.device, drafter.vocab_width, model.name, head), ids


@pytest.mark.parametrize("kind", ["feature", "model", "headed"])
@pytest.mark.parametrize("gamma", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("stop", [None, 1, 2, 3])
def test_the_chain_graph_drafts_as_the_eager_chain_and_the_step_loop(kind, gamma, stop, tiny_pair, feature,
                                                                     monkeypatch):
    runs = {}
    for mode in MODES:
        keep_going = _mode(monkeypatch, mode)
        drafter, ids = _a_drafter(kind, tiny_pair, feature)
        cuda_graphs.reset_counts()
        runs[mode] = _proposals(drafter, ids, gamma, stop, keep_going)
    _same(runs)
    counts = cuda_graphs.counts()
    if gamma == 1:  # no pass to capture
        assert "chain_captures" not in counts and "chain_replays" not in counts
    else:  # the first proposal ran eagerly, the second captured, the rest replayed: one replay each from there
        assert counts["chain_captures"] == 1 and counts["chain_replays"] == 3, counts


@pytest.mark.parametrize("gamma", [2, 4, 6])
def test_the_hybrid_with_the_chain_graph_proposes_as_the_step_loop(gamma, tiny_pair, feature, monkeypatch):
    """`hybrid:feature`: its repeat check (`stop_after`) cuts a replayed chain where it cuts the step loop, and a
    copy continues it as before, at every cut of a repeating context."""
    from decoding.lm.backend import make_lm
    from decoding.lm.cached_lm import CachedLM
    from decoding.trace.source import MODEL_SOURCE

    target, _ = tiny_pair
    ids = target.encode_prompt(_greedy.REPEATING + " " + _greedy.REPEATING, chat=False)
    continued = 0
    for end in range(len(ids) // 2, len(ids)):
        proposals = {}
        for mode in MODES:
            keep_going = _mode(monkeypatch, mode)
            drafter = feature.hybrid().drafter(target)
            lm = make_lm(CachedLM, target.model, target.device, target.vocab_size)
            drafter.attach_target(lm)
            lm.extend(ids[: end - 1])
            proposals[mode] = []
            for _ in range(2):  # nothing accepted, the same proposal again: a chain's second sighting replays
                proposals[mode].append((drafter.propose(ids[:end], gamma, GREEDY, torch.Generator(), keep_going,
                                                        MODEL_SOURCE, exact=True), drafter.calls))
                drafter.rollback(end)
        for mode in ("chain", "graph"):
            for (got, calls), (loop, loop_calls) in zip(proposals[mode], proposals["loop"]):
                assert got.tokens == loop.tokens and got.copied == loop.copied and calls == loop_calls, (end, mode)
                assert torch.equal(got.q_rows, loop.q_rows)
        continued += proposals["loop"][0][0].copied > 0
    assert continued >= (2 if gamma == 6 else 1), continued  # model drafts cut by the repeat check, then a copy
    assert cuda_graphs.counts().get("chain_replays", 0) >= len(ids) // 2 - 1  # a replay at every cut


def _plain(record) -> dict:
    """A record without its clocks and meters."""
    data = record.to_dict()
    for key in ("timings", "elapsed", "energy_joules", "energy_note", "extra"):
        data.pop(key, None)
    return data


@pytest.mark.parametrize("gamma", [1, 2, 3, 5])
@pytest.mark.parametrize("drafter", ["model", "feature", "hybrid"])
def test_runs_with_chain_graphs_keep_their_records(tiny_pair, tiny_feature_dir, drafter, gamma, monkeypatch):
    """Whole greedy runs at a fixed gamma, switch off and on: the same records (tokens, drafts, verdicts, call
    counts), and the on run replayed chains."""
    from decoding.run.pair import load_draft_value

    target, model = tiny_pair
    feature_draft = load_draft_value(str(tiny_feature_dir), target, "float32")
    draft = {"model": model, "feature": feature_draft, "hybrid": feature_draft.hybrid()}[drafter]
    config = RunConfig(method="speculative", max_new_tokens=30, sampling=GREEDY, gamma=gamma, stop_at_eos=False,
                       extra={"gamma_schedule": "fixed"})
    ids = target.encode_prompt(_greedy.REPEATING + " and the dog sat", chat=False)
    runs = {}
    for mode in ("chain", "graph"):
        _mode(monkeypatch, mode)
        cuda_graphs.reset_counts()
        runs[mode] = [_plain(r) for r in decode(target, draft, ids, config)]
        if mode == "graph" and gamma > 1:
            assert cuda_graphs.counts().get("chain_replays", 0) > 0
    assert runs["graph"] == runs["chain"]
    assert sum(len(r["emitted"]) for r in runs["graph"]) == 30
