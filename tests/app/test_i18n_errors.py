"""The engine's user-facing messages in every language (app/i18n_errors.py over decoding/errors.py's
keyed exceptions): each path a user can reach with bad input (settings, a trace file, a race file, the
lab's p and q, a model that does not load) raises an exception that carries a key, and its message
renders in every language with its parameters, with no English fallback."""

from __future__ import annotations

import html
import json

import pytest

from app import i18n
from app.i18n_errors import app_error, has_key, message, title
from app.race_file import race_from_text
from app.presets import pair_problem
from app.settings import make_settings
from decoding.run.pair import PROMPT_LOOKUP
from decoding.errors import ModelLoadError
from decoding.methods.registry import METHODS
from decoding.rules.lab import run_sampling_lab
from decoding.run.trace_file import load_trace_lines, read_trace

LANGS = list(i18n.LANGUAGES)
GOOD = dict(prompt="the cat", chat=False, method="speculative", gamma=4, temperature=1.0, top_k=0, top_p=1.0,
            lenience=1.0, seed=0, max_new_tokens=16, target="t", draft="d")


def _settings(**changes):
    values = {**GOOD, **changes}
    return make_settings(values["prompt"], values["chat"], values["method"], values["gamma"], values["temperature"],
                         values["top_k"], values["top_p"], values["lenience"], values["seed"],
                         values["max_new_tokens"], values["target"], values["draft"], values.get("extra"))


def _error(fn, *args, **kwargs) -> BaseException:
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    return info.value


def _record_line(**changes) -> str:
    """A minimal valid trace record line, from the shipped example's first record."""
    from app.session import example_traces

    path = next(iter(example_traces().values()))
    with open(path, encoding="utf-8") as f:
        data = json.loads(f.readline())
    data.update(changes)
    return json.dumps(data)


def bad_inputs() -> list[tuple[str, BaseException]]:
    """(what, exception) for the bad inputs the app's users can give."""
    cases = [
        ("empty prompt", _error(_settings, prompt="  ")),
        ("long prompt", _error(_settings, prompt="x" * 100_000)),
        ("unknown method", _error(_settings, method="nope")),
        ("gamma", _error(_settings, gamma=99)),
        ("gamma not whole", _error(_settings, gamma="two")),
        ("max new", _error(_settings, max_new_tokens=0)),
        ("temperature", _error(_settings, temperature=-1)),
        ("temperature nan", _error(_settings, temperature="nan")),
        ("top-p", _error(_settings, top_p=0)),
        ("top-k", _error(_settings, top_k=-3)),
        ("lenience", _error(_settings, lenience=2)),
        ("trace not json", _error(load_trace_lines, ["{not json"])),
        ("trace not a record", _error(load_trace_lines, ['{"hello": 1}'])),
        ("trace empty", _error(load_trace_lines, [])),
        ("trace probability", _error(load_trace_lines, [_record_line(accepted_length=99)])),
        ("race not json", _error(race_from_text, "{oops")),
        ("race format", _error(race_from_text, '{"format": "other"}')),
        ("race single trace", _error(race_from_text, _record_line() + "\n" + _record_line())),
        ("lab p sum", _error(run_sampling_lab, [0.9, 0.3], [0.5, 0.5], n=10)),
        ("lab q negative", _error(run_sampling_lab, [0.5, 0.5], [1.5, -0.5], n=10)),
        ("lab lengths", _error(run_sampling_lab, [0.5, 0.5], [0.2, 0.3, 0.5], n=10)),
        ("model vocabulary", ModelLoadError("the draft and target differ", "model.vocabulary", draft="a", target="b",
                                            target_size=3, draft_size=4, differing=1)),
        ("model not loaded", app_error("model.could_not_load", "title.not_loaded",
                                       detail=ModelLoadError("x", "model.offline", spec="no-such/model"))),
        ("pair cannot run the method", app_error("pair.choose", "title.pair_method", pair="a pair",
                                                 problem=lambda lang: pair_problem("mjsd", PROMPT_LOOKUP, lang))),
    ]
    from decoding.methods.speculative import SpeculativeSettings
    from decoding.methods.tree_draft import parse_draft_tree
    from decoding.rules.tree_acceptance import validate_tree_lenience

    cases += [  # the draft tree (speculative's draft_tree): a value that does not parse, out of range, lenience
        ("draft tree format", _error(SpeculativeSettings.from_dict, {"draft_tree": "wide"})),
        ("draft tree size", _error(parse_draft_tree, "999,3")),
        ("draft tree lenience", _error(validate_tree_lenience, 0.5)),
    ]
    for name, spec in METHODS.items():  # each method's own knobs, out of range
        for f, k in spec.settings.knobs():
            if k.maximum is not None and isinstance(k.maximum, (int, float)) and not k.choices:
                cases.append((f"{name} {f.name}", _error(spec.settings.from_dict, {f.name: k.maximum * 10 + 10})))
                break
    return cases


