"""Parallel prompt decoding, PPD (Chen et al., docs/papers.md), one iteration per record:

  Step 1. Draft: the previous step's prompt tokens predicted distances 1..k beyond its last
          accepted node; the dynamic sparse tree of state k (`decoding.methods.ppd.tree.dynamic_trees`)
          turns their top-k lists into candidates (index paths), and prompt tokens are attached
          to the root and candidates as the tree allocates them.
  Step 2. ONE target pass over [uncached committed tokens (the root last), candidate tree,
          prompt tokens] with a 4D tree attention mask and explicit position ids.
  Step 3. Verify: greedy = exact match along the tree (output identical to greedy autoregressive
          decoding); sampling = typical acceptance p(x) > min(epsilon, delta exp(-H(p))), which is
          LOSSY (not the target distribution).
  Step 4. Emit the accepted candidates and one token from the target at the last accepted node
          (its argmax, or a sample from the warped p).
  Step 5. Compact the KV cache to the committed prefix plus the accepted branch; the last accepted
          node's prompt-token logits (ensemble-averaged over EPT) seed the next tree.

Settings: `PPDSettings` (tree size n, whose 0 or None means the hardware-aware choice cached for
this device, else DEFAULT_TREE_SIZE; prompt tokens m; EPT; the embeddings file; typical
acceptance's epsilon and delta).

Trace: the tree holds the root, every candidate (kind "candidate", score = the prompt token's
probability of it, accepted = on the accepted path) and one node per (owner, distance) prompt
token (kind "prompt", token = its top-1 guess, score = that guess's probability, accepted = its
guesses seeded the next tree). record.extra["ppd"] is a `PPDStep`: the settings, the tree as
index paths and the next predictions (top ids per distance); the first record also carries
"tuning": the hardware-aware curves of `decoding.methods.ppd.tuning.tuning_curves` (None when not tuned
here), so a saved trace carries them to the app.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Iterator

import torch

from ...lm.backend import make_lm, run_capacity
from ...lm.cached_lm import CachedLM
from ..settings import MethodSettings, knob
from .engine import (
    TYPICAL_DELTA, TYPICAL_EPSILON, lm_tree_forward, prompt_predictions, verify_greedy, verify_typical
)
from .prompts import load_prompt_tokens
from .tree import dynamic_trees, tree_buffers
from ...trace.record import ACCEPTED, BONUS, CORRECTION, TARGET, DraftToken, IterationRecord, StepData, TreeNode
from ...rules.draw import draw
from ...rules.warp import warp_logits
from ..base import RunConfig, RunState, raw_logprobs

DEFAULT_TREE_SIZE = 12
PREDICTION_TOP = 10  # top ids per distance kept for the trace / acceptance-table measurement


@dataclass
class PPDSettings(MethodSettings):
    lenience_note = "PPD verifies by exact match / typical acceptance: leave lenience at 1"

    tree_size: int | None = knob(
        None, flag="--tree-size", aliases=("--tree-budget",), app_name="tree_budget", minimum=0, maximum=512,
        ui_maximum=64, step=1, app_default=0, auto=0, what="tree size",
        label="Tree size n (PPD): 0 = auto, the n* tuned for this device (else 12)",
        help="ppd: candidate + prompt-token inputs per step (default: the size tuned for this device by "
             "`python -m decoding.methods.ppd tune`, else 12)")
    ppd_embeddings: str | None = knob(None, flag="--ppd-embeddings", app=False, label="Prompt-token embeddings",
                                      help="ppd: prompt-token embeddings file (default: shipped asset)")
    prompt_tokens: int | None = knob(None, flag="--prompt-tokens", minimum=1, maximum=16, app=False,
                                     what="prompt tokens m", label="Prompt tokens m",
                                     help="ppd: prompt tokens m (untrained only; default 3)")
    ept: int | None = knob(None, flag="--ept", minimum=1, maximum=128, app=False, label="EPT",
                           help="ppd: ensemble embeddings per prompt token (untrained only)")
    typical_epsilon: float = knob(
        TYPICAL_EPSILON, flag="--typical-epsilon", minimum=0.0, maximum=1.0, app=False, what="typical epsilon",
        label="Typical acceptance ε",
        help="ppd sampling (lossy typical acceptance): accept x when p(x) > min(epsilon, delta*exp(-H(p)))")
    typical_delta: float = knob(TYPICAL_DELTA, flag="--typical-delta", minimum=0.0, app=False,
                                what="typical delta", label="Typical acceptance δ",
                                help="ppd sampling: delta of typical acceptance")
    ppd_acceptance: list | None = field(default=None)  # a measured acceptance table (programmatic: tuning)


@dataclass
class PPDStep(StepData):
    """PPD's data of one step (record.extra["ppd"])."""

    KEY = "ppd"
    tree_size: int | None = None
    tree_size_chosen_by: str | None = None
    prompt_tokens: int | None = None
    ept: int | None = None
    state: int | None = None  # how many prompt predictions seeded this step's tree
    n_candidates: int | None = None
    n_prompt_inputs: int | None = None
    tree: dict | None = None  # the sparse tree as index paths (PPDTree.as_dict)
    verification: str | None = None  # a sentence for people; `lossy` is the fact
    lossy: bool | None = None  # typical acceptance (sampling) is lossy; exact match (greedy) is not
    typical_epsilon: float | None = None
    typical_delta: float | None = None
    embeddings: str | None = None
    trained_embeddings: bool | None = None
    last_accepted_node: int | None = None
    next_predictions: list[list[int]] = field(default_factory=list)
    tuning: dict | None = None  # hardware-aware curves; carried by the first record only
    carries_tuning: bool = False  # whether this record carries `tuning` (None then means: not tuned)

    def to_dict(self) -> dict:
        data = asdict(self)
        del data["carries_tuning"]
        if not self.carries_tuning:
            del data["tuning"]
        return data

    @classmethod
    def from_dict(cls, data: dict):
        data = dict(data) if isinstance(data, dict) else data
        if isinstance(data, dict):
            data["carries_tuning"] = "tuning" in data
            if data.get("lossy") is None and isinstance(data.get("verification"), str):
                # traces written before `lossy` existed said it in words only
                data["lossy"] = "lossy" in data["verification"] or "typical" in data["verification"]
        return super().from_dict(data)


