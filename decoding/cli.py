"""The engine headless: python -m decoding {generate,sample,theory,eval-draft,bench,verify-cost,gpu-check}.

`generate` runs the methods the app runs (`methods/registry.py`); `--help` after a subcommand says what it takes.

Bad input gets one clear line on stderr and exit code 2, never a traceback. With --json,
`generate` prints one JSON object per iteration (the trace, "summary": false) and a final line
with "summary": true; that output is also a trace file the app can replay.
"""

from __future__ import annotations

import argparse
import json
import sys

from .errors import UsageError
from .methods.base import MAX_GAMMA
from .rules.examples import EXAMPLES
from .rules.implementations import IMPLEMENTATIONS

EXIT_BAD_INPUT = 2


def _add_generate(sub, methods=None) -> None:
    from .methods.registry import METHODS

    g = sub.add_parser("generate", help="decode a prompt with one method, optionally as a JSON trace")
    g.add_argument("--prompt", required=True)
    g.add_argument("--chat", action="store_true", help="apply the model's chat template")
    g.add_argument("--method", default="speculative",
                   help="one of the registry's methods (decoding/methods/registry.py): "
                   + " | ".join(METHODS if methods is None else methods))
    g.add_argument("--gamma", type=int, default=4, help=f"draft length, 1..{MAX_GAMMA}")
    g.add_argument("--temperature", type=float, default=1.0, help="0 means greedy")
    g.add_argument("--top-k", type=int, default=0, help="0 means off")
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--lenience", type=float, default=1.0, help="l in (0, 1]; 1 is exact")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--max-new-tokens", type=int, default=64)
    g.add_argument("--target", default="default", help="hub id, local directory, .gguf file or 'default'")
    g.add_argument("--draft", default=None, help="hub id, local directory, .gguf file, 'distilled', 'feature' (a "
                   "draft over the target's own hidden states), 'prompt-lookup', 'hybrid[:<draft>]' or "
                   "'hybrid+corpus[=<corpus dir>][:<draft>]' (also copies from the target's own earlier answers); "
                   "default: 'hybrid:feature' for the embedded target ('distilled' for mjsd), prompt lookup for "
                   "any other")
    g.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda when available)")
    g.add_argument("--dtype", default=None, help="float32, bfloat16, float16 (default: bfloat16 on CPUs with native "
                   "bf16 and on CUDA, else float32; $SPECDEC_DTYPE overrides); float32 is the reference for exactness")
    g.add_argument("--backend", default=None, choices=("auto", "static", "dynamic"),
                   help="KV-cache path: 'static' (preallocated fixed-shape cache; CUDA graphs on CUDA), 'dynamic', "
                   "or 'auto' (static on CUDA, dynamic on a CPU; $SPECDEC_BACKEND sets it too)")
    g.add_argument("--draft-dtype", default=None, help="draft dtype (default: as --dtype, or float16 on AVX-512 CPUs without native bfloat16; see docs)")
    g.add_argument("--lean", action="store_true", help="skip top-k lists in the trace (timing runs)")
    g.add_argument("--ignore-eos", action="store_true", help="always generate max-new-tokens")
    g.add_argument("--json", action="store_true", help="one JSON trace record per line, then a summary")
    add_method_flags(g, methods)


def add_method_flags(parser, methods=None) -> None:
    """One flag per knob of every method's settings dataclass (`decoding.methods.registry`), defaults and help
    from the field; a knob that several methods share (the gamma schedule) is added once."""
    import dataclasses
    import typing

    from .methods.registry import METHODS

    seen: dict[str, object] = {}
    for spec in (METHODS if methods is None else methods).values():
        hints = typing.get_type_hints(spec.settings)
        for f, k in spec.settings.knobs():
            if f.name in seen:
                if seen[f.name] is not k:
                    raise ValueError(f"two methods declare the setting {f.name!r} differently")
                continue
            seen[f.name] = k
            kind = hints[f.name]
            flags = [k.flag, *k.aliases]
            default = f.default if f.default is not dataclasses.MISSING else None
            if kind is bool:
                parser.add_argument(*flags, dest=f.name, action="store_true", default=bool(default), help=k.help)
                continue
            base = next((t for t in (int, float, str) if kind is t or t in typing.get_args(kind)), str)
            parser.add_argument(*flags, dest=f.name, type=base, default=default, help=k.help,
                                **({"choices": list(k.choices)} if k.choices and not k.open_choices else {}))


