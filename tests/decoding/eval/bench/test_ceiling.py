"""The replay of a fixed greedy output under drafting rules (decoding/eval/bench/ceiling.py), on hand-written
sequences."""

import json

import pytest

from decoding.eval.bench import ceiling as cl


def flat_cost(ms: float = 10.0) -> cl.VerifyCost:
    return cl.VerifyCost({100: {1: ms, 64: ms}})


def test_verify_cost_interpolates_in_size_and_context(tmp_path):
    cost = cl.VerifyCost({200: {1: 20.0, 5: 24.0}, 1000: {1: 30.0, 5: 38.0}})
    assert cost.ms(1, 200) == 20.0
    assert cost.ms(3, 200) == pytest.approx(22.0)
    assert cost.ms(3, 1000) == pytest.approx(34.0)
    assert cost.ms(3, 600) == pytest.approx(28.0)  # halfway in both
    assert cost.ms(9, 50) == 24.0 and cost.ms(1, 5000) == 30.0  # clamped outside
    path = tmp_path / "v.json"
    path.write_text(json.dumps({"context": 200, "rows": {"bfloat16": {"ms": {"1": 20.0, "5": 24.0}}}}))
    assert cl.VerifyCost.from_files([path], "bfloat16").ms(3, 700) == pytest.approx(22.0)
    with pytest.raises(ValueError, match="no float32 row"):
        cl.VerifyCost.from_files([path], "float32")
    with pytest.raises(ValueError, match="one-token pass"):
        cl.VerifyCost({100: {5: 1.0}})


def test_run_length_never_reads_the_unknown_future():
    seq = [7, 7, 7, 7]
    assert cl.run_length(seq, 0, 1) == 1  # the copy may read position 0 only: position 1 is not known yet
    assert cl.run_length([1, 2, 3, 1, 2, 3], 0, 3) == 3
    assert cl.run_length([1, 2, 3, 1, 2, 9], 0, 3) == 2
    assert cl.run_length([1, 2, 3, 1, 2, 3], 0, 3, cap=1) == 1


# 5 8 9 | 5 6 7 | 5 -> truth 6 7: the most recent 5 (followed by 6 7) is right, the first (8 9) wrong
SEQ = [5, 8, 9, 5, 6, 7, 4, 5, 6, 7]


def test_rules_on_a_known_sequence():
    t = 7  # last committed token: the third 5
    assert cl.occurrences(SEQ, t) == [4, 1]
    assert cl.lookup_rule(4)(SEQ, t) == (2, 4)  # copies 6 7 4 5, 2 accepted (the output ends)
    assert cl.lookup_rule(8)(SEQ, t) == (2, 4)  # only 4 tokens follow the occurrence so far
    assert cl.oracle_gate(4)(SEQ, t) == (2, 4)
    assert cl.oracle_length(SEQ, t) == (2, 2)
    assert cl.oracle_choice(4)(SEQ, t) == (2, 4)
    assert cl.oracle_copy(SEQ, t) == (2, 2)
    # at t = 3 (the second 5) lookup copies 8 9 5: wrong; the gate proposes nothing
    assert cl.lookup_rule(4)(SEQ, 3) == (0, 3)
    assert cl.oracle_gate(4)(SEQ, 3) == (0, 0)
    assert cl.oracle_copy(SEQ, 3) == (0, 0)


def test_copy_tree_counts_shared_prefixes_once():
    # two earlier 1s, continuations 2 3 and 2 4; truth after the last 1 is 2 4
    seq = [1, 2, 3, 0, 1, 2, 4, 0, 1, 2, 4]
    accepted, nodes = cl.copy_tree(2, 2)(seq, 8)
    assert accepted == 2 and nodes == 3  # paths (2,4) and (2,3) share the node 2
    assert cl.copy_tree(1, 2)(seq, 8) == (2, 2)  # the most recent occurrence alone


