"""The draft model: autoregressive drafting with a small causal LM and its own KV cache."""

from __future__ import annotations

import time

import torch

from ..lm.backend import make_lm
from ..lm.cached_lm import CachedLM
from ..lm.tree_pass import tree_pass
from ..rules.draw import draw
from ..rules.warp import SamplingConfig, warp_logits
from ..trace.source import MODEL_SOURCE, DraftSource
from .base import CATCH_UP_TOKENS, Drafter, Proposal, greedy_chain, one_hot_rows, stop_point
from .chain_graph import model_chain
from .tree import DraftTree, grow_tree, tree_mask


class ModelDrafter(Drafter):
    """Autoregressive drafting with a small causal LM (Algorithm 1, step 1 of Leviathan et al.)."""

    kind = "model"
    supports_tree = True

    def __init__(self, model: torch.nn.Module, device: torch.device, vocab_width: int, name: str, head=None):
        self.lm = make_lm(CachedLM, model, device, vocab_width, head)
        self.name = name

    @property
    def vocab_width(self) -> int:
        """The columns its cached LM scores (the vocabulary it shares with the target)."""
        return self.lm.vocab_width

    @property
    def calls(self) -> int:
        return self.lm.calls

    def attach_target(self, lm) -> None:
        """Nothing to do: it drafts from its own model and cache, never from the target."""

    def sources(self, sequence: list[int]) -> list[DraftSource]:
        """The model, which can always draft."""
        return [MODEL_SOURCE]

    def propose(self, sequence: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator,
                keep_going=None, source: DraftSource | None = None, exact: bool = False,
                stop_after=None) -> Proposal:
        """Up to `gamma` tokens (`source` is always the model's, `exact` changes nothing here).
        `keep_going(i, confidence)`, when given, is asked after token i with the draft's unwarped
        probability of it and ends the draft early on False (the token stays in); `stop_after(tokens)`
        likewise with the tokens drafted so far. Stopping depends on the draft side only, so
        exactness is untouched."""
        tokens: list[int] = []
        rows = []
        new_tokens, started = len(sequence) - self.lm.length, time.perf_counter()
        logits = self.lm.extend(sequence, keep=1)[-1]
        catch_up = time.perf_counter() - started if new_tokens > CATCH_UP_TOKENS else 0.0
        if sampling.greedy and keep_going is None and gamma >= 1 and greedy_chain(self.lm.device):
            return self._greedy_chain(len(sequence), gamma, logits, stop_after, catch_up)
        for i in range(gamma):
            if sampling.greedy:  # q is one-hot on the argmax: built once for the whole draft (below)
                x = int(logits.argmax())
            else:
                q = warp_logits(logits, sampling)
                x = draw(q, generator)
                rows.append(q)
            tokens.append(x)
            if i + 1 < gamma:
                if keep_going is not None and not keep_going(i, float(torch.softmax(logits, -1)[x])):
                    break
                if stop_after is not None and stop_after(tokens):
                    break
                logits = self.lm.forward([x])[-1]
        if sampling.greedy:
            q_rows = one_hot_rows(tokens, self.lm.vocab_width, self.lm.device)
        else:
            q_rows = torch.stack(rows) if rows else torch.empty(0, self.lm.vocab_width)
        return Proposal(tokens, q_rows, catch_up_seconds=catch_up)

    def _greedy_chain(self, n: int, gamma: int, logits: torch.Tensor, stop_after, catch_up: float) -> Proposal:
        """A greedy draft of `gamma` tokens after a sequence of `n`, from the first step's logits (vocab_width,),
        with no host read per step: each argmax stays on the device and is fed to the next step as a (1, 1) id
        tensor (`forward_ids`), so the host launches step i + 1 without waiting for step i (on a GPU the draft's
        steps queue up back to back). The tokens are read once at the end; `stop_after` is then asked with the
        prefixes in order, as the step loop would have asked it, and the chain is cut where it says: a later
        step never changes an earlier token, so the kept tokens and their one-hot q rows are those of the step
        loop. The passes run past the cut are undone: the cache is rolled back to what the step loop would
        have fed (the sequence and all kept tokens but the last) and `calls` counts only the passes the kept
        tokens needed, so the records are the same. With SPECDEC_DRAFT_CHAIN_GRAPH on (the static backend with
        graphs), the gamma - 1 passes are one CUDA graph replay (chain_graph.py, lm/chain_graphs.py), same tokens."""
        picks = [logits.argmax()]  # 0-d long tensors on the device
        # on the static backend with graphs, and switched on: the chain's passes as one graph replay (chain_graph.py)
        chained = model_chain(self.lm, picks[0], gamma)
        for _ in range(gamma - 1 if chained is None else 0):
            picks.append(self.lm.forward_ids(picks[-1].view(1, 1))[-1].argmax())
        ids = torch.stack(picks) if chained is None else torch.cat([picks[0].view(1), chained[0]])
        tokens = ids.tolist()  # the one host read of the draft
        keep = stop_point(tokens, stop_after)
        if keep < gamma:
            self.lm.rollback(n + keep - 1)
            self.lm.calls -= gamma - keep
        return Proposal(tokens[:keep], one_hot_rows(tokens[:keep], self.lm.vocab_width, self.lm.device, ids[:keep]),
                        catch_up_seconds=catch_up)

    def propose_tree(self, sequence: list[int], nodes: int, depth: int, sampling: SamplingConfig,
                     generator: torch.Generator | None, keep_growing=None) -> DraftTree:
        """A draft tree after `sequence` (drafters/tree.py's `grow_tree`): one pass catches the cache up
        to the sequence (its last row gives the root's q), then one tree pass per level over the level's
        fed nodes (node c at position len(sequence) - 1 + depth(c), seeing the committed prefix and
        its ancestors). The cache is cropped back to the sequence afterwards (the next proposal feeds
        the accepted tokens again: one pass, as a chain draft's catch-up)."""
        n = len(sequence)
        new_tokens, started = n - self.lm.length, time.perf_counter()
        root_logits = self.lm.extend(sequence, keep=1)[-1]
        catch_up = time.perf_counter() - started if new_tokens > CATCH_UP_TOKENS else 0.0
        slots: dict[int, int] = {}

        def expand(fed: list[int], tree: DraftTree) -> torch.Tensor:
            base = self.lm.length
            slots.update({c: base + j for j, c in enumerate(fed)})
            mask = tree_mask(tree.parents, fed, slots, n, base + len(fed))
            return tree_pass(self.lm, [tree.tokens[c] for c in fed], [n - 1 + tree.depths[c] for c in fed], mask)

        tree = grow_tree(sequence[-1], root_logits, expand, nodes, depth, sampling, generator,
                         keep_growing=keep_growing)
        self.lm.rollback(n)
        tree.catch_up_seconds = catch_up
        return tree

    def rollback(self, length: int) -> None:
        """Crop its KV cache to the first `length` tokens."""
        self.lm.rollback(length)
