"""The app's precision setting: checked on the server, written into the CLI command, read back from a
trace; and what the app says when greedy texts differ."""

import pytest

from app.settings import cli_command, make_settings, settings_from_summary
from app.texts import greedy_texts_note
from decoding.trace.record import RunSummary

OK = dict(prompt="hi", chat=False, method="speculative", gamma=4, temperature=0.0, top_k=0, top_p=1.0, lenience=1.0,
          seed=0, max_new_tokens=8, target="default", draft="prompt-lookup")


def test_precision_is_checked_and_reproduced():
    assert "--dtype" not in cli_command(make_settings(**OK))  # auto: the device's default
    s = make_settings(**OK, dtype="float32")
    assert s.dtype == "float32" and "--dtype float32" in cli_command(s)
    with pytest.raises(ValueError, match="precision"):
        make_settings(**OK, dtype="int8")
    assert make_settings(**OK, dtype="bfloat16").key() != make_settings(**OK, dtype="float32").key()


def _summary(tokens, dtype, temperature=0.0):
    return RunSummary("speculative", "hi", {"sampling": {"temperature": temperature}}, tokens, "", 1, 1, 0, None, 1.0,
                      1.0, 1.0, None, "", "max_new_tokens", {"dtype": dtype})


def test_a_replayed_trace_brings_its_precision_and_differing_greedy_texts_are_explained():
    assert settings_from_summary(_summary([1], "bfloat16")).dtype == "bfloat16"
    assert settings_from_summary(_summary([1], None)).dtype == "auto"  # traces from before the setting
    assert greedy_texts_note(_summary([1, 2], "bfloat16"), _summary([1, 2], "bfloat16")) == ""
    assert "nearly tied" in greedy_texts_note(_summary([1, 2], "bfloat16"), _summary([1, 3], "bfloat16"))
    assert "bug" in greedy_texts_note(_summary([1, 2], "float32"), _summary([1, 3], "float32"))
    assert greedy_texts_note(_summary([1, 2], "float32", 0.7), _summary([1, 3], "float32", 0.7)) == ""
