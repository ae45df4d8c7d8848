"""A greedy draft chain of gamma tokens captured as ONE CUDA graph, replayed with one launch (off by default).

Why: on a GPU whose passes are captured one by one (`cuda_graphs.py`), a greedy draft step still costs the host
about a dozen launches and their Python around one graph replay: the head's scores, the argmax, the token id,
the embedding and the [feature ; embedding] pair, then `forward` (room check, an arange of slots, the causal
mask's compare and select, the runner's key, lock, four copies into its static buffers, the replay and the clone
of its output). On an H200 a feature draft step measured ~0.5 ms against a ~1.5 ms captured step of the 135M
target (docs/gpu.md). A greedy chain's steps depend on nothing the host knows (each argmax feeds the next step on
the device, drafters/base.py `greedy_chain`), so all of them can be recorded together.

What is captured (`run_chain`; the bodies are the drafters', drafters/chain_graph.py): `steps` one-token passes of
the LM's own short pass (`body_pass`, called directly: a graph replay cannot nest inside a capture) at rotary
positions and cache slots base, base + 1, ..., each pass's causal mask row computed on the device from its
position (`_Chain.step`: slot = position, mask = 0 on slots <= position, the dtype's minimum elsewhere, as
`causal_mask` makes it), with the drafter's head, argmax and input between passes. Static inputs: the chain's
first input `x` (the feature draft: the predicted feature (1, hidden); the draft model: the last token id (1, 1))
and the base position (1, 1) long (the LM's length). Outputs: the chain's token ids and the last pass's final
hidden states (1, hidden), in the graph's memory. Every tensor the graph reads besides the model's weights and
the cache's buffers (the static inputs, the slot columns, the mask's two values) belongs to the chain, not to the
LM that captured it: the cache and its runner outlive that LM and serve the model's next one (backend.py).

What stays on the host, per chain (not per step): the room check (a growth re-allocates the cache), the key, one
lock, the copy of x and a fill of the base position into the static buffers, the replay, the clone of the ids
(and of the hidden state where asked), and moving the LM's length and call count by `steps`, as `steps` forwards
would have. The drafter then reads the ids once, as its eager chain does, and cuts and rolls back by `stop_after`
as before, so the records are the same. Counted on the tiny test models (aten ops a proposal dispatches outside
graph replays, each a launch on a GPU): 32 for the draft model and 34 for the feature draft at gamma 2 and 5 alike,
against 50 -> 116 and 64 -> 148 with the eager chain (tests/decoding/lm/test_chain_graphs.py); not yet timed on a GPU.

The capture rules are `cuda_graphs.py`'s: a chain shape (key: the body's name, steps, x's shape and dtype, the
capacity, the addresses of the other tensors it reads: a drafter's head, the target's embedding) is captured the
SECOND time it is seen (the first runs the eager chain, where torch.compile compiles the lean layer for this shape);
warm-up passes on a side stream, then `cuda_graphs.record` into the memory pool of the LM's GraphRunner (the chains
live in its `graphs` dict, so the capacity growth's `reset` drops them with the pass graphs and the pool), under its
one lock (`cuda_graphs._replaying`). Warm-up, recording and replays write the same keys and values at the same slots
(the same static inputs over the same cache prefix), so repeating the body changes nothing. A capture that raises
turns chains off for the model for good (`failure(model)`, the run summary's backend note) and resets the runner
(its pass graphs are captured again into a fresh pool, since a failed capture may leave its pool in doubt); the
drafter runs its eager chain: a run never fails on a capture.

Switch: SPECDEC_DRAFT_CHAIN_GRAPH=1 (or `ENABLED` True/False, for tests and experiments); read on the static
backend with graphs on only (an LM with a GraphRunner), for LMs that keep no features (a draft's). Off by default
until measured on a GPU (experiments/host_overhead.py --chain-graph both).
"""

from __future__ import annotations

import weakref
from typing import Callable

import torch

from . import cuda_graphs
from .cuda_graphs import count
from .devices import env_flag

ENV = "SPECDEC_DRAFT_CHAIN_GRAPH"
ENABLED: bool | None = None  # True/False overrides the env (tests, experiments)

_failures: "weakref.WeakKeyDictionary[torch.nn.Module, str]" = weakref.WeakKeyDictionary()

# body(x, position, step) -> (ids (k,) long, hidden (1, hidden)): the drafter's chain on the static x and position
# (1, 1), each of its passes run as step(inputs, position + k) (`_Chain.step`)
Body = Callable[[torch.Tensor, torch.Tensor, Callable], tuple[torch.Tensor, torch.Tensor]]


def switched_on() -> bool:
    """`ENABLED` where set, else SPECDEC_DRAFT_CHAIN_GRAPH (unset: off)."""
    return ENABLED if ENABLED is not None else env_flag(ENV, False)


def failure(model) -> str | None:
    """Why a chain capture failed for `model` (its drafts then run eager chains), or None."""
    return _failures.get(model)


