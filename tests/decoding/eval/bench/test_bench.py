"""The benchmark end to end on the tiny models (1 repeat: it checks the plumbing, never timings) and
the HF transformers peer on the tiny pair."""

from __future__ import annotations

import json

import pytest

from decoding.cli import main
from decoding.eval.bench import Variant, measure_memory, parse_gammas
from decoding.rules.warp import SamplingConfig

from _siblings import load_test_module

test_feature = load_test_module("decoding/drafters/test_feature.py")
feature_dir = test_feature.feature_dir
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
    # acceptance per draft position, per category and overall: the categories' counts add up to the overall ones
    for key in (f"speculative-{label}-g2", "speculative-prompt-lookup-g2", hybrid):
        row = rows[key]
        assert row["mean_acceptance_length"] == pytest.approx(1 + row["mean_accepted"])
        assert sum(row["acceptance_length_histogram"]) == sum(sum(c[key]["acceptance_length_histogram"])
                                                              for c in cats.values())
        for i in range(len(row["acceptance_per_position"])):
            drafted = sum((c[key]["position_drafted"] + [0] * 9)[i] for c in cats.values())
            accepted = sum((c[key]["position_accepted"] + [0] * 9)[i] for c in cats.values())
            assert row["position_drafted"][i] == drafted and row["position_accepted"][i] == accepted
            assert row["acceptance_per_position"][i] == pytest.approx(accepted / drafted)
        assert len(row["iid_acceptance"]) == len(row["acceptance_per_position"])
    assert rows["autoregressive"]["acceptance_per_position"] == []
    assert rows["hf-generate"]["mean_acceptance_length"] is None
    report = (out / "bench.md").read_text()
    assert "Acceptance per draft position, per prompt category" in report
    assert f"| {hybrid} | " in report.split("Acceptance per draft position")[1]


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


def test_bench_names_the_corpus_hybrid():
    from decoding.eval.bench.cli import draft_label

    assert draft_label("hybrid+corpus:feature") == "hybrid-corpus-feature"
    assert draft_label("hybrid+corpus") == "hybrid-corpus"
    assert draft_label("hybrid:feature") == "hybrid-feature"


def test_bench_runs_a_feature_draft_without_an_hf_peer(feature_dir, tiny_target_dir, tmp_path, capsys):
    import json

    from decoding.cli import main

    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "the cat sat on the cat", "category": "copy"}) + "\n")
    argv = ["bench", "--prompts", str(prompts), "--target", str(tiny_target_dir), "--dtype", "float32",
            "--draft", f"{feature_dir},hybrid:{feature_dir}", "--gamma", "2", "--max-new-tokens", "6",
            "--repeats", "1", "--warmup", "0", "--no-memory", "--no-quality", "--out", str(tmp_path / "b"), "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    label = feature_dir.name
    # HF's assisted generation cannot draft from the target's states: no HF assisted rows for either
    assert set(result["methods"]) == {"autoregressive", f"speculative-{label}-g2",
                                      f"speculative-hybrid-{label}-g2", "hf-generate"}
    assert result["models"]["drafts"][label]["params"] > 0
    assert all(v == "1/1" for v in result["greedy_equal_to_autoregressive"].values())


def _seeds_seen(monkeypatch) -> list:
    """(timing, seed) of every run the benchmark makes from now on (its run_variant spied on)."""
    from decoding.eval.bench import driver

    seen = []
    real = driver.run_variant

    def spy(v, target, draft, ids, args, timing, meter=None):
        seen.append((timing, args.seed))
        return real(v, target, draft, ids, args, timing, meter)

    monkeypatch.setattr(driver, "run_variant", spy)
    return seen


def test_sampled_repeats_draw_with_seeds_of_their_own(tmp_path, tiny_target_dir, capsys, monkeypatch):
    """At a temperature repeat r runs with seed + r (each repeat a new draw of every prompt's text); the
    warm-up and quality runs keep the seed; greedy runs keep it everywhere."""
    seen = _seeds_seen(monkeypatch)
    base = ["bench", "--prompts", str(_prompt_file(tmp_path)), "--target", str(tiny_target_dir), "--dtype", "float32",
            "--methods", "autoregressive", "--max-new-tokens", "2", "--repeats", "3", "--warmup", "1", "--seed", "5",
            "--no-memory", "--no-hf", "--json"]
    assert main(base + ["--temperature", "0.8", "--out", str(tmp_path / "sampled")]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["settings"]["repeat_seeds"] == [5, 6, 7] and result["settings"]["seed"] == 5
    # warm-up (seed 5), 3 repeats x 2 prompts (5, 5, 6, 6, 7, 7), quality runs (5, 5)
    assert [s for _, s in seen] == [5, 5, 5, 6, 6, 7, 7, 5, 5]
    assert "3 interleaved repeats (seeds 5, 6, 7)" in (tmp_path / "sampled" / "bench.md").read_text()
    seen.clear()
    assert main(base + ["--temperature", "0", "--out", str(tmp_path / "greedy")]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["settings"]["repeat_seeds"] == [5, 5, 5] and {s for _, s in seen} == {5}
    assert "3 interleaved repeats after" in (tmp_path / "greedy" / "bench.md").read_text()


def test_seed_per_prompt_gives_every_sampled_run_a_seed_of_its_own(tmp_path, tiny_target_dir, capsys, monkeypatch):
    """--seed-per-prompt: at a temperature prompt i of repeat r samples with seed + r x prompts + i (a class's
    near-identical prompts would otherwise draw near-identical texts under one seed); greedy runs keep the seed."""
    seen = _seeds_seen(monkeypatch)
    base = ["bench", "--prompts", str(_prompt_file(tmp_path)), "--target", str(tiny_target_dir), "--dtype", "float32",
            "--methods", "autoregressive", "--max-new-tokens", "2", "--repeats", "3", "--warmup", "1", "--seed", "5",
            "--no-memory", "--no-hf", "--no-quality", "--seed-per-prompt", "--json"]
    assert main(base + ["--temperature", "0.8", "--out", str(tmp_path / "sampled")]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["settings"]["seed_per_prompt"] is True and result["settings"]["seed"] == 5
    # warm-up (seed 5), then 3 repeats x 2 prompts: 5 + 2r + i
    assert [s for timing, s in seen if timing] == [5, 5, 6, 7, 8, 9, 10]
    assert "a seed per prompt and repeat: 5 + repeat x prompts + prompt" in (tmp_path / "sampled" / "bench.md").read_text()
    seen.clear()
    assert main(base + ["--temperature", "0", "--out", str(tmp_path / "greedy")]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["settings"]["seed_per_prompt"] is False and {s for _, s in seen} == {5}


@pytest.mark.parametrize("tree", ["off", "4,2;off", "0,2", "4,x"])
def test_a_bad_draft_tree_is_refused_before_any_model_loads(tmp_path, tree, capsys, monkeypatch):
    """--draft-tree lists trees to add to the chains: "off" and malformed shapes exit 2 with the reason on stderr,
    before the target is loaded (a missing target directory would otherwise be the first error)."""
    import decoding.run.pair as pair

    monkeypatch.setattr(pair, "load_pair", lambda *a, **k: pytest.fail("the models were loaded"))
    argv = ["bench", "--prompts", str(_prompt_file(tmp_path)), "--target", str(tmp_path / "no-model"),
            "--draft", "prompt-lookup", "--draft-tree", tree, "--no-memory", "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--draft-tree" in err or "tree" in err.lower(), err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
