"""Speculative sampling with a draft TREE: several guesses per position, verified in one target pass.

Per iteration (speculative decoding with `--draft-tree` set; chain_loop's steps, with a tree):
  Step 1. The drafter grows a tree from the last committed token (drafters/tree.py: level by level by
          path confidence, at most N nodes and depth D, one draft pass per level). A copy from the
          context (the hybrid's lookup) stays a chain with one-hot q.
  Step 2. The target scores the uncached committed tokens and every tree node in ONE pass: node c at
          position len(sequence) - 1 + depth(c), seeing the committed prefix and its ancestors
          (lm/tree_pass.py; the tree attention of SpecInfer, Miao et al., arXiv:2305.09781).
  Step 3. rules/tree_acceptance.py walks the tree: recursive rejection over siblings at temperature > 0
          (Jeon et al., arXiv:2402.14160), the target's argmax at temperature 0; the longest accepted
          path is kept.
  Step 4. The next token comes from the last residual under the path's end, or from the target's p
          there (the bonus) when that node has no children.
  Step 5. The target's cache keeps the accepted path's entries (compaction, as PPD's and Medusa's);
          the draft rolls back to the committed prefix and catches up next time; a record is yielded.

N and D: `--draft-tree N[,D]` sets them; `auto` takes this device's tuned size (`tree_tune.py`, cached
like PPD's hardware tune; `decoding/eval/tree_tune.py` measures it) or the default where none is tuned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import torch

from ..drafters.base import Drafter
from ..errors import keyed
from ..drafters.gamma_policy import GammaPolicy
from ..drafters.tree import DraftTree, chain_tree, tree_mask
from ..lm.cached_lm import CachedLM
from ..lm.tree_pass import compact, tree_pass
from ..rules.tree_acceptance import REJECTED, TreeVerdict, validate_tree_lenience, verify_tree
from ..rules.draw import draw
from ..rules.warp import argmax_index, warp_logits
from ..trace.record import (ACCEPTED, BONUS, CORRECTION, DraftToken, IterationRecord, Residual, StepData,
                            TreeNode)
from .base import RunConfig, RunState, raw_logprobs

TUNED, DEFAULT, SET = "tuned", "default", "set"  # how an iteration's tree size was chosen
# before a tune: the shape measured best for the device and precision where one was measured, else 16 nodes and 6
# levels (a GPU's wide pass costs little more than a step, so deep trees may pay there; unmeasured). On a CPU in
# bfloat16, 4 nodes and 2 levels: the tree-ceiling replay's best shape at measured costs (docs/bench/tree-ceiling.md),
# and the fastest of chains, 4,2, 6,3 and 16,6 on Spec-Bench (docs/bench/spec-bench-tree42-bfloat16 and
# spec-bench-tree-default-bfloat16) and on the class's prompts at T 0.7 (docs/bench/classroom-tree-default-bfloat16).
# With the lean dynamic path (the CPU default since then) 4,2 and the chain ran level in one run
# (docs/bench/spec-bench-tree42-lean-bfloat16, classroom-tree42-lean-bfloat16) and 4,2 ahead of the chain and 16,6
# in another (docs/bench/spec-bench-tree-lean-bfloat16, which the lesson's tree chapter quotes).
DEFAULT_NODES, DEFAULT_DEPTH = 16, 6
MEASURED_DEFAULTS = {("cpu", torch.bfloat16): (4, 2)}  # (device type, target dtype) -> (N, D)
MAX_NODES, MAX_DEPTH = 64, 16


@dataclass
class TreeDraftStep(StepData):
    """One tree iteration's shape and rule (record.extra["tree_draft"]).

    The record's `tree` holds every node with its verdict (TreeNode's q, p, coin, threshold, verdict,
    sibling_rank, residual_mass, residual_top); `record.draft` is the accepted path's chain view: one
    DraftToken per node on the accepted path, then the first rejected child tried under its last node (if
    any), so per-position acceptance reads "position i accepted given 1..i-1 were" along the accepted path.
    """

    KEY = "tree_draft"
    nodes: int | None = None  # N: the most draft nodes the tree may hold (root excluded)
    depth: int | None = None  # D: the deepest level drafted
    chosen: str | None = None  # how N and D were chosen: "tuned" (measured costs) | "default" | "set" (by the user)
    source: str | None = None  # "model" (a tree of the draft's guesses) | "lookup" (a copied chain)
    drafted: int | None = None  # draft nodes actually in this iteration's tree (<= nodes)
    greedy: bool | None = None  # temperature 0: no coins, a child is accepted iff it is the target's argmax
    shape: str | None = None  # what was drafted this iteration: "tree" | "chain" | "plain"
    # a chain's source as the gamma policy buckets it (trace/source.py's DraftSource.key: "model", "lookup",
    # "lookup-short", "corpus"); None for a tree or a plain step
    source_key: str | None = None


def parse_draft_tree(value: str) -> tuple[int, int] | str:
    """"off" | "auto" | "N" | "N,D" -> "off", "auto" or (N, D) (D defaults to DEFAULT_DEPTH, capped at N);
    ValueError with a readable message otherwise."""
    text = str(value).strip().lower()
    if text in ("off", "auto"):
        return text
    parts = [s.strip() for s in text.split(",")]
    message = (f"draft tree must be off, auto, a node count N or N,D (nodes, depth), e.g. 16 or 16,6 "
               f"(got {value!r})")
    if not 1 <= len(parts) <= 2 or not all(p.isdigit() for p in parts):
        raise keyed(message, "tree.format", value=repr(value))
    n = int(parts[0])
    d = int(parts[1]) if len(parts) == 2 else min(n, DEFAULT_DEPTH)
    if not (1 <= n <= MAX_NODES) or not (1 <= d <= min(n, MAX_DEPTH)):
        raise keyed(f"draft tree needs 1 <= N <= {MAX_NODES} nodes and 1 <= D <= min(N, {MAX_DEPTH}) levels "
                    f"(got {value!r})", "tree.size", nodes=MAX_NODES, depth=MAX_DEPTH, value=repr(value))
    return n, d


def tree_size(setting: str, target, drafter) -> tuple[int, int, str]:
    """(N, D, how chosen) for a run: set by the user, this device's tune, or the default."""
    parsed = parse_draft_tree(setting)
    if isinstance(parsed, tuple):
        return parsed[0], parsed[1], SET
    from .tree_tune import tuned_size

    tuned = tuned_size(target, drafter)
    if tuned is not None:
        return tuned[0], tuned[1], TUNED
    return (*default_size(target), DEFAULT)