@pytest.fixture(scope="module")
def cases():
    return bad_inputs()


def test_every_user_reachable_bad_input_raises_a_keyed_exception(cases):
    unkeyed = [(what, f"{type(exc).__name__}: {exc}") for what, exc in cases if not has_key(exc)]
    assert unkeyed == [], "these raises carry no message key (shown in English in every language)"


@pytest.mark.parametrize("lang", LANGS)
def test_every_message_renders_in_every_language_without_fallback(cases, lang):
    i18n.reset_missing()
    i18n.strict(True)
    try:
        for what, exc in cases:
            text = message(exc, lang)
            assert text and "{" not in text, (what, text)
            if getattr(exc, "title_key", None):
                assert title(exc, lang)
    finally:
        i18n.strict(False)
    assert i18n.missing() == set()


def test_english_text_of_a_keyed_exception_is_unchanged_for_the_cli():
    exc = _error(load_trace_lines, ['{"hello": 1}'])
    assert str(exc).startswith("line 1 of the file is not a trace record")
    assert message(exc, "en") == str(exc)


def test_a_nested_detail_and_a_keyed_name_follow_the_language():
    exc = _error(run_sampling_lab, [0.9, 0.3], [0.5, 0.5], n=10)
    assert i18n.t("engine.lab.name_p", "es") in message(exc, "es")
    wrapped = app_error("trace.cannot_open", "title.not_trace", name="x.jsonl",
                        detail=_error(load_trace_lines, ["{bad"]))
    assert message(wrapped, "fr").startswith("x.jsonl")
    assert message(wrapped, "fr") != str(wrapped.message)
    assert title(wrapped, "zh") == i18n.t("engine.title.not_trace", "zh")


def test_every_catalog_key_an_engine_exception_names_exists(cases):
    english = i18n.catalog("en")
    for what, exc in cases:
        assert "engine." + exc.key in english, what


def test_a_file_that_is_no_trace_reads_in_the_readers_language(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\x00\x01binary")
    exc = _error(read_trace, path)
    assert message(exc, "zh") == i18n.t("engine.trace.binary", "zh")


def test_a_failed_event_is_told_in_the_sessions_language():
    """The error boundary runs inside the session's language (errors.on wraps `guard` in
    `i18n.ui.with_language`): a keyed failure's title and message come in that language."""
    import gradio as gr

    from app.errors import on
    from app.i18n import ui

    def fail(text):
        raise app_error("trace.no_file", "title.not_trace")

    with gr.Blocks() as demo:
        ui.begin()
        ui.menu()
        box, status, button = gr.Textbox(), gr.HTML(), gr.Button()
        on(button.click, fail, box, box, status)
        ui.finish(demo, on)
    handler = next(f.fn for f in demo.fns.values() if getattr(f.fn, "__wrapped__", None) is not None
                   and getattr(f.fn.__wrapped__, "__wrapped__", None) is fail)
    for lang in LANGS:
        *_, line = handler(lang, "x", None, None)
        line = html.unescape(line)
        assert i18n.t("engine.trace.no_file", lang) in line and i18n.t("engine.title.not_trace", lang) in line
