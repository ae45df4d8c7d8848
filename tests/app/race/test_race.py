"""The race: the player's data schedules each iteration at its measured `elapsed`, the result
sentence never calls a slower run faster, race files round-trip and bad ones give clear errors,
the task gallery and its measured tags, the recording script, and the `/race` api through
gradio_client on the tiny models (greedy: both lanes give the same tokens)."""

import json

import gradio as gr
import pytest

from decoding.trace.record import (
    ACCEPTED, BONUS, CORRECTION, TARGET, DraftToken, EmittedToken, IterationRecord, RunSummary, Timings
)

from app.gallery import DEFAULT_GAMMA, gallery_choices, gallery_items, gallery_tags, lane_a_choice, tag_text
from app.player import PLAYER_CSS, PLAYER_JS, _asset, lane_data
from app.race_file import Race, RaceLane, read_race, write_race
from app.race_result import race_figures, result_sentence, speedup


def _draft(position, text, accepted, source="model"):
    return DraftToken(position, 10 + position, text, 0.5, 0.5, 0.1, 1.0, accepted, 0.9, source=source)


def _record(i, elapsed, emitted, draft=(), calls=1, method="speculative"):
    return IterationRecord(method=method, iteration=i, context_length=5, gamma=len(draft), draft=list(draft),
                           accepted_length=sum(1 for d in draft if d.accepted), emitted=list(emitted), residual=None,
                           next_top=[], tree=[], timings=Timings(), target_calls=calls, draft_calls=0, generated=0,
                           elapsed=elapsed, energy_joules=None, energy_note="", finished=False)


def _summary(method, tokens, seconds, calls, settings=None):
    return RunSummary(method=method, prompt="p", settings=settings or {"seed": 0}, token_ids=list(range(tokens)),
                      text="", iterations=calls, target_calls=calls, draft_calls=0, mean_accepted=None,
                      tokens_per_call=tokens / calls, tokens_per_second=tokens / seconds, wall_seconds=seconds,
                      energy_joules=None, energy_note="", stop_reason="max_new_tokens")


def _records():
    return [
        _record(0, 0.25, [EmittedToken(1, "The", TARGET)], calls=1),
        _record(1, 0.40, [EmittedToken(2, " cat", ACCEPTED), EmittedToken(3, " sat", ACCEPTED),
                          EmittedToken(4, "\n", CORRECTION)],
                [_draft(0, " cat", True, "lookup"), _draft(1, " sat", True, "corpus"), _draft(2, " on", False)],
                calls=2),
        _record(2, 0.90, [EmittedToken(5, " on", ACCEPTED), EmittedToken(6, " a", BONUS)],
                [_draft(0, " on", True)], calls=3),
    ]


def test_player_data_schedules_each_iteration_at_its_elapsed():
    records = _records()
    lane = lane_data("A", records, _summary("speculative", 6, 0.9, 3), name="speculative (lookup, γ 3)")
    assert [t["time"] for t in lane["tokens"]] == [r.elapsed for r in records for _ in r.emitted]
    assert [t["kind"] for t in lane["tokens"]] == [t.kind for r in records for t in r.emitted]
    assert [t["text"] for t in lane["tokens"]] == ["The", " cat", " sat", "\n", " on", " a"]
    # the first accepted draft of iteration 1 was copied from the context, the second from the corpus
    assert [t["lookup"] for t in lane["tokens"]] == [False, True, False, False, False, False]
    assert [t["corpus"] for t in lane["tokens"]] == [False, False, True, False, False, False]  # the second: corpus
    assert [t["calls"] for t in lane["tokens"]] == [1, 2, 2, 2, 3, 3]
    assert lane["summary"] == {"tokens": 6, "seconds": 0.9, "tokens_per_second": pytest.approx(6 / 0.9),
                               "target_calls": 3, "tokens_per_call": 2.0}
    json.dumps(lane)  # plain data, as the browser receives it
    # a chosen pace (the explainer's single-lane use): one time per record
    paced = lane_data("run", records, times=[0.0, 0.5, 1.0])
    assert [t["time"] for t in paced["tokens"]] == [0.0, 0.5, 0.5, 0.5, 1.0, 1.0] and paced["summary"] is None
    with pytest.raises(ValueError):
        lane_data("run", records, times=[0.0])


