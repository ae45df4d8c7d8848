"""The method registry: one entry per method, and every front end derived from it.

A setting added to one method's settings dataclass (on a copy of the registry) must appear as a CLI
flag, an app control (with its api name, range check and visibility) and in "copy as CLI command".
"""

import dataclasses
import shlex

import gradio as gr
import pytest

from decoding.cli import build_parser, method_extra
from decoding.methods.mentored import MentoredSettings, MentoredStep
from decoding.methods.mjsd.generator import MjsdStep
from decoding.methods.ppd.generator import PPDStep
from decoding.methods.registry import METHODS, method_spec
from decoding.methods.settings import MethodSettings, knob
from decoding.trace.record import StepData


def test_five_methods_each_with_a_settings_dataclass():
    assert list(METHODS) == ["autoregressive", "speculative", "mentored", "mjsd", "ppd"]
    for name, spec in METHODS.items():
        assert spec.name == name
        assert dataclasses.is_dataclass(spec.settings) and issubclass(spec.settings, MethodSettings)
        assert spec.trace_data is None or issubclass(spec.trace_data, StepData)
        spec.settings()  # the defaults are valid
    assert METHODS["mjsd"].needs_draft_model and METHODS["speculative"].uses_lenience
    assert not METHODS["ppd"].uses_drafter and METHODS["mentored"].adaptive_gamma
    with pytest.raises(ValueError, match="unknown method"):
        method_spec("nope")


@dataclasses.dataclass
class MentoredPlus(MentoredSettings):
    warmup_tokens: int = knob(3, flag="--warmup-tokens", minimum=0, maximum=10, step=1,
                              label="Warm-up tokens (test)", help="a setting added for this test")


@pytest.fixture
def registry_with_new_setting():
    methods = dict(METHODS)
    methods["mentored"] = dataclasses.replace(METHODS["mentored"], settings=MentoredPlus)
    return methods


def test_a_new_setting_becomes_a_cli_flag(registry_with_new_setting):
    methods = registry_with_new_setting
    args = build_parser(methods).parse_args(["generate", "--prompt", "hi", "--method", "mentored",
                                              "--warmup-tokens", "5", "--kl-bound", "0.2"])
    assert args.warmup_tokens == 5
    assert method_extra(args, methods) == {"gamma_schedule": "fixed", "kl_bound": 0.2, "warmup_tokens": 5}
    assert "--warmup-tokens" not in build_parser().format_help() + str(build_parser()._subparsers._actions)


def test_a_new_setting_becomes_an_app_control_and_a_checked_input(registry_with_new_setting):
    from app.controls import build_method_controls, control_order, run_input_names, visible_for
    from app.settings import make_settings

    methods = registry_with_new_setting
    with gr.Blocks():
        controls = build_method_controls("mentored", methods)
    slider = controls["warmup_tokens"]
    assert isinstance(slider, gr.Slider) and slider.label == "Warm-up tokens (test)"
    assert (slider.minimum, slider.maximum, slider.value) == (0, 10, 3)
    assert "warmup_tokens" in run_input_names(methods) and "warmup_tokens" in control_order(methods)
    assert "warmup_tokens" in visible_for("mentored", methods) and "warmup_tokens" not in visible_for("mjsd", methods)
    ok = dict(prompt="hi", chat=False, method="mentored", gamma=4, temperature=0.7, top_k=0, top_p=1.0,
              lenience=1.0, seed=0, max_new_tokens=8, target="default", draft="prompt-lookup")
    with pytest.raises(ValueError, match="warmup tokens"):
        make_settings(**ok, extra={"warmup_tokens": 11}, methods=methods)


def test_a_new_setting_is_written_into_the_cli_command(registry_with_new_setting):
    from app.settings import cli_command, make_settings

    methods = registry_with_new_setting
    s = make_settings(prompt="hi", chat=False, method="mentored", gamma=4, temperature=0.7, top_k=0, top_p=1.0,
                      lenience=1.0, seed=0, max_new_tokens=8, target="default", draft="prompt-lookup",
                      extra={"warmup_tokens": 5, "kl_bound": 0.2}, methods=methods)
    command = cli_command(s, methods)
    assert "--kl-bound 0.2 --warmup-tokens 5" in command
    # and the command parses back into the same settings
    args = build_parser(methods).parse_args(shlex.split(command.split(" --json")[0])[3:])
    assert method_extra(args, methods)["warmup_tokens"] == 5


@pytest.mark.parametrize("method", list(METHODS))
def test_the_app_default_command_round_trips_through_the_cli(method):
    """Every method's app defaults, written as a command, parse back into the same method settings."""
    from app.controls import method_controls
    from app.settings import cli_command, make_settings

    defaults = {c.name: c.default for c in method_controls()}
    s = make_settings(prompt="hi there", chat=True, method=method, gamma=3, temperature=0.0, top_k=0, top_p=1.0,
                      lenience=1.0, seed=1, max_new_tokens=8, target="default", draft="prompt-lookup", extra=defaults)
    args = build_parser().parse_args(shlex.split(cli_command(s).split(" --json")[0])[3:])
    parsed = method_extra(args)
    autos = {f.name: k.auto for f, k in METHODS[method].settings.knobs()}
    for name, value in s.extra.items():
        if value == autos[name]:
            continue  # automatic: not written into the command
        assert parsed[name] == value, name
    assert args.method == method and args.seed == 1 and args.chat


def test_step_data_round_trips_and_is_checked():
    step = MjsdStep.from_dict({"tau": 0.1, "eta": 1, "prefixes": [{"length": 1, "log_p": float("-inf"), "ratio": 0.0,
                                                                   "passes": False}]})
    assert step.prefixes[0].log_p == float("-inf") and step["eta"] == 1  # -inf is a meaningful log p
    assert MjsdStep.from_dict(step.to_dict()) == step
    with pytest.raises(ValueError, match="ratio"):
        MjsdStep.from_dict({"prefixes": [{"ratio": "high"}]})
    with pytest.raises(ValueError, match="tau"):
        MjsdStep.from_dict({"tau": float("nan")})
    # PPD: the tuning rides on the first record only; absent and None mean different things
    first, later = PPDStep(tree_size=4, tuning=None, carries_tuning=True), PPDStep(tree_size=4)
    assert "tuning" in first.to_dict() and "tuning" not in later.to_dict()
    assert PPDStep.from_dict(first.to_dict()).carries_tuning and not PPDStep.from_dict(later.to_dict()).carries_tuning
    # traces written before `lossy` existed said it in words
    assert PPDStep.from_dict({"verification": "typical acceptance (lossy)"}).lossy is True
    assert PPDStep.from_dict({"verification": "exact match (lossless)"}).lossy is False
    assert MentoredStep.from_dict({"kl_bound": 0.3, "positions": [{"kl_draft": float("inf")}]}).positions[0].kl_draft \
        == float("inf")
