"""PPD (Chen et al.): greedy output identical to greedy autoregressive decoding, the tree forward pass
and KV compaction against fresh forward passes, typical acceptance, the trace, the hardware-aware
tree size and a training smoke test, on the tiny random models (plus one short run on the real
target)."""

import json

import pytest

from decoding.methods.base import RunConfig
from decoding.methods.registry import METHODS
from decoding.rules.warp import SamplingConfig
from decoding.trace.record import IterationRecord

PROMPT = "the quick brown fox"


def run(target, method, prompt_ids, n=40, temperature=0.0, seed=0, **extra):
    config = RunConfig(method=method, max_new_tokens=n, sampling=SamplingConfig(temperature), seed=seed,
                       stop_at_eos=False, extra=extra)
    return list(METHODS[method](target, None, prompt_ids, config))


def tokens(records):
    return [t.token_id for r in records for t in r.emitted]


@pytest.fixture(scope="module")
def tiny(tiny_pair):
    return tiny_pair[0]


@pytest.mark.parametrize("size, m, ept", [(1, 3, 1), (4, 1, 1), (12, 3, 1), (24, 3, 2), (40, 4, 1)])
def test_greedy_ppd_equals_autoregressive(tiny, size, m, ept):
    for prompt in (PROMPT, "hello, world! 12"):
        ids = tiny.encode_prompt(prompt, False)
        ar = tokens(run(tiny, "autoregressive", ids))
        records = run(tiny, "ppd", ids, tree_size=size, prompt_tokens=m, ept=ept)
        assert tokens(records) == ar
        assert records[-1].target_calls == len(records)  # one forward pass per step
        assert all(r.extra["ppd"]["tree_size"] == size for r in records)


def test_sampling_is_typical_acceptance_labelled_lossy_and_seeded(tiny):
    ids = tiny.encode_prompt(PROMPT, False)
    a = run(tiny, "ppd", ids, n=24, temperature=1.0, seed=3, tree_size=8)
    b = run(tiny, "ppd", ids, n=24, temperature=1.0, seed=3, tree_size=8)
    assert tokens(a) == tokens(b) and len(tokens(a)) == 24
    assert all(r.extra["ppd"]["verification"] == "typical acceptance (lossy)" for r in a)
    assert run(tiny, "ppd", ids, n=4, tree_size=8)[0].extra["ppd"]["verification"] == "exact match (lossless)"


def test_trace_carries_the_tree(tiny):
    ids = tiny.encode_prompt(PROMPT, False)
    records = run(tiny, "ppd", ids, n=30, tree_size=12)
    assert records[0].extra["ppd"]["state"] == 0 and records[0].extra["ppd"]["trained_embeddings"] is False
    for r in records:
        kinds = [n.kind for n in r.tree]
        assert kinds[0] == "root" and set(kinds) <= {"root", "candidate", "prompt"} and "prompt" in kinds
        assert all(n.index == i and n.parent < n.index for i, n in enumerate(r.tree))
        accepted = [n for n in r.tree if n.kind == "candidate" and n.accepted]
        assert len(accepted) == r.accepted_length
        if not r.finished:  # the last record's tokens may be cut at max-new-tokens
            assert len(r.emitted) == r.accepted_length + 1
            assert [n.token_id for n in sorted(accepted, key=lambda n: n.depth)] == [t.token_id for t in r.emitted[:-1]]
        n_cand = kinds.count("candidate")
        assert n_cand == r.extra["ppd"]["n_candidates"]
        assert n_cand + r.extra["ppd"]["n_prompt_inputs"] <= 12
        back = IterationRecord.from_dict(json.loads(json.dumps(r.to_dict())))
        assert back.tree == r.tree
    assert "target_logprobs" in records[0].extra


def test_cli_generate_ppd(tiny_target_dir, capsys):
    from decoding.cli import main

    base = ["generate", "--prompt", PROMPT, "--target", str(tiny_target_dir), "--temperature", "0",
            "--max-new-tokens", "12", "--ignore-eos", "--json"]
    assert main(base + ["--method", "ppd", "--tree-size", "6"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[-1]["summary"] and lines[-1]["method"] == "ppd"
    assert lines[0]["extra"]["ppd"]["tree_size"] == 6
    assert main(base + ["--method", "autoregressive"]) == 0
    ar = [json.loads(x) for x in capsys.readouterr().out.splitlines()][-1]
    assert ar["token_ids"] == lines[-1]["token_ids"]
    assert main(base + ["--method", "ppd", "--tree-size", "-1"]) == 2
    assert main(base + ["--method", "ppd", "--lenience", "0.5"]) == 2


@pytest.mark.slow
def test_greedy_ppd_equals_autoregressive_on_default_target(embedded_target):
    target = embedded_target
    ids = target.encode_prompt("Explain why the sky is blue in two sentences.", True)
    ar = tokens(run(target, "autoregressive", ids, n=16))
    records = run(target, "ppd", ids, n=16, tree_size=8)
    assert tokens(records) == ar