def test_the_result_never_calls_a_slower_run_faster():
    fast, slow = _summary("speculative", 64, 2.1, 41), _summary("autoregressive", 64, 3.2, 64)
    text = result_sentence(fast, slow)
    assert speedup(fast, slow) == pytest.approx(fast.tokens_per_second / slow.tokens_per_second)
    assert text.startswith("speculative: 64 tokens in 2.10 s against 3.20 s for autoregressive")
    assert "1.52x faster" in text and "41 target calls instead of 64" in text
    assert "30.5 against 20.0 tokens/s" in text and "slower" not in text
    text = result_sentence(_summary("speculative", 64, 3.2, 41), _summary("autoregressive", 64, 2.1, 64))
    assert text.startswith("slower:") and "faster" not in text and "0.66x the speed" in text
    # a hair slower still says slower, with enough digits not to read 1.00
    text = result_sentence(_summary("speculative", 64, 2.101, 41), _summary("autoregressive", 64, 2.1, 64))
    assert text.startswith("slower:") and "1.00x" not in text and "faster" not in text
    # different token counts: tokens/s decides, said so
    text = result_sentence(_summary("speculative", 20, 1.0, 10), _summary("autoregressive", 64, 2.0, 64))
    assert text.startswith("slower:") and "20 tokens in 1.00 s against 64 tokens in 2.00 s" in text
    assert "tokens/s decides" in text


def _race():
    records = _records()
    return Race([RaceLane("A", "challenger", records, _summary("speculative", 6, 0.9, 3)),
                 RaceLane("B", "baseline", records, _summary("autoregressive", 6, 1.8, 6))], title="t")


def test_race_files_round_trip_and_their_figures(tmp_path):
    path = tmp_path / "race.json"
    write_race(path, _race())
    race = read_race(path)
    assert [lane.label for lane in race.lanes] == ["A", "B"] and race.title == "t"
    assert [len(lane.records) for lane in race.lanes] == [3, 3]
    assert race.lanes[0].records[1].draft[0].source == "lookup"
    figures = race_figures(race)
    assert figures["speedup"] == pytest.approx(2.0) and figures["verdict"] == "faster"
    assert [lane["summary"]["method"] for lane in figures["lanes"]] == ["speculative", "autoregressive"]
    # each lane's trace is a trace file's lines: it opens on its own
    from decoding.run.trace_file import load_trace_lines

    data = json.loads(path.read_text())
    records, summary = load_trace_lines(json.dumps(line) for line in data["lanes"][1]["trace"])
    assert summary.method == "autoregressive" and len(records) == 3


@pytest.mark.parametrize("content, message", [
    ("not json at all", "not JSON"),
    ('{"summary": false, "method": "x"}\n{"summary": true}\n', "single run's trace"),
    ('{"lanes": []}', "not a race file"),
    ('{"format": "specdec-race", "version": 1, "lanes": [{"label": "A", "trace": []}]}', "two lanes"),
    ('{"format": "specdec-race", "version": 9, "lanes": []}', "version"),
    ('{"format": "specdec-race", "version": 1, "lanes": [{"label": "A"}, {"label": "B"}]}', "lane A has no trace"),
])
def test_a_bad_race_file_gives_a_clear_visible_error(tmp_path, content, message):
    from app.race.handlers import open_race_upload

    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(gr.Error) as info:
        open_race_upload(str(path))
    assert info.value.title == "Not a race file"
    assert message in str(info.value) and "Traceback" not in str(info.value)


def test_a_lane_without_a_summary_is_refused(tmp_path):
    data = _race().to_dict()
    data["lanes"][1]["trace"] = data["lanes"][1]["trace"][:-1]
    with pytest.raises(ValueError, match="lane B's trace has no summary line"):
        from app.race_file import race_from_dict

        race_from_dict(data)


def test_the_gallery_fits_the_app_and_reads_its_tags(tmp_path, monkeypatch):
    from app.settings import MAX_PROMPT_CHARS

    items = gallery_items()
    assert len(items) >= 21 and len({i.id for i in items}) == len(items)
    assert all(0 < len(i.prompt) <= MAX_PROMPT_CHARS for i in items)
    # no tags file: no tags, lane A = the pair's draft at gamma 4
    assert gallery_tags(tmp_path / "absent.json") == {}
    assert lane_a_choice(items[0].id, {}) == ("pair", DEFAULT_GAMMA, None)
    assert "Not measured on this prompt" in tag_text(None)
    # the benchmark's file, as a list and as a mapping by id
    entry = {"id": items[0].id, "drafter": "prompt-lookup", "gamma": 6, "precision": "float32", "speedup": 1.4,
             "tokens_per_call": 2.1, "machine": {"cpu": "Some CPU"}, "date": "2026-11-22"}
    for content in ([entry], {items[0].id: {k: v for k, v in entry.items() if k != "id"}}):
        path = tmp_path / "gallery.json"
        path.write_text(json.dumps(content))
        tags = gallery_tags(path)
        assert lane_a_choice(items[0].id, tags)[:2] == ("prompt-lookup", 6)
        assert "1.40x" in dict((v, k) for k, v in gallery_choices(items, tags))[items[0].id]
        assert "Some CPU" in tag_text(tags[items[0].id]) and "2026-11-22" in tag_text(tags[items[0].id])
    slower = gallery_tags(path)[items[0].id].__class__(items[0].id, "hybrid", 3, speedup=0.8)
    assert slower.drafter_choice == "hybrid" and "(slower)" in tag_text(slower)
    # picking a gallery prompt moves it into the race and sets lane A from the tag
    from app import gallery
    from app.race import handlers as race

    monkeypatch.setattr(gallery, "GALLERY_TAGS", path)
    prompt, method, drafter, gamma, note = race.on_gallery_pick(items[0].id)
    assert (prompt, method, drafter, gamma) == (items[0].prompt, "speculative", "prompt-lookup", 6)
    assert "Measured" in note


