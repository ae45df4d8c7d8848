"""Where the static path's lean-layer savings came from on the CPU, and what the dynamic path gains from a lean
decoder whose logits are bit-identical to HF's modules (`decoding/lm/lean_dynamic.py`, SPECDEC_LEAN_DYNAMIC=1).

Pass variants, all on one loaded default target (switched by env switches and one patch the engine reads at every
pass), each prefilled with the chat prompt plus 64 greedy tokens (about 100 cached tokens):

- dynamic: `CachedLM` with HF's modules (today's CPU path);
- dynamic+lean-unfused: `CachedLM` through `lean_dynamic.body` with five separate q, k, v, gate, up matmuls (HF's
  op list without HF's modules; `_unfused_layer` below);
- dynamic+lean: the same with the fused q|k|v and gate|up matmuls (what SPECDEC_LEAN_DYNAMIC=1 runs);
- static+lean: `StaticLM` with the static lean layer (`lean_layer.py`: slot attention over the whole buffer).

A timed pass feeds the next token (step) or it and 4 or 8 more (verify 5, 9) and is rolled back; the variants
alternate within each repetition; figures are medians. So: dynamic - unfused = HF's module and Python overhead,
unfused - lean = the fused matmuls, lean - static+lean = the attention, cache write and mask differences. The
attention functions alone are timed too (layer 0's cache and query shapes, times the layer count): the split
kernel of the dynamic path (`models/attention.py`) and the static path's `grouped_slot_attention`, and one pass's
mask (HF's `create_causal_mask`, which the dynamic path calls once a pass, and the static path's own), and a
layer's cache write (the DynamicCache's update, plus the crop back a rollback does, against two index_copy_).

Whole runs (`--runs N`): the CLI's plain and hybrid:feature commands (bfloat16, greedy, 64 tokens, OMP_NUM_THREADS
as --threads; the hybrid with the automatic gamma schedule, and with the fixed one, gamma 4) with
SPECDEC_LEAN_DYNAMIC=0 and 1 alternating, N rounds: tokens/s, target calls, and whether the texts match (the automatic schedule picks its drafts from wall-clock costs, so
its bfloat16 text may differ between two runs of the same path: distinct texts are counted per setting).

    PYTHONPATH=. .venv/bin/python experiments/lean_dynamic_cpu.py [--threads 1] [--repeats 40] [--runs 3]
        [--dtype bfloat16] [--lock /path/to/lockfile] [--out docs/bench/lean-dynamic-cpu.json]

--lock: an exclusive flock on that file is held while timing (passes, then each whole run), and only then.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decoding.paths import display_command  # noqa: E402 (after the path insert)

PROMPT = "Explain in two sentences why the sky is blue."
VARIANTS = ("dynamic", "dynamic+lean-unfused", "dynamic+lean", "static+lean")
PASSES = {"step": [], "verify5": [42, 1337, 7, 99], "verify9": [42, 1337, 7, 99, 5, 6, 7, 8]}
RUNS = {"autoregressive": ["--method", "autoregressive"],
        "hybrid:feature": ["--method", "speculative", "--draft", "hybrid:feature", "--gamma-schedule", "auto"],
        "hybrid:feature fixed": ["--method", "speculative", "--draft", "hybrid:feature", "--gamma-schedule", "fixed"]}


@contextlib.contextmanager
def locked(path: str | None):
    """An exclusive flock on `path` for the block (nothing when None)."""
    if path is None:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _unfused_layer(x, w, attn, cache, index, cos, sin, mask, attend, positions):
    """`lean_dynamic.layer_pass` with q, k, v, gate and up as five matmuls on row views of the fused weights (the
    tensors HF's projections point at): HF's ops one for one, without its modules."""
    import torch.nn.functional as F

    from decoding.lm.lean_dynamic import rms_norm
    from decoding.lm.lean_layer import rotate_half

    b, n, _ = x.shape
    hd, q_width = attn.head_dim, w.o.shape[1]
    kv_width = (w.qkv.shape[0] - q_width) // 2
    h = rms_norm(x, w.norm_in, w.eps)
    q = F.linear(h, w.qkv[:q_width]).view(b, n, -1, hd).transpose(1, 2)
    k = F.linear(h, w.qkv[q_width: q_width + kv_width]).view(b, n, -1, hd).transpose(1, 2)
    v = F.linear(h, w.qkv[q_width + kv_width:]).view(b, n, -1, hd).transpose(1, 2)
    q, k = (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)
    k, v = cache.update(k, v, index)
    out, _ = attend(attn, q, k, v, mask, dropout=0.0, scaling=attn.scaling, position_ids=positions, use_cache=True)
    x = x + F.linear(out.reshape(b, n, -1).contiguous(), w.o)
    h = rms_norm(x, w.norm_post, w.eps)
    f = w.gate_up.shape[0] // 2
    return x + F.linear(F.silu(F.linear(h, w.gate_up[:f])) * F.linear(h, w.gate_up[f:]), w.down)


def _switch(variant: str, real_body) -> None:
    """The env switches and the lean body of `variant` (the engine reads them at every pass)."""
    from decoding.lm import lean_dynamic

    os.environ["SPECDEC_LEAN_DYNAMIC"] = "1" if variant.startswith("dynamic+lean") else "0"
    os.environ["SPECDEC_LEAN_LAYER"] = "1" if variant == "static+lean" else "0"
    if variant == "dynamic+lean-unfused":
        lean_dynamic.body = lambda *a, **k: real_body(*a, step=_unfused_layer, **k)
    else:
        lean_dynamic.body = real_body


def _median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return round(1000 * statistics.median(times), 3)


def _attention_alone(target, dynamic_lm, static_lm, length: int, repeats: int) -> dict:
    """ms of the layer count times one layer's attention call, dynamic (split kernel, HF's mask) and static (slot
    attention over the buffer), of one pass's mask (HF's create_causal_mask; the static path's own) and of the
    layer count times one layer's cache write."""
    import torch
    from transformers.masking_utils import create_causal_mask
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    from decoding.lm.static_kernels import grouped_slot_attention

    decoder = target.model.get_decoder()
    attn, layers = decoder.layers[0].self_attn, len(decoder.layers)
    attend = ALL_ATTENTION_FUNCTIONS.get_interface(attn.config._attn_implementation, None)
    keys, values = dynamic_lm.cache.layers[0].keys, dynamic_lm.cache.layers[0].values  # (1, kv, length, hd)
    out = {"attention_function": getattr(attend, "__name__", str(attend)), "layers": layers}
    for name, extra in PASSES.items():
        n = 1 + len(extra)
        torch.manual_seed(0)
        query = torch.randn(1, n, attn.config.num_attention_heads, attn.head_dim, dtype=keys.dtype).transpose(1, 2)
        k = torch.cat([keys, keys[:, :, -n:]], 2)  # the cache after the pass's update: length + n entries
        v = torch.cat([values, values[:, :, -n:]], 2)
        positions = torch.arange(length, length + n)[None]
        embeds = torch.empty(1, n, attn.config.hidden_size, dtype=keys.dtype)  # its batch, length and dtype count
        mask = create_causal_mask(config=attn.config, inputs_embeds=embeds, attention_mask=None,
                                  cache=dynamic_lm.cache, position_ids=positions)
        static_mask = static_lm.causal_mask(n)
        kbuf, vbuf = static_lm.cache.layers[0].keys, static_lm.cache.layers[0].values
        with torch.inference_mode():
            dyn = _median_ms(lambda: attend(attn, query, k, v, mask, dropout=0.0, scaling=attn.scaling), repeats)
            sta = _median_ms(lambda: grouped_slot_attention(query, kbuf, vbuf, static_mask, attn.scaling), repeats)
            dyn_mask = _median_ms(lambda: create_causal_mask(config=attn.config, inputs_embeds=embeds,
                                                             attention_mask=None, cache=dynamic_lm.cache,
                                                             position_ids=positions), repeats)
            sta_mask = _median_ms(lambda: static_lm.causal_mask(n), repeats)
            new_k, new_v, slots = keys[:, :, -n:].clone(), values[:, :, -n:].clone(), torch.arange(length, length + n)

            def dynamic_write():  # the cache's update, as a layer pass calls it, and the crop back of a rollback
                dynamic_lm.cache.update(new_k, new_v, 0)
                dynamic_lm.cache.layers[0].crop(-n)

            dyn_write = _median_ms(dynamic_write, repeats)
            sta_write = _median_ms(lambda: (kbuf.index_copy_(2, slots, new_k), vbuf.index_copy_(2, slots, new_v)),
                                   repeats)
        out[name] = {"dynamic_split_ms": round(dyn * layers, 2), "static_slot_ms": round(sta * layers, 2),
                     "static_capacity": static_lm.capacity, "dynamic_mask_ms": round(dyn_mask, 3),
                     "static_mask_ms": round(sta_mask, 3), "dynamic_cache_write_ms": round(dyn_write * layers, 2),
                     "static_cache_write_ms": round(sta_write * layers, 2)}
    return out