def _add_sample(sub) -> None:
    s = sub.add_parser("sample", help="single-step sampling lab on hand-written p and q")
    s.add_argument("--p", default=None, help="target distribution, comma-separated (default: the 004 example)")
    s.add_argument("--q", default=None, help="draft distribution, comma-separated")
    s.add_argument("--lenience", type=float, default=1.0)
    s.add_argument("--kl-bound", type=float, default=None, help="run mentored decoding with KL bound D instead")
    s.add_argument("--n", type=int, default=100_000)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--implementation", default=None, metavar="NAME",
                   help="the step as implemented: " + ", ".join(IMPLEMENTATIONS)
                   + " (default: correct; the others are public mistakes, compared at lenience 1)")
    s.add_argument("--example", default=None, metavar="NAME",
                   help="the shipped p and q when --p/--q are not given: " + ", ".join(EXAMPLES) + " (default: worked)")
    s.add_argument("--json", action="store_true")


def _add_theory(sub) -> None:
    t = sub.add_parser("theory", help="expected tokens per call, improvement factor, optimal gamma")
    t.add_argument("--alpha", type=float, required=True)
    t.add_argument("--gamma", type=int, required=True)
    t.add_argument("--c", type=float, required=True, help="draft step time / target step time")
    t.add_argument("--c-hat", type=float, default=None, help="arithmetic-operation ratio (default: c)")
    t.add_argument("--json", action="store_true")


