"""Greedy fixed-gamma draft chains (`ModelDrafter._greedy_chain`, `FeatureDrafter._greedy_chain`): each step's
argmax stays on the device and feeds the next step, the tokens are read back once per proposal, and `stop_after`
cuts the chain afterwards (by default only on a GPU: `base.greedy_chain`; here on the CPU too).
They must give what the step loop gives (the loop still runs where a `keep_going` is passed: one that always says
yes changes nothing else), on the dynamic and the static cache alike: the same tokens, q rows, draft cache and
call count, and the same next proposal after a rollback."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from decoding.drafters import base
from decoding.lm import backend
from decoding.rules.warp import SamplingConfig
from decoding.run.pair import load_draft_value

from _siblings import load_test_module

REPEATING = load_test_module("decoding/drafters/test_hybrid.py").REPEATING
GREEDY = SamplingConfig(temperature=0.0)


def _always(i, confidence):
    """A `keep_going` that never stops: the step loop with its per-step host reads, nothing else changed."""
    return True


@pytest.fixture(autouse=True)
def chains_on_the_cpu(monkeypatch):
    """Greedy chains run on the CPU too (by default only on an asynchronous device)."""
    monkeypatch.setattr(base, "GREEDY_CHAIN", True)


def test_greedy_chains_run_only_where_reads_make_the_host_wait(monkeypatch):
    monkeypatch.setattr(base, "GREEDY_CHAIN", None)
    assert not base.greedy_chain("cpu") and not base.greedy_chain(torch.device("cpu"))
    assert base.greedy_chain("cuda") and base.greedy_chain(torch.device("cuda", 0))


@pytest.fixture(params=["dynamic", "static"])
def cache_kind(request):
    backend.set_backend(request.param)
    yield request.param
    backend.set_backend(None)


@pytest.fixture(scope="module")
def feature(tiny_feature_dir, tiny_pair):
    return load_draft_value(str(tiny_feature_dir), tiny_pair[0], "float32")


def _drafter(kind, tiny_pair, feature):
    """A fresh drafter of `kind` ("model" or "feature") with its context read: (drafter, sequence)."""
    target, draft = tiny_pair
    ids = target.encode_prompt(REPEATING + " and the dog sat", chat=False)
    if kind == "model":
        from decoding.drafters.model import ModelDrafter

        return ModelDrafter(draft.model, draft.device, min(target.vocab_size, draft.vocab_size), draft.name), ids
    from decoding.lm.backend import make_lm
    from decoding.lm.cached_lm import CachedLM

    drafter = feature.drafter(target)
    lm = make_lm(CachedLM, target.model, target.device, target.vocab_size)
    drafter.attach_target(lm)
    lm.extend(ids[:-1])  # the target has read all but the last token, as after a verify pass
    return drafter, ids


class _Reads(TorchDispatchMode):
    """Counts host reads of a scalar (item / int / float: aten._local_scalar_dense)."""

    def __init__(self):
        super().__init__()
        self.scalars = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            self.scalars += 1
        return func(*args, **(kwargs or {}))


def _counted_propose(drafter, sequence, gamma, monkeypatch):
    """(proposal, scalar reads, tolist calls, tensors made from host data) of one greedy proposal."""
    counts = {"tolist": 0, "from_host": 0}
    tolist, make = torch.Tensor.tolist, torch.tensor

    def counted_tolist(self, *args, **kwargs):
        counts["tolist"] += 1
        return tolist(self, *args, **kwargs)

    def counted_tensor(*args, **kwargs):
        counts["from_host"] += 1
        return make(*args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "tolist", counted_tolist)
    monkeypatch.setattr(torch, "tensor", counted_tensor)
    with _Reads() as reads:
        proposal = drafter.propose(sequence, gamma, GREEDY, torch.Generator())
    monkeypatch.setattr(torch.Tensor, "tolist", tolist)
    monkeypatch.setattr(torch, "tensor", make)
    return proposal, reads.scalars, counts["tolist"], counts["from_host"]


@pytest.mark.parametrize("kind", ["model", "feature"])
def test_a_greedy_chain_reads_its_tokens_back_once(kind, tiny_pair, feature, cache_kind, monkeypatch):
    found = {}
    for gamma in (2, 7):
        drafter, ids = _drafter(kind, tiny_pair, feature)
        drafter.propose(ids[:-1], 1, GREEDY, torch.Generator())  # the prefill / catch-up, not counted below
        drafter.rollback(len(ids) - 1)
        proposal, scalars, tolists, from_host = _counted_propose(drafter, ids, gamma, monkeypatch)
        assert len(proposal.tokens) == gamma
        assert scalars == 0 and tolists == 1, (kind, gamma, scalars, tolists)
        found[gamma] = from_host
    # host data copied to the device (the catch-up's token ids) does not grow with the draft's steps
    assert found[2] == found[7], found


@pytest.mark.parametrize("kind", ["model", "feature"])
@pytest.mark.parametrize("stop", [1, 2, 3, 5, None])
def test_a_greedy_chain_cut_by_stop_after_is_the_step_loop(kind, stop, tiny_pair, feature, cache_kind):
    gamma = 5
    runs = []
    for keep_going in (None, _always):
        drafter, ids = _drafter(kind, tiny_pair, feature)
        asked = []

        def stop_after(tokens):
            asked.append(list(tokens))
            return stop is not None and len(tokens) >= stop

        first = drafter.propose(ids, gamma, GREEDY, torch.Generator(), keep_going, stop_after=stop_after)
        state = (drafter.lm.length, drafter.calls)
        # the next iteration: all drafted tokens accepted plus one more, then a proposal after the rollback
        drafter.rollback(len(ids) + len(first.tokens))
        nxt = drafter.propose(ids + first.tokens + [first.tokens[-1]], gamma, GREEDY, torch.Generator(), keep_going)
        runs.append((first, asked, state, nxt, drafter.calls))
    (chain, chain_asked, chain_state, chain_next, chain_calls), (loop, loop_asked, loop_state, loop_next,
                                                                  loop_calls) = runs
    assert chain.tokens == loop.tokens and len(chain.tokens) == (stop or gamma)
    assert torch.equal(chain.q_rows, loop.q_rows)
    assert chain_asked == loop_asked
    assert chain_state == loop_state
    assert chain_next.tokens == loop_next.tokens and torch.equal(chain_next.q_rows, loop_next.q_rows)
    assert chain_calls == loop_calls


def test_the_hybrid_stops_its_greedy_chain_where_the_context_repeats(tiny_pair, feature, cache_kind):
    """The hybrid's `stop_after` (the model stops where its tokens make the context repeat, then a copy follows)
    over a chain read back once gives the step loop's proposals, at every cut of a repeating context."""
    from decoding.lm.backend import make_lm
    from decoding.lm.cached_lm import CachedLM
    from decoding.trace.source import MODEL_SOURCE

    target, _ = tiny_pair
    ids = target.encode_prompt(REPEATING + " " + REPEATING, chat=False)
    continued = 0
    for end in range(len(ids) // 2, len(ids)):
        proposals = []
        for keep_going in (None, _always):
            drafter = feature.hybrid().drafter(target)
            lm = make_lm(CachedLM, target.model, target.device, target.vocab_size)
            drafter.attach_target(lm)
            lm.extend(ids[: end - 1])
            proposals.append(drafter.propose(ids[:end], 6, GREEDY, torch.Generator(), keep_going, MODEL_SOURCE,
                                             exact=True))
        chain, loop = proposals
        assert chain.tokens == loop.tokens and chain.copied == loop.copied and torch.equal(chain.q_rows, loop.q_rows)
        continued += chain.copied > 0
    assert continued >= 2, continued  # model drafts cut by the repeat check and continued by a copy
