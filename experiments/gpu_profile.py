"""Where a captured step of the static path spends its time on a CUDA GPU, per configuration of the short passes.

Builds a random-weight Llama of the default target's shape (SmolLM2-135M: 30 layers, hidden 576, 9 query / 3
key-value heads of 64, MLP 1536, vocabulary 49152; the values are copied below in CONFIG, so no download and no
tokenizer), and for each configuration of the static path's short passes measures:

- replay: one CUDA graph replay of a captured one-token step and of a 5-token verify pass (ms, median of
  200, synchronised), i.e. the step's GPU floor;
- forward: `lm.forward` of one token through the graphs, rolled back, including the host's work (ms);
- decode: a greedy loop of 64 tokens (forward + argmax read back per token), tokens/s;
- kernels: CUDA kernels per eager one-token step (torch profiler, graphs off), and the step's top kernels
  (table written to OUT/kernels-<config>.txt);

Configurations, by the engine's env switches: `hf` (SPECDEC_SHORT_KERNELS=0, SPECDEC_LEAN_LAYER=0: HF's modules
on the static cache), `short` (the short-pass kernels, `static_kernels.py`, the lean layer off), `lean` (the lean
layer, `lean_layer.py`), `lean+compile` (SPECDEC_COMPILE=1: one compiled `layer_step` for all 30 layers; its
compile time and dynamo graph count are printed). Then HF's `generate()` in its fastest configuration (static
cache, torch.compile mode reduce-overhead; `decoding/eval/bench/hf_fast.py`) on the same prompt for 64 tokens:
first call (compiles) and tokens/s of the next two. Last, parity: the lean graphs' verify logits against the
dynamic cache's in the run's dtype (max |difference|, argmax equal).

The one command a GPU session runs (71 s on an H200 with `--budget-s 150 --skip-hf`; a part that would start past
--budget-s is skipped and says so; `--skip-compile` and `--skip-hf` drop the two slow parts; `--whole-body-compile` adds `short+compile`, HF's whole
short pass compiled, which took over 110 s on an H200 before):

    PYTHONPATH=. python experiments/gpu_profile.py --dtype bfloat16 --budget-s 420

It prints one line per configuration,
    `<config>: replay step X ms, verify(5) Y ms; forward step Z ms; decode T tokens/s; K kernels/step`,
the compile line (`lean+compile: layer_step compiled in S s, G dynamo graphs`), the HF line
(`hf-generate-compiled: first call S s, tokens/s [a, b]`), the parity line, and writes everything to
$OUT/gpu-profile.json (OUT: the env variable if set, else --out-dir, default runs/gpu-profile), with the kernel
tables beside it. Without CUDA it prints why and exits with status 2. Not a test (pytest collects tests/ only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# SmolLM2-135M-Instruct's config (the default target's shape), as its config.json gives it.
CONFIG = dict(
    architectures=["LlamaForCausalLM"], attention_bias=False, attention_dropout=0.0, bos_token_id=1, eos_token_id=2,
    head_dim=64, hidden_act="silu", hidden_size=576, initializer_range=0.02, intermediate_size=1536,
    max_position_embeddings=8192, mlp_bias=False, num_attention_heads=9, num_hidden_layers=30,
    num_key_value_heads=3, pad_token_id=2, pretraining_tp=1, rms_norm_eps=1e-5,
    rope_parameters={"rope_theta": 100000.0, "rope_type": "default"}, tie_word_embeddings=True, vocab_size=49152,
)
CONFIGS = {  # name -> env switches
    "hf": {"SPECDEC_SHORT_KERNELS": "0", "SPECDEC_LEAN_LAYER": "0", "SPECDEC_COMPILE": "0"},
    "short": {"SPECDEC_SHORT_KERNELS": "1", "SPECDEC_LEAN_LAYER": "0", "SPECDEC_COMPILE": "0"},
    "lean": {"SPECDEC_SHORT_KERNELS": "1", "SPECDEC_LEAN_LAYER": "1", "SPECDEC_COMPILE": "0"},
    "lean+compile": {"SPECDEC_SHORT_KERNELS": "1", "SPECDEC_LEAN_LAYER": "1", "SPECDEC_COMPILE": "1"},
    # only with --whole-body-compile: HF's whole short pass compiled (over 110 s on an H200 in an earlier session)
    "short+compile": {"SPECDEC_SHORT_KERNELS": "1", "SPECDEC_LEAN_LAYER": "0", "SPECDEC_COMPILE": "1"},
}
PROMPT_TOKENS = 48
NEW_TOKENS = 64
REPLAYS = 200
NO_CUDA = "gpu_profile: no CUDA device here; this experiment profiles the static path's CUDA graphs and needs a GPU"


def _sync():
    import torch

    torch.cuda.synchronize()


def _median_ms(fn, repeats: int) -> float:
    """Median wall time of `fn()` in ms, synchronised around each call."""
    times = []
    for _ in range(repeats):
        _sync()
        started = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - started)
    return round(1000 * statistics.median(times), 3)


class Profiler:
    def __init__(self, model, prompt: list[int], out_dir: Path, budget_s: float):
        self.model, self.prompt, self.out_dir = model, prompt, out_dir
        self.deadline = time.time() + budget_s
        self.results: dict = {}

    def save(self) -> None:
        (self.out_dir / "gpu-profile.json").write_text(json.dumps(self.results, indent=1) + "\n")

    def part(self, name: str, fn, least_s: float = 5.0) -> None:
        """Run one part, keep its result (or its error), skip it when the budget has less than `least_s` left."""
        if time.time() + least_s > self.deadline:
            self.results[name] = {"skipped": f"the budget had under {least_s:.0f} s left"}
            print(f"{name}: skipped (budget)", flush=True)
        else:
            try:
                self.results[name] = fn()
            except Exception:  # noqa: BLE001 - a part's failure is a finding; the others still run
                self.results[name] = {"error": traceback.format_exc()[-2000:]}
                print(f"{name}: ERROR\n{self.results[name]['error']}", flush=True)
        self.save()

    def _lm(self, graphs: bool):
        """A fresh static LM (new cache and graph runner) holding the prompt but its last token."""
        from decoding.lm import backend
        from decoding.lm.cached_lm import CachedLM

        os.environ["SPECDEC_CUDA_GRAPHS"] = "1" if graphs else "0"
        backend._spare.clear()
        lm = backend.make_lm(CachedLM, self.model, self.model.device, CONFIG["vocab_size"],
                             capacity=len(self.prompt) + NEW_TOKENS + 64, backend="static")
        lm.forward(self.prompt[:-1], keep=1)
        return lm

    def configuration(self, name: str) -> dict:
        import torch
        from torch._dynamo.utils import counters

        from decoding.lm import compiled_body, cuda_graphs

        os.environ.update(CONFIGS[name])
        compiled_body.reset()
        counters.clear()
        cuda_graphs.reset_counts()
        out: dict = {}
        lm = self._lm(graphs=True)
        length = lm.length
        step, verify = self.prompt[-1:], self.prompt[-1:] + [42, 1337, 7, 99]
        started = time.perf_counter()
        for tokens in (step, verify, step, verify, step, verify):  # each shape: eager (compiles), captured, replayed
            lm.forward(tokens)
            lm.rollback(length)
        _sync()
        out["first_passes_s"] = round(time.perf_counter() - started, 2)
        if name.endswith("compile"):
            out["dynamo_graphs"] = counters["stats"]["unique_graphs"]
            out["compile_failure"] = compiled_body.failure()
        graphs = {key[0][1]: captured.graph for key, captured in lm.graphs.graphs.items()}
        out["replay_ms"] = {f"{n}": _median_ms(graphs[n].replay, REPLAYS) for n in sorted(graphs)}

        def forward_step():
            lm.forward(step)
            lm.rollback(length)

        out["forward_step_ms"] = _median_ms(forward_step, REPLAYS)
        seq = list(self.prompt)
        _sync()
        started = time.perf_counter()
        for _ in range(NEW_TOKENS):
            seq.append(int(lm.forward(seq[-1:], keep=1)[-1].argmax()))
        out["decode_tokens_per_s"] = round(NEW_TOKENS / (time.perf_counter() - started), 1)
        out["graph_counts"] = cuda_graphs.counts()
        del lm
        out["kernels_per_step"], table = self._kernels(name)
        (self.out_dir / f"kernels-{name.replace('+', '-')}.txt").write_text(table)
        print(f"{name}: replay step {out['replay_ms'].get('1')} ms, verify(5) {out['replay_ms'].get('5')} ms; "
              f"forward step {out['forward_step_ms']} ms; decode {out['decode_tokens_per_s']} tokens/s; "
              f"{out['kernels_per_step']} kernels/step", flush=True)
        if name.endswith("compile"):
            print(f"{name}: layer_step compiled in {out['first_passes_s']} s (first passes), "
                  f"{out['dynamo_graphs']} dynamo graphs, failure {out['compile_failure']}", flush=True)
        torch.cuda.empty_cache()
        return out

    def _kernels(self, name: str, steps: int = 10) -> tuple[float, str]:
        """CUDA kernels per eager one-token step (graphs off) and the profiler's kernel table."""
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        lm = self._lm(graphs=False)
        length = lm.length
        for _ in range(3):  # warm-up (and, compiled, the compile's eager sightings)
            lm.forward(self.prompt[-1:])
            lm.rollback(length)
        _sync()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                lm.forward(self.prompt[-1:])
                lm.rollback(length)
            _sync()
        kernels = sum(1 for e in prof.events() if e.device_type == DeviceType.CUDA)
        table = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=25)
        return round(kernels / steps, 1), f"{name}: {steps} eager one-token steps\n{table}"

    def hf_compiled(self) -> dict:
        import torch
        from transformers import GenerationConfig

        from decoding.eval.bench.hf_fast import fast_generation_config

        ids = torch.tensor([self.prompt], device=self.model.device)
        base = GenerationConfig(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                                eos_token_id=None, pad_token_id=CONFIG["pad_token_id"])
        config = fast_generation_config(base, len(self.prompt) + NEW_TOKENS + 8, True)
        out = {}
        _sync()
        started = time.perf_counter()
        self.model.generate(ids, generation_config=config)
        _sync()
        out["first_call_s"] = round(time.perf_counter() - started, 1)
        rates = []
        for _ in range(2):
            _sync()
            started = time.perf_counter()
            generated = self.model.generate(ids, generation_config=config)
            _sync()
            rates.append(round((generated.shape[1] - ids.shape[1]) / (time.perf_counter() - started), 1))
        out["tokens_per_s"] = rates
        out["compiled"] = hasattr(self.model, "_compiled_call")
        print(f"hf-generate-compiled: first call {out['first_call_s']} s, tokens/s {rates}, "
              f"compiled {out['compiled']}", flush=True)
        return out

    def parity(self) -> dict:
        """The lean graphs' verify logits against the dynamic cache's, in the model's dtype."""
        from decoding.lm import backend
        from decoding.lm.cached_lm import CachedLM

        os.environ.update(CONFIGS["lean"])
        lm = self._lm(graphs=True)
        length = lm.length
        verify = self.prompt[-1:] + [42, 1337, 7, 99]
        for _ in range(3):  # eager, captured, replayed
            got = lm.forward(verify)
            lm.rollback(length)
        dynamic = backend.make_lm(CachedLM, self.model, self.model.device, CONFIG["vocab_size"], backend="dynamic")
        dynamic.forward(self.prompt[:-1], keep=1)
        want = dynamic.forward(verify)
        out = {"max_abs_diff": float((got - want).abs().max()), "logit_scale": float(want.abs().max()),
               "argmax_equal": bool((got.argmax(-1) == want.argmax(-1)).all()), "replays": lm.graphs is not None}
        print(f"parity (lean graphs vs dynamic, {self.model.dtype}): max |diff| {out['max_abs_diff']:.3g} on logits "
              f"up to {out['logit_scale']:.3g}, argmax equal {out['argmax_equal']}", flush=True)
        return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument("--budget-s", type=float, default=420.0, help="skip parts that would start past this")
    ap.add_argument("--skip-compile", action="store_true", help="leave out lean+compile")
    ap.add_argument("--skip-hf", action="store_true", help="leave out HF's compiled generate()")
    ap.add_argument("--whole-body-compile", action="store_true",
                    help="also compile HF's whole short pass (the lean layer off; slow to compile)")
    ap.add_argument("--out-dir", type=Path, default=Path("runs/gpu-profile"))
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(NO_CUDA, file=sys.stderr)
        return 2
    from transformers import LlamaConfig, LlamaForCausalLM

    out_dir = Path(os.environ.get("OUT") or args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**CONFIG)).to(device="cuda", dtype=getattr(torch, args.dtype)).eval()
    prompt = torch.randint(100, CONFIG["vocab_size"], (PROMPT_TOKENS,), generator=torch.Generator().manual_seed(1))
    profiler = Profiler(model, prompt.tolist(), out_dir, args.budget_s)
    profiler.results["device"] = {"name": torch.cuda.get_device_name(), "torch": torch.__version__,
                                  "dtype": args.dtype, "prompt_tokens": PROMPT_TOKENS, "new_tokens": NEW_TOKENS}
    print(f"gpu_profile: {torch.cuda.get_device_name()}, torch {torch.__version__}, {args.dtype}, random weights of "
          f"the default target's shape, prompt {PROMPT_TOKENS} tokens", flush=True)
    for name in CONFIGS:
        whole = name == "short+compile" and not args.whole_body_compile
        if whole or (name.endswith("compile") and args.skip_compile):
            continue
        profiler.part(name, lambda name=name: profiler.configuration(name), least_s=60 if "compile" in name else 10)
    if not args.skip_hf:
        profiler.part("hf-generate-compiled", profiler.hf_compiled, least_s=90)
    profiler.part("parity", profiler.parity)
    print(f"gpu_profile: written {out_dir / 'gpu-profile.json'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
