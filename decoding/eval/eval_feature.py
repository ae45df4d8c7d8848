"""eval-draft's figures for a feature draft (drafters/feature.py): alpha, greedy agreement, tokens
per call and c, comparable with a draft model's.

alpha and greedy agreement are teacher-forced as for a draft model, here from the target's true
features: the draft's first token of every draft. Later tokens of a draft read the draft's own
predicted features and are right less often, so tokens per call is not replayed from those
matches: it is the engine's own greedy speculative run at gamma 4 over every prompt.
c is one draft step (the layer over one pair, then the head) against one target step, timed
interleaved at the same context.
"""

from __future__ import annotations

import statistics
import time

import torch

from ..lm.backend import make_lm
from ..lm.cached_lm import CachedLM
from ..lm.devices import sync
from ..trace.metrics import c_step
from ..paths import display_path


@torch.inference_mode()
def feature_probs(target, draft, prompt: list[int], cont: list[int], width: int) -> torch.Tensor:
    """The draft's temperature-1 q at the positions that predict `cont` (len(cont) x width): the
    target's features of prompt + cont, then the draft layer over every pair (f_t, x_{t+1}) at
    once; the pair at t predicts the token at t + 2."""
    tokens = prompt + cont
    ids = torch.tensor([tokens[:-1]], device=target.device)
    features = target.model.get_decoder()(input_ids=ids).last_hidden_state
    nxt = target.model.get_input_embeddings()(torch.tensor([tokens[1:]], device=target.device))
    positions = torch.arange(len(tokens) - 1, device=target.device)[None]
    predicted, _ = draft.feature(features, nxt, positions)
    first = len(prompt) - 2  # the pair (f_{P-2}, x_{P-1}) predicts the continuation's first token
    rows = predicted[0, max(first, 0): len(tokens) - 2]  # the last pair predicts past the continuation
    logits = draft.head.logits(rows, width)
    if first < 0:  # a one-token prompt: its first continuation token has no pair before it
        logits = torch.cat([torch.zeros(1, width, device=logits.device), logits])
    return torch.softmax(logits, dim=-1).cpu()


def measure_feature_c(target, draft, context: list[int], repeats: int = 20) -> dict:
    """Median step times of the draft (one pair through its layer, then its head) and of the
    target (one token), interleaved at the same context."""
    from ..rules.warp import SamplingConfig

    lm = make_lm(CachedLM, target.model, target.device, target.vocab_size)
    drafter = draft.drafter(target)
    drafter.attach_target(lm)
    lm.extend(context[:-1])
    greedy = SamplingConfig(0.0)
    t_times, d_times = [], []
    for r in range(repeats + 2):
        drafter.propose(context, 1, greedy, None)  # catch up; the step timed next is one pass
        t0 = time.perf_counter()
        drafter.propose(context, 2, greedy, None)
        sync(target.device)
        t1 = time.perf_counter()
        lm.forward([context[-1]])
        sync(target.device)
        t2 = time.perf_counter()
        lm.rollback(len(context) - 1)
        if r >= 2:
            # propose(2) = a re-fed pair, the head, one more pass and the head; propose(1) the first half
            d_times.append((t1 - t0) / 2)
            t_times.append(t2 - t1)
    t_med, d_med = statistics.median(t_times), statistics.median(d_times)
    return {"c": c_step(d_med, t_med), "target_step_ms": 1000 * t_med, "draft_step_ms": 1000 * d_med}


def eval_feature_draft(target, draft, side, timing_repeats: int = 20) -> dict:
    """A feature draft's teacher-forced figures and c (`draft` a pair.Draft with `.feature`); `side`
    the target's continuations (eval_draft.target_side). Tokens per call: eval_draft's engine check."""
    width = target.vocab_size
    mins, n_alpha, agree, n_greedy = 0.0, 0, 0, 0
    for prompt, samp, greedy in zip(side.prompt_ids, side.sampled, side.greedy):
        if samp:
            from ..lm.scoring import teacher_forced_probs

            p = teacher_forced_probs(target, prompt, samp, width)
            q = feature_probs(target, draft, prompt, samp, width)
            mins += torch.minimum(p, q).sum().item()
            n_alpha += len(samp)
        if greedy:
            q = feature_probs(target, draft, prompt, greedy, width)
            agree += int((q.argmax(-1) == torch.tensor(greedy)).sum())
            n_greedy += len(greedy)
    result = {
        "draft": draft.name,
        "draft_spec": display_path(draft.spec),
        "draft_params": draft.n_params,
        "draft_dtype": str(draft.dtype).removeprefix("torch."),
        "target_dtype": str(target.dtype).removeprefix("torch."),
        "alpha": mins / max(n_alpha, 1),
        "greedy_agreement": agree / max(n_greedy, 1),
        "tokens_per_call_gamma4": None,  # the engine's runs over every prompt (eval_draft.evaluate adds them)
        "tokens_per_call_from": "engine (every prompt)",
        "positions_sampled": n_alpha,
        "positions_greedy": n_greedy,
        "head_tokens": draft.head.size,
    }
    result.update(measure_feature_c(target, draft, side.prompt_ids[0] + side.greedy[0][:32], timing_repeats))
    return result
