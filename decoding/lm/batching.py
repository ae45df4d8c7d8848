"""Cross-run batching: concurrent runs on one shared model share its forward passes.

When a class presses Run at once, many runs decode on the same target (and draft). On a CPU a
forward pass over a few tokens is bound by reading the weights, not by arithmetic, so one pass over
B runs' tokens costs little more than one run's (experiments/batch_forward.py measures it). With
batching on (the app turns it on; the CLI, the benchmark and the tests of single runs leave it off),
`CachedLM.forward` hands its call to the `ForwardBatcher`: one worker thread that takes one model's
calls waiting at that moment, pads their KV caches to one length, runs one forward pass with a 4D
mask (each row sees its own cache and its own new tokens causally, never the padding or another
run), and gives each run its logits and its cache grown by its own tokens only. Each run keeps its
own sequence, random generator and trace; the logits equal a solo pass up to float rounding
(tests/decoding/lm/test_batching.py). Prefills (more than `LONG_CALL` tokens, or a call on an empty
cache) are batched only with prefills: padding one-token steps to a prompt's length would waste the
saving.

Where a run needs more than the model's logits, the pass runs the model's decoder and hands each
run the final hidden states of its own tokens: a target that a feature draft reads keeps them
(`CachedLM.keep_features`), and the output heads then score only the rows the runs asked for, one
matmul per head over all runs' rows (the head of a 135M model is a third of its weights: read once
per pass, not once per run). The feature draft's
own layer (`drafters.feature.FeatureDraftLM`, fed [feature; embedding] vectors rather than token ids)
is batched the same way: the runs of a class share every pass of both models. A batched pass of at most
`lean_dynamic.MAX_TOKENS` tokens a row runs the lean decoder (`lean_dynamic.py`) on the merged cache, as a solo
pass does, bit-identical to HF's modules.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache

from .hf_cache import cache_kwargs, grown_cache

LONG_CALL = 16  # calls feeding more tokens than this are batched only with each other
_settings = {"max_batch": 0, "window_s": 0.0}
_lock = threading.Lock()
_batcher: "ForwardBatcher | None" = None


def enable(max_batch: int = 8, window_s: float = 0.015) -> None:
    """Batch concurrent forward calls from now on (up to `max_batch` runs per pass, waiting at most
    `window_s` for running decodes that have not called yet before starting a pass without them)."""
    if max_batch < 1 or window_s < 0:
        raise ValueError("max_batch must be >= 1 and window_s >= 0")
    _settings.update(max_batch=max_batch, window_s=window_s)


def disable() -> None:
    """Back to one forward pass per call in the caller's thread (the worker goes idle)."""
    _settings["max_batch"] = 0


def tracked(records):
    """`records` (a decode generator), counted as a running decode while it is open, except while
    it has been paused between records for longer than the window (a Step run waiting for its next
    click): the batcher waits, up to the window, until every running decode has a call waiting
    before it starts a pass, and must not wait for one that will not call soon. runner.decode
    wraps a run in this only while batching is on."""
    run = object()
    try:
        while True:
            with _lock:
                _runs[run] = None  # computing its next record
            try:
                record = next(records)
            except StopIteration:
                return
            with _lock:
                _runs[run] = time.monotonic()  # paused since
            yield record
    finally:
        with _lock:
            _runs.pop(run, None)
        close = getattr(records, "close", None)
        if close is not None:
            close()


_runs: dict[object, float | None] = {}  # open decodes -> None while computing, else when they paused


def _running(now: float) -> int:
    """The open decodes worth waiting for: computing, or paused for less than the window."""
    window = _settings["window_s"]
    return sum(1 for paused in list(_runs.values()) if paused is None or now - paused < window)


def sharing() -> tuple[int, int]:
    """(passes, calls served) of the batcher so far, (0, 0) without one: two snapshots give the
    mean number of runs per pass between them."""
    found = _batcher if _settings["max_batch"] > 1 else None
    return (found.passes, found.runs_served) if found is not None else (0, 0)


def enabled() -> bool:
    """Is cross-run batching on (the static-cache factory, backend.py, then builds dynamic LMs)?"""
    return _settings["max_batch"] > 1


def batcher() -> "ForwardBatcher | None":
    """The batcher when batching is on, else None."""
    global _batcher
    if _settings["max_batch"] <= 1:
        return None
    with _lock:
        if _batcher is None:
            _batcher = ForwardBatcher()
        return _batcher


@dataclass
class Call:
    """One run's forward call: feed `tokens` to `lm`'s cache, return the logits (or, for an lm that
    returns hidden states, those) of the last `keep`. `tokens`: token ids, or a (n, inputs) tensor
    of input vectors for an lm fed vectors."""

    lm: object  # a CachedLM
    tokens: list[int] | torch.Tensor
    keep: int | None
    done: threading.Event = field(default_factory=threading.Event)
    result: torch.Tensor | None = None
    error: BaseException | None = None

    @property
    def long(self) -> bool:
        """A prefill (or any call feeding many tokens): batched only with other long calls."""
        return len(self.tokens) > LONG_CALL or self.lm.length == 0