def measure(dtype: str, repeats: int, lock: str | None) -> dict:
    import torch

    from decoding.lm import lean_dynamic
    from decoding.lm.cached_lm import CachedLM
    from decoding.lm.static_lm import StaticLM
    from decoding.run.pair import load_pair

    real_body = lean_dynamic.body
    target, _ = load_pair("default", need_draft=False, dtype=dtype)
    ids = target.encode_prompt(PROMPT, chat=True)
    _switch("dynamic", real_body)
    lm = CachedLM(target.model, target.device, target.vocab_size)
    logits = lm.forward(ids)
    context = list(ids)
    for _ in range(64):
        context.append(int(logits[-1].argmax()))
        logits = lm.forward(context[-1:])
    length = len(context) - 1  # the cache holds all but the last token, which each timed pass feeds
    lms = {}
    for variant in VARIANTS:
        _switch(variant, real_body)
        lms[variant] = (StaticLM(target.model, target.device, target.vocab_size, capacity=len(context) + 128)
                        if variant.startswith("static") else CachedLM(target.model, target.device, target.vocab_size))
        lms[variant].forward(context[:-1])
    times = {(v, p): [] for v in VARIANTS for p in PASSES}
    equal = {v: True for v in VARIANTS}
    diffs = {v: 0.0 for v in VARIANTS}
    with locked(lock):
        for r in range(repeats):
            order = VARIANTS[r % len(VARIANTS):] + VARIANTS[: r % len(VARIANTS)]
            got = {}
            for variant in order:
                _switch(variant, real_body)
                for name, extra in PASSES.items():
                    started = time.perf_counter()
                    got[variant, name] = lms[variant].forward(context[-1:] + extra)
                    times[variant, name].append(time.perf_counter() - started)
                    lms[variant].rollback(length)
            for variant in VARIANTS:
                for name in PASSES:
                    a, b = got[variant, name], got["dynamic", name]
                    equal[variant] &= torch.equal(a, b)
                    diffs[variant] = max(diffs[variant], float((a - b).abs().max()))
        _switch("dynamic", real_body)
        attention = _attention_alone(target, lms["dynamic"], lms["static+lean"], length, 5 * repeats)
    return {"dtype": dtype, "context_tokens": length, "repeats": repeats,
            "median_ms": {v: {p: round(1000 * statistics.median(times[v, p]), 2) for p in PASSES} for v in VARIANTS},
            "logits_equal_to_dynamic": equal, "logits_max_abs_diff_vs_dynamic": diffs, "attention_alone": attention}


