"""How good is a draft for a target? The figures of `python -m decoding eval-draft`.

For every prompt of a prompt file (JSON lines with a "prompt" field, or plain lines):

- the target decodes `max_new_tokens` tokens twice with the engine's autoregressive strategy:
  once sampled at temperature 1 (seeded), once greedily. These target-side continuations do not
  depend on the draft, so they are cached (per prompt file, target, settings) under
  `cache_dir()/eval-draft/`;
- ``alpha``: mean over the positions of the sampled continuations of sum_x min(p(x), q(x)) at
  temperature 1 (the expected acceptance of one draft token, Leviathan et al.), with p and
  q from one teacher-forced forward pass of each model over prompt + continuation;
- ``greedy_agreement``: how often the draft's argmax equals the target's greedy token, over the
  positions of the greedy continuations (teacher-forced);
- ``tokens_per_call_gamma4``: tokens emitted per target call by greedy speculative decoding with
  gamma 4, correction/bonus token included. In greedy decoding every accepted draft token equals
  the target's greedy token, so the draft's proposals at each iteration are its argmaxes over the
  target's greedy continuation; the run is replayed exactly from those (one pass per model).
  The engine's real speculative run is executed on the first `engine_check` prompts and its
  figures are reported beside the replay's (`"engine_check"`), as is whether its output equals
  the greedy autoregressive one;
- ``c``: the draft's single-token step time over the target's (`metrics.c_step`), both timed in
  this run on this device, interleaved, median of `timing_repeats` steps each at the same context.

Prompt lookup proposes nothing where no n-gram of the context matches: its alpha (the target's
probability of the copied token, since its q is one-hot) and greedy agreement are over the
positions where it proposes, and ``coverage`` is the share of positions where it does.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
from dataclasses import dataclass

import torch

from ..drafters.lookup import PROMPT_LOOKUP, PromptLookupDrafter
from ..trace.metrics import c_step
from ..lm.models import LoadedModel, cache_dir, check_same_vocabulary
from ..paths import display_path
from ..lm.prompt_files import read_prompts
from ..lm.scoring import teacher_forced_probs as _probs

GAMMA = 4


@dataclass
class TargetSide:
    prompt_ids: list[list[int]]
    sampled: list[list[int]]
    greedy: list[list[int]]


def _cache_key(target: LoadedModel, prompts: list[str], max_new_tokens: int, chat: bool, seed: int) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([target.spec, target.name, target.n_params, str(target.dtype), prompts,
                         max_new_tokens, chat, seed, 1]).encode())
    return h.hexdigest()[:16]


def target_side(target: LoadedModel, prompts: list[str], max_new_tokens: int, chat: bool, seed: int,
                use_cache: bool = True, progress=None) -> TargetSide:
    """The target's sampled (T=1) and greedy continuations of every prompt (cached on disk)."""
    from ..run.runner import generate
    from ..methods.base import RunConfig
    from ..rules.warp import SamplingConfig

    path = cache_dir() / "eval-draft" / f"{_cache_key(target, prompts, max_new_tokens, chat, seed)}.json"
    if use_cache and path.is_file():
        data = json.loads(path.read_text())
        return TargetSide(data["prompt_ids"], data["sampled"], data["greedy"])
    prompt_ids, sampled, greedy = [], [], []
    for i, prompt in enumerate(prompts):
        prompt_ids.append(target.encode_prompt(prompt, chat))
        for temperature, out in ((1.0, sampled), (0.0, greedy)):
            config = RunConfig(method="autoregressive", max_new_tokens=max_new_tokens,
                               sampling=SamplingConfig(temperature), seed=seed + i, chat=chat, lean=True)
            _, summary = generate(target, None, prompt, config)
            out.append(list(summary.token_ids))
        if progress:
            progress(i + 1, len(prompts))
    if use_cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"prompt_ids": prompt_ids, "sampled": sampled, "greedy": greedy}))
            tmp.replace(path)
        except OSError:
            pass
    return TargetSide(prompt_ids, sampled, greedy)


