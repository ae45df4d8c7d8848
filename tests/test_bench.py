"""The benchmark end to end on the tiny models (1 repeat: it checks the plumbing, never timings),
the HF transformers peer on the tiny pair, and the gamma schedules (auto, heuristic)."""

import json

import pytest
import torch

from decoding.eval.bench import Variant, measure_memory, parse_gammas
from decoding.cli import main
from decoding.drafters.gamma_policy import GammaPolicy
from decoding.run.runner import decode
from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig

GREEDY = SamplingConfig(temperature=0.0)
PROMPTS = ['{"prompt": "hello world, the cat sat"}', '{"prompt": "abc abc abc abc"}']


def _prompt_file(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(PROMPTS) + "\n")
    return path


def _bench(tmp_path, target_dir, draft, gamma, out_name, capsys):
    out = tmp_path / out_name
    # float32: the reference precision of the greedy-equality checks below (bfloat16 verify passes and
    # one-token steps round differently, so near-ties of tiny random models may go either way there)
    argv = ["bench", "--prompts", str(_prompt_file(tmp_path)), "--target", str(target_dir), "--draft", str(draft),
            "--dtype", "float32", "--gamma", gamma, "--max-new-tokens", "8", "--repeats", "1", "--warmup", "1", "--no-memory",
            "--out", str(out), "--json"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    saved = json.loads((out / "bench.json").read_text())
    assert printed["speedup"] == saved["speedup"]
    return out, saved


def test_bench_end_to_end_with_hf_peer(tmp_path, tiny_target_dir, tiny_draft_dir, capsys):
    out, result = _bench(tmp_path, tiny_target_dir, tiny_draft_dir, "2,auto,heuristic", "draft-model", capsys)
    rows = result["methods"]
    assert set(rows) == {"autoregressive", "speculative-g2", "speculative-auto", "speculative-heuristic",
                         "hf-generate", "hf-assisted-default", "hf-assisted-g2"}
    # documented top-level keys
    for key in ("speedup", "hf_assisted_speedup", "hf_generate_tokens_per_second", "hf_assisted_speedup_pinned",
                "ratios", "machine", "date", "settings", "models", "energy", "goals", "charts"):
        assert key in result, key
    for key in ("cpu", "cores", "torch_threads", "versions"):
        assert key in result["machine"]
    assert result["machine"]["versions"]["transformers"]
    assert result["speedup"]["autoregressive"] == pytest.approx(1.0)
    assert result["hf_generate_tokens_per_second"] > 0
    assert result["hf_assisted_speedup"] > 0
    assert "autoregressive_vs_hf_generate" in result["ratios"]
    assert "speculative-g2_speedup_vs_hf_assisted-g2_speedup" in result["ratios"]
    # per-method figures
    for key, row in rows.items():
        assert row["tokens"] == 2 * 8, key  # fixed token counts: EOS ignored in timing runs
        for field in ("tokens_per_second", "speedup", "tokens_per_target_call", "mean_accepted", "alpha", "c",
                      "theory_speedup", "cost_model_speedup", "target_perplexity", "memory", "energy_joules",
                      "energy_note", "weight_bytes_per_token_proxy", "slower_than_autoregressive"):
            assert field in row, (key, field)
        assert row["target_perplexity"] is not None and row["target_perplexity"] > 1
        assert row["weight_bytes_per_token_proxy"] > 0
    spec = rows["speculative-g2"]
    assert 0 <= spec["alpha"] <= 1 and spec["c"] > 0 and spec["theory_speedup"] > 0
    assert rows["hf-assisted-g2"]["draft_calls"] > 0
    # greedy: every lossless variant, ours and HF's, reproduces our autoregressive output
    assert all(v == "2/2" for v in result["greedy_equal_to_autoregressive"].values()), result["greedy_equal_to_autoregressive"]
    # reports
    md = (out / "bench.md").read_text()
    assert "| variant |" in md and "speculative-auto" in md
    assert (out / "bench.html").stat().st_size > 1000
    assert result["charts"]["png"] or result["charts"]["png_note"]


def test_bench_prompt_lookup_hf_peer(tmp_path, tiny_target_dir, capsys):
    _, result = _bench(tmp_path, tiny_target_dir, "prompt-lookup", "3", "lookup", capsys)
    assert result["models"]["draft"] == "prompt-lookup"
    assert set(result["methods"]) == {"autoregressive", "speculative-g3", "hf-generate", "hf-assisted-default",
                                      "hf-assisted-g3"}
    assert all(v == "2/2" for v in result["greedy_equal_to_autoregressive"].values())


def test_memory_is_measured_in_a_child_process(tiny_target_dir):
    from types import SimpleNamespace

    args = SimpleNamespace(target=str(tiny_target_dir), draft_spec="prompt-lookup", device="cpu", dtype=None,
                           max_new_tokens=4, chat=False, sampling=GREEDY, seed=0)
    out = measure_memory(Variant("autoregressive", "ours", "autoregressive"), args, "hello world")
    assert out["peak_rss_mb"] > 10, out
    assert out["run_peak_rss_mb"] is None or out["run_peak_rss_mb"] <= out["peak_rss_mb"] + 1


def test_parse_gammas():
    assert parse_gammas("1, 4,auto,heuristic") == [1, 4, "auto", "heuristic"]
    with pytest.raises(ValueError):
        parse_gammas("0")
    with pytest.raises(ValueError):
        parse_gammas("fast")


@pytest.mark.parametrize("schedule", ["auto", "heuristic"])
@pytest.mark.parametrize("draft_kind", ["model", "prompt-lookup"])
def test_gamma_schedules_keep_greedy_output(tiny_pair, schedule, draft_kind):
    target, draft = tiny_pair
    draft = draft if draft_kind == "model" else "prompt-lookup"
    ids = target.encode_prompt("abc abc abc hello world, the cat", chat=False)
    base = RunConfig(method="autoregressive", max_new_tokens=40, sampling=GREEDY, stop_at_eos=False)
    expected = [t.token_id for r in decode(target, None, ids, base) for t in r.emitted]
    config = RunConfig(method="speculative", max_new_tokens=40, sampling=GREEDY, gamma=3, stop_at_eos=False,
                       extra={"gamma_schedule": schedule})
    records = list(decode(target, draft, ids, config))
    assert [t.token_id for r in records for t in r.emitted] == expected
    assert all("gamma_policy" in r.extra for r in records)
    if schedule == "heuristic" and draft_kind == "model":
        assert len({r.gamma for r in records}) > 1  # the schedule moved


def test_auto_policy_choices():
    # drafting that costs as much as the target and never matches: gamma 0 (plain decoding)
    bad = GammaPolicy("auto", 4, probe_every=100)
    for fed in (1, 2, 5, 1, 3):
        bad.update(fed - 1, fed - 1, 0, [0.0] * min(1, fed - 1), 0.02 * (fed - 1), 0.02 + 0.01 * (fed - 1), fed, False)
    assert bad.next_gamma() == 0
    # cheap drafts that nearly always match, verify cost almost flat: a long draft
    good = GammaPolicy("auto", 2, max_gamma=16)
    for fed in (3, 2, 4, 3, 5):
        good.update(fed - 1, fed - 1, fed - 1, [0.99] * (fed - 1), 1e-5 * (fed - 1), 0.02 + 0.0005 * (fed - 1), fed, False)
    assert good.next_gamma() >= 6
    # while at gamma 0 a one-token probe is drafted every probe_every iterations
    probe = GammaPolicy("auto", 4, probe_every=3)
    probe.update(4, 4, 0, [0.0], 0.08, 0.06, 5, False)
    probe.update(1, 1, 0, [0.0], 0.02, 0.021, 2, False)
    chosen = [probe.next_gamma() for _ in range(6)]
    assert chosen.count(1) == 2 and chosen.count(0) == 4


def test_heuristic_policy_matches_hf_rule():
    p = GammaPolicy("heuristic", 5)
    p.update(5, 5, 5, [], 0, 0, 6, False)
    assert p.next_gamma() == 7  # +2 after a full accept
    p.update(7, 7, 3, [], 0, 0, 8, False)
    assert p.next_gamma() == 6  # -1 otherwise
    for _ in range(10):
        p.update(1, 1, 0, [], 0, 0, 2, False)
    assert p.next_gamma() == 1  # never below 1


def test_auto_draft_stopper_threshold_and_rule():
    fixed = GammaPolicy("fixed", 4)
    assert fixed.draft_stopper() is None and fixed.stop_threshold() is None
    p = GammaPolicy("auto", 4, prior_alpha=0.5, prior_weight=1.0)
    assert p.draft_stopper() is None  # nothing measured yet
    # draft step 2 ms per token; single-token pass 20 ms; multi-token passes 30 ms + 1 ms per extra token
    p.update(0, 0, 0, [], 0.0, 0.020, 1, False)
    for n in (2, 3, 5):
        p.update(n - 1, n - 1, 0, [], 0.002 * (n - 1), 0.030 + 0.001 * (n - 2), n, False)
    assert p.stop_threshold() == pytest.approx((0.002 + 0.001) / 0.020)  # 0.15
    keep = p.draft_stopper()
    a = p.alpha
    # continue while alpha * prod(confidences) >= 0.15
    assert keep(0, 0.9) == (a * 0.9 >= 0.15)
    keep = p.draft_stopper()
    assert keep(0, 0.5) is (a * 0.5 >= 0.15)
    assert keep(1, 0.5) is (a * 0.25 >= 0.15)


def test_model_drafter_stops_when_told(tiny_pair):
    from decoding.drafters.model import ModelDrafter

    target, draft = tiny_pair
    drafter = ModelDrafter(draft.model, draft.device, min(target.vocab_size, draft.vocab_size), draft.name)
    seq = target.encode_prompt("hello world", chat=False)
    seen = []

    def stop_after_two(i, confidence):
        seen.append(confidence)
        return i < 1

    proposal = drafter.propose(seq, 6, GREEDY, torch.Generator().manual_seed(0), stop_after_two)
    assert len(proposal.tokens) == 2 and proposal.q_rows.shape[0] == 2
    assert len(seen) == 2 and all(0.0 < c <= 1.0 for c in seen)
    drafter.rollback(len(seq) - 1)
    assert len(drafter.propose(seq, 6, GREEDY, torch.Generator().manual_seed(0)).tokens) == 6


def test_bench_per_category_with_two_drafters(tmp_path, tiny_target_dir, tiny_draft_dir, capsys):
    """A categorised prompt file and two drafters in one run: every category has every variant, the
    overall figures follow from the categories', and HF's peer of each drafter is in the table."""
    prompts = tmp_path / "cats.jsonl"
    prompts.write_text("\n".join(json.dumps(r) for r in [
        {"prompt": "hello world, the cat sat", "category": "chat"},
        {"prompt": "abc abc abc abc", "category": "copy"},
        {"prompt": "the cat sat on the cat", "category": "copy"}]) + "\n")
    out = tmp_path / "cat-run"  # a hybrid beside its own model: HF's peer of the hybrid is not run twice
    argv = ["bench", "--prompts", str(prompts), "--target", str(tiny_target_dir), "--dtype", "float32",
            "--draft", f"{tiny_draft_dir},prompt-lookup,hybrid:{tiny_draft_dir}", "--gamma", "2", "--max-new-tokens", "6",
            "--repeats", "1", "--warmup", "0", "--no-memory", "--no-quality", "--out", str(out), "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    label = tiny_draft_dir.name
    rows = result["methods"]
    # HF has no hybrid: its peer would be the same model alone, already run as hf-assisted-<label>
    assert set(rows) == {"autoregressive", f"speculative-{label}-g2", "speculative-prompt-lookup-g2",
                         f"speculative-hybrid-{label}-g2", "hf-generate",
                         f"hf-assisted-{label}-default", f"hf-assisted-{label}-g2",
                         "hf-assisted-prompt-lookup-default", "hf-assisted-prompt-lookup-g2"}
    # every run, ours and HF's, times its first target pass (the prompt's prefill) apart
    assert rows["autoregressive"]["speedup_after_first_pass"] == 1.0
    for key, row in rows.items():
        assert 0 < row["first_pass_share"] < 1 and row["speedup_after_first_pass"] > 0, key
        assert all(0 < cats_row[key]["first_pass_share"] < 1 for cats_row in result["categories"].values())
    cats = result["categories"]
    assert set(cats) == {"chat", "copy"} and all(set(block) == set(rows) for block in cats.values())
    assert cats["copy"]["autoregressive"]["prompts"] == 2 and cats["copy"]["autoregressive"]["speedup"] == 1.0
    for key, row in rows.items():
        tokens = sum(cats[c][key]["tokens"] for c in cats)
        seconds = sum(cats[c][key]["seconds"] for c in cats)
        calls = sum(cats[c][key]["target_calls"] for c in cats)
        assert tokens == row["tokens"] and seconds == pytest.approx(row["seconds"])
        assert row["tokens_per_target_call"] == pytest.approx(tokens / calls)
        ar = rows["autoregressive"]
        assert row["speedup"] == pytest.approx((tokens / seconds) / (ar["tokens"] / ar["seconds"]))
    assert result["models"]["dtype"] == "torch.float32"
    assert set(result["models"]["drafts"]) == {label, "prompt-lookup", f"hybrid-{label}"}
    assert set(result["hf_assisted_speedup_by_draft"]) == {label, "prompt-lookup"}
    assert "After the prompt's prefill" in (out / "bench.md").read_text()
    # greedy, float32, no quality runs: equality is read off the timing runs, and it holds
    assert result["greedy_equal_precision"] == "float32"
    assert all(v == "3/3" for v in result["greedy_equal_to_autoregressive"].values())
    assert "| variant | chat | copy | all |" in (out / "bench.md").read_text()
    # where each chain variant's iterations drafted from: they add up to its iterations after the prefill
    hybrid = f"speculative-hybrid-{label}-g2"
    assert "by_source" not in rows["autoregressive"] and "by_source" not in rows["hf-generate"]
    assert set(rows["speculative-prompt-lookup-g2"]["by_source"]) <= {"lookup", "lookup-short", "none"}
    by_source = rows[hybrid]["by_source"]
    assert sum(r["share"] for r in by_source.values()) == pytest.approx(1.0)
    iterations = sum(r["iterations"] for r in by_source.values())
    assert iterations == sum(r["iterations"] for c in cats.values() for r in c[hybrid]["by_source"].values())
    assert iterations == rows[hybrid]["target_calls"] - 3  # one target pass per iteration; 3 prefills left out
    emitted = sum(r["tokens_per_iteration"] * r["iterations"] for r in by_source.values())
    assert emitted <= rows[hybrid]["tokens"] - 3  # each prefill iteration emitted at least one token
    for r in by_source.values():
        assert r["accepted_per_iteration"] <= r["drafted_per_iteration"]
        assert r["tokens_per_iteration"] == pytest.approx(r["accepted_per_iteration"] + 1)
    assert f"Where {hybrid}'s iterations after the prefill drafted from" in (out / "bench.md").read_text()


def test_bench_tags_each_prompt_for_the_gallery(tmp_path, tiny_target_dir, tiny_draft_dir, capsys):
    prompts = tmp_path / "gallery.jsonl"
    prompts.write_text("\n".join(json.dumps(r) for r in [
        {"id": "g-1", "kind": "copy", "prompt": "abc abc abc abc"},
        {"id": "g-2", "kind": "chat", "prompt": "hello world, the cat sat"}]) + "\n")
    gallery = tmp_path / "gallery.json"
    argv = ["bench", "--prompts", str(prompts), "--target", str(tiny_target_dir), "--dtype", "float32",
            "--draft", f"{tiny_draft_dir},prompt-lookup", "--gamma", "2,4", "--max-new-tokens", "6", "--repeats", "1",
            "--warmup", "0", "--no-memory", "--no-quality", "--no-hf", "--out", str(tmp_path / "out"),
            "--gallery", str(gallery), "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    tags = json.loads(gallery.read_text())
    assert [t["id"] for t in tags] == ["g-1", "g-2"]
    for tag, prompt in zip(tags, result["per_prompt"]):
        assert tag["drafter"] in (tiny_draft_dir.name, "prompt-lookup") and tag["gamma"] in (2, 4)
        assert tag["precision"] == "float32" and tag["machine"] and tag["date"]
        best = max(v["speedup"] for k, v in prompt["variants"].items() if k.startswith("speculative"))
        assert tag["speedup"] == best and prompt["variants"][tag["variant"]]["tokens_per_call"] == tag["tokens_per_call"]


def test_two_rate_expected_tokens():
    from decoding.rules import theory

    assert theory.expected_tokens_two_rates(0.6, 0.6, 4) == pytest.approx(theory.expected_tokens_per_call(0.6, 4))
    assert theory.expected_tokens_two_rates(0.5, 1.0, 3) == pytest.approx(2.5)  # 1 + 0.5 * 3
    assert theory.expected_tokens_two_rates(0.2, 0.9, 0) == 1.0
    # the cost model with two rates: tokens per second of the pass times the target step
    assert theory.measured_improvement(0.5, 3, 0.001, 0.02, 0.025, alpha_next=1.0) == pytest.approx(2.5 * 0.02 / 0.028)
    assert theory.measured_improvement(0.6, 4, 0.001, 0.02, 0.025, alpha_next=0.6) == pytest.approx(
        theory.measured_improvement(0.6, 4, 0.001, 0.02, 0.025))


def test_auto_policy_weighs_each_source_by_its_own_estimates():
    from decoding.trace.source import MODEL_SOURCE, DraftSource

    p = GammaPolicy("auto", 4, max_gamma=16, prior_weight=0.5)
    copy = DraftSource("lookup", match_length=3, start=10, available=12)
    # verify passes: 20 ms for one token, 21 ms + 0.5 ms per extra token beyond two
    p.update(0, 0, 0, [], 0.0, 0.020, 1, False)
    for n in (2, 5, 9):
        p.update(n - 1, n - 1, 0, [], 0.0, 0.021 + 0.0005 * (n - 2), n, False, source="lookup-short")
    # copies after long matches: first token 60% right, once one is right the next nearly always is
    for _ in range(20):
        p.update(8, 8, 8, [1.0] * 9, 1e-5, 0.024, 9, False, source="lookup")
        p.update(8, 8, 0, [0.0], 1e-5, 0.024, 9, False, source="lookup")
        p.update(8, 8, 8, [1.0] * 9, 1e-5, 0.024, 9, False, source="lookup")
    # the model: 8 ms a token, a poor 15% match
    for _ in range(10):
        p.update(2, 2, 0, [0.15], 0.016, 0.021, 3, False, source="model")
    est = p.estimate("lookup")
    assert est.alpha_first == pytest.approx(2 / 3, abs=0.05) and est.alpha_next > 0.95
    source, gamma = p.choose([copy, MODEL_SOURCE])
    assert source == copy and gamma == 12  # a long copy, capped by what the context holds
    assert p.choose([MODEL_SOURCE]) == (MODEL_SOURCE, 0)  # the model alone does not pay: plain steps
    assert p.snapshot()["sources"]["lookup"]["alpha_next"] > 0.95
    fixed = GammaPolicy("fixed", 4)
    assert fixed.choose([copy, MODEL_SOURCE]) == (copy, 4) and fixed.choose([]) == (None, 0)


def test_bench_writes_its_figures_without_plotly(tmp_path, tiny_target_dir, capsys, monkeypatch):
    # The GPU check runs the benchmark on the Python it finds on a GPU machine, where plotly may be
    # missing (it was on the H100): the figures are still written, and the report says why no chart is.
    import sys

    for name in [m for m in sys.modules if m == "plotly" or m.startswith("plotly.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "plotly", None)  # `import plotly...` now raises ImportError
    out, result = _bench(tmp_path, tiny_target_dir, "prompt-lookup", "3", "bare", capsys)
    assert result["charts"]["html"] is None and "plotly is not installed" in result["charts"]["png_note"]
    assert not (out / "bench.html").exists()
    assert "Charts: none (charts not written: plotly is not installed" in (out / "bench.md").read_text()
    assert result["speedup"]["speculative-g3"] > 0


def test_speed_after_the_first_pass_leaves_the_prefill_out():
    from decoding.trace.metrics import RunCounts

    # 64 tokens in 5 s, of which the first pass (prefill + 1 token) took 1.85 s
    run = RunCounts(tokens=64, seconds=5.0, first_pass_seconds=1.85, first_pass_tokens=1)
    assert run.tokens_per_second_after_first_pass == pytest.approx(63 / 3.15)
    both = run + RunCounts(tokens=32, seconds=1.0, first_pass_seconds=0.2, first_pass_tokens=3)
    assert both.tokens_per_second_after_first_pass == pytest.approx((96 - 4) / (6.0 - 2.05))
    assert RunCounts(tokens=5, seconds=1.0).tokens_per_second_after_first_pass is None  # not timed


def test_bench_keeps_only_the_categories_asked_for(tmp_path, tiny_target_dir, capsys):
    prompts = tmp_path / "cats.jsonl"
    prompts.write_text("\n".join(json.dumps(r) for r in [
        {"prompt": "hello world, the cat sat", "category": "chat"},
        {"prompt": "abc abc abc abc", "category": "copy"},
        {"prompt": "the cat sat on the cat", "category": "copy"}]) + "\n")
    base = ["bench", "--prompts", str(prompts), "--target", str(tiny_target_dir), "--dtype", "float32",
            "--methods", "autoregressive", "--max-new-tokens", "2", "--repeats", "1", "--warmup", "0",
            "--no-memory", "--no-quality", "--no-hf", "--json"]
    assert main(base + ["--categories", "copy", "--out", str(tmp_path / "copy")]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result["categories"]) == {"copy"}
    assert result["categories"]["copy"]["autoregressive"]["prompts"] == 2
    assert main(base + ["--categories", "copy,poetry", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "no prompts of poetry" in err and "chat, copy" in err