def ppd(target, drafter, prompt_ids: list[int], config: RunConfig, meter=None) -> Iterator[IterationRecord]:
    """`drafter` is ignored: the target drafts for itself through its prompt tokens."""
    options = PPDSettings.from_config(config)  # validate before the first iteration
    prompts = load_prompt_tokens(target, options.ppd_embeddings, options.prompt_tokens, options.ept)
    from .tuning import cached_choice, cached_tuning_for

    tuned = cached_tuning_for(target, prompts.source)
    acceptance = options.ppd_acceptance
    if acceptance is None and tuned:  # trees from these prompt tokens' measured acceptance
        acceptance = tuned.get("acceptance")
    size, chosen_by = options.tree_size, "flag"
    if not size:  # None or 0: automatic
        tuned_size = cached_choice(target, prompts.source)
        if tuned_size is not None:
            size, chosen_by = tuned_size, "hardware-aware (tuned)"
        else:
            size, chosen_by = DEFAULT_TREE_SIZE, "default (not tuned on this device)"
    if size < prompts.ept:
        raise ValueError(f"tree size must be >= ept = {prompts.ept}")
    settings = {"tree_size": size, "chosen_by": chosen_by, "m": prompts.m, "ept": prompts.ept,
                "epsilon": options.typical_epsilon, "delta": options.typical_delta,
                "tuning": _tuning(target, prompts)}
    trees = dynamic_trees(size, prompts.m, prompts.ept, acceptance)
    return _ppd(target, prompt_ids, config, meter, settings, prompts, trees)


