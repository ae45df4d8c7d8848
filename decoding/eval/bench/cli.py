"""`python -m decoding bench`: the command line of the benchmark (see `driver.py` for the protocol)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ...errors import UsageError
from ...paths import SHIPPED_DRAFT, SHIPPED_FEATURE_DRAFT, display_command


def add_parser(sub) -> None:
    b = sub.add_parser("bench", help="benchmark methods (and HF transformers as a peer) on a prompt file")
    b.add_argument("--prompts", required=True, help="JSON lines with a 'prompt' field (and a 'category'), or plain lines")
    b.add_argument("--methods", default="autoregressive,speculative", help="comma-separated methods")
    b.add_argument("--gamma", default="4", help="comma-separated: numbers, 'auto', 'heuristic' (e.g. 2,4,8,auto,heuristic)")
    b.add_argument("--draft-tree", default=None,
                   help="also run each speculative row of a drafter with a model with these draft trees, ';'-separated "
                        "(e.g. '16,6;auto'): N,D nodes and depth, or auto (methods/tree_draft.py)")
    b.add_argument("--temperature", type=float, default=0.0, help="0 (default) means greedy")
    b.add_argument("--top-k", type=int, default=0)
    b.add_argument("--top-p", type=float, default=1.0)
    b.add_argument("--max-new-tokens", type=int, default=64)
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--warmup", type=int, default=1)
    b.add_argument("--max-prompts", type=int, default=None,
                   help="use N prompts spread evenly over the file (every kind of prompt stays represented)")
    b.add_argument("--categories", default=None,
                   help="comma-separated prompt categories to keep (e.g. summarization,rag); default: all")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--seed-per-prompt", action="store_true",
                   help="at a temperature, prompt i of repeat r samples with seed + r x prompts + i (each run its own "
                        "draw) instead of seed + r for every prompt, whose near-identical prompts draw near-identical "
                        "texts")
    b.add_argument("--no-chat", dest="chat", action="store_false", help="raw prompts (default: chat template)")
    b.add_argument("--target", default="default")
    b.add_argument("--draft", default=None,
                   help="comma-separated drafters, each a hub id, directory, .gguf, 'distilled' (the shipped draft), "
                        "'feature' (the shipped feature draft), 'prompt-lookup', 'hybrid[:<one of those>]' or "
                        "'hybrid+corpus[=<corpus dir>][:<one of those>]' (default: the target's default draft); "
                        "several make one table")
    b.add_argument("--device", default=None)
    b.add_argument("--dtype", default=None)
    b.add_argument("--backend", default=None, choices=("auto", "static", "dynamic"),
                   help="KV-cache path: 'static' (preallocated fixed-shape cache; CUDA graphs on CUDA), 'dynamic', "
                   "or 'auto' (static on CUDA, dynamic on a CPU; $SPECDEC_BACKEND sets it too)")
    b.add_argument("--draft-dtype", default=None, help="draft dtype (default: as --dtype, or float16 on AVX-512 CPUs without native bfloat16; see docs)")
    b.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    b.add_argument("--no-hf", dest="hf", action="store_false", help="skip the HF transformers peer")
    b.add_argument("--hf-compiled", action="store_true",
                   help="also run HF generate() in its fastest configuration: static cache, step compiled with "
                        "torch.compile(mode='reduce-overhead') (compiled on CUDA only; elsewhere eager, with the reason)")
    b.add_argument("--hf-gamma", default=None, help="gammas HF assisted generation is pinned to (default: every numeric --gamma; 'none': only HF's "
                        "default settings)")
    b.add_argument("--no-quality", dest="quality", action="store_false",
                   help="skip the quality runs (perplexity; greedy equality then uses the timing runs)")
    b.add_argument("--gallery", default=None,
                   help="also write, per prompt, the fastest speculative variant's tags to this JSON file "
                        "(the app's task gallery reads docs/bench/gallery.json)")
    b.add_argument("--report", default=None, help="also write the markdown report to this path (e.g. docs/performance.md)")
    b.add_argument("--no-memory", dest="memory", action="store_false", help="skip per-method memory subprocesses")
    b.add_argument("--out", default="runs/bench", help="output directory for JSON, markdown and charts")
    b.add_argument("--json", action="store_true", help="print the result JSON on stdout")


def draft_label(spec: str) -> str:
    """A short name for a drafter in the tables: 'distilled' for the shipped draft, 'hybrid' or
    'hybrid-<name>' for a hybrid ('hybrid-corpus-<name>' with the corpus), else the draft's
    directory or file name."""
    if spec.startswith("hybrid+corpus"):
        inner = spec.partition(":")[2]
        return "hybrid-corpus" + ("-" + draft_label(inner) if inner else "")
    if spec.startswith("hybrid:"):
        return "hybrid-" + draft_label(spec.partition(":")[2])
    if spec in ("distilled",) or Path(spec).expanduser().resolve() == SHIPPED_DRAFT.resolve():
        return "distilled"
    if spec in ("feature",) or Path(spec).expanduser().resolve() == SHIPPED_FEATURE_DRAFT.resolve():
        return "feature"
    return Path(spec.rstrip("/")).name or spec


def spread(items: list, n: int) -> list:
    """n items spread evenly over `items` (first one included), in file order."""
    return [items[(i * len(items)) // n] for i in range(n)]


def only_categories(prompts: list, categories: str) -> list:
    """The prompts of the named categories; a name no prompt has is a usage error that lists the ones there are."""
    wanted = [c.strip() for c in categories.split(",") if c.strip()]
    present = sorted({p.category for p in prompts if p.category})
    unknown = [c for c in wanted if c not in present]
    if not wanted or unknown:
        raise UsageError(f"--categories: no prompts of {', '.join(unknown) or 'any category'}; "
                         f"the file has {', '.join(present) or 'no categories'}")
    return [p for p in prompts if p.category in wanted]


def run_cli(args) -> int:
    import torch

    from ...methods.registry import METHODS
    from ...lm.models import ModelLoadError
    from ...run.pair import default_draft_spec, load_draft_value, load_pair
    from ...lm.prompt_files import read_prompt_rows
    from ...rules.warp import SamplingConfig
    from .driver import run_bench
    from .report import markdown_report, markdown_table, write_outputs
    from .variants import parse_gammas, parse_trees

    if args.repeats < 1 or args.warmup < 0 or args.max_new_tokens < 1:
        raise UsageError("--repeats must be >= 1, --warmup >= 0 and --max-new-tokens >= 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    args.sampling = SamplingConfig(args.temperature, args.top_k, args.top_p)
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    parse_gammas(args.gamma)
    parse_trees(getattr(args, "draft_tree", None))  # a bad setting is refused before the models load
    try:
        prompts = read_prompt_rows(args.prompts)
    except OSError as exc:
        raise UsageError(f"cannot read prompts: {exc}") from None
    if args.categories:
        prompts = only_categories(prompts, args.categories)
    if args.max_prompts and args.max_prompts < len(prompts):
        prompts = spread(prompts, args.max_prompts)
    specs = [s.strip() for s in (args.draft or default_draft_spec(args.target)).split(",") if s.strip()]
    specs = [str(SHIPPED_DRAFT) if s == "distilled" else s for s in specs]
    labels = [draft_label(s) for s in specs]
    if len(set(labels)) != len(labels):
        raise UsageError(f"--draft names one drafter twice: {', '.join(specs)}")
    needs = any(METHODS[m].uses_drafter for m in args.methods if m in METHODS) or args.hf
    try:
        target, _ = load_pair(args.target, device=args.device, dtype=args.dtype, need_draft=False)
        drafts = {label: load_draft_value(spec, target, args.dtype, args.draft_dtype, target_spec=args.target)
                  for label, spec in zip(labels, specs)} if needs else {}
    except ModelLoadError as exc:
        raise UsageError(str(exc)) from None
    args.draft_specs = dict(zip(labels, specs))
    args.draft_spec = specs[0]
    result = run_bench(args, target, drafts, prompts)
    result["command"] = display_command("python -m decoding", sys.argv[1:])
    paths = write_outputs(result, Path(args.out))
    if args.gallery:
        from .report import gallery_tags

        Path(args.gallery).parent.mkdir(parents=True, exist_ok=True)
        Path(args.gallery).write_text(json.dumps(gallery_tags(result), indent=1) + "\n")
    if args.report:
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(markdown_report(result, command=result["command"]))
    if args.json:
        sys.stdout.write(json.dumps(result, default=str) + "\n")
    else:
        sys.stdout.write(markdown_table(result))
        print(f"\nwrote {', '.join(v for k, v in paths.items() if v and k != 'png_note')}"
              + (f"; {paths['png_note']}" if paths.get("png_note") else ""))
    return 0
