"""HF generate()'s fastest configuration as a peer (decoding/eval/bench/hf_fast.py): the config it
builds, the eager static cache on a CPU with the reason recorded, and a compile failure that is
recorded once and then run eagerly, on the tiny random target."""

from __future__ import annotations

import argparse
import json

from decoding.cli import main
from decoding.eval.bench import hf_fast
from decoding.eval.bench.hf_peer import run_hf
from decoding.eval.bench.variants import Variant, build_variants
from decoding.lm.models import load_model
from decoding.rules.warp import SamplingConfig

COMPILED = Variant(hf_fast.VARIANT_KEY, "hf", hf_fast.VARIANT_METHOD)


def _args(tokens=6):
    return argparse.Namespace(sampling=SamplingConfig(0.0), max_new_tokens=tokens, chat=True, seed=0,
                              hf_cache_len=64)


def test_the_config_is_a_static_cache_with_the_step_compiled_in_reduce_overhead():
    from transformers import GenerationConfig

    base = GenerationConfig(max_new_tokens=5, do_sample=False)
    fast = hf_fast.fast_generation_config(base, 123, True)
    assert fast.cache_implementation == "static" and fast.max_cache_len == 123
    assert fast.compile_config.mode == "reduce-overhead" and not fast.disable_compile
    eager = hf_fast.fast_generation_config(base, 123, False)
    assert eager.cache_implementation == "static" and eager.disable_compile and eager.compile_config is None
    assert base.cache_implementation is None  # the base config is left as it was


def test_the_variant_is_built_only_when_asked():
    keys = [v.key for v in build_variants(["autoregressive"], [4], hf=False, hf_compiled=True)]
    assert keys == ["autoregressive", "hf-generate-compiled"]
    assert "hf-generate-compiled" not in [v.key for v in build_variants(["autoregressive"], [4], hf=True)]


def test_on_a_cpu_the_static_cache_runs_eagerly_with_the_reason_and_the_same_tokens(tiny_target_dir):
    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    ids = target.encode_prompt("abc abc", True)
    compiled = run_hf(COMPILED, target, None, ids, _args(), timing=True)
    plain = run_hf(Variant("hf-generate", "hf", "generate"), target, None, ids, _args(), timing=True)
    assert compiled.token_ids == plain.token_ids and len(compiled.token_ids) == 6
    status = hf_fast.fast_peer_status(target.model)
    assert status["compiled"] is False and status["compile_asked"] is False and status["compiled_calls"] == 0
    assert "CUDA only" in status["eager_why"] and status["max_cache_len"] == 64


def test_a_compile_failure_is_recorded_once_and_the_peer_runs_eagerly(tiny_target_dir, monkeypatch):
    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    monkeypatch.setattr(hf_fast, "compiles_on", lambda device_type: True)  # as on CUDA
    real = target.model.generate
    compiling = []

    def generate(ids, generation_config, **kwargs):
        if not generation_config.disable_compile:
            compiling.append(1)
            raise RuntimeError("inductor: no C compiler\nmore lines")
        return real(ids, generation_config=generation_config, **kwargs)

    monkeypatch.setattr(target.model, "generate", generate)
    ids = target.encode_prompt("abc", True)
    first = run_hf(COMPILED, target, None, ids, _args(), timing=True)
    second = run_hf(COMPILED, target, None, ids, _args(), timing=True)
    assert len(first.token_ids) == len(second.token_ids) == 6
    assert compiling == [1]  # tried once, never again
    status = hf_fast.fast_peer_status(target.model)
    assert status["error"] == "RuntimeError: inductor: no C compiler"
    assert status["compiled"] is False and "torch.compile failed" in status["eager_why"]


def test_a_step_that_transformers_does_not_compile_is_said_so(tiny_target_dir, monkeypatch):
    target = load_model(str(tiny_target_dir), device="cpu", dtype="float32")
    monkeypatch.setattr(hf_fast, "compiles_on", lambda device_type: True)  # asked, but HF's criteria say cpu: no
    run_hf(COMPILED, target, None, target.encode_prompt("abc", True), _args(), timing=True)
    status = hf_fast.fast_peer_status(target.model)
    assert status["compiled"] is False and "did not compile" in status["eager_why"]


def test_bench_runs_the_compiled_peer_beside_ours(tmp_path, tiny_target_dir):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "abc abc", "category": "qa"}\n{"prompt": "hello", "category": "rag"}\n')
    out = tmp_path / "out"
    argv = ["bench", "--prompts", str(prompts), "--target", str(tiny_target_dir), "--methods", "autoregressive",
            "--dtype", "float32", "--max-new-tokens", "6", "--repeats", "1", "--warmup", "1", "--no-memory",
            "--no-hf", "--hf-compiled", "--no-quality", "--out", str(out)]
    assert main(argv) == 0
    result = json.loads((out / "bench.json").read_text())
    assert list(result["methods"]) == ["autoregressive", "hf-generate-compiled"]
    assert result["greedy_equal_to_autoregressive"]["hf-generate-compiled"] == "2/2"
    assert set(result["categories"]) == {"qa", "rag"}