def default_size(target) -> tuple[int, int]:
    """(N, D) before a tune: MEASURED_DEFAULTS for the target's device type and dtype, else 16, 6."""
    device = torch.device(target.device).type
    return MEASURED_DEFAULTS.get((device, target.dtype), (DEFAULT_NODES, DEFAULT_DEPTH))


def tree_loop(name: str, target, drafter: Drafter, prompt_ids: list[int], config: RunConfig, meter=None,
              settings=None) -> Iterator[IterationRecord]:
    """Steps 1-5 (module doc) with `drafter` (one whose `supports_tree`; the hybrid's copies stay chains).
    `settings` is the speculative method's (its draft_tree, gamma_schedule and max_gamma)."""
    validate_tree_lenience(config.lenience)
    if not drafter.supports_tree:
        raise keyed("a draft tree needs a draft model or a feature draft (prompt lookup only copies chains)",
                    "tree.needs_model")
    state = RunState(name, target, prompt_ids, config, meter, drafter)
    lm = CachedLM(target.model, target.device, min(target.vocab_size, drafter.vocab_width))
    drafter.attach_target(lm)
    greedy = config.sampling.greedy
    nodes, depth, chosen = tree_size(settings.draft_tree, target, drafter)
    # the gamma policy picks the source (model or copy), the shape (a tree or a chain for the model) and a
    # chain's length; fixed and heuristic schedules: a model source becomes a tree
    policy = GammaPolicy(settings.gamma_schedule, config.gamma, max_gamma=settings.max_gamma)
    auto = policy.schedule == "auto"

    while not state.finished:
        state.start_iteration()
        context_length = len(state.sequence)
        room = max(0, state.room() - 1)

        # Step 1: draft a tree (a model source) or a chain (a copy; with the automatic schedule also a model
        # chain where chains are expected to be faster, and nothing where a plain step is:
        # drafters/gamma_policy.py's choose_shape). Sources, lengths and shapes are chosen from earlier
        # iterations and the context only; a tree stops growing where its next level does not pay.
        with state.timed("draft"):
            source, asked, shape = policy.choose_shape(drafter.sources(state.sequence))
            if source is not None and not auto:
                source = drafter.fixed_source(state.sequence, source)  # the hybrid's fixed rule: copy or model
                shape = "tree" if source.kind == "model" else "chain"
            gamma = max(0, min(asked, room))
            tree, proposal = None, None
            if source is None or not gamma:
                shape = "plain"
            else:
                if shape == "tree":
                    tree = drafter.propose_tree(state.sequence, nodes, min(depth, room), config.sampling,
                                                state.generator, policy.tree_stopper())
                else:
                    stopper = policy.draft_stopper() if source.kind == "model" else None
                    proposal = drafter.propose(state.sequence, gamma, config.sampling, state.generator, stopper, source,
                                               exact=auto)
                    proposal = proposal.truncated(room)
                    kinds = ["lookup" if proposal.source_of(i) != "model" else "draft"
                             for i in range(len(proposal.tokens))]
                    tree = chain_tree(state.sequence[-1], proposal.tokens, proposal.q_rows,
                                      "draft" if proposal.source == "model" else "lookup", kinds)
        if tree is None or tree.size == 0:  # nothing drafted (a feature draft before the target's first pass)
            tree, shape = None, "plain"
        n_nodes = 1 + (tree.size if tree is not None else 0)

        # Step 2: one target pass over the uncached committed tokens and the tree
        fed, prefill = context_length - lm.length + n_nodes - 1, lm.length == 0
        with state.timed("verify"):
            logits = _target_pass(lm, state.sequence, tree)  # (n_nodes, V): row c after node c's path
        # the walk and the records read the rows of the root and the accepted path only: each is warped when
        # first read (a row's warp equals that row of the whole matrix's)
        p_rows = NodeRows(logits, lambda row: warp_logits(row, config.sampling))

        # Step 3-4: walk the tree, pick the next distribution
        if tree is None:
            verdict = TreeVerdict([], [], p_rows[0], True)
            parents, tokens = [-1], [state.sequence[-1]]
        else:
            parents, tokens = tree.parents, tree.tokens
            coins = None if greedy else torch.rand(n_nodes, generator=state.generator, device=target.device)
            p_raw = NodeRows(logits, lambda row: torch.softmax(row, dim=-1)) if greedy else None
            verdict = verify_tree(parents, tokens, p_rows, tree.q_rows, coins, p_raw)
        path = verdict.path
        nxt = verdict.next_distribution
        y = argmax_index(nxt) if greedy else draw(nxt, state.generator)

        # Step 5: commit, compact the target's cache to the accepted path, roll the draft back
        accepted = [tokens[c] for c in path]
        emitted = [state.token(x, ACCEPTED) for x in accepted]
        emitted.append(state.token(y, BONUS if verdict.next_is_bonus else CORRECTION))
        emitted = state.commit(emitted, raw_logprobs(logits[[0] + path], accepted + [y]))
        compact(lm, context_length, [context_length - 1 + c for c in path])
        drafter.rollback(context_length + len(path))

        record = state.record(
            context_length=context_length,
            gamma=tree.depth if tree is not None else 0,
            draft=_path_view(state, tree, verdict, p_rows) if tree is not None else [],
            accepted_length=len(path),
            emitted=emitted,
            residual=None if verdict.next_is_bonus else _residual(state, nxt, y, verdict),
            next_top=state.top_candidates(nxt),
            tree=_tree_nodes(state, parents, tokens, verdict, tree),
            target_calls=lm.calls,
            extra={TreeDraftStep.KEY: TreeDraftStep(nodes, depth, chosen, _source_word(tree),
                                                     n_nodes - 1, greedy, shape,
                                                     source.key if shape == "chain" else None).to_dict()},
        )
        if shape == "tree":
            end_has_children = any(parent == verdict.last for parent in tree.parents)
            policy.update_tree(len(emitted), len(path), len(path) + int(end_has_children), tree.depth,
                               record.timings.draft - tree.catch_up_seconds, record.timings.verify, fed, prefill)
        elif policy.schedule != "fixed":
            # as chain_loop: the chosen source's own tokens only (a copy that continued a model draft is extra)
            k = len(proposal.tokens) if proposal is not None else 0
            own = k - (proposal.copied if proposal is not None else 0)
            policy.update(gamma, own, min(len(path), own),
                          [d.overlap for d in record.draft[:own] if d.accepted is not None],
                          record.timings.draft - (proposal.catch_up_seconds if proposal is not None else 0.0),
                          record.timings.verify, fed, prefill, source.key if source is not None else "model")
        if policy.schedule != "fixed":
            record.extra["gamma_policy"] = policy.snapshot()
        yield record


