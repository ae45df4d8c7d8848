"""Hand-built records of a verified draft tree (shared by the renderer's unit tests and the browser test)."""

from __future__ import annotations

from decoding.trace.record import (ACCEPTED, CORRECTION, Candidate, DraftToken, EmittedToken, IterationRecord,
                                   Residual, Timings, TreeNode)


def node(index, parent, text, depth, kind="draft", **verdict):
    """A TreeNode with the verdict fields of a verified tree (a field left out is None, as in a trace that
    lacks it); the root and the kept nodes are on the accepted path."""
    return TreeNode(index, parent, 100 + index, text, depth, kind,
                    kind == "root" or verdict.get("verdict") == "accepted", **verdict)


def record(tree, emitted, residual=None, extra=None):
    return IterationRecord(method="speculative", iteration=2, context_length=9, gamma=3, draft=[],
                           accepted_length=sum(1 for t in emitted if t.kind == ACCEPTED), emitted=emitted,
                           residual=residual, next_top=[], tree=tree, timings=Timings(), target_calls=3,
                           draft_calls=3, generated=5, elapsed=0.1, energy_joules=None, energy_note="",
                           finished=False, extra=extra or {})


def sampled_tree():
    """root 'The' -> ' cat' (1st try, rejected: residual on ' dog', ' cow'), ' dog' (2nd, kept), ' cow'
    (untried); ' dog' -> ' ran' (kept) -> ' away' (rejected), ' off' (untried); correction ' fast'."""
    resid = [Candidate(2, " dog", 0.5), Candidate(3, " cow", 0.5)]
    tree = [node(0, -1, "The", 0, "root"),
            node(1, 0, " cat", 1, q=0.5, p=0.4, coin=0.93, threshold=0.8, verdict="rejected", sibling_rank=0,
                 residual_mass=0.1, residual_top=resid),
            node(2, 0, " dog", 1, q=0.5, p=0.5, coin=0.31, threshold=1.0, verdict="accepted", sibling_rank=1),
            node(3, 0, " cow", 1, q=0.3, p=0.5, verdict="untried", sibling_rank=2),
            node(4, 2, " ran", 2, q=0.7, p=0.6, coin=0.2, threshold=0.857, verdict="accepted", sibling_rank=0),
            node(5, 4, " away", 3, q=0.6, p=0.1, coin=0.5, threshold=0.167, verdict="rejected", sibling_rank=0,
                 residual_mass=0.55, residual_top=[Candidate(7, " fast", 0.8)]),
            node(6, 4, " off", 3, q=0.2, p=0.3, verdict="untried", sibling_rank=1)]
    emitted = [EmittedToken(102, " dog", ACCEPTED), EmittedToken(104, " ran", ACCEPTED),
               EmittedToken(7, " fast", CORRECTION)]
    return record(tree, emitted, Residual(7, " fast", 0.55, False, [Candidate(7, " fast", 0.8)]),
                  {"tree_draft": {"nodes": 6, "depth": 3, "chosen": "tuned", "greedy": False}})


def with_chain(rec: IterationRecord, iteration: int = 0) -> IterationRecord:
    """`rec` with its `draft` as the engine writes it for a tree: the accepted path as a chain, then the first
    rejected child tried under its last node (so the draft row and the chips read as for a chain)."""
    nodes = {n.index: n for n in rec.tree}
    path = sorted((n for n in rec.tree if n.kind != "root" and n.verdict == "accepted"), key=lambda n: n.depth)
    end = path[-1].index if path else 0
    tried = sorted((n for n in rec.tree if n.parent == end and n.verdict == "rejected"), key=lambda n: n.sibling_rank)
    chain = path + tried[:1]
    rec.draft = [DraftToken(i, n.token_id, n.text, n.q, n.p, n.coin, n.threshold, n.verdict == "accepted",
                            overlap=0.8, source="lookup" if n.kind == "lookup" else "model")
                 for i, n in enumerate(chain)]
    rec.iteration, rec.target_calls, rec.generated = iteration, iteration + 1, 3 * (iteration + 1)
    assert all(n.parent in nodes for n in chain)
    return rec


def greedy_tree() -> IterationRecord:
    """The sampled tree at temperature 0: no coins, a child kept iff it is the target's top token."""
    rec = sampled_tree()
    for n in rec.tree:
        n.coin = n.residual_mass = n.residual_top = None
        n.threshold = 0.6 if n.verdict in ("accepted", "rejected") else None
    rec.extra = {"tree_draft": {"nodes": 6, "depth": 3, "chosen": "default", "greedy": True}}
    rec.residual = None
    return rec
