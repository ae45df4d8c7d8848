"""The capture rules of draft chain graphs (`decoding/lm/chain_graphs.py`) on the CPU with the fake graphs of
test_static_lm.py: the switch, capture at a chain's second sighting, a failed capture falling back to eager chains
with its reason kept, and re-capture after the cache grows. (Equality with the eager chains and the step loop:
tests/decoding/drafters/test_chain_graph.py; real graphs: tests/decoding/test_cuda.py.)"""

from __future__ import annotations

import pytest
import torch

from decoding.drafters import base
from decoding.lm import backend, chain_graphs, cuda_graphs, static_lm
from decoding.rules.warp import SamplingConfig

from _siblings import load_test_module

_static = load_test_module("decoding/lm/test_static_lm.py")
_greedy = load_test_module("decoding/drafters/test_greedy_chain.py")
fake_graphs = _static.fake_graphs  # the fixtures, used here by name
feature = _greedy.feature
GREEDY = SamplingConfig(temperature=0.0)


@pytest.fixture(autouse=True)
def static_backend(monkeypatch):
    monkeypatch.setattr(base, "GREEDY_CHAIN", True)
    backend.set_backend("static")
    cuda_graphs.reset_counts()
    yield
    backend.set_backend(None)
    chain_graphs._failures.clear()


def _model_drafter(tiny_pair):
    return _greedy._drafter("model", tiny_pair, None)


def _draft_twice(drafter, ids, gamma=4):
    """Two proposals of the same draft (nothing accepted in between): the tokens of each."""
    out = []
    for _ in range(2):
        out.append(drafter.propose(ids, gamma, GREEDY, torch.Generator()).tokens)
        drafter.rollback(len(ids) - 1)  # the last token is fed again, as after a rejection
    return out


def test_the_switch_is_off_by_default_and_needs_a_static_lm_with_graphs(tiny_pair, monkeypatch, request):
    monkeypatch.delenv(chain_graphs.ENV, raising=False)
    monkeypatch.setattr(chain_graphs, "ENABLED", None)
    assert not chain_graphs.switched_on()
    monkeypatch.setenv(chain_graphs.ENV, "1")
    assert chain_graphs.switched_on()
    drafter, ids = _model_drafter(tiny_pair)  # the static backend without graphs (a CPU)
    drafter.propose(ids, 3, GREEDY, torch.Generator())
    assert drafter.lm.graphs is None and not chain_graphs.wanted(drafter.lm)
    request.getfixturevalue("fake_graphs")
    drafter, ids = _model_drafter(tiny_pair)
    drafter.propose(ids, 3, GREEDY, torch.Generator())
    assert chain_graphs.wanted(drafter.lm)
    monkeypatch.setattr(chain_graphs, "ENABLED", False)  # the flag wins over the env
    assert not chain_graphs.wanted(drafter.lm)
    backend.set_backend("dynamic")
    monkeypatch.setattr(chain_graphs, "ENABLED", True)
    assert not chain_graphs.wanted(_model_drafter(tiny_pair)[0].lm)


def test_a_chain_is_captured_at_its_second_sighting_and_replayed_after(tiny_pair, fake_graphs, monkeypatch):
    monkeypatch.setattr(chain_graphs, "ENABLED", True)
    drafter, ids = _model_drafter(tiny_pair)
    runner = drafter.lm.graphs
    first, second = _draft_twice(drafter, ids)
    assert first == second
    keys = [k for k in runner.graphs if k[0] == "chain"]
    assert keys == [("chain", "model", 3, (1, 1), torch.long, drafter.lm.capacity, ())]  # no restricted head
    chain = runner.graphs[keys[0]]
    assert chain.graph in fake_graphs and chain.graph.replays == 1
    assert chain.columns is not drafter.lm._columns  # the chain owns what it reads (the LM may go before it)
    assert _draft_twice(drafter, ids) == [first, first]
    assert chain.graph.replays == 3
    assert cuda_graphs.counts()["chain_captures"] == 1 and cuda_graphs.counts()["chain_replays"] == 3