class ForwardBatcher:
    """One worker thread that runs every model's forward calls, several runs' calls per pass.

    It waits until every running decode has a call waiting (or the window has passed), then serves
    the model with the most calls waiting: the runs then move in step (all draft, then all verify),
    and one pass at a time keeps the cores for that pass."""

    def __init__(self):
        self.batch_sizes: dict[int, int] = {}  # runs per pass -> number of passes
        self._cond = threading.Condition()
        self._pending: list[Call] = []
        threading.Thread(target=self._serve, daemon=True, name="forward-batcher").start()

    @property
    def passes(self) -> int:
        return sum(list(self.batch_sizes.values()))

    @property
    def runs_served(self) -> int:
        """Calls served, summed over passes (runs_served / passes: runs per pass)."""
        return sum(size * count for size, count in list(self.batch_sizes.items()))

    def forward(self, lm, tokens, keep: int | None) -> torch.Tensor:
        """Queue the call and wait for its result (an error of its pass is raised here)."""
        call = Call(lm, tokens if isinstance(tokens, torch.Tensor) else list(tokens), keep)
        with self._cond:
            self._pending.append(call)
            self._cond.notify_all()
        call.done.wait()
        if call.error is not None:
            raise call.error
        return call.result

    def _take(self) -> list[Call]:
        """The next pass's calls: once every running decode has a call waiting (or the window has
        passed), the calls of the model and kind (long or short) with the most of them waiting, up
        to max_batch; a long call waits for nobody."""
        with self._cond:
            while not self._pending:
                self._cond.wait()
            max_batch = max(1, _settings["max_batch"])
            deadline = time.monotonic() + _settings["window_s"]
            while True:  # wait for the running decodes still computing (they call within a few ms)
                now = time.monotonic()
                if len(self._pending) >= _running(now) or now >= deadline or self._pending[0].long:
                    break
                self._cond.wait(deadline - now)
            groups: dict[tuple[int, bool], list[Call]] = {}
            for call in self._pending:
                groups.setdefault((id(call.lm.model), call.long), []).append(call)
            calls = max(groups.values(), key=len)[:max_batch]
            for call in calls:
                self._pending.remove(call)
            return calls

    def _serve(self) -> None:
        while True:
            calls = self._take()
            try:
                with torch.inference_mode():
                    if len(calls) == 1:
                        calls[0].result = calls[0].lm.forward_alone(calls[0].tokens, calls[0].keep)
                    else:
                        try:
                            results = batched_forward(calls[0].lm.model, calls)
                        except NotBatchable:  # e.g. sliding-window caches: one pass per run, as without batching
                            results = [call.lm.forward_alone(call.tokens, call.keep) for call in calls]
                        for call, logits in zip(calls, results):
                            call.result = logits
                self.batch_sizes[len(calls)] = self.batch_sizes.get(len(calls), 0) + 1
            except BaseException as exc:  # noqa: BLE001 (handed to the callers, who raise it)
                for call in calls:
                    call.error = exc
            finally:
                for call in calls:
                    call.done.set()


class NotBatchable(Exception):
    """The model or its caches cannot take a batched pass; nothing was changed."""


@torch.inference_mode()
def batched_forward(model, calls: list[Call]) -> list[torch.Tensor]:
    """One forward pass over several runs' calls on `model`; each call's lm.cache grows by its own
    tokens, a run that keeps features stores its own rows' hidden states, and each call's result
    comes back in order (as CachedLM.forward_alone would give it: float32 logits, or hidden states
    for an lm that returns them). Raises NotBatchable, with every cache untouched, when the pass
    cannot be made."""
    try:
        out, grown, counts, keeps, padded, width = _pass(model, calls)
    except Exception as exc:  # noqa: BLE001 (any model that refuses the padded pass runs its calls alone)
        raise NotBatchable(str(exc)) from exc
    plain = _plain(calls)
    rows = []
    for row, (call, count, keep) in enumerate(zip(calls, counts, keeps)):
        lm = call.lm
        for index, layer in enumerate(grown.layers):  # this run's new keys/values only
            lm.cache.update(layer.keys[row : row + 1, :, padded + width - count :],
                            layer.values[row : row + 1, :, padded + width - count :], index)
        if plain:  # the model's own logits of the last max(keeps) slots
            rows.append(out[row, out.shape[1] - keep :, : lm.vocab_width].float())
        else:
            mine = out[row, width - count :]  # (count, hidden): this run's positions
            if lm.features is not None:
                lm.store_features(mine)  # at [length, length + count), before the length moves on
            rows.append(mine[-keep:])
        lm.length += count
        lm.calls += 1
    return rows if plain else _outputs(calls, rows)


def _plain(calls: list[Call]) -> bool:
    """Calls that want the model's own logits and nothing else (no features kept, no restricted head,
    no hidden states): the pass runs the whole model, whose head may do more than a matmul (e.g. a
    final logit soft-capping)."""
    return all(c.lm.head is None and c.lm.features is None and not c.lm.returns_hidden for c in calls)