_TUNING_MEMO: dict = {}


def _tuning(target, prompts) -> dict | None:
    """The hardware-aware curves L(n), T(n), Speedup(n) of this device and model, for the trace
    (None when `python -m decoding.methods.ppd tune` has not been run here, or its cache is unreadable).
    Memoized on the tuning file's mtime: benchmarks and `tune` itself start many runs."""
    from .tuning import device_key, tuning_curves, tuning_path

    try:
        stamp = tuning_path().stat().st_mtime_ns
    except OSError:
        return None
    key = (str(tuning_path()), stamp, device_key(target), target.name, prompts.m, prompts.ept)
    if key not in _TUNING_MEMO:
        try:
            _TUNING_MEMO.clear()
            _TUNING_MEMO[key] = tuning_curves(target, prompts.m, prompts.ept)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):  # a stale or partial cache entry
            _TUNING_MEMO[key] = None
    curves = _TUNING_MEMO[key]
    return None if curves is None else {k: list(v) if isinstance(v, list) else v for k, v in curves.items()}


def _ppd(target, prompt_ids, config: RunConfig, meter, settings, prompts, trees) -> Iterator[IterationRecord]:
    state = RunState("ppd", target, prompt_ids, config, meter)
    lm = make_lm(CachedLM, target.model, target.device, target.vocab_size, capacity=run_capacity(prompt_ids, config))
    greedy, ept = config.sampling.greedy, settings["ept"]
    preds: list[torch.Tensor] = []  # prompt-token logits of the last step's last accepted node
    while not state.finished:
        state.start_iteration()
        context_length = len(state.sequence)
        root = state.sequence[-1]

        # Step 1: the state-k tree, its candidate tokens from the previous prompt predictions
        with state.timed("draft"):
            k = len(preds)
            tree = trees.trees[k]
            buffers = tree_buffers(tree, prefix_length=context_length - 1, ept=ept)
            width = max(PREDICTION_TOP, tree.max_rank() + 1)
            top = [torch.topk(torch.softmax(row, -1), min(width, row.shape[-1])) for row in preds]
            ranked = [t.indices.tolist() for t in top]
            tree_ids = [root] + [ranked[len(p) - 1][p[-1]] for p in tree.candidates]

        # Step 2: one pass over [uncached tokens, root, candidates, prompt tokens]
        with state.timed("verify"), torch.inference_mode():
            cached = lm.length
            logits = lm_tree_forward(lm, state.sequence[cached:-1], tree_ids, buffers, prompts)
        n_tok = 1 + buffers.n_candidates

        # Step 3: verify along the tree
        if greedy:
            verdict = verify_greedy(buffers, tree_ids, logits)
            probs = None
        else:
            probs = warp_logits(logits[:n_tok], config.sampling)
            verdict = verify_typical(buffers, tree_ids, probs, settings["epsilon"], settings["delta"])

        # Step 4: accepted candidates, then one token from the target at the last accepted node
        last = verdict.last
        if greedy:
            y = int(logits[last].argmax())
            nxt = warp_logits(logits[last], config.sampling)
        else:
            nxt = probs[last]
            y = draw(nxt, state.generator)
        accepted_ids = [tree_ids[c] for c in verdict.accepted]
        kind = CORRECTION if buffers.children(last) else (BONUS if buffers.n_candidates else TARGET)
        emitted = [state.token(x, ACCEPTED) for x in accepted_ids]
        emitted.append(state.token(y, kind))
        rows = [buffers.parent[c] for c in verdict.accepted] + [last]
        emitted = state.commit(emitted, raw_logprobs(logits[rows], accepted_ids + [y]))

        # Step 5: keep prefix + root + accepted branch in the cache; seed the next tree
        with torch.inference_mode():
            lm.compact(context_length - 1, [context_length - 1 + c for c in [0] + verdict.accepted])
        preds = prompt_predictions(buffers, logits, last, ept)

        info = PPDStep(
            tree_size=settings["tree_size"],
            tree_size_chosen_by=settings["chosen_by"],
            prompt_tokens=settings["m"],
            ept=ept,
            state=k,
            n_candidates=buffers.n_candidates,
            n_prompt_inputs=buffers.size - n_tok,
            tree=tree.as_dict(),
            verification="exact match (lossless)" if greedy else "typical acceptance (lossy)",
            lossy=not greedy,
            typical_epsilon=settings["epsilon"],
            typical_delta=settings["delta"],
            embeddings=prompts.source,
            trained_embeddings=bool(prompts.trained),
            last_accepted_node=last,
            next_predictions=[torch.topk(row, min(PREDICTION_TOP, row.shape[-1])).indices.tolist() for row in preds],
            # the hardware-aware curves ride on the first record only
            tuning=settings["tuning"] if state.iteration == 0 else None,
            carries_tuning=state.iteration == 0,
        )
        record = state.record(
            context_length=context_length,
            gamma=tree.depth,
            draft=_draft_tokens(state, buffers, tree_ids, logits, probs, top, verdict),
            accepted_length=len(verdict.accepted),
            emitted=emitted,
            residual=None,
            next_top=state.top_candidates(nxt),
            tree=_trace_tree(state, buffers, tree_ids, logits, top, verdict, ept),
            target_calls=lm.calls,
            extra={PPDStep.KEY: info.to_dict()},
        )
        yield record