def test_replay_counts_tokens_iterations_and_time():
    seq = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4]  # prompt 1 2 3 4; the output repeats it
    out = cl.replay(seq, 4, cl.oracle_copy, flat_cost())
    # t=4 (the prefill emitted the first 1): the copy 2 3 4 1 is all that is known, all accepted
    # (5 tokens); t=9: the copy 3 4 ..., 1 accepted before the output ends (2 tokens)
    assert out.tokens == 7 and out.iterations == 2
    assert out.autoregressive_ms == 70.0 and out.rule_ms == 20.0
    assert out.speedup == 3.5 and out.tokens_per_iteration == 3.5
    plain = cl.replay(seq, 4, None, flat_cost())
    assert plain.speedup == 1.0 and plain.iterations == 7


def test_model_in_expectation_pays_only_when_it_should():
    cost = cl.VerifyCost({100: {1: 10.0, 2: 12.0, 9: 20.0}})
    assert cl.ModelDraft(0.0, 0.1).ms_per_token(cost, 100) == 10.0  # gamma 0: a plain step
    good = cl.ModelDraft(0.8, 0.05).ms_per_token(cost, 100)
    # best at gamma 5: (1 - 0.8^6) / 0.2 = 3.6893 tokens for a 6-token pass (12 + 8 * 4/7 ms) + 5 draft steps
    # (2.5 ms); gamma 4 (3.3616 tokens, 12 + 8 * 3/7 + 2 ms) is a little slower
    assert good == pytest.approx((12 + 8 * 4 / 7 + 5 * 0.5) / 3.68928)
    assert good < (12 + 8 * 3 / 7 + 4 * 0.5) / 3.3616
    seq = [9, 8, 1, 2, 3, 4, 5]
    with_model = cl.replay(seq, 2, cl.oracle_copy, cost, cl.ModelDraft(0.8, 0.05))
    assert with_model.rule_ms == pytest.approx(4 * good)  # nothing to copy: every token the model's


def test_prefill_arithmetic():
    assert cl.with_prefill(2.0, 0.0) == 2.0
    assert cl.with_prefill(2.0, 0.5) == pytest.approx(1 / (0.5 + 0.25))
    need = cl.needed_decode_speedup(1.7, 0.258)
    assert cl.with_prefill(need, 0.258) == pytest.approx(1.7)
    assert cl.needed_decode_speedup(1.7, 0.7) is None  # the prefill alone takes more than 1/1.7


def test_markdown_table_names_categories_and_the_needed_speedup():
    result = {"categories": ["summarization", "rag"], "prompts": 16,
              "rows": [{"rule": "oracle copy", "overall": 1.66,
                        "categories": {"summarization": {"whole_run": 1.6}, "rag": {"whole_run": 1.72}}}],
              "needed_after_prefill_for_1_7x": {"summarization": 2.25, "rag": None}}
    text = cl.markdown(result, {"rag": "RAG"})
    assert "| rule | all 16 | summarization | RAG |" in text
    assert "| oracle copy | **1.66x** | 1.60x | 1.72x |" in text
    assert "summarization 2.25x, RAG: unreachable" in text