def test_a_chain_captured_by_one_lm_serves_the_models_next_lm(tiny_pair, fake_graphs, monkeypatch):
    """A static LM's cache and runner go to the model's next LM (backend.py), its chains with them: the next LM
    replays them from its own length and context, with the step loop's proposals, and captures nothing new."""
    monkeypatch.setattr(chain_graphs, "ENABLED", True)
    first, ids = _model_drafter(tiny_pair)
    _draft_twice(first, ids)
    assert cuda_graphs.counts()["chain_captures"] == 1
    other = ids[: len(ids) // 2] + [5, 6, 7]  # another context, shorter: other slots, other positions
    proposals = {}
    for graph in (True, False):
        monkeypatch.setattr(chain_graphs, "ENABLED", graph)
        drafter, _ = _model_drafter(tiny_pair)
        if graph:  # the first drafter's cache and runner, as the factory hands them on
            drafter.lm = static_lm.StaticLM(drafter.lm.model, drafter.lm.device, drafter.lm.vocab_width,
                                            cache=first.lm.cache, graphs=first.lm.graphs)
        proposals[graph] = [drafter.propose(other, 4, GREEDY, torch.Generator(), None if graph else _greedy._always)
                            .tokens]
        drafter.rollback(len(other) - 1)
        proposals[graph].append(drafter.propose(other, 4, GREEDY, torch.Generator()).tokens)
    assert proposals[True] == proposals[False]
    assert cuda_graphs.counts()["chain_captures"] == 1 and cuda_graphs.counts()["chain_replays"] == 3


def test_a_failed_capture_falls_back_to_eager_chains_with_its_reason(tiny_pair, fake_graphs, monkeypatch):
    monkeypatch.setattr(chain_graphs, "ENABLED", False)
    drafter, ids = _model_drafter(tiny_pair)
    want = _draft_twice(drafter, ids)
    monkeypatch.setattr(chain_graphs, "ENABLED", True)
    tries = []
    record = cuda_graphs.record

    def broken(device, one_pass, pool=None):
        if isinstance(one_pass(), tuple):  # a chain (a pass graph records one tensor)
            tries.append(1)
            raise RuntimeError("capture is not allowed here")
        return record(device, one_pass, pool)

    monkeypatch.setattr(cuda_graphs, "record", broken)
    drafter, ids = _model_drafter(tiny_pair)
    runner = drafter.lm.graphs
    assert _draft_twice(drafter, ids) == want
    model = drafter.lm.model
    assert "capture is not allowed here" in chain_graphs.failure(model)
    assert not any(k[0] == "chain" for k in runner.graphs) and runner.failed is None  # the pass graphs go on
    assert "draft chain graph capture failed" in backend.describe(model)["backend_note"]
    assert _draft_twice(drafter, ids) == want and _draft_twice(_model_drafter(tiny_pair)[0], ids) == want
    assert len(tries) == 1  # never tried again for this model
    assert not chain_graphs.wanted(drafter.lm)


@pytest.mark.parametrize("kind", ["model", "feature"])
def test_a_grown_cache_captures_its_chains_again(kind, tiny_pair, feature, fake_graphs, monkeypatch):
    """Caches of 128 slots (the context starts at about 60 tokens): the run grows them (re-allocated, graphs
    dropped) after its chain was captured; the chain is seen again, captured again, and the proposals stay the
    step loop's."""
    monkeypatch.setattr(static_lm, "GRAPH_CAPACITY", 128)
    monkeypatch.setattr(static_lm, "DEFAULT_CAPACITY", 128)
    runs = {}
    for graph in (False, True):
        monkeypatch.setattr(chain_graphs, "ENABLED", graph)
        cuda_graphs.reset_counts()
        drafter, ids = _greedy._drafter(kind, tiny_pair, feature)
        assert drafter.lm.capacity == 128 and len(ids) < 100
        seq, tokens = list(ids), []
        while len(seq) < 160:
            proposal = drafter.propose(seq, 4, GREEDY, torch.Generator(), None if graph else _greedy._always)
            tokens.append((proposal.tokens, drafter.lm.length, drafter.calls))
            seq = seq + proposal.tokens + [proposal.tokens[-1]]
            drafter.rollback(len(seq) - 1)
        runs[graph] = tokens
        assert drafter.lm.capacity == 256
    assert runs[True] == runs[False]
    assert cuda_graphs.counts()["chain_captures"] == 2, cuda_graphs.counts()


class _HostOps:
    """Counts the aten ops dispatched outside (fake) graph replays: on a GPU each is a launch the host pays for,
    while a replay is one launch whatever it holds."""

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        self.ops, replaying = 0, [0]
        self.replaying = replaying
        counter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if not replaying[0]:
                    counter.ops += 1
                return func(*args, **(kwargs or {}))

        self.mode = Mode()


@pytest.mark.parametrize("kind", ["model", "feature"])
def test_a_replayed_chain_costs_the_host_the_same_at_any_gamma(kind, tiny_pair, feature, fake_graphs, monkeypatch):
    """Ops outside the replays per proposal (the catch-up pass is a replay too, once captured): with the chain
    graph the same at gamma 2 and 5; with the eager chain they grow with each step. (Seen on the tiny models: the
    draft model 32 ops at either gamma against 50 and 116 eager, the feature draft 34 against 64 and 148: about 22
    and 28 host ops per eager step.)"""
    host = _HostOps()
    replay = _static._FakeGraph.replay

    def counted_replay(graph):
        host.replaying[0] += 1
        try:
            replay(graph)
        finally:
            host.replaying[0] -= 1

    monkeypatch.setattr(_static._FakeGraph, "replay", counted_replay)
    ops = {}
    for graph in (True, False):
        monkeypatch.setattr(chain_graphs, "ENABLED", graph)
        for gamma in (2, 5):
            drafter, ids = _greedy._drafter(kind, tiny_pair, feature)
            for _ in range(3):  # the chain and the catch-up pass are captured by the third proposal
                drafter.propose(ids, gamma, GREEDY, torch.Generator())
                drafter.rollback(len(ids) - 1)
            host.ops = 0
            with host.mode:
                drafter.propose(ids, gamma, GREEDY, torch.Generator())
            ops[graph, gamma] = host.ops
            drafter.rollback(len(ids) - 1)
    assert ops[True, 2] == ops[True, 5], ops
    assert ops[False, 5] > ops[False, 2] + 3 * 5, ops  # each eager step launches its own ops
    assert ops[True, 5] < ops[False, 5], ops