def _draft_tokens(state, buffers, tree_ids, logits, probs, top, verdict) -> list[DraftToken]:
    """The path verification walked: the accepted candidates, then the best-ranked child of the
    last accepted node (rejected), if it has one. q = the prompt token's probability of it."""
    path = list(verdict.accepted)
    kids = buffers.children(verdict.last)
    if kids:
        path.append(kids[0])
    out = []
    for i, c in enumerate(path):
        parent = buffers.parent[c]
        x = tree_ids[c]
        p_row = probs[parent] if probs is not None else torch.softmax(logits[parent], -1)
        d, r = len(buffers.path[c]), buffers.path[c][-1]
        q = float(top[d - 1].values[r]) if r < top[d - 1].values.numel() else 0.0
        threshold = verdict.thresholds.get(parent)
        out.append(DraftToken(position=i, token_id=x, text=state.target.decode_token(x), q=q, p=float(p_row[x]),
                              coin=None, threshold=threshold, accepted=c in verdict.accepted, overlap=0.0,
                              top=state.top_candidates(p_row)))
    return out


def _trace_tree(state, buffers, tree_ids, logits, top, verdict, ept) -> list[TreeNode]:
    accepted = {0, *verdict.accepted}
    nodes = [TreeNode(0, -1, tree_ids[0], state.target.decode_token(tree_ids[0]), 0, "root", True)]
    for c in range(1, 1 + buffers.n_candidates):
        d, r = len(buffers.path[c]), buffers.path[c][-1]
        q = float(top[d - 1].values[r]) if r < top[d - 1].values.numel() else None
        nodes.append(TreeNode(c, buffers.parent[c], tree_ids[c], state.target.decode_token(tree_ids[c]), d,
                              "candidate", c in accepted, q))
    where = {}
    for (owner, k, j), node in sorted(buffers.prompt_index.items(), key=lambda kv: kv[1]):
        if j:
            continue
        rows = [buffers.prompt_index[(owner, k, g)] for g in range(ept)]
        p = torch.softmax(logits[rows].mean(0), -1)
        guess = int(p.argmax())
        index = len(nodes)
        where[(owner, k)] = index
        nodes.append(TreeNode(index, owner if k == 1 else where[(owner, k - 1)], guess,
                              state.target.decode_token(guess), buffers.depth[node], "prompt",
                              owner == verdict.last, float(p[guess])))
    return nodes
