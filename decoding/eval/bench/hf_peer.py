"""Hugging Face transformers as a peer in the same run: `generate()` and assisted generation.

`generate()` runs as shipped ("hf-generate") and, where asked, in its own fastest configuration, a
static cache with the step compiled ("hf-generate-compiled", `hf_fast.py`).

Assisted generation with the draft model as `assistant_model` (HF's default draft-length settings,
or pinned to a gamma: schedule "constant", num_assistant_tokens = gamma, confidence threshold off),
and with prompt lookup (`prompt_lookup_num_tokens`). HF's loop gives no counters, so forward calls
are counted with hooks; outputs are scored with one teacher-forced pass for the perplexity.
"""

from __future__ import annotations

import copy
import time

import torch

from ...trace.metrics import RunCounts
from ...lm.scoring import teacher_forced_logprob
from ...rules.warp import SamplingConfig
from .hf_fast import CACHE_MARGIN_TOKENS, VARIANT_METHOD as COMPILED, generate_fast
from .variants import RunStats, Variant

HF_DEFAULT_PROMPT_LOOKUP_TOKENS = 10  # the value HF's docs use; generate() has no default for it


class _FirstPassClock:
    """A `generate()` streamer that notes when the first pass's tokens come out. HF puts the prompt
    first, then each verified batch of tokens; the first of those ends the prompt's prefill pass."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.puts = 0
        self.seconds, self.tokens = 0.0, 0

    def put(self, value):
        self.puts += 1
        if self.puts == 2:
            self.seconds, self.tokens = time.perf_counter() - self.t0, int(value.numel())

    def end(self):
        pass


class _CallCounter:
    """Counts forward calls of a module (HF's loop gives us no counters)."""

    def __init__(self, module):
        self.calls = 0
        self.handle = module.register_forward_pre_hook(self._hook)

    def _hook(self, *_):
        self.calls += 1

    def close(self):
        self.handle.remove()


def hf_generation_config(variant: Variant, target, args, timing: bool, prompt_lookup: bool):
    """HF's GenerationConfig for a variant: the same sampling and token count as our runs."""
    from transformers import GenerationConfig

    s: SamplingConfig = args.sampling
    eos = target.eos_token_ids(args.chat)
    kwargs = dict(
        max_new_tokens=args.max_new_tokens,
        do_sample=not s.greedy,
        num_beams=1,
        pad_token_id=eos[0] if eos else 0,
        eos_token_id=[] if timing else eos,  # [] never stops early (None means: the model's eos)
    )
    if not s.greedy:
        kwargs.update(temperature=s.temperature, top_k=s.top_k or None, top_p=s.top_p)
    if variant.method == "assisted" and prompt_lookup:
        if variant.gamma is None:
            kwargs["prompt_lookup_num_tokens"] = HF_DEFAULT_PROMPT_LOOKUP_TOKENS
        else:
            kwargs["prompt_lookup_num_tokens"] = variant.gamma
            kwargs["max_matching_ngram_size"] = 3  # our PromptLookupDrafter's largest n-gram
    return GenerationConfig(**kwargs)


@torch.inference_mode()
def run_hf(variant: Variant, target, draft, prompt_ids: list[int], args, timing: bool, meter=None) -> RunStats:
    """One `generate()` call; `draft` (a pair.Draft) is the assistant model, or prompt lookup."""
    prompt_lookup = draft is None or draft.model is None
    config = hf_generation_config(variant, target, args, timing, prompt_lookup)
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=target.device)
    kwargs = {"attention_mask": torch.ones_like(ids), "generation_config": config}
    saved = None
    draft_counter = None
    if variant.method == "assisted" and not prompt_lookup:
        assistant = draft.model.model
        kwargs["assistant_model"] = assistant
        saved = assistant.generation_config
        gc = copy.deepcopy(saved)
        if variant.gamma is not None:  # pinned: constant gamma, no early stop on confidence
            gc.num_assistant_tokens_schedule = "constant"
            gc.num_assistant_tokens = variant.gamma
            gc.assistant_confidence_threshold = 0.0
        assistant.generation_config = gc
        draft_counter = _CallCounter(assistant)
    counter = _CallCounter(target.model)
    if not args.sampling.greedy:
        torch.manual_seed(args.seed)  # HF samples from the global RNG
    try:
        if timing and meter is not None:
            meter.begin()
        if variant.method == COMPILED:
            cache_len = (getattr(args, "hf_cache_len", None)
                         or len(prompt_ids) + args.max_new_tokens + CACHE_MARGIN_TOKENS)
            out, clock = generate_fast(target.model, ids, config, cache_len, _FirstPassClock,
                                       attention_mask=kwargs["attention_mask"])
        else:
            clock = _FirstPassClock()  # its clock starts here: the run's own
            out = target.model.generate(ids, streamer=clock, **kwargs)
        seconds = time.perf_counter() - clock.t0
        joules = meter.read().joules if timing and meter is not None else None
    finally:
        counter.close()
        if draft_counter is not None:
            draft_counter.close()
        if saved is not None:
            assistant.generation_config = saved
    new = out[0, len(prompt_ids):].tolist()
    if not timing:
        eos = set(target.eos_token_ids(args.chat))
        for i, t in enumerate(new):
            if t in eos:
                new = new[: i + 1]
                break
    counts = RunCounts(tokens=len(new), seconds=seconds, target_calls=counter.calls,
                       draft_calls=draft_counter.calls if draft_counter else 0,
                       first_pass_seconds=clock.seconds, first_pass_tokens=min(clock.tokens, len(new)))
    stats = RunStats(counts=counts, token_ids=new, joules=joules)
    if not timing and new:
        stats.logprob_sum, stats.logprob_n = teacher_forced_logprob(target, prompt_ids, new), len(new)
    return stats