class NodeRows:
    """Rows of `fn` applied to `logits` (n, V) row by row, computed when first indexed (`rows[c]`, c an int) and
    kept: `fn(logits[c])` equals row c of `fn(logits)` for the row-wise transforms used here (warp_logits, softmax
    over the last dimension), so a reader gets the same values while the rows it never reads (the tree's nodes
    off the accepted path) cost nothing. Shape: (n, V); a row (V,)."""

    def __init__(self, logits: torch.Tensor, fn):
        self.logits, self.fn, self.rows = logits, fn, {}

    def __getitem__(self, node: int) -> torch.Tensor:
        row = self.rows.get(node)
        if row is None:
            row = self.rows[node] = self.fn(self.logits[node])
        return row

    def __len__(self) -> int:
        return self.logits.shape[0]

    @property
    def shape(self) -> torch.Size:
        return self.logits.shape


def _target_pass(lm: CachedLM, sequence: list[int], tree: DraftTree | None) -> torch.Tensor:
    """Float32 logits (n, V) of the root (the last committed token) and the tree's nodes, in node order,
    from one pass over the uncached committed tokens (causal) and the tree nodes (tree mask)."""
    if tree is None or tree.size == 0:
        return lm.extend(sequence, keep=1)
    if tree.is_chain:
        # a chain's tree mask is the causal mask: the LM's causal pass (no explicit mask: on the CPU, SDPA's causal
        # kernel, ~20% faster than a dense mask when the pass is also the prompt's prefill, as a copy from the prompt
        # makes the first iteration's), the same rows, positions and cache slots
        return lm.extend(sequence, tree.tokens[1:], keep=tree.size + 1)
    cached, n = lm.length, len(sequence)
    pre = list(sequence[cached:])
    width = n + tree.size
    causal = torch.ones(len(pre), width, dtype=torch.bool).tril(cached)
    slots = {c: n - 1 + c for c in range(1, tree.size + 1)}
    rows = tree_mask(tree.parents, list(range(1, tree.size + 1)), slots, n, width)
    positions = list(range(cached, n)) + [n - 1 + d for d in tree.depths[1:]]
    return tree_pass(lm, pre + tree.tokens[1:], positions, torch.cat([causal, rows]), keep=tree.size + 1)