def test_lane_a_drafter_choices():
    from app.race.handlers import drafter_spec

    assert drafter_spec("pair", "some/draft") == "some/draft"
    assert drafter_spec("prompt-lookup", "some/draft") == "prompt-lookup"
    assert drafter_spec("hybrid", "some/draft") == "hybrid:some/draft"
    assert drafter_spec("hybrid", "hybrid") == "hybrid"
    assert drafter_spec("hybrid", "hybrid+corpus:feature") == "hybrid+corpus:feature"  # already a hybrid
    assert drafter_spec("hybrid", "hybrid+corpus=some/dir:feature") == "hybrid+corpus=some/dir:feature"
    with pytest.raises(ValueError, match="needs a draft model"):
        drafter_spec("hybrid", "prompt-lookup")
    with pytest.raises(ValueError, match="unknown drafter"):
        drafter_spec("nonsense", "some/draft")


def test_the_player_assets_are_safe_templates():
    assert "watch('value'" in _asset(PLAYER_JS) and ".rp-lane" in _asset(PLAYER_CSS)
    assert "innerHTML" not in PLAYER_JS.read_text()  # token text is data, never HTML


def test_record_races_writes_a_race_that_opens(tmp_path, tiny_target_dir, tiny_draft_dir, capsys):
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[3] / "scripts" / "record_races.py"
    spec = importlib.util.spec_from_file_location("record_races", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    code = module.main(["gallery-math-1", "--target", str(tiny_target_dir), "--draft", str(tiny_draft_dir),
                        "--out", str(tmp_path), "--max-new-tokens", "8", "--dtype", "float32", "--threads", "1",
                        "--tags", str(tmp_path / "gallery.json"), "--keep-anyway"])  # random weights: any text
    assert code == 0
    race = read_race(tmp_path / "gallery-math-1.json")
    assert race.gallery_id == "gallery-math-1" and race.title.startswith("math: ")
    assert [lane.summary.method for lane in race.lanes] == ["speculative", "autoregressive"]
    assert race.lanes[0].summary.token_ids == race.lanes[1].summary.token_ids  # greedy, float32
    assert race.recorded["warmup_tokens"] == 4 and "machine" in race.recorded
    assert "tokens/s" in capsys.readouterr().out
    # the race's measurement is the prompt's gallery tag
    tag = gallery_tags(tmp_path / "gallery.json")["gallery-math-1"]
    assert tag.gamma == 4 and tag.speedup == pytest.approx(race_figures(race)["speedup"])
    assert module.main(["no-such-id", "--out", str(tmp_path)]) == 2


# ---------------------------------------------------------------- the /race api (gradio_client)
gradio_client = pytest.importorskip("gradio_client")


@pytest.fixture(scope="module")
def client(tiny_target_dir, tiny_draft_dir):
    from gradio_client import Client

    from _app_server import running_app

    with running_app(tiny_target_dir, tiny_draft_dir) as url:
        yield Client(url, verbose=False)


def test_race_api_returns_both_summaries_and_the_speedup(client):
    value, figures, download, _status = client.predict(prompt="the cat sat", lane_a="speculative",
                                                       lane_b="autoregressive", temperature=0, max_new_tokens=16,
                                                       api_name="/race")
    a, b = (lane["summary"] for lane in figures["lanes"])
    assert (a["method"], b["method"]) == ("speculative", "autoregressive")
    assert a["token_ids"] == b["token_ids"] and len(a["token_ids"]) > 0  # greedy and lossless, float32
    diff = {k for k in a["settings"].keys() | b["settings"].keys() if a["settings"].get(k) != b["settings"].get(k)}
    assert "method" in diff and diff <= {"method", "extra"}, diff  # extra: the method's own settings
    assert a["models"]["target"] == b["models"]["target"] and a["models"]["dtype"] == b["models"]["dtype"] == "float32"
    assert figures["speedup"] == pytest.approx(a["tokens_per_second"] / b["tokens_per_second"])
    word = "faster" if figures["speedup"] > 1 else "slower"
    assert word in figures["result"] and figures["verdict"] == word
    if word == "slower":
        assert figures["result"].startswith("slower:") and "faster" not in figures["result"]
    # the player's data: both lanes, every token at its record's elapsed, ending with the run
    value = json.loads(value) if isinstance(value, str) else value
    assert [lane["label"] for lane in value["lanes"]] == ["A", "B"]
    for lane, summary in zip(value["lanes"], (a, b)):
        times = [t["time"] for t in lane["tokens"]]
        assert len(times) == len(summary["token_ids"]) and times == sorted(times)
        assert times[-1] == pytest.approx(summary["wall_seconds"])
    assert value["result"] == figures["result"]
    race = read_race(download if isinstance(download, str) else download["value"])
    assert race.lanes[0].summary.token_ids == a["token_ids"]


def test_race_lane_a_takes_its_own_drafter(client):
    _, figures, _, _ = client.predict(prompt="abc abc abc abc", lane_a="speculative", lane_a_draft="prompt-lookup",
                                   lane_a_gamma=3, temperature=0, max_new_tokens=8, api_name="/race")
    a, b = (lane["summary"] for lane in figures["lanes"])
    assert a["models"]["draft"] == "prompt-lookup" and a["settings"]["gamma"] == 3
    assert a["token_ids"] == b["token_ids"]
    with pytest.raises(Exception) as info:
        client.predict(prompt="x", lane_a_draft="nonsense", max_new_tokens=4, api_name="/race")
    assert "not in the list of choices" in str(info.value) and "Traceback" not in str(info.value)


def test_the_task_gallery_is_shared_with_the_explainer():
    from app.gallery import gallery_items, gallery_tags
    from app.explainer.handlers import on_prompt_pick, prompt_choices

    choices = dict((value, label) for label, value in prompt_choices())
    items = gallery_items()
    assert items and all(f"gallery:{i.id}" in choices for i in items)
    first = items[0]
    assert on_prompt_pick(f"gallery:{first.id}") == (first.prompt, True)
    tag = gallery_tags().get(first.id)
    if tag is not None:  # the label says what the benchmark measured, read from docs/bench/gallery.json
        assert f"{tag.speedup:.2f}x" in choices[f"gallery:{first.id}"]


def test_a_shipped_race_sets_the_race_tabs_controls_to_itself(monkeypatch):
    """On load (and when picked) the race tab's prompt, lanes, drafter and γ are the shown race's, so
    that what plays and what Race would run agree."""
    from app.race.handlers import lane_a_drafter, open_shipped_race, race_on_load
    from app.race_file import shipped_races

    for var in ("SPECDEC_APP_TARGET", "SPECDEC_APP_DRAFT"):  # the app's own presets: the race's pair is the first
        monkeypatch.delenv(var, raising=False)

    races = shipped_races()
    title, value, figures, download, prompt, lane_a, lane_b, drafter, gamma, note = race_on_load()
    race = read_race(races[title])
    a, b = race.lanes
    assert value["title"] == race.title and prompt == a.summary.prompt == b.summary.prompt
    assert (lane_a, lane_b) == (a.summary.method, b.summary.method)
    assert drafter["value"] == "pair" and gamma["value"] == a.summary.settings["gamma"]
    assert "greedy (temperature 0)" in note and "Explainer's settings" in note
    for other in races:
        shown = open_shipped_race(other)
        assert shown[3] == read_race(races[other]).lanes[0].summary.prompt
    assert lane_a_drafter("prompt-lookup", "hybrid:feature") == "prompt-lookup"
    assert lane_a_drafter("hybrid:feature", "hybrid:feature") == "pair"
    assert lane_a_drafter("hybrid:some/draft", "some/draft") == "hybrid"


@pytest.mark.parametrize("tree, words", [(None, ""), ("off", ""), ("auto", ", draft trees"),
                                         ("16,6", ", draft trees of 16 tokens, 6 deep"), ("12", ", draft trees of 12 tokens, 6 deep"),
                                         ("bogus", "")])
def test_a_lane_names_the_draft_trees_its_run_drafted(tree, words):
    """A tree run's name says so (chapter 13's live run is a tree run, and "γ 4" alone reads as a chain); a
    chain's name, and a setting this engine cannot read, say nothing of trees."""
    from app.i18n import using
    from app.race_result import lane_name

    extra = {"draft_tree": tree} if tree is not None else {}
    summary = _summary("speculative", 8, 1.0, 4, settings={"seed": 0, "gamma": 4, "extra": extra})
    summary.models = {"draft": "prompt-lookup"}
    assert lane_name(summary) == f"speculative (prompt lookup, γ 4{words})"
    with using("es"):
        assert ("árboles de borrador" in lane_name(summary)) == bool(words)
