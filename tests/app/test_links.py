"""Links that reproduce a run or a race (app/links.py, app/share.py): a run's settings survive the
round trip, a long prompt is refused with a message, and a cut, garbled or foreign link says why and
changes nothing."""

from types import SimpleNamespace

import gradio as gr
import pytest

from app import links, share
from app.errors import is_skip
from app.i18n import t
from app.settings import make_settings


def _settings(prompt="Repeat: a, b, c, a, b,", method="speculative", **kw):
    values = dict(chat=False, gamma=4, temperature=0.0, top_k=0, top_p=1.0, lenience=1.0, seed=7, max_new_tokens=12,
                  target="default", draft="prompt-lookup")
    values.update(kw)
    return make_settings(prompt, values["chat"], method, values["gamma"], values["temperature"], values["top_k"],
                         values["top_p"], values["lenience"], values["seed"], values["max_new_tokens"],
                         values["target"], values["draft"], {}, dtype="float32")


def test_a_run_link_round_trips_every_setting():
    s = _settings(prompt="Ünïcode, 推测解码 & ?=#")
    query = links.run_query(s, "float32", "cpu")
    assert query.startswith("?run=1") and all(c.isalnum() or c in "?=-_" for c in query)
    link = links.read_run(query.removeprefix("?run="))
    assert link.settings == {name: getattr(s, name) for name in links.RUN_FIELDS.values()}
    assert (link.precision, link.device) == ("float32", "cpu")


def test_a_long_prompt_is_compressed_and_a_too_long_one_refused():
    links.run_query(_settings(prompt="the cat sat on the mat. " * 200), "float32", "cpu")  # 4800 chars fit
    import random

    rng = random.Random(0)
    noise = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(3000))
    with pytest.raises(links.LinkError) as err:
        links.run_query(_settings(prompt=noise), "float32", "cpu")
    assert err.value.why == "export.link.too_long"
    assert "characters" in t(err.value.why, "en", **err.value.params)


@pytest.mark.parametrize("token, why", [
    ("", "export.link.why.garbled"),
    ("1AAAA", "export.link.why.garbled"),
    ("1" + "%%%", "export.link.why.garbled"),
    ("2abc", "export.link.why.version"),
    ("x" + "abc", "export.link.why.garbled"),
])
def test_a_bad_token_says_why(token, why):
    with pytest.raises(links.LinkError) as err:
        links.read_run(token)
    assert err.value.why == why


def test_a_cut_link_says_it_is_cut():
    query = links.run_query(_settings(), "float32", "cpu")
    with pytest.raises(links.LinkError) as err:
        links.read_run(query.removeprefix("?run=")[:-6])
    assert err.value.why == "export.link.why.garbled"
    with pytest.raises(links.LinkError):  # valid JSON, but not a run's
        links.read_run(links.encode({"p": "hello"}))


def _request(**params):
    return SimpleNamespace(query_params=params)


def test_opening_a_run_link_fills_the_controls_and_asks_for_a_run():
    from app.controls import control_order

    s = _settings(gamma=3, seed=11)
    token = links.run_query(s, "float32", "cpu").removeprefix("?run=")
    out = share.open_run_link(_request(run=token), len(control_order()))
    values = dict(zip(control_order(), out))
    assert values["prompt"] == s.prompt and values["gamma"] == 3 and values["seed"] == 11
    assert values["dtype"] == "float32"
    *_, preset, custom_target, custom_draft, autorun, tabs, notice = out
    assert autorun is True
    assert "seed 11" in notice and "speculative" in notice


def test_a_bad_run_link_changes_nothing_but_the_notice():
    from app.controls import control_order

    n = len(control_order())
    out = share.open_run_link(_request(run="1garbled!!"), n)
    assert all(is_skip(v) for v in out[: n + 4])
    assert "could not be opened" in out[-1] and "cut or garbled" in out[-1]
    # a pair this page cannot load: said, not silently replaced by another pair
    token = links.run_query(_settings(target="/some/local/model"), "float32", "cpu").removeprefix("?run=")
    out = share.open_run_link(_request(run=token), n)
    assert all(is_skip(v) for v in out[: n + 4])
    assert "/some/local/model" in out[-1] and "not available" in out[-1]


def test_other_hardware_is_said():
    from app.controls import control_order

    token = links.run_query(_settings(), "float32", "cuda").removeprefix("?run=")
    out = share.open_run_link(_request(run=token), len(control_order()))
    assert "may differ" in out[-1] and "cuda" in out[-1]


def test_no_link_changes_nothing():
    out = share.open_run_link(_request(), 5)
    assert all(is_skip(v) for v in out)
    out = share.open_race_link(_request())
    assert all(is_skip(v) for v in out)


def test_a_race_link_round_trips_and_a_bad_one_says_why():
    from app.presets import presets

    values = dict(prompt="Count: 1, 2, 3,", lane_a="speculative", lane_b="autoregressive", lane_a_draft="pair",
                  lane_a_gamma=5, preset=presets()[0].label, custom_target="", custom_draft="", chat=True,
                  temperature=0.0, top_k=0, top_p=1.0, seed=3, max_new_tokens=16, dtype="float32")
    query, note = share.race_link({"lanes": [{}]}, None, None, values)
    out = share.open_race_link(_request(race=query.removeprefix("?race=")))
    shared = dict(zip(share.SHARED_RACE_SETTINGS, out))
    race = dict(zip(links.RACE_FIELDS, out[len(share.SHARED_RACE_SETTINGS):]))
    assert shared["seed"] == 3 and shared["preset"] == presets()[0].label
    assert race == {k: values[k] for k in links.RACE_FIELDS}
    assert out[-3] is True  # the race runs next
    assert "Running it" in out[-1]
    out = share.open_race_link(_request(race=links.encode({"shipped": "no such race"})))
    assert "no shipped race called no such race" in out[-1]
    assert isinstance(out[-2], gr.Tabs)


def test_a_page_loads_queued_run_reads_its_own_flag_not_the_lessons():
    """Every page load queues the run-link chain's `run_if_asked` with the controls the page loaded with, and a
    State is read when the event runs. Were its flag the lesson's, a chapter's "Run it live" clicked while that
    event waited in a busy queue would be taken by it: a live run of the page's first settings under the chapter's
    controls, and the chapter's own run skipped (seen as a speculative run under chapter 1's autoregressive Method
    box). So the two `run_if_asked` events read two flags, and neither is set both on a page load and by a click."""
    from app.explainer.handlers import run_if_asked
    from app.layout import build_demo

    def unwrapped(fn):
        while fn is not None:
            yield fn
            fn = getattr(fn, "__wrapped__", None)

    demo = build_demo()
    setters = {}  # a flag (a State that starts False) -> the events that set it
    for bf in demo.fns.values():
        for block in bf.outputs:
            if isinstance(block, gr.State) and block.value is False:
                setters.setdefault(block._id, set()).update(event for _, event in bf.targets)
    read = [block._id for bf in demo.fns.values() if any(f is run_if_asked for f in unwrapped(bf.fn))
            for block in bf.inputs if isinstance(block, gr.State) and block.value is False]
    assert len(read) == 2 and len(set(read)) == 2, read
    assert all(not {"load", "click"} <= setters[flag] for flag in read), {flag: setters[flag] for flag in read}
