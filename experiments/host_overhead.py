"""The host work of one decoding iteration and of one draft step, on tiny random models (a CPU proxy).

On a GPU whose target passes are captured as CUDA graphs, an iteration's cost is mostly the Python and
op-dispatch work around the passes: the method loop's acceptance, records, stop checks and schedule, and
the draft's eager steps (docs/gpu.md: on an H200, plain decoding spent ~1.0 ms a token and a hybrid
iteration ~1.5 ms beyond its graph replays). This experiment measures that work where the model compute
is ~0: tiny random Llama targets and drafts (as tests/conftest.py builds them) on the CPU, the static
backend, one thread, greedy, the lean trace (as the benchmark runs). For each method (plain decoding,
prompt lookup, the distilled draft model, the feature draft, the hybrid of lookup + feature draft; fixed
gamma 4 and auto) it reports:

- wall ms per iteration of an un-instrumented run (the figure to compare before/after);
- ms per iteration of each phase from an instrumented run (each phase's functions wrapped with a
  timer, ~1 us a call): schedule (sources, gamma choice, policy update/snapshot), draft propose (and of
  it the draft model's decoder body), target verify call (and of it the target's decoder body, what a
  CUDA graph replays on a GPU), acceptance (warp + the acceptance rule), records (tokens, commit,
  log-probabilities, draft-token/tree/residual records, the record itself), and the rest of the loop;
- ms per draft step: draft propose time over the draft model's forward passes, and its part outside
  the decoder body (the host work a captured draft step would still pay);
- per iteration, from one more run under a dispatch counter: aten ops outside the decoder bodies (ops/it;
  each a kernel launch or a view on a GPU), host reads of a scalar (reads: item/int/float), `tolist`
  calls, and tensors made from host lists (h2d): on a GPU each read and tolist waits for the device, and
  each h2d copy from pageable memory waits for the stream.

Columns: tok/it tokens per iteration, steps draft model passes per iteration, wall ms/it (un-instrumented),
instr (the instrumented run's ms/it), the phases, other (the loop's remaining time), draft/step and
host/step (ms), then the counts.

`--vocab 49152` widens the tiny models' vocabulary to the real default target's (extra dummy tokens),
so vocabulary-wide ops cost what they would on rows of that width. `--profile N` prints the N functions
of most own time (cProfile) of each method, to find what to cut.

    PYTHONPATH=. .venv/bin/python experiments/host_overhead.py [--vocab 49152] [--prompts 6]
        [--max-new-tokens 64] [--repeats 3] [--profile 25] [--device cuda] [--out host_overhead.json]
        [--chain-graph off|on|both]

`--chain-graph both` runs each method with greedy draft chains as one CUDA graph (lm/chain_graphs.py) switched off,
then on, and prints a comparison (ms per iteration and per draft step, on / off, chains captured and replayed, the
same tokens or not); it needs CUDA graphs (`--device cuda`): on a CPU the switch changes nothing.

On a GPU (`--device cuda`; graphs on, the lean layer compiled, as there by default) the same table measures the
iteration itself: with the passes captured, what is left is this host work and the replays.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import string
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CHARS = string.ascii_lowercase + string.digits + " \n.,!?'\"-:;()"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"]
PROMPTS = [
    "the cat sat on the mat. the cat sat on the mat and the dog sat on the",
    "summarize: the river flows to the sea. the river is long. the sea is wide. summary:",
    "count: one two three four five six seven eight nine ten one two three",
    "write a story about a robot who learns to paint pictures of the sky at night.",
    "question: what is the capital of france? context: paris is the capital of france. answer:",
    "repeat after me: hello world, hello world, hello world, hello",
    "list three colors: red, green, blue. list three fruits: apple, pear,",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
]
# (label, draft spec understood by `_draft`, gamma schedule); plain decoding has no draft
METHODS = [
    ("plain", None, "fixed"),
    ("lookup g4", "lookup", "fixed"),
    ("distilled g4", "distilled", "fixed"),
    ("feature g4", "feature", "fixed"),
    ("hybrid g4", "hybrid", "fixed"),
    ("hybrid auto", "hybrid", "auto"),
]


def make_tokenizer(vocab: int):
    """A character-level tokenizer (tests/conftest.py's), padded with dummy tokens to `vocab` entries."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    names = SPECIALS + list(CHARS)
    names += [f"<x{i}>" for i in range(max(0, vocab - len(names)))]
    backend = Tokenizer(models.WordLevel(vocab={t: i for i, t in enumerate(names)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(SPECIALS)
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=SPECIALS[0], pad_token=SPECIALS[0],
                                   unk_token="<unk>")


def make_model_dir(path: Path, tokenizer, hidden: int, layers: int, heads: int, seed: int) -> Path:
    """A random fp32 Llama (large initializer range: peaked logits, no argmax ties) saved with its tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=1024, initializer_range=0.5, tie_word_embeddings=False,
                         bos_token_id=None, eos_token_id=eos, pad_token_id=eos)
    torch.manual_seed(seed)
    LlamaForCausalLM(config).to(torch.float32).eval().save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def noisy_copy(source: Path, path: Path) -> Path:
    """The model in `source` with noise (0.1 of each weight's spread) added to every weight: a draft whose
    q overlaps the target's p partly (tests/conftest.py's close draft), so drafts are partly accepted."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(source, dtype=torch.float32)
    generator = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 0.1 * param.std())
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(source).save_pretrained(path)
    return path


def build(vocab: int, dtype: str, head_size: int, root: Path, device: str = "cpu"):
    """(target LoadedModel, {spec: Draft}) of tiny random models on `device`."""
    import torch

    from decoding.drafters.feature import FeatureDraftModel, draft_layer_config
    from decoding.drafters.output_head import OutputHead, subset_head
    from decoding.lm.models import load_model
    from decoding.run.pair import Draft

    tokenizer = make_tokenizer(vocab)
    target_dir = make_model_dir(root / "target", tokenizer, 64, 2, 4, 1)
    target = load_model(str(target_dir), device=device, dtype=dtype)
    draft = load_model(str(noisy_copy(target_dir, root / "draft")), device=device, dtype=dtype)
    width = target.vocab_size
    k = min(head_size, width) if head_size else width
    ids = list(range(width - k, width)) if k < width else list(range(width))  # the chars sit in the low ids
    ids = sorted(set(ids) | set(range(len(SPECIALS) + len(CHARS))))
    torch.manual_seed(5)
    feature = FeatureDraftModel(draft_layer_config(target.model.config))
    feature.init_from_target(target.model)
    feature.to(device=target.device, dtype=target.dtype).eval()
    weight = target.model.get_output_embeddings().weight.detach()
    head = OutputHead(torch.tensor(ids, device=target.device), weight[torch.tensor(ids, device=target.device)].clone())
    feature_draft = Draft.of_feature(feature, head, "feature")
    distilled = Draft.of_model(draft, subset_head(draft.model, ids) if k < width else None)
    drafts = {"lookup": Draft.prompt_lookup(), "distilled": distilled, "feature": feature_draft,
              "hybrid": feature_draft.hybrid()}
    return target, drafts


# ---- instrumentation: phase timers wrapped around the loop's functions ------------------------------

class Phases:
    """Inclusive wall seconds and calls per phase, from timers wrapped around functions (`patch`)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._depth: dict[str, int] = {}
        self.prefill: dict[str, float] = {}  # the part of `seconds` spent in prefill iterations
        self._undo = []

    def wrap(self, owner, name: str, phase: str, when=None) -> None:
        """Time `owner.name` (a class's method or a module's function) into `phase`; a call nested in an
        open call of the same phase is not counted twice. `when(args)`: count only the calls it accepts
        (the others go to `phase + "?"`, e.g. the draft's own LM calls)."""
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        seconds, calls, depth = self.seconds, self.calls, self._depth
        for key in (phase, phase + "?"):
            seconds.setdefault(key, 0.0)
            calls.setdefault(key, 0)
            depth.setdefault(key, 0)
        clock = time.perf_counter

        @functools.wraps(original)
        def timed(*args, **kwargs):
            key = phase if when is None or when(args) else phase + "?"
            if depth[key]:
                return original(*args, **kwargs)
            depth[key] += 1
            t0 = clock()
            try:
                return original(*args, **kwargs)
            finally:
                seconds[key] += clock() - t0
                calls[key] += 1
                depth[key] -= 1

        setattr(owner, name, timed)
        self._undo.append((owner, name, original))

    def undo(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()


def patch(phases: Phases, target_model) -> None:
    """Wrap the loop's functions, by phase (module doc). Only the names the loops call are wrapped:
    a drafter's own warp/argmax counts in its propose. The decoder body and `extend` are split by
    model: the target's (its verify pass) or a draft's (inside propose)."""
    from decoding.drafters import feature, hybrid, lookup, model
    from decoding.drafters.gamma_policy import GammaPolicy
    from decoding.lm import cached_lm, static_lm
    from decoding.methods import autoregressive, base, speculative

    def is_target(args) -> bool:
        return args[0].model is target_model

    for cls in (model.ModelDrafter, feature.FeatureDrafter, hybrid.HybridDrafter, lookup.PromptLookupDrafter):
        phases.wrap(cls, "propose", "draft")
        phases.wrap(cls, "sources", "schedule")
        phases.wrap(cls, "rollback", "rollback")
    for name in ("choose", "draft_stopper", "update", "snapshot"):
        phases.wrap(GammaPolicy, name, "schedule")
    phases.wrap(static_lm.StaticMixin, "body_pass", "target_body", when=is_target)  # "target_body?": a draft's
    phases.wrap(cached_lm.CachedLM, "extend", "verify", when=is_target)
    phases.wrap(speculative, "strict_verify", "acceptance")
    phases.wrap(speculative, "warp_logits", "acceptance")
    for name in ("_draft_tokens", "_residual", "_chain_tree", "raw_logprobs"):
        phases.wrap(speculative, name, "records")
    phases.wrap(autoregressive, "raw_logprobs", "records")
    phases.wrap(autoregressive, "warp_logits", "acceptance")
    for name in ("record", "commit", "token", "top_candidates"):
        phases.wrap(base.RunState, name, "records")


# ---- runs ------------------------------------------------------------------------------------------

def run_method(target, draft, spec_schedule: str, prompts: list[list[int]], max_new: int, phases=None):
    """Decode every prompt once: totals of iterations, tokens, target and draft calls, draft tokens and wall
    seconds, each without the run's first iteration (the prompt's prefill), and the emitted token ids.
    With `phases` (a Phases being timed), the prefill iterations' phase time is set apart."""
    from decoding.methods.base import RunConfig
    from decoding.rules.warp import SamplingConfig
    from decoding.run.runner import decode

    totals = {"iterations": 0, "tokens": 0, "target_calls": 0, "draft_calls": 0, "seconds": 0.0,
              "drafted": 0, "token_ids": []}
    for ids in prompts:
        config = RunConfig(method="autoregressive" if draft is None else "speculative", max_new_tokens=max_new,
                           sampling=SamplingConfig(temperature=0.0), gamma=4, stop_at_eos=False, lean=True,
                           extra={} if draft is None else {"gamma_schedule": spec_schedule})
        gen = decode(target, draft, ids, config)
        before = dict(phases.seconds) if phases is not None else None
        first = next(gen)  # the prefill iteration, left out of the per-iteration figures
        if phases is not None:
            for key, value in phases.seconds.items():
                phases.prefill[key] = phases.prefill.get(key, 0.0) + value - before.get(key, 0.0)
        records = []
        t0 = time.perf_counter()
        for record in gen:
            records.append(record)
        totals["seconds"] += time.perf_counter() - t0
        totals["iterations"] += len(records)
        totals["tokens"] += sum(len(r.emitted) for r in records)
        totals["drafted"] += sum(len(r.draft) for r in records)
        if records:
            totals["target_calls"] += records[-1].target_calls - first.target_calls
            totals["draft_calls"] += records[-1].draft_calls - first.draft_calls
        totals["token_ids"].append([t.token_id for r in [first, *records] for t in r.emitted])
    return totals


def measure(label, target, draft, schedule, prompts, max_new, repeats, profile: int):
    """One method's figures (module doc): the median wall ms per iteration of `repeats` plain runs, then one
    instrumented run's phases."""
    walls = []
    for _ in range(repeats):
        totals = run_method(target, draft, schedule, prompts, max_new)
        walls.append(1e3 * totals["seconds"] / max(1, totals["iterations"]))
    phases = Phases()
    patch(phases, target.model)
    try:
        inst = run_method(target, draft, schedule, prompts, max_new, phases)
    finally:
        phases.undo()
    ops = count_ops(target, draft, schedule, prompts, max_new)
    profile_rows = []
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        run_method(target, draft, schedule, prompts, max_new)
        prof.disable()
        stats = pstats.Stats(prof)
        rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:profile]
        profile_rows = [{"function": f"{Path(f).name}:{line} {fn}", "calls": nc, "tottime_ms": 1e3 * tt,
                         "cumtime_ms": 1e3 * ct} for (f, line, fn), (cc, nc, tt, ct, _) in rows]
    iters = max(1, inst["iterations"])  # past each run's prefill iteration
    per_iter = {k: 1e3 * (v - phases.prefill.get(k, 0.0)) / iters for k, v in phases.seconds.items()
                if k != "verify?"}
    per_iter["draft_body"] = per_iter.pop("target_body?", 0.0)
    steps = inst["draft_calls"]
    row = {
        "method": label,
        "iterations": totals["iterations"],
        "tokens_per_iteration": totals["tokens"] / max(1, totals["iterations"]),
        "draft_steps_per_iteration": steps / iters,
        "wall_ms_per_iteration": statistics.median(walls),
        "wall_ms_per_iteration_runs": walls,
        "wall_ms_per_token": statistics.median(walls) * totals["iterations"] / max(1, totals["tokens"]),
        "instrumented_ms_per_iteration": 1e3 * inst["seconds"] / iters,
        "phase_ms_per_iteration": per_iter,
        "draft_ms_per_step": (per_iter.get("draft", 0.0) * iters / steps) if steps else None,
        "draft_host_ms_per_step": ((per_iter.get("draft", 0.0) - per_iter["draft_body"]) * iters / steps)
        if steps else None,
        "ops_per_iteration": ops,
        "token_ids": totals["token_ids"],
        "profile": profile_rows,
    }
    return row


def count_ops(target, draft, schedule, prompts, max_new) -> dict:
    """Per iteration past the prefill, from one more run: aten ops dispatched outside the decoder bodies (each
    a kernel launch on a GPU; the bodies are what graphs replay), of them host reads of a scalar (item, int,
    float: a GPU sync each), `tolist` calls (a sync and copy each) and tensors made from host lists
    (`torch.tensor`: on a GPU a copy from pageable memory, which waits for the stream first)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    import torch

    from decoding.lm import static_lm

    counts = {"ops": 0, "scalar_reads": 0, "tolist": 0, "from_host": 0, "body_ops": 0}
    inside = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if inside[0]:
                counts["body_ops"] += 1
            else:
                counts["ops"] += 1
                if func is torch.ops.aten._local_scalar_dense.default:
                    counts["scalar_reads"] += 1
            return func(*args, **(kwargs or {}))

    body, tolist, make = static_lm.StaticMixin.body_pass, torch.Tensor.tolist, torch.tensor

    def body_pass(self, *args, **kwargs):
        inside[0] += 1
        try:
            return body(self, *args, **kwargs)
        finally:
            inside[0] -= 1

    def counted_tolist(self, *args, **kwargs):
        if not inside[0]:
            counts["tolist"] += 1
        return tolist(self, *args, **kwargs)

    def counted_tensor(*args, **kwargs):
        if not inside[0]:
            counts["from_host"] += 1
        return make(*args, **kwargs)

    static_lm.StaticMixin.body_pass, torch.Tensor.tolist, torch.tensor = body_pass, counted_tolist, counted_tensor
    try:
        # the prefill iterations are counted too, then taken out with one counted run of the prefills alone
        with Count():
            totals = run_method(target, draft, schedule, prompts, max_new)
        full = dict(counts)
        counts.update({k: 0 for k in counts})
        with Count():
            run_method(target, draft, schedule, prompts, 1)
        prefill = dict(counts)
    finally:
        static_lm.StaticMixin.body_pass, torch.Tensor.tolist, torch.tensor = body, tolist, make
    iters = max(1, totals["iterations"])
    return {k: (full[k] - prefill[k]) / iters for k in full}


PHASES = ("schedule", "draft", "draft_body", "verify", "target_body", "acceptance", "records", "rollback")


def print_table(rows) -> None:
    head = (f"{'method':<18}{'tok/it':>7}{'steps':>6}{'wall ms/it':>11}{'instr':>7} | "
            + "".join(f"{p:>12}" for p in PHASES) + f"{'other':>8} |{'draft/step':>11}{'host/step':>10}")
    print(head + f"{'ops/it':>8}{'reads':>6}{'tolist':>7}{'h2d':>5}")
    print("-" * (len(head) + 26))
    for r in rows:
        ph = r["phase_ms_per_iteration"]
        named = sum(ph.get(p, 0.0) for p in ("schedule", "draft", "verify", "acceptance", "records", "rollback"))
        other = r["instrumented_ms_per_iteration"] - named
        step = "" if r["draft_ms_per_step"] is None else f"{r['draft_ms_per_step']:.3f}"
        host = "" if r["draft_host_ms_per_step"] is None else f"{r['draft_host_ms_per_step']:.3f}"
        print(f"{r['method']:<18}{r['tokens_per_iteration']:>7.2f}{r['draft_steps_per_iteration']:>6.2f}"
              f"{r['wall_ms_per_iteration']:>11.3f}{r['instrumented_ms_per_iteration']:>7.3f} | "
              + "".join(f"{ph.get(p, 0.0):>12.3f}" for p in PHASES) + f"{other:>8.3f} |{step:>11}{host:>10}"
              + f"{r['ops_per_iteration']['ops']:>8.1f}{r['ops_per_iteration']['scalar_reads']:>6.1f}"
              f"{r['ops_per_iteration']['tolist']:>7.1f}{r['ops_per_iteration'].get('from_host', 0):>5.1f}")


def print_chain_comparison(rows, device: str) -> None:
    """Per method, the chain graph's switch off against on (rows in pairs, `--chain-graph both`): wall ms per
    iteration and per draft step, their ratio (on / off), the chain graphs captured and replayed, and whether the
    two emitted the same tokens (they must: the switch changes no token)."""
    print(f"\ndraft chain graphs (SPECDEC_DRAFT_CHAIN_GRAPH) off -> on, on {device}"
          + ("" if device.startswith("cuda") else " (no CUDA graphs here: the switch changes nothing)"))
    print(f"{'method':<14}{'ms/it off':>10}{'ms/it on':>10}{'on/off':>8}{'step off':>10}{'step on':>9}"
          f"{'captured':>9}{'replays':>8}  same tokens")
    for off, on in zip(rows[0::2], rows[1::2]):
        step = [r["draft_ms_per_step"] for r in (off, on)]
        steps = "".join(f"{v:>9.3f}" if v is not None else f"{'':>9}" for v in step)
        counts = on["graph_counts"]
        print(f"{off['method']:<14}{off['wall_ms_per_iteration']:>10.3f}{on['wall_ms_per_iteration']:>10.3f}"
              f"{on['wall_ms_per_iteration'] / off['wall_ms_per_iteration']:>8.3f} {steps}"
              f"{counts.get('chain_captures', 0):>9}{counts.get('chain_replays', 0):>8}  "
              f"{'yes' if on['token_ids'] == off['token_ids'] else 'NO'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=0, help="vocabulary width (0: the tiny tokenizer's own, ~50)")
    ap.add_argument("--head", type=int, default=8192, help="restricted draft head size where the vocab is wider")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--prompts", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (on a GPU: graphs on, as the static backend's "
                                                    "default there; the figures are then the GPU's own)")
    ap.add_argument("--chain-graph", default="off", choices=("off", "on", "both"),
                    help="greedy draft chains as one CUDA graph (SPECDEC_DRAFT_CHAIN_GRAPH; needs CUDA graphs): off "
                         "(the default path), on, or both (each method off then on, and a comparison table)")
    ap.add_argument("--methods", default="", help="comma-separated labels to run (default: all)")
    ap.add_argument("--profile", type=int, default=0, help="print the N functions of most own time per method")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    if args.prompts < 1 or args.repeats < 1 or args.max_new_tokens < 1 or args.threads < 1 or args.vocab < 0:
        print("error: --prompts, --repeats, --max-new-tokens and --threads must be >= 1, --vocab >= 0",
              file=sys.stderr)
        return 2
    import torch

    from decoding.lm import chain_graphs, cuda_graphs
    from decoding.lm.backend import set_backend

    torch.set_num_threads(args.threads)
    set_backend("static")
    wanted = [m.strip() for m in args.methods.split(",") if m.strip()]
    methods = [m for m in METHODS if not wanted or m[0] in wanted]
    with tempfile.TemporaryDirectory() as tmp:
        target, drafts = build(args.vocab, args.dtype, args.head, Path(tmp), args.device)
        prompts = [target.encode_prompt(p, chat=False) for p in (PROMPTS * 4)[: args.prompts]]
        switches = {"off": [False], "on": [True], "both": [False, True]}[args.chain_graph]
        # warm-up: every method once on one prompt (caches, pools, first-call costs; chain graphs captured)
        for _, spec, schedule in methods:
            for on in switches:
                chain_graphs.ENABLED = on
                run_method(target, drafts.get(spec), schedule, prompts[:1], 8)
        rows = []
        for label, spec, schedule in methods:
            for on in switches:  # switch off, then on, method by method: the pair runs close in time
                chain_graphs.ENABLED = on
                cuda_graphs.reset_counts()
                rows.append(measure(label + (" +chain" if on and len(switches) > 1 else ""), target, drafts.get(spec),
                                    schedule, prompts, args.max_new_tokens, args.repeats, args.profile))
                rows[-1].update(chain_graph=on, graph_counts=cuda_graphs.counts())
        chain_graphs.ENABLED = None
    print(f"tiny random models on {args.device}, static backend, {args.threads} thread(s), greedy, lean trace, "
          f"vocab {target.vocab_size}, {args.dtype}, {len(prompts)} prompts x {args.max_new_tokens} tokens "
          f"(ms per iteration past the prefill; phases from an instrumented run)")
    print_table(rows)
    plain = next((r for r in rows if r["method"] == "plain"), None)
    if plain is not None:
        for r in rows[1:]:
            if r["token_ids"] != plain["token_ids"]:
                print(f"warning: {r['method']} emitted other tokens than plain decoding", file=sys.stderr)
    if len(switches) > 1:
        print_chain_comparison(rows, args.device)
    if args.profile:
        for r in rows:
            print(f"\n{r['method']}: top {args.profile} functions by own time (cProfile, whole run)")
            for p in r["profile"]:
                print(f"  {p['tottime_ms']:9.1f} ms own {p['cumtime_ms']:9.1f} ms cum {p['calls']:>8}  {p['function']}")
    if args.out:
        args.out.write_text(json.dumps({"settings": vars(args) | {"out": str(args.out)},
                                        "vocab": target.vocab_size,
                                        "rows": [{k: v for k, v in r.items() if k != "token_ids"} for r in rows]},
                                       indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