def replay_greedy(matches: list[bool], gamma: int = GAMMA) -> tuple[int, int]:
    """(tokens, target calls) of greedy speculative decoding over a continuation, given for each
    position whether the draft's proposal there equals the target's greedy token. A call accepts
    the run of matches from the current position (at most gamma), then emits one more token."""
    n, pos, calls = len(matches), 0, 0
    while pos < n:
        k = 0
        while k < gamma and pos + k < n and matches[pos + k]:
            k += 1
        pos += k + 1
        calls += 1
    return n, calls


def _time_step(model: LoadedModel, context: list[int], repeats: int, head=None) -> list[float]:
    from ..lm.backend import make_lm
    from ..lm.cached_lm import CachedLM
    from ..lm.devices import sync

    lm = make_lm(CachedLM, model.model, model.device, model.vocab_size, head)
    lm.extend(context)
    times = []
    for r in range(repeats):
        t0 = time.perf_counter()
        lm.forward([context[-1]])
        sync(model.device)
        times.append(time.perf_counter() - t0)
        lm.rollback(len(context))
    return times


def measure_c(target: LoadedModel, draft: LoadedModel, context: list[int], repeats: int = 20, head=None) -> dict:
    """Median single-token step time of draft and target at the same context, interleaved."""
    _time_step(target, context, 2), _time_step(draft, context, 2, head)  # warm-up
    t_times, d_times = [], []
    for _ in range(max(1, repeats // 5)):
        t_times += _time_step(target, context, 5)
        d_times += _time_step(draft, context, 5, head)
    t_med, d_med = statistics.median(t_times), statistics.median(d_times)
    return {"c": c_step(d_med, t_med), "target_step_ms": 1000 * t_med, "draft_step_ms": 1000 * d_med}


def eval_model_draft(target: LoadedModel, draft: LoadedModel, side: TargetSide, engine_check: int = 2,
                     chat: bool = True, prompts: list[str] | None = None, timing_repeats: int = 20,
                     head=None) -> dict:
    """A draft model's figures (`head`: its restricted output head, if it has one)."""
    check_same_vocabulary(target, draft)
    width = min(target.vocab_size, draft.vocab_size)
    mins, n_alpha, agree, n_greedy, tokens, calls = 0.0, 0, 0, 0, 0, 0
    per_prompt_tpc = []
    for prompt, samp, greedy in zip(side.prompt_ids, side.sampled, side.greedy):
        if samp:
            p = _probs(target, prompt, samp, width)
            q = _probs(draft, prompt, samp, width, head)
            mins += torch.minimum(p, q).sum().item()
            n_alpha += len(samp)
        if greedy:
            q = _probs(draft, prompt, greedy, width, head)
            matches = (q.argmax(-1) == torch.tensor(greedy)).tolist()
            agree += sum(matches)
            n_greedy += len(greedy)
            t, c = replay_greedy(matches)
            tokens, calls = tokens + t, calls + c
            per_prompt_tpc.append(t / c)
    result = {
        "draft": draft.name,
        "draft_spec": display_path(draft.spec),
        "draft_params": draft.n_params,
        "draft_dtype": str(draft.dtype).removeprefix("torch."),
        "target_dtype": str(target.dtype).removeprefix("torch."),
        "alpha": mins / max(n_alpha, 1),
        "greedy_agreement": agree / max(n_greedy, 1),
        "tokens_per_call_gamma4": tokens / max(calls, 1),
        "positions_sampled": n_alpha,
        "positions_greedy": n_greedy,
        "head_tokens": head.size if head is not None else None,
    }
    result.update(measure_c(target, draft, side.prompt_ids[0] + side.greedy[0][:32], timing_repeats, head))
    if engine_check and prompts:
        from ..run.pair import Draft

        result["engine_check"] = _engine_check(target, Draft.of_model(draft, head), side, prompts, chat, engine_check)
    return result


def _engine_check(target, draft, side: TargetSide, prompts: list[str], chat: bool, n: int) -> dict:
    """Run the engine's greedy speculative decoding (gamma 4) on the first n prompts; `draft` as
    `runner.decode` takes it."""
    from ..run.pair import as_draft

    draft = as_draft(draft)
    from ..run.runner import generate
    from ..methods.base import RunConfig
    from ..rules.warp import SamplingConfig

    tokens = calls = 0
    replay_tokens = replay_calls = 0
    equal = 0
    for i in range(min(n, len(prompts))):
        greedy = side.greedy[i]
        config = RunConfig(method="speculative", gamma=GAMMA, max_new_tokens=max(1, len(greedy)),
                           sampling=SamplingConfig(0.0), chat=chat, lean=True)
        _, summary = generate(target, draft, prompts[i], config)
        tokens += len(summary.token_ids)
        calls += summary.target_calls
        equal += int(list(summary.token_ids) == list(greedy))
        if draft.feature is not None:  # its later tokens read its own states: no teacher-forced replay
            t = c = 0
        elif draft.model is None:
            t, c = _replay_lookup(side.prompt_ids[i], greedy, target)
        else:
            q = _probs(draft.model, side.prompt_ids[i], greedy, min(target.vocab_size, draft.model.vocab_size),
                       draft.head)
            t, c = replay_greedy((q.argmax(-1) == torch.tensor(greedy)).tolist())
        replay_tokens, replay_calls = replay_tokens + t, replay_calls + c
    return {
        "prompts": min(n, len(prompts)),
        "tokens_per_call_engine": tokens / max(calls, 1),
        "tokens_per_call_replay": replay_tokens / replay_calls if replay_calls else None,
        "outputs_equal_greedy_autoregressive": equal,
    }


def _lookup_matches(prompt: list[int], cont: list[int], vocab: int, device) -> tuple[list[int | None], list[bool]]:
    """Prompt lookup's first proposed token at each position (None: no proposal)."""
    drafter = PromptLookupDrafter(vocab, device)
    proposals = []
    for j in range(len(cont)):
        found = drafter.find(prompt + cont[:j], 1)
        proposals.append(found[0] if found else None)
    return proposals, [x == y for x, y in zip(proposals, cont)]


def _replay_lookup(prompt: list[int], greedy: list[int], target: LoadedModel, gamma: int = GAMMA) -> tuple[int, int]:
    """Greedy speculative decoding with prompt lookup replayed over the target's greedy tokens."""
    drafter = PromptLookupDrafter(target.vocab_size, target.device)
    n, pos, calls = len(greedy), 0, 0
    while pos < n:
        draft = drafter.find(prompt + greedy[:pos], gamma)
        k = 0
        while k < len(draft) and pos + k < n and draft[k] == greedy[pos + k]:
            k += 1
        pos += k + 1
        calls += 1
    return n, calls


def eval_prompt_lookup(target: LoadedModel, side: TargetSide, engine_check: int = 2, chat: bool = True,
                       prompts: list[str] | None = None, timing_repeats: int = 20) -> dict:
    width = target.vocab_size
    p_sum, proposed, positions, agree, proposed_g, tokens, calls = 0.0, 0, 0, 0, 0, 0, 0
    for prompt, samp, greedy in zip(side.prompt_ids, side.sampled, side.greedy):
        if samp:
            props, _ = _lookup_matches(prompt, samp, width, target.device)
            p = _probs(target, prompt, samp, width)
            for j, x in enumerate(props):
                if x is not None:
                    p_sum += p[j, x].item()
                    proposed += 1
            positions += len(samp)
        if greedy:
            props, matches = _lookup_matches(prompt, greedy, width, target.device)
            agree += sum(m for x, m in zip(props, matches) if x is not None)
            proposed_g += sum(x is not None for x in props)
            t, c = _replay_lookup(prompt, greedy, target)
            tokens, calls = tokens + t, calls + c
    # c: the lookup's time per proposal over the target's step time (no model: tiny)
    context = side.prompt_ids[0] + side.greedy[0][:32]
    drafter = PromptLookupDrafter(width, target.device)
    t0 = time.perf_counter()
    for _ in range(timing_repeats):
        drafter.find(context, 1)
    lookup_s = (time.perf_counter() - t0) / timing_repeats
    target_s = statistics.median(_time_step(target, context, max(5, timing_repeats // 2)))
    result = {
        "draft": PROMPT_LOOKUP,
        "draft_spec": PROMPT_LOOKUP,
        "draft_params": 0,
        "alpha": p_sum / max(proposed, 1),
        "coverage": proposed / max(positions, 1),
        "greedy_agreement": agree / max(proposed_g, 1),
        "greedy_coverage": proposed_g / max(sum(len(g) for g in side.greedy), 1),
        "tokens_per_call_gamma4": tokens / max(calls, 1),
        "c": c_step(lookup_s, target_s),
        "target_step_ms": 1000 * target_s,
        "draft_step_ms": 1000 * lookup_s,
        "positions_sampled": positions,
        "positions_greedy": sum(len(g) for g in side.greedy),
    }
    if engine_check and prompts:
        result["engine_check"] = _engine_check(target, PROMPT_LOOKUP, side, prompts, chat, engine_check)
    return result


def evaluate(target: LoadedModel, drafts: list, prompts: list[str], max_new_tokens: int = 128,
             chat: bool = True, seed: int = 0, engine_check: int = 2, use_cache: bool = True,
             timing_repeats: int = 20, progress=None) -> dict:
    """Evaluate each draft (a `pair.Draft`; a LoadedModel or "prompt-lookup" also do) against
    `target` on `prompts`."""
    from ..run.pair import as_draft

    t0 = time.perf_counter()
    side = target_side(target, prompts, max_new_tokens, chat, seed, use_cache, progress)
    results = []
    for draft in map(as_draft, drafts):
        if draft.feature is not None:
            from .eval_feature import eval_feature_draft

            result = eval_feature_draft(target, draft, side, timing_repeats)
            if engine_check and prompts:  # its tokens per call: the engine over every prompt (no replay)
                result["engine_check"] = _engine_check(target, draft, side, prompts, chat, len(prompts))
                result["tokens_per_call_gamma4"] = result["engine_check"]["tokens_per_call_engine"]
            results.append(result)
        elif draft.model is None:
            results.append(eval_prompt_lookup(target, side, engine_check, chat, prompts, timing_repeats))
        else:
            results.append(eval_model_draft(target, draft.model, side, engine_check, chat, prompts, timing_repeats,
                                            draft.head))
    return {
        "target": target.name,
        "prompts": len(prompts),
        "max_new_tokens": max_new_tokens,
        "chat": chat,
        "seed": seed,
        "device": str(target.device),
        "seconds": time.perf_counter() - t0,
        "results": results,
    }


def format_table(report: dict) -> str:
    """A Markdown table of the results (the README's and the model card's)."""
    lines = [
        "| draft | params | alpha (T=1) | coverage | greedy agreement | tokens/call (greedy, gamma 4) | c |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        cov = f"{r['coverage']:.2f}" if "coverage" in r else "1.00"
        params = f"{r['draft_params'] / 1e6:.1f}M" if r["draft_params"] else "0"
        name = f"{r['draft']} ({r['draft_dtype']})" if r.get("draft_dtype") else r["draft"]
        tpc = "n/a" if r["tokens_per_call_gamma4"] is None else f"{r['tokens_per_call_gamma4']:.2f}"
        lines.append(f"| {name} | {params} | {r['alpha']:.3f} | {cov} | {r['greedy_agreement']:.3f} | "
                     f"{tpc} | {r['c']:.3f} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# CLI: `python -m decoding eval-draft` (the parser and command live here; cli.py wires them)
# ------------------------------------------------------------------------------------------


def add_parser(sub) -> None:
    e = sub.add_parser("eval-draft", help="measure a draft against the target: alpha, greedy agreement, "
                       "tokens per call at gamma 4, cost ratio c")
    e.add_argument("--prompts", required=True, help="JSON-lines file with a 'prompt' field (or one prompt per line)")
    e.add_argument("--draft", default=None,
                   help="directory, hub id or 'prompt-lookup', or several separated by commas, measured in one run "
                        "(default: the shipped distilled draft and prompt lookup)")
    e.add_argument("--target", default="default")
    e.add_argument("--max-new-tokens", type=int, default=128)
    e.add_argument("--limit", type=int, default=0, help="use only the first N prompts")
    e.add_argument("--no-chat", action="store_true", help="do not wrap prompts in the chat template")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--engine-check", type=int, default=2,
                   help="prompts on which the engine's real speculative run is compared with the replay")
    e.add_argument("--no-cache", action="store_true", help="recompute the target's continuations")
    e.add_argument("--device", default=None)
    e.add_argument("--dtype", default=None)
    e.add_argument("--draft-dtype", default=None, help="draft dtype (default: as --dtype, or float16 on AVX-512 CPUs without native bfloat16; see docs)")
    e.add_argument("--match-lengths", action="store_true",
                   help="also: how often a copied token is right, by the context's suffix-match length, beside the "
                        "draft model (the hybrid drafter's minimum match)")
    e.add_argument("--json", action="store_true")


def run_cli(args) -> int:
    import sys

    from ..lm.models import ModelLoadError
    from ..run.pair import load_draft_value, load_pair
    from ..paths import SHIPPED_DRAFT

    if args.max_new_tokens < 1:
        raise ValueError("max-new-tokens must be >= 1")
    prompts = read_prompts(args.prompts)
    if args.limit:
        prompts = prompts[: args.limit]
    specs = [s.strip() for s in (args.draft or "").split(",") if s.strip()]
    if not specs:
        specs = ([str(SHIPPED_DRAFT)] if (SHIPPED_DRAFT / "config.json").is_file() else []) + [PROMPT_LOOKUP]
    try:
        target, _ = load_pair(args.target, device=args.device, dtype=args.dtype, need_draft=False)
        drafts = [load_draft_value(s, target, args.dtype, args.draft_dtype, target_spec=args.target) for s in specs]
    except ModelLoadError as exc:
        raise ValueError(str(exc)) from None

    def progress(i, n):
        if not args.json:
            print(f"target continuations: {i}/{n} prompts", file=sys.stderr, flush=True)

    report = evaluate(target, drafts, prompts, args.max_new_tokens, chat=not args.no_chat, seed=args.seed,
                      engine_check=args.engine_check, use_cache=not args.no_cache, progress=progress)
    report["prompt_file"] = display_path(args.prompts)
    if args.match_lengths:
        from .lookup_eval import bucket_table, markdown, match_length_rows, minimum_match

        model_draft = next((d for d in drafts if d.model is not None), None)
        side = target_side(target, prompts, args.max_new_tokens, not args.no_chat, args.seed, not args.no_cache)
        rows = match_length_rows(target, side, model_draft.model if model_draft else None,
                                 model_draft.head if model_draft else None)
        report["match_lengths"] = {"buckets": bucket_table(rows), "minimum_match": minimum_match(rows),
                                   "rows": {str(n): r for n, r in sorted(rows.items())}}
    if len(report["results"]) == 1:
        report.update({k: v for k, v in report["results"][0].items()})
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"target {report['target']}, {report['prompts']} prompts, {report['max_new_tokens']} new tokens, "
              f"chat {report['chat']}, device {report['device']} ({report['seconds']:.0f} s)")
        print(format_table(report))
        for r in report["results"]:
            if "engine_check" in r:
                e = r["engine_check"]
                replay = e["tokens_per_call_replay"]
                print(f"{r['draft']}: engine check on {e['prompts']} prompts: tokens/call engine "
                      f"{e['tokens_per_call_engine']:.2f}"
                      + (f" vs replay {replay:.2f}" if replay is not None else " (a feature draft: engine only)") + "; "
                      f"greedy speculative == greedy autoregressive on {e['outputs_equal_greedy_autoregressive']}")
        if args.match_lengths:
            print("\n" + markdown({int(n): r for n, r in report["match_lengths"]["rows"].items()}))
    return 0