def wanted(lm) -> bool:
    """Whether `lm`'s greedy chains go through a chain graph: the switch on, a static LM with graphs whose runner
    and chains have not failed, its cache allocated, and no features kept (the chain's passes store none)."""
    runner = getattr(lm, "graphs", None)
    return (switched_on() and runner is not None and getattr(lm, "backend", "") == "static"
            and runner.failed is None and failure(lm.model) is None and lm.features is None
            and lm.cache.layers[0].is_initialized)


class _Chain:
    """One chain's graph and the tensors it reads besides the model's and the cache's: the static inputs x and
    position (1, 1), the slot columns (C,) and the mask's two values; its outputs ids (k,) and hidden (1, hidden).
    All are owned here, not by the LM that captured it: a static LM's cache and GraphRunner outlive it and go to
    the model's next LM (backend.py), whose replays must not read a collected LM's tensors."""

    def __init__(self, lm, x: torch.Tensor):
        self.x = x.clone()
        self.position = torch.full((1, 1), lm.length, dtype=torch.long, device=x.device)
        self.columns = torch.arange(lm.cache.capacity, device=x.device)
        self.allowed = torch.zeros((), dtype=lm.dtype, device=x.device)
        self.blocked = torch.full((), torch.finfo(lm.dtype).min, dtype=lm.dtype, device=x.device)
        self.graph = self.ids = self.hidden = None

    def step(self, lm, inputs: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        """One token's short pass of the static `lm` at rotary position `position` (1, 1) long, written at slot
        `position` under the causal mask row made on the device from it (the values `causal_mask` gives):
        inputs (1, 1) ids or (1, 1, width) vectors -> final hidden states (1, hidden), as `forward_alone`
        computes them for one token at length `position`."""
        slot = position[0]  # (1,)
        mask = torch.where(self.columns[None, :] <= slot[:, None], self.allowed, self.blocked)[None, None]
        return lm.body_pass(inputs, position, slot, mask)[0]  # mask (1, 1, 1, C)


@torch.inference_mode()
def run_chain(lm, name: str, steps: int, x: torch.Tensor, body: Body, reads: tuple[torch.Tensor, ...] = (),
              keep_hidden: bool = False) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """`steps` (>= 1) one-token passes of `lm` from its length on, as `body` runs them from `x`, through the
    chain's graph (module doc): (ids (k,) long on the device, the last pass's hidden (1, hidden) where
    `keep_hidden`, else None), with `lm.length` and `lm.calls` moved by `steps`; or None, the LM untouched but
    for a grown cache, when the caller should run its eager chain (switched off, a first sighting, a failure).
    `reads`: the tensors `body` reads besides the LM's model and cache (a drafter's head, the target's embedding):
    their addresses are part of the key, since a graph reads whatever lies at the addresses it recorded."""
    if steps < 1 or not wanted(lm):
        return None
    lm._ensure_room(lm.length + steps)  # a growth resets the runner: its chains are captured again
    runner = lm.graphs
    key = ("chain", name, steps, tuple(x.shape), x.dtype, lm.cache.capacity, tuple(t.data_ptr() for t in reads))
    try:
        chain = runner.graph_for(key, lambda: _capture(lm, runner, x, body), tally="chain_")
    except Exception as error:  # noqa: BLE001 - any capture error means: eager chains, say why
        _give_up(lm, runner, f"draft chain graph capture failed ({type(error).__name__}: {error}); "
                             f"eager draft chains")
        return None
    if chain is None:
        return None
    with cuda_graphs._replaying:
        chain.x.copy_(x)
        chain.position.fill_(lm.length)
        chain.graph.replay()
        ids = chain.ids.clone()
        hidden = chain.hidden.clone() if keep_hidden else None
    count("chain_replays")
    lm.length += steps
    lm.calls += steps
    return ids, hidden


def _capture(lm, runner, x: torch.Tensor, body: Body) -> _Chain:
    """The chain's own tensors (`_Chain`), warm-up passes on a side stream, one recorded chain."""
    chain = _Chain(lm, x)

    def one_chain():
        return body(chain.x, chain.position, lambda inputs, position: chain.step(lm, inputs, position))

    cuda_graphs.warm_up(runner.device, one_chain)
    chain.graph, (chain.ids, chain.hidden) = cuda_graphs.record(runner.device, one_chain, runner.pool)
    if runner.pool is None:
        runner.pool = chain.graph.pool()
    return chain


def _give_up(lm, runner, reason: str) -> None:
    _failures.setdefault(lm.model, reason)
    runner.reset()  # the pass graphs are captured again, into a fresh pool
    try:
        torch.cuda.synchronize(runner.device)
    except Exception:  # noqa: BLE001 - a broken capture may leave an error to clear; the eager chain follows
        pass


def forget(model) -> None:
    """Drop a recorded failure of `model` (tests)."""
    _failures.pop(model, None)
