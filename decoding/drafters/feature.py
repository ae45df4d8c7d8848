"""A feature draft: a decoder layer that drafts from the target's own last hidden states (EAGLE).

EAGLE (Li, Wei, Zhang, Zhang, "EAGLE: Speculative Sampling Requires Rethinking Feature
Uncertainty", arXiv:2401.15077, section 3) drafts at the level of the target's features: with
f_t the target's final hidden state at position t and x_{t+1} the token that followed, the draft
predicts f_{t+1} = g([f_t ; e(x_{t+1})]) and scores the next token with the target's own output
head, head(f_{t+1}). Its embedding and head are the target's (shared, not copied); its own weights
are one fully connected layer (2d -> d) and one Llama decoder layer of the target's width (or a few). Where
the target has already read a position its true feature is used; past that, the draft feeds its
own predictions back in (steps 2.. of a draft).

The head scores only the target's most frequent tokens (`head.safetensors`, ids only, rows taken
from the target's head; see output_head.py), so q is zero elsewhere and the rule stays exact.
On disk: config.json (the draft layer's Llama config), model.safetensors (fc + layer + norm),
head.safetensors, training.json and a model card. `python -m training features` and
`python -m training train-features` make one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from ..lm.backend import make_lm
from ..lm.cached_lm import CachedLM
from ..lm.hf_cache import cache_kwargs, grown_cache
from .base import CATCH_UP_TOKENS, Drafter, Proposal, greedy_chain, one_hot_rows, stop_point
from .chain_graph import feature_chain
from .tree import DraftTree, grow_tree, tree_mask
from ..lm.tree_pass import tree_pass
from ..trace.source import MODEL_SOURCE, DraftSource
from .output_head import OutputHead, load_head
from ..rules.draw import draw
from ..rules.warp import SamplingConfig, warp_logits

KIND = "feature"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
MARKER = "feature_draft"  # config.json key that marks a feature draft's folder


def draft_layer_config(target_config, layers: int = 1, **overrides):
    """The target's Llama config cut to `layers` decoder layers, no vocabulary (inputs are embeddings)."""
    from transformers import LlamaConfig

    cfg = target_config.to_dict()
    for key in ("architectures", "auto_map", "_name_or_path", "transformers_version", "model_type"):
        cfg.pop(key, None)
    cfg.update(num_hidden_layers=layers, vocab_size=1, pad_token_id=None, bos_token_id=None, eos_token_id=None,
               tie_word_embeddings=False, **overrides)
    return LlamaConfig(**cfg)


class FeatureDraftModel(torch.nn.Module):
    """g([f_t ; e(x_{t+1})]) -> the predicted f_{t+1} (after a final RMS norm, as the target's is)."""

    def __init__(self, config):
        super().__init__()
        from transformers import LlamaModel

        d = config.hidden_size
        self.config = config
        self.fc = torch.nn.Linear(2 * d, d, bias=True)
        self.body = LlamaModel(config)

    def pairs(self, features: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        """fc([f_t ; e(x_{t+1})]): features and embeds (..., d) -> what enters the body's first layer (..., d)."""
        return self.fc(torch.cat([features.to(self.fc.weight.dtype), embeds.to(self.fc.weight.dtype)], dim=-1))

    def forward(self, features: torch.Tensor, embeds: torch.Tensor, position_ids: torch.Tensor,
                cache=None, attention_mask=None, use_cache: bool = False):
        x = self.pairs(features, embeds)
        out = self.body(inputs_embeds=x, position_ids=position_ids, **cache_kwargs(self.body, cache),
                        attention_mask=attention_mask, use_cache=use_cache)
        return out.last_hidden_state, grown_cache(out)

    def init_from_target(self, target_model) -> None:
        """Start from the target's last decoder layers and final norm (same shapes), the feature half
        of fc as the identity: before training the draft already maps f_t to something like it."""
        source = target_model.get_decoder().layers[-len(self.body.layers):]
        for mine, theirs in zip(self.body.layers, source):
            mine.load_state_dict(theirs.state_dict())
        self.body.norm.load_state_dict(target_model.get_decoder().norm.state_dict())
        d = self.config.hidden_size
        with torch.no_grad():
            self.fc.weight.zero_()
            self.fc.weight[:, :d].copy_(torch.eye(d))
            self.fc.weight[:, d:].normal_(0.0, 0.02)
            self.fc.bias.zero_()

    def save(self, directory: str | Path, extra: dict | None = None) -> None:
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        cfg = self.config.to_dict()
        cfg[MARKER] = {"version": 1, **(extra or {})}
        (directory / CONFIG_FILE).write_text(json.dumps(cfg, indent=1))
        state = {k: v.detach().to(torch.float16 if v.is_floating_point() else v.dtype).contiguous().cpu()
                 for k, v in self.state_dict().items() if not k.startswith("body.embed_tokens")}
        save_file(state, str(directory / WEIGHTS_FILE))


def is_feature_draft(directory: str | Path) -> bool:
    path = Path(directory).expanduser() / CONFIG_FILE
    if not path.is_file():
        return False
    try:
        return MARKER in json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return False


def load_feature_draft(directory: str | Path, target_model, dtype: torch.dtype, device) -> tuple[FeatureDraftModel, OutputHead]:
    """The draft layer in `directory` for `target_model` (raises ValueError with a clear reason)."""
    from safetensors.torch import load_file
    from transformers import LlamaConfig

    directory = Path(directory).expanduser()
    raw = json.loads((directory / CONFIG_FILE).read_text())
    raw.pop(MARKER, None)
    config = LlamaConfig(**raw)
    hidden = target_model.get_input_embeddings().weight.shape[1]
    if config.hidden_size != hidden:
        raise ValueError(f"it drafts from {config.hidden_size}-wide hidden states; this target's are {hidden} wide")
    model = FeatureDraftModel(config)
    state = load_file(str(directory / WEIGHTS_FILE))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if not k.startswith("body.embed_tokens")]:
        raise ValueError(f"its weights do not fit its layer (missing {missing}, unexpected {unexpected})")
    model.to(device=device, dtype=dtype).eval()
    head = load_head(directory, dtype, device, target_model)
    if head is None:
        raise ValueError("it has no head.safetensors (the token ids its head scores)")
    head = OutputHead(head.token_ids.to(device), head.weight.to(device=device, dtype=dtype))
    return model, head