def _outputs(calls: list[Call], rows: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each call's result from its kept rows (keep, hidden): the rows themselves for an lm that
    returns hidden states, else float32 logits, computed by one matmul per output head over the
    rows of every call that uses it (the model's own head, or a restricted OutputHead)."""
    results: list[torch.Tensor | None] = [None] * len(calls)
    groups: dict[int, list[int]] = {}
    for i, call in enumerate(calls):
        if call.lm.returns_hidden:
            results[i] = rows[i].clone()  # not a view that keeps the whole pass's states alive
        else:
            groups.setdefault(id(call.lm.head), []).append(i)
    for members in groups.values():
        lm = calls[members[0]].lm
        stacked = torch.cat([rows[i] for i in members])
        widest = max(calls[i].lm.vocab_width for i in members)
        if lm.head is not None:
            logits = lm.head.logits(stacked, widest)
        else:
            logits = lm.model.get_output_embeddings()(stacked)[:, :widest].float()
        for i, part in zip(members, logits.split([len(rows[i]) for i in members])):
            width = calls[i].lm.vocab_width
            results[i] = part if width == widest else part[:, :width].contiguous()
    return results


def _pass(model, calls: list[Call]):
    """The batched pass itself, changing no run's cache: (the logits of the last max(keeps) slots for
    `_plain` calls, else the final hidden states (batch, width, hidden); the pass's grown cache, token
    counts, keeps, padded cache length, slot width)."""
    lengths = [c.lm.length for c in calls]
    counts = [len(c.tokens) for c in calls]
    padded, width = max(lengths), max(counts)
    device = calls[0].lm.device
    batch_cache = DynamicCache(config=model.config)
    if padded:
        for index in range(len(calls[0].lm.cache.layers)):
            layers = [c.lm.cache.layers[index] for c in calls]
            filled = [(row, layer) for row, (layer, length) in enumerate(zip(layers, lengths)) if length]
            for row, layer in filled:
                if getattr(layer, "is_sliding", False) or layer.keys.shape[-2] != lengths[row]:
                    raise ValueError("batched forward needs full-attention caches holding exactly the run's tokens")
            shape = filled[0][1].keys.shape
            keys = filled[0][1].keys.new_zeros(len(calls), shape[1], padded, shape[3])
            values = filled[0][1].values.new_zeros(len(calls), shape[1], padded, shape[3])
            for row, layer in filled:  # each run's cache at the left of its row, zeros (masked) after it
                keys[row, :, : lengths[row]] = layer.keys[0]
                values[row, :, : lengths[row]] = layer.values[0]
            batch_cache.update(keys, values, index)

    # each run's new tokens sit at the right end of its row (slots [width - count, width)), so the
    # last rows of every run line up; row i's real query at slot j sees its cache [0, length_i) and
    # its own new tokens up to j: the causal mask of a solo pass, with the padding and the other
    # runs hidden (a padding query sees only itself)
    vectors = isinstance(calls[0].tokens, torch.Tensor)  # an lm fed input vectors, not token ids
    if vectors:
        inputs = calls[0].tokens.new_zeros(len(calls), width, calls[0].tokens.shape[-1])
    else:
        inputs = torch.zeros(len(calls), width, dtype=torch.long)
    positions = torch.zeros(len(calls), width, dtype=torch.long)
    allowed = torch.zeros(len(calls), 1, width, padded + width, dtype=torch.bool)
    for row, (call, length, count) in enumerate(zip(calls, lengths, counts)):
        start = width - count
        inputs[row, start:] = call.tokens if vectors else torch.tensor(call.tokens, dtype=torch.long)
        positions[row, start:] = torch.arange(length, length + count)
        allowed[row, 0, start:, :length] = True
        allowed[row, 0, start:, padded + start :] = torch.ones(count, count, dtype=torch.bool).tril()
        allowed[row, 0, :start, padded : padded + start] = torch.eye(start, dtype=torch.bool)
    dtype = next(model.parameters()).dtype
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    inputs, positions, mask = inputs.to(device), positions.to(device), mask.to(device)
    keeps = [min(c.keep or n, n) for c, n in zip(calls, counts)]
    lm = calls[0].lm
    if _plain(calls):
        needed = max(keeps)
        hidden = lm._lean_hidden(inputs, positions, mask, batch_cache)
        if hidden is not None:  # LlamaForCausalLM's head over the kept slots, as its forward computes them
            return lm.model.get_output_embeddings()(hidden[:, -needed:]), batch_cache, counts, keeps, padded, width
        out = model(input_ids=inputs, attention_mask=mask, position_ids=positions, **cache_kwargs(model, batch_cache),
                    use_cache=True, **({"logits_to_keep": needed} if needed < width else {}))
        return out.logits[:, -needed:], grown_cache(out), counts, keeps, padded, width
    hidden, grown = lm.decoder_pass(inputs, positions, batch_cache, attention_mask=mask)
    return hidden, grown, counts, keeps, padded, width
