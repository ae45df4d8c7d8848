"""Mentored decoding as a method (`decoding/methods/mentored.py`): D = 0 reproduces speculative decoding,
the trace's fields, settings validation."""

import pytest


def _gen(pair, method, sampling, **extra):
    from decoding.run.runner import generate
    from decoding.methods.base import RunConfig

    target, draft = pair
    config = RunConfig(method=method, max_new_tokens=16, sampling=sampling, gamma=3, seed=5, stop_at_eos=False,
                       extra=extra)
    return generate(target, draft, "the cat sat on", config)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_engine_d_zero_reproduces_speculative(tiny_pair, temperature):
    from decoding.rules.warp import SamplingConfig

    sampling = SamplingConfig(temperature, top_k=10)
    rec_m, sum_m = _gen(tiny_pair, "mentored", sampling, kl_bound=0.0)
    rec_s, sum_s = _gen(tiny_pair, "speculative", sampling)
    assert sum_m.token_ids == sum_s.token_ids
    assert [d.coin for r in rec_m for d in r.draft] == [d.coin for r in rec_s for d in r.draft]
    assert sum_m.target_perplexity == pytest.approx(sum_s.target_perplexity)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_engine_trace_fields(tiny_pair, temperature):
    from decoding.run.trace_file import load_trace_lines
    from decoding.rules.warp import SamplingConfig
    import json

    records, summary = _gen(tiny_pair, "mentored", SamplingConfig(temperature), kl_bound=0.5)
    assert len(summary.token_ids) == 16 and summary.target_perplexity >= 1.0
    seen = 0
    for r in records:
        m = r.extra["mentored"]
        assert m["kl_bound"] == 0.5
        examined = [d for d in r.draft if d.accepted is not None]
        assert [x["position"] for x in m["positions"]] == [d.position for d in examined]
        for d, x in zip(examined, m["positions"]):
            seen += 1
            assert d.accepted == (d.coin <= d.threshold) and x["threshold"] == d.threshold
            assert x["threshold"] >= x["strict_threshold"] - 1e-7
            assert x["alpha"] >= x["strict_alpha"] - 1e-6
            assert x["kl_to_target"] <= 0.5 + 1e-9
            assert x["rule"] in ("strict-pass", "within-bound", "search")
            assert x["output_top"] and abs(sum(c["output"] for c in x["output_top"])) <= 1 + 1e-6
    assert seen > 0
    lines = [json.dumps(r.to_dict()) for r in records] + [json.dumps(summary.to_dict())]
    back, _ = load_trace_lines(lines)
    assert [r.to_dict() for r in back] == [r.to_dict() for r in records]


def test_engine_validation(tiny_pair):
    from decoding.run.runner import decode
    from decoding.methods.base import RunConfig

    target, draft = tiny_pair
    with pytest.raises(ValueError, match="KL bound"):
        decode(target, draft, [5, 6], RunConfig(method="mentored", extra={"kl_bound": -0.1}))
    with pytest.raises(ValueError, match="lenience"):
        decode(target, draft, [5, 6], RunConfig(method="mentored", lenience=0.5, extra={"kl_bound": 0.1}))