def _path_view(state: RunState, tree: DraftTree, verdict: TreeVerdict, p_rows) -> list[DraftToken]:
    """The accepted path as a chain (record.draft): its nodes, then the first child tried and rejected
    under its end (position i accepted given 1..i-1 were, along the accepted path)."""
    shown = list(verdict.path)
    end_kids = [c for c in range(len(tree.parents)) if tree.parents[c] == verdict.last]
    if end_kids and verdict.nodes[end_kids[0]].verdict == REJECTED:
        shown.append(end_kids[0])
    out = []
    for i, c in enumerate(shown):
        v, node = tree.parents[c], verdict.nodes[c]
        p_v, q_v = p_rows[v], tree.q_rows[v]
        out.append(DraftToken(
            position=i, token_id=tree.tokens[c], text=state.target.decode_token(tree.tokens[c]),
            q=float(node.q if node.q is not None else q_v[tree.tokens[c]]), p=float(node.p or 0.0),
            coin=node.coin, threshold=node.threshold, accepted=node.verdict == "accepted",
            overlap=float(torch.minimum(p_v, q_v).sum()), top=state.top_candidates(p_v, q_v),
            source="lookup" if tree.kind_of(c) == "lookup" else "model"))
    return out


def _residual(state: RunState, residual, y: int, verdict: TreeVerdict) -> Residual:
    mass = verdict.residual_mass
    return Residual(token_id=y, text=state.target.decode_token(y), mass=float(mass if mass is not None else 0.0),
                    fell_back_to_p=verdict.residual_fell_back_to_p, top=state.top_candidates(residual))


def _tree_nodes(state: RunState, parents, tokens, verdict: TreeVerdict, tree: DraftTree | None) -> list[TreeNode]:
    """Every node with its verdict (TreeNode's fields); the accepted path marked `accepted`."""
    on_path = set(verdict.path)
    root = tokens[0]
    out = [TreeNode(0, -1, root, state.target.decode_token(root), 0, "root", True)]
    if tree is None:
        return out
    for c in range(1, len(parents)):
        node = verdict.nodes[c]
        out.append(TreeNode(
            c, parents[c], tokens[c], state.target.decode_token(tokens[c]), tree.depths[c], tree.kind_of(c), c in on_path,
            tree.scores[c] if c < len(tree.scores) else None, node.q, node.p, node.coin, node.threshold,
            node.verdict, node.rank, node.residual_mass,
            state.top_candidates(node.residual) if node.residual is not None else None))
    return out


def _source_word(tree: DraftTree | None) -> str | None:
    """TreeDraftStep.source: "model" for the model's guesses (a chain it drew included), "lookup" for a copy."""
    return None if tree is None else "lookup" if tree.kind == "lookup" else "model"