class FeatureDraftLM(CachedLM):
    """The feature draft's layer with its KV cache, fed (n, 2 x hidden) vectors [f_t ; e(x_{t+1})]
    and returning the predicted features (its final hidden states) instead of logits. A CachedLM,
    so that with cross-run batching on (batching.py) the drafts of concurrent runs share its passes
    as their targets share theirs."""

    returns_hidden = True

    def __init__(self, model: FeatureDraftModel, device):
        super().__init__(model, device, vocab_width=0)

    def _inputs(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens.unsqueeze(0)

    def _body(self, inputs: torch.Tensor, position_ids: torch.Tensor, cache, attention_mask=None):
        """g over (batch, n, 2 x hidden) pairs: the predicted features (batch, n, hidden), the grown cache."""
        d = inputs.shape[-1] // 2
        return self.model(inputs[..., :d], inputs[..., d:], position_ids, cache=cache,
                          attention_mask=attention_mask, use_cache=True)

    def _decoder(self) -> torch.nn.Module:
        return self.model.body

    def _first_hidden(self, inputs: torch.Tensor) -> torch.Tensor:
        """fc over the (batch, n, 2 x hidden) pairs: (batch, n, hidden) entering the body's first layer."""
        d = inputs.shape[-1] // 2
        return self.model.pairs(inputs[..., :d], inputs[..., d:])


class FeatureDrafter(Drafter):
    """Drafts with a FeatureDraftModel from the target's features (the chain loop attaches the
    target's CachedLM, which then keeps its final hidden states). Its KV cache (`lm`, a
    FeatureDraftLM) holds only the pairs (f_t, x_{t+1}) built from true features; the pairs a draft
    adds on its own predictions are dropped after every proposal, and the next proposal first
    catches up on the target's new features (the tokens the target verified meanwhile)."""

    kind = "model"
    supports_tree = True

    def __init__(self, model: FeatureDraftModel, head: OutputHead, embedding: torch.nn.Module, device,
                 vocab_width: int, name: str):
        self.model = model
        self.head = head
        self.embedding = embedding
        self.device = device
        self._vocab_width = vocab_width
        self.name = name
        self.lm = make_lm(FeatureDraftLM, model, device)
        # the head's ids as a list where they ascend and all lie in the vocabulary (a greedy step's fast argmax)
        ids = head.token_ids
        ascending = ids.numel() > 0 and head.max_id < vocab_width and bool((ids[1:] > ids[:-1]).all())
        self.head_ids: list[int] | None = ids.tolist() if ascending else None
        self.length = 0  # pairs in the cache, all from true features: pair t sits at position t
        self.target = None  # the target's CachedLM (attach_target)

    @property
    def vocab_width(self) -> int:
        """The width of its q rows: the target's vocabulary (its head scores a subset of it)."""
        return self._vocab_width

    @property
    def calls(self) -> int:
        return self.lm.calls

    def attach_target(self, lm) -> None:
        """Read features from `lm` (the run's target CachedLM), which starts keeping them."""
        lm.keep_features()
        self.target = lm

    def sources(self, sequence: list[int]) -> list[DraftSource]:
        """The model's source once the target has read part of the context (its features exist)."""
        return [MODEL_SOURCE] if self.target is not None and self.target.length > 0 else []

    def _pass(self, features: torch.Tensor, tokens, start: int) -> torch.Tensor:
        """Feed the pairs (features[i], tokens[i]) at positions start.. (the cache must hold exactly
        `start`); `tokens`: a list of ids, or (n,) long ids on the device (a greedy chain's argmax, never
        read back); the features predicted from the pairs (n, hidden)."""
        if start != self.lm.length:
            raise RuntimeError(f"feature draft cache holds {self.lm.length} pairs, the pass starts at {start}")
        with torch.inference_mode():
            ids = tokens if isinstance(tokens, torch.Tensor) else torch.tensor(tokens, device=self.device)
            embeds = self.embedding(ids)
            dtype = self.model.fc.weight.dtype
            pairs = torch.cat([features.to(dtype), embeds.to(dtype)], dim=-1)
        return self.lm.forward(pairs, keep=1)

    def _crop(self, length: int) -> None:
        self.lm.rollback(length)

    def _catch_up(self, sequence: list[int]) -> tuple[torch.Tensor, float]:
        """Feed the true pairs the cache lacks (at least the last one), then its own predictions for
        positions the target has not read; returns the predicted feature at position len(sequence) - 1
        (1, hidden) and the catch-up's seconds (0 unless it was long: CATCH_UP_TOKENS)."""
        n = len(sequence)
        known = min(self.target.length, n - 1)  # pairs t < known have true features f_t and a next token
        # re-feed at least the last true pair: its output, the predicted f_known, starts the draft
        self.length = min(self.length, known - 1)
        self._crop(self.length)
        started, fed = time.perf_counter(), known - self.length
        feature = self._pass(self.target.features[self.length: known], list(sequence[self.length + 1: known + 1]),
                             self.length)[-1:]
        self.length = known
        catch_up = time.perf_counter() - started if fed > CATCH_UP_TOKENS else 0.0
        # positions the target has not read (a context longer than its cache): its own predictions
        for t in range(known, n - 1):
            feature = self._pass(feature, [sequence[t + 1]], t)[-1:]
        return feature, catch_up

    def propose_tree(self, sequence: list[int], nodes: int, depth: int, sampling: SamplingConfig,
                     generator: torch.Generator | None, keep_growing=None) -> DraftTree | None:
        """A draft tree after `sequence` (drafters/tree.py's `grow_tree`; None where it cannot draft).
        Node c's pair (the predicted feature of its parent, its token) is fed at position
        len(sequence) - 2 + depth(c) in one tree pass per level (it sees the true pairs and its
        ancestors' pairs); the head of its output, the predicted feature at its own position, scores
        its children. The pairs built on predictions are dropped afterwards, as after a chain."""
        if self.target is None or self.target.length == 0 or len(sequence) < 2:
            return None
        n = len(sequence)
        root_feature, catch_up = self._catch_up(sequence)
        committed = self.lm.length
        features = {0: root_feature}
        slots: dict[int, int] = {}

        def expand(fed: list[int], tree: DraftTree) -> torch.Tensor:
            base = self.lm.length
            slots.update({c: base + j for j, c in enumerate(fed)})
            mask = tree_mask(tree.parents, fed, slots, committed, base + len(fed))
            dtype = self.model.fc.weight.dtype
            with torch.inference_mode():
                embeds = self.embedding(torch.tensor([tree.tokens[c] for c in fed], device=self.device))
                parents = torch.cat([features[tree.parents[c]] for c in fed]).to(dtype)
                pairs = torch.cat([parents, embeds.to(dtype)], dim=-1)
            out = tree_pass(self.lm, pairs, [n - 2 + tree.depths[c] for c in fed], mask)
            features.update({c: out[j: j + 1] for j, c in enumerate(fed)})
            return scores(out)

        # the tree is grown over the head's K tokens (q = 0 elsewhere) where they all lie in the vocabulary
        subset = self.head.max_id < self.vocab_width
        scores = self.head.sub_logits if subset else (lambda hidden: self.head.logits(hidden, self.vocab_width))
        tree = grow_tree(sequence[-1], scores(root_feature)[-1], expand, nodes, depth, sampling, generator,
                         token_ids=self.head.token_ids if subset else None, vocab=self.vocab_width,
                         keep_growing=keep_growing)
        self._crop(self.length)
        tree.catch_up_seconds = catch_up
        return tree

    def propose(self, sequence: list[int], gamma: int, sampling: SamplingConfig, generator: torch.Generator,
                keep_going=None, source: DraftSource | None = None, exact: bool = False,
                stop_after=None) -> Proposal:
        """Up to `gamma` tokens, as ModelDrafter.propose (the same `keep_going` and `stop_after`)."""
        if self.target is None or self.target.length == 0 or gamma < 1 or len(sequence) < 2:
            return Proposal([], torch.empty(0, self.vocab_width, device=self.device))
        n = len(sequence)
        feature, catch_up = self._catch_up(sequence)
        if sampling.greedy and keep_going is None and greedy_chain(self.device):
            return self._greedy_chain(n, gamma, feature, sampling, stop_after, catch_up)
        tokens, rows = [], []
        # greedy over a head whose ids are ascending and inside the vocabulary: the argmax of the head's own
        # K logits names the same token as the argmax of the full-width row (-inf elsewhere; ties go to the
        # smallest id either way), and q, one-hot on it, is built once for the whole draft
        sub_argmax = sampling.greedy and self.head_ids is not None
        for i in range(gamma):
            logits = None
            if sub_argmax:
                x = self.head_ids[int(self.head.sub_logits(feature)[-1].argmax())]
            else:
                logits = self.head.logits(feature, self.vocab_width)[-1]
                q = warp_logits(logits, sampling)
                x = draw(q, generator) if not sampling.greedy else int(q.argmax())
                rows.append(q)
            tokens.append(x)
            if i + 1 == gamma:
                break
            if keep_going is not None:
                if logits is None:
                    logits = self.head.logits(feature, self.vocab_width)[-1]
                if not keep_going(i, float(torch.softmax(logits, -1)[x])):
                    break
            if stop_after is not None and stop_after(tokens):
                break
            feature = self._pass(feature, [x], n - 1 + i)[-1:]
        self._crop(self.length)
        q_rows = one_hot_rows(tokens, self.vocab_width, self.device) if sub_argmax else torch.stack(rows)
        return Proposal(tokens, q_rows, catch_up_seconds=catch_up)

    def _greedy_chain(self, n: int, gamma: int, feature: torch.Tensor, sampling: SamplingConfig, stop_after,
                      catch_up: float) -> Proposal:
        """A greedy draft of `gamma` tokens after a sequence of `n` from the predicted `feature` (1, hidden), with
        no host read per step: each argmax (the head's own column mapped to its id through the head's ids on the
        device, or the full row's) stays on the device and its embedding feeds the next step, so the host
        launches step i + 1 without waiting for step i. The tokens are read once at the end; `stop_after` is
        then asked with the prefixes in order, as the step loop would have asked it, and the chain is cut where
        it says (a later step never changes an earlier token: the kept tokens and q rows are the step loop's).
        The pairs fed on predictions are dropped as after any proposal, and `calls` counts only the passes the
        kept tokens needed, so the records are the same. With SPECDEC_DRAFT_CHAIN_GRAPH on (the static backend with
        graphs), the chain is one CUDA graph replay (chain_graph.py, lm/chain_graphs.py), same tokens."""
        sub_argmax = self.head_ids is not None  # see propose: the same token as the full row's argmax
        # on the static backend with graphs, and switched on: the whole chain as one graph replay (chain_graph.py)
        chained = feature_chain(self, feature, gamma) if sub_argmax else None
        picks, rows = [], []  # (1,) long token ids on the device; the warped rows where q is not one-hot
        for i in range(gamma if chained is None else 0):
            if sub_argmax:  # index_select: a 0-d index tensor would be read back as a Python int
                picks.append(self.head.token_ids.index_select(0, self.head.sub_logits(feature)[-1].argmax().view(1)))
            else:
                rows.append(warp_logits(self.head.logits(feature, self.vocab_width)[-1], sampling))
                picks.append(rows[-1].argmax().view(1))
            if i + 1 < gamma:
                feature = self._pass(feature, picks[-1], n - 1 + i)[-1:]
        ids = torch.cat(picks) if chained is None else chained[0]
        tokens = ids.tolist()  # the one host read of the draft
        keep = stop_point(tokens, stop_after)
        self.lm.calls -= gamma - keep
        self._crop(self.length)
        q_rows = (one_hot_rows(tokens[:keep], self.vocab_width, self.device, ids[:keep]) if sub_argmax
                  else torch.stack(rows[:keep]))
        return Proposal(tokens[:keep], q_rows, catch_up_seconds=catch_up)

    def rollback(self, length: int) -> None:
        """Keep the pairs of the first `length` committed tokens (pair t needs token t + 1)."""
        if self.length > max(0, length - 1):
            self.length = max(0, length - 1)
            self._crop(self.length)