def whole_runs(rounds: int, threads: int, lock: str | None) -> dict:
    """The CLI's runs with the switch off and on, alternating: tokens/s per round, texts equal."""
    out = {}
    for name, method in RUNS.items():
        argv = ["generate", *method, "--prompt", PROMPT, "--chat", "--temperature", "0", "--max-new-tokens", "64",
                "--ignore-eos", "--dtype", "bfloat16", "--lean"]
        runs, texts, passes = {"0": [], "1": []}, {"0": set(), "1": set()}, {"0": [], "1": []}
        for _ in range(rounds):
            for flag in ("0", "1"):
                env = dict(os.environ, SPECDEC_LEAN_DYNAMIC=flag, OMP_NUM_THREADS=str(threads), PYTHONPATH=".")
                with locked(lock):
                    done = subprocess.run([sys.executable, "-m", "decoding", *argv], capture_output=True, text=True,
                                          env=env, cwd=Path(__file__).resolve().parents[1], timeout=900)
                lines = done.stdout.strip().splitlines()
                rate = re.search(r"([\d.]+) tokens/s", lines[-1] if lines else "")
                if done.returncode or rate is None:
                    raise RuntimeError(f"{name} run failed: {done.stderr[-2000:]}")
                runs[flag].append(float(rate.group(1)))
                passes[flag].append(int(re.search(r"(\d+) target calls", lines[-1]).group(1)))
                texts[flag].add("\n".join(lines[:-1]))
        off, on = statistics.median(runs["0"]), statistics.median(runs["1"])
        out[name] = {"command": "python -m decoding " + " ".join(f'"{a}"' if " " in a else a for a in argv),
                     "tokens_per_s_off": runs["0"], "tokens_per_s_on": runs["1"], "median_off": off,
                     "median_on": on, "ratio": round(on / off, 3), "texts_equal": texts["0"] == texts["1"],
                     "distinct_texts_off": len(texts["0"]), "distinct_texts_on": len(texts["1"]),
                     "target_calls_off": passes["0"], "target_calls_on": passes["1"]}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=40, help="repetitions of the pass timings (0: none)")
    ap.add_argument("--runs", type=int, default=0, help="rounds of whole CLI runs (0: none)")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument("--lock", default=None, help="hold an exclusive flock on this file while timing")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    if args.threads < 1 or args.repeats < 0 or args.runs < 0 or not (args.repeats or args.runs):
        print("error: --threads must be >= 1, --repeats and --runs >= 0, not both 0", file=sys.stderr)
        return 2
    import torch

    from decoding.eval.bench.driver import machine_info

    torch.set_num_threads(args.threads)
    shown = list(sys.argv[1:] if argv is None else argv)  # the lock file is this machine's, not the repository's
    shown = ["LOCKFILE" if i and shown[i - 1] == "--lock" else re.sub(r"^--lock=.*", "--lock=LOCKFILE", a)
             for i, a in enumerate(shown)]
    results = {"command": display_command("python experiments/lean_dynamic_cpu.py", shown),
               "machine": machine_info(), "threads": args.threads}
    if args.repeats:  # 0: whole runs only
        run = results["passes"] = measure(args.dtype, args.repeats, args.lock)
        print(f"{run['dtype']}: context {run['context_tokens']} tokens, {run['repeats']} repeats (medians, ms)")
        for variant, ms in run["median_ms"].items():
            print(f"  {variant:22s} " + "  ".join(f"{p} {v:7.2f}" for p, v in ms.items())
                  + f"  logits equal to dynamic: {run['logits_equal_to_dynamic'][variant]}"
                  f" (max |diff| {run['logits_max_abs_diff_vs_dynamic'][variant]:.2e})")
        att = run["attention_alone"]
        print(f"  attention alone, {att['layers']} layers ({att['attention_function']} vs grouped_slot_attention over "
              f"{att['step']['static_capacity']} slots): " + "  ".join(
                  f"{p} {att[p]['dynamic_split_ms']:.2f} vs {att[p]['static_slot_ms']:.2f}" for p in PASSES))
        print("  one pass's mask (create_causal_mask vs the static causal_mask): " + "  ".join(
            f"{p} {att[p]['dynamic_mask_ms']:.3f} vs {att[p]['static_mask_ms']:.3f}" for p in PASSES))
        print(f"  cache writes, {att['layers']} layers (update + crop back vs two index_copy_): " + "  ".join(
            f"{p} {att[p]['dynamic_cache_write_ms']:.2f} vs {att[p]['static_cache_write_ms']:.2f}" for p in PASSES))
    if args.runs:
        results["whole_runs"] = whole_runs(args.runs, args.threads, args.lock)
        for name, r in results["whole_runs"].items():
            print(f"  whole run {name}: off {r['tokens_per_s_off']} on {r['tokens_per_s_on']} tokens/s "
                  f"(medians {r['median_off']} -> {r['median_on']}, {r['ratio']}x), texts equal: {r['texts_equal']} "
                  f"(distinct texts off {r['distinct_texts_off']}, on {r['distinct_texts_on']}; target calls off "
                  f"{r['target_calls_off']}, on {r['target_calls_on']})")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