def test_script_rejects_bad_arguments_before_loading_anything(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[4] / "experiments" / "copy_ceiling.py"
    spec = importlib.util.spec_from_file_location("copy_ceiling", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--alphas", "0.5,1.2"]) == 2
    assert "--alphas must be comma-separated numbers in [0, 1)" in capsys.readouterr().err
    assert script.main(["--bench", "no-such-bench.json"]) == 2
    assert "no-such-bench.json" in capsys.readouterr().err
    assert script.main(["--max-new-tokens", "1"]) == 2


def test_hybrid_copy_rule_prefers_a_long_repeat_then_the_corpus():
    from decoding.drafters.corpus import TextCorpus

    corpus = TextCorpus([[7, 8, 9, 4, 4]])
    seq = [1, 2, 3, 0, 1, 2, 3, 7, 8, 9, 4, 4]  # t=6: 1 2 3 repeats; t=9: 7 8 9 is in the corpus
    rule = cl.hybrid_copy_rule(4, corpus)
    assert rule(seq, 6) == (0, 4)  # copies 0 1 2 3 after the 3-token match: wrong at once
    assert rule(seq, 9) == (2, 2)  # the corpus's 4 4, both right
    assert cl.hybrid_copy_rule(4)(seq, 9) == (0, 0)  # no corpus, no earlier 9: nothing to copy
    seq2 = [5, 6, 0, 6, 1]  # t=3: only a 1-token match of 6
    assert cl.hybrid_copy_rule(4)(seq2, 3) == (0, 2)
    assert cl.hybrid_copy_rule(4, short_copies=False)(seq2, 3) == (0, 0)


def test_copy_length_grows_with_the_match():
    tokens = cl.by_match_length({2: 4, 8: 12})
    assert [tokens(m) for m in (1, 2, 7, 8, 30)] == [4, 4, 4, 12, 12]  # below the first step: its length
    # 1 2 3 4 5 6 | 9 | 1 2 3 4 5 6: at t=12 the suffix 1..6 matches 6 tokens, the copy reads 9 1 2 ...
    seq = [1, 2, 3, 4, 5, 6, 9, 1, 2, 3, 4, 5, 6, 9, 1, 2, 3]
    assert cl.hybrid_copy_rule(cl.by_match_length({2: 2, 6: 5}), short_copies=False)(seq, 12) == (4, 5)
    assert cl.hybrid_copy_rule(cl.by_match_length({2: 2, 7: 5}), short_copies=False)(seq, 12) == (2, 2)
    assert cl.hybrid_copy_rule(3, short_copies=False)(seq, 12) == (3, 3)  # a plain length still works
    # the oracle length after a long match only: the 1-token match at t=7 runs 7 tokens, but not with min_match=2
    assert cl.oracle_length(seq, 7) == (7, 7) and cl.oracle_length(seq, 7, min_match=2) == (0, 0)
    assert cl.oracle_length(seq, 12, min_match=2) == (4, 4)
    assert cl.oracle_length(seq, 12, min_match=7) == (0, 0)


def test_runs_by_match_groups_positions_by_the_match_length():
    seq = [1, 2, 3, 4, 1, 2, 3, 5]  # prompt 1 2 3 4; output 1 2 3 5
    rows = cl.runs_by_match([(seq, 4)], [1, 2])
    # t=4 (1: 1-token match, copy 2 3 4 -> 2 right), t=5 (1 2: 2-token match, copy 3 4 -> 1 right),
    # t=6 (1 2 3: 3-token match, copy 4 -> wrong)
    assert rows == [{"shortest_match": 1, "positions": 1, "mean_run": 2.0, "share_first_right": 1.0},
                    {"shortest_match": 2, "positions": 2, "mean_run": 0.5, "share_first_right": 0.5}]
    text = cl.markdown({"categories": [], "prompts": 1, "rows": [], "needed_after_prefill_for_1_7x": {},
                        "runs_by_match": rows})
    assert "| 1 | 1 | 1.00 | 2.00 |" in text and "| 2+ | 2 | 0.50 | 0.50 |" in text


def test_whole_runs_weights_categories_by_their_autoregressive_seconds():
    from types import SimpleNamespace

    from decoding.eval.bench.ceiling import whole_runs

    bench = {"categories": {"a": {"autoregressive": {"first_pass_share": 0.0, "seconds": 10.0}},
                            "b": {"autoregressive": {"first_pass_share": 0.5, "seconds": 30.0}}}}
    parts = {"a": SimpleNamespace(speedup=2.0, tokens_per_iteration=2.0),
             "b": SimpleNamespace(speedup=3.0, tokens_per_iteration=3.0)}
    out = whole_runs(parts, bench)
    assert out["categories"]["a"]["whole_run"] == pytest.approx(2.0)
    assert out["categories"]["b"]["whole_run"] == pytest.approx(1 / (0.5 + 0.5 / 3))  # 1.5x: the prefill is paid
    assert out["categories"]["b"]["after_prefill"] == 3.0
    assert out["overall"] == pytest.approx(40 / (10 / 2.0 + 30 / 1.5))  # 1.6x