def build_parser(methods=None) -> argparse.ArgumentParser:
    """The CLI's parser; `methods` (default: the registry) supplies generate's method flags."""
    parser = argparse.ArgumentParser(prog="python -m decoding", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_generate(sub, methods)
    _add_sample(sub)
    _add_theory(sub)
    from .eval.eval_draft import add_parser as _add_eval_draft

    _add_eval_draft(sub)
    from .eval.bench import add_parser as _add_bench
    from .eval.bench.verify_cost import add_parser as _add_verify_cost
    from .eval.gpu_check import add_parser as _add_gpu_check

    _add_bench(sub)
    _add_verify_cost(sub)
    _add_gpu_check(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "backend", None):
        from .lm.backend import use_backend

        use_backend(args.backend)
    try:
        if args.command == "generate":
            return cmd_generate(args)
        if args.command == "sample":
            return cmd_sample(args)
        if args.command == "theory":
            return cmd_theory(args)
        if args.command == "eval-draft":
            from .eval.eval_draft import run_cli

            return run_cli(args)
        if args.command == "bench":
            from .eval.bench import run_cli as run_bench_cli

            return run_bench_cli(args)
        if args.command == "verify-cost":
            from .eval.bench.verify_cost import run_cli as run_verify_cost

            return run_verify_cost(args)
        if args.command == "gpu-check":
            from .eval.gpu_check import run_cli as run_gpu_check

            return run_gpu_check(args)
    except (UsageError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


def _print_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def cmd_generate(args) -> int:
    from .eval.energy import make_meter
    from .methods.registry import method_spec
    from .lm.models import ModelLoadError
    from .run.pair import load_pair
    from .run.runner import decode, summarize
    from .methods.base import RunConfig
    from .rules.warp import SamplingConfig

    if not args.prompt.strip():
        raise UsageError("the prompt is empty")
    spec = method_spec(args.method)
    config = RunConfig(
        method=args.method,
        max_new_tokens=args.max_new_tokens,
        sampling=SamplingConfig(args.temperature, args.top_k, args.top_p),
        gamma=args.gamma,
        lenience=args.lenience,
        seed=args.seed,
        chat=args.chat,
        stop_at_eos=not args.ignore_eos,
        lean=args.lean,
        extra=method_extra(args),
    )
    spec.settings.from_config(config)  # the method's own checks, before any model loads
    try:
        target, draft = load_pair(args.target, args.draft, device=args.device, dtype=args.dtype,
                                  draft_dtype=args.draft_dtype, need_draft=spec.uses_drafter,
                                  needs_draft_model=spec.needs_draft_model)
        prompt_ids = target.encode_prompt(args.prompt, args.chat)
        meter = make_meter(target.device)
        records = []
        for record in decode(target, draft, prompt_ids, config, meter):
            records.append(record)
            if args.json:
                _print_json(record.to_dict())
            else:
                sys.stdout.write("".join(t.text for t in record.emitted))
                sys.stdout.flush()
    except ModelLoadError as exc:
        raise UsageError(str(exc)) from None
    summary = summarize(records, config, args.prompt, target, draft)
    if args.json:
        _print_json(summary.to_dict())
    else:
        mean_acc = "n/a" if summary.mean_accepted is None else f"{summary.mean_accepted:.2f}"
        energy = f"{summary.energy_joules:.2f} J" if summary.energy_joules is not None else summary.energy_note
        drafted_by = summary.models.get("draft")
        print(
            f"\n\n[{summary.method}{f', draft: {drafted_by}' if drafted_by else ''}, {summary.models.get('dtype')}] "
            f"{len(summary.token_ids)} tokens in {summary.iterations} iterations, "
            f"{summary.target_calls} target calls ({summary.tokens_per_call:.2f} tokens/call), "
            f"mean accepted draft tokens {mean_acc}, {summary.tokens_per_second:.1f} tokens/s, "
            f"stop: {summary.stop_reason}; energy: {energy}; target perplexity "
            f"{'n/a' if summary.target_perplexity is None else f'{summary.target_perplexity:.3f}'}"
        )
    return 0


def method_extra(args, methods=None) -> dict:
    """The chosen method's own settings (`RunConfig.extra`), read from the flags its dataclass declares."""
    from .methods.registry import method_spec

    spec = method_spec(args.method, methods)
    return {f.name: getattr(args, f.name) for f, _ in spec.settings.knobs()}


def cmd_sample(args) -> int:
    from .rules.implementations import DEFAULT_IMPLEMENTATION, get_implementation
    from .rules.lab import parse_distribution, run_sampling_lab

    if args.example is not None and args.example not in EXAMPLES:
        raise ValueError(f"unknown example {args.example!r}; choose one of: {', '.join(EXAMPLES)}")
    example = EXAMPLES[args.example or "worked"]
    p = parse_distribution(args.p, "--p") if args.p else list(example.p)
    q = parse_distribution(args.q, "--q") if args.q else list(example.q)
    impl = get_implementation(args.implementation or DEFAULT_IMPLEMENTATION)
    out = run_sampling_lab(p, q, lenience=args.lenience, n=args.n, seed=args.seed, kl_bound=args.kl_bound,
                           implementation=impl.name)
    if args.json:
        _print_json(out)
        return 0
    fmt = lambda xs: "[" + ", ".join(f"{x:.4f}" for x in xs) + "]"  # noqa: E731
    print(f"target p        {fmt(out['target'])}")
    print(f"draft q         {fmt(out['draft'])}")
    rule = f"mentored, KL bound {out['kl_bound']}" if out.get("rule") == "mentored" else f"lenience {out['lenience']}"
    print(f"expected output {fmt(out['expected'])}   ({rule})")
    print(f"empirical       {fmt(out['empirical'])}   (n = {out['n']})")
    drawn = "residual       " if impl.name == DEFAULT_IMPLEMENTATION else "after rejection"
    print(f"{drawn} {fmt(out['residual']) if out['residual'] else 'none (never rejects)'}")
    print(f"alpha {out['alpha']:.4f}   acceptance rate {out['acceptance_rate']:.4f}")
    print(f"TV(empirical, p) {out['tv_to_target']:.4f}   TV(empirical, expected) {out['tv_to_expected']:.4f}")
    if impl.name != DEFAULT_IMPLEMENTATION:
        print(f"implementation {impl.name}: {impl.label}; TV(expected, p) {out['expected_tv_to_target']:.4f}   "
              f"correct rule's alpha {out['correct_alpha']:.4f}")
    if out.get("rule") == "mentored":
        print(f"strict alpha {out['strict_alpha']:.4f}   KL(p || expected) {out['kl_to_target']:.6f} <= D = {out['kl_bound']}"
              f"   KL(p || q) {out['kl_draft']:.6f}")
    return 0


def cmd_theory(args) -> int:
    from .rules import theory

    c_hat = args.c if args.c_hat is None else args.c_hat
    best = theory.optimal_gamma(args.alpha, args.c)
    out = {
        "alpha": args.alpha,
        "gamma": args.gamma,
        "c": args.c,
        "c_hat": c_hat,
        "expected_tokens": theory.expected_tokens_per_call(args.alpha, args.gamma),
        "expected_accepted": theory.expected_accepted_length(args.alpha, args.gamma),
        "improvement": theory.improvement_factor(args.alpha, args.gamma, args.c),
        "optimal_gamma": best,
        "improvement_at_optimal": theory.improvement_factor(args.alpha, best, args.c),
        "ops_increase": theory.ops_increase(args.alpha, args.gamma, c_hat),
    }
    if args.json:
        _print_json(out)
        return 0
    print(f"alpha {args.alpha}, gamma {args.gamma}, c {args.c} (c-hat {c_hat})")
    print(f"expected tokens per target call  {out['expected_tokens']:.4f}  (accepted draft tokens {out['expected_accepted']:.4f} + 1)")
    print(f"walltime improvement factor      {out['improvement']:.4f}")
    print(f"optimal gamma                    {best}  (improvement {out['improvement_at_optimal']:.4f})")
    print(f"arithmetic operations increase   {out['ops_increase']:.4f}")
    return 0
