"""CUDA graphs of a StaticLM's fixed-shape passes: one graph per pass shape, captured lazily, replayed.

A StaticLM pass of n tokens (`static_lm.py`) always runs the same shapes: inputs (1, n) ids or
(1, n, width) vectors, rotary positions (1, n), cache slots (n,), the additive mask (1, 1, n, C)
and the per-layer cache buffers (1, kv_heads, C, head_dim), which live at fixed addresses. So the
decoder's kernels for that n can be recorded once (torch.cuda.CUDAGraph) and replayed with one
launch: the small models' step is otherwise bound by the launches of 30 layers' kernels, not by
GPU work (docs/gpu.md's H100 measurement: about 25 ms a step of the 135M target).

- Lazily, per key (input shape, dtype): a pass shape is captured the SECOND time it is seen, so a
  one-off pass (a prefill of a short prompt) stays eager; passes longer than
  static_lm.MAX_GRAPH_TOKENS never get here.
- Capture, as torch's docs ask (torch.cuda.graphs, "CUDA Graphs" in the CUDA semantics notes):
  static input buffers are cloned from the first call's inputs; warm-up passes run on a side
  stream (cuBLAS workspaces, lazy inits), then `torch.cuda.graph(g, pool=...)` records one pass.
  The warm-up passes write the same keys/values at the same slots as the real pass (same inputs,
  same cache prefix), so running them changes nothing. Capture only records: the pass itself then
  runs as the graph's first replay.
- Replay: copy the call's inputs into the static buffers, `graph.replay()`, and CLONE the output
  (1, n, hidden) at once. The graphs of one runner share one memory pool (its first graph's
  `pool()`); that is safe in any replay order because nothing a graph allocates is read after
  another graph's replay (outputs are cloned immediately; cache buffers and static inputs are
  allocated outside capture), and one lock makes a capture, or a replay with its copies, one
  step among the process's threads. The pool is never handed to a capture after all its graphs
  are gone (`reset` forgets it): PyTorch frees a private pool with its last graph, and a later
  capture into the freed pool fails an internal assert (seen on an H200 with torch 2.11 when
  one process-wide pool outlived a model's graphs).
- A capture that raises: the runner turns itself off for good and the StaticLM runs its eager
  static pass; the reason is kept per model (`failure(model)`) for the run summary's
  `backend_note`. A run never fails on a capture.
- A re-allocated cache (capacity growth) invalidates the graphs: `reset()` drops them.

ZeroGPU (app/zerogpu.py): whether capture works inside a `spaces.GPU` call is unknown, so the
factory (`backend.py`) uses the eager static path there unless SPECDEC_ZEROGPU_GRAPHS=1.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import Counter

import torch

WARMUP_PASSES = 2
CAPTURE_AFTER_USES = 2  # a shape is captured the second time it is seen

_failures: "weakref.WeakKeyDictionary[torch.nn.Module, str]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()
# One capture or (copy in, replay, clone out) at a time in the process: graphs share a pool, so a replay
# of another thread's graph between this replay and its clone could overwrite this graph's output.
_replaying = threading.Lock()
# Process-wide tallies, for the benchmark's and gpu-check's reports (`counts()`, `reset_counts()`): "captures",
# "capture_ms", "replays", "eager_passes" (static passes that ran eagerly: prefills, first sightings, no graphs).
_counts: Counter = Counter()


def count(name: str, amount: float = 1) -> None:
    _counts[name] += amount


def counts() -> dict:
    """The tallies since the last `reset_counts()` (see `_counts`)."""
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in _counts.items()}


def reset_counts() -> None:
    _counts.clear()


def failure(model) -> str | None:
    """Why capture failed for `model` (then its StaticLMs run eagerly), or None."""
    return _failures.get(model)


class _Captured:
    """One graph with its static inputs and its output (1, n, hidden)."""

    def __init__(self, graph, inputs, output):
        self.graph = graph
        self.inputs = inputs  # (inputs, positions, slots, mask), the buffers the graph reads
        self.output = output


class GraphRunner:
    """The graphs of one StaticLM cache (see the module doc). `run` returns the pass's final hidden
    states (n, hidden), or None when the pass should run eagerly (not captured yet, or capture off)."""

    def __init__(self, model: torch.nn.Module, device: torch.device):
        self.device = torch.device(device)
        self._model = weakref.ref(model)
        self.graphs: dict[tuple, _Captured] = {}
        self.seen: dict[tuple, int] = {}
        self.failed: str | None = failure(model)
        self.pool = None  # the memory pool of this runner's graphs: its first graph's, while graphs live

    def reset(self) -> None:
        """Drop every graph (the cache buffers they point at were re-allocated), and with them their pool."""
        self.graphs.clear()
        self.seen.clear()
        self.pool = None

    def run(self, lm, inputs: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,
            mask: torch.Tensor) -> torch.Tensor | None:
        """inputs (1, n) or (1, n, width), positions (1, n), slots (n,), mask (1, 1, n, C) ->
        hidden (n, hidden) from the graph of this shape, or None (run it eagerly)."""
        if self.failed is not None or not lm.cache.layers[0].is_initialized:
            return None  # the first pass allocates the cache eagerly
        key = (tuple(inputs.shape), inputs.dtype, tuple(mask.shape))
        try:
            captured = self.graph_for(key, lambda: self._capture(lm, (inputs, positions, slots, mask)))
        except Exception as error:  # noqa: BLE001 - any capture error means: run eagerly, say why
            self._give_up(f"CUDA graph capture failed ({type(error).__name__}: {error}); eager static passes")
            return None
        if captured is None:
            return None
        with _replaying:
            for buffer, value in zip(captured.inputs, (inputs, positions, slots, mask)):
                buffer.copy_(value)
            captured.graph.replay()
            count("replays")
            return captured.output[0].clone()

    def graph_for(self, key: tuple, capture, tally: str = ""):
        """The graph kept under `key`; else, at the key's CAPTURE_AFTER_USES-th sighting, `capture()`'s (run under
        the process's lock, counted as `tally` + "captures" and + "capture_ms", then kept); None before that.
        Raises what `capture` raises (the caller decides what a failure turns off). Pass graphs and draft chain
        graphs (chain_graphs.py) share it, and with it one table, one pool and one `reset`."""
        captured = self.graphs.get(key)
        if captured is not None:
            return captured
        self.seen[key] = self.seen.get(key, 0) + 1
        if self.seen[key] < CAPTURE_AFTER_USES:
            return None
        started = time.perf_counter()
        with _replaying:
            captured = capture()
        count(f"{tally}captures")
        count(f"{tally}capture_ms", 1000 * (time.perf_counter() - started))
        self.graphs[key] = captured
        return captured

    def _give_up(self, reason: str) -> None:
        self.failed = reason
        self.graphs.clear()
        model = self._model()
        if model is not None:
            with _lock:
                _failures.setdefault(model, reason)
        try:
            torch.cuda.synchronize(self.device)
        except Exception:  # noqa: BLE001 - a broken capture may leave an error to clear; the eager path follows
            pass

    def _capture(self, lm, values: tuple[torch.Tensor, ...]) -> _Captured:
        """Static copies of `values` (inputs, positions, slots, mask), warm-up, one recorded pass."""
        static = tuple(v.clone() for v in values)

        def one_pass() -> torch.Tensor:
            return lm.body_pass(*static)

        warm_up(self.device, one_pass)
        graph, output = record(self.device, one_pass, self.pool)
        if self.pool is None:
            self.pool = graph.pool()
        return _Captured(graph, static, output)


def warm_up(device: torch.device, one_pass) -> None:
    """Run `one_pass` WARMUP_PASSES times on a side stream, as torch's docs ask before a capture."""
    current = torch.cuda.current_stream(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(current)
    with torch.cuda.stream(side):
        for _ in range(WARMUP_PASSES):
            one_pass()
    current.wait_stream(side)


def record(device: torch.device, one_pass, pool=None) -> tuple[object, torch.Tensor]:
    """(a CUDAGraph of one call of `one_pass`, its output tensor, which every replay rewrites);
    `pool`: the memory pool of a live graph to share (None: a new private pool)."""
    graph = torch.cuda.CUDAGraph()
    # thread_local: another run's thread (the app) may use the GPU meanwhile without breaking the capture
    with torch.cuda.graph(graph, pool=pool, capture_error_mode="thread_local"):
        output = one_pass()
    return graph, output
