"""The Exactness lab's handlers: the implementation switch (its figures and words), the examples, and the
API's old four inputs still meaning the correct rule."""

import gradio as gr
import pytest

from app.lab.events import implementation_words, lab_converge, lab_example, lab_run
from decoding.rules.examples import EXAMPLES, LARGER
from decoding.rules.implementations import IMPLEMENTATIONS
from tests._student_text import dev_hits


def test_the_four_old_inputs_still_run_the_correct_rule():
    old = lab_run(lab_example("worked"), 1.0, 10_000, 0)
    new = lab_run(lab_example("worked"), 1.0, 10_000, 0, "correct")
    assert old[3] == new[3] and "α = 0.9000" in old[3] and "TV(empirical, p)" in old[3]


@pytest.mark.parametrize("name", list(IMPLEMENTATIONS))
def test_each_implementation_reports_its_tv_to_p_and_acceptance_in_plain_words(name):
    plot, residual, tv, md = lab_run(lab_example("larger"), 1.0, 10_000, 0, name)
    assert "TV(empirical, p)" in md and "acceptance rate" in md
    assert not dev_hits(md) and not dev_hits(implementation_words(name))
    labels = [t["name"] for t in plot.data]
    assert any(n.startswith("p (target)") for n in labels) and any(n.startswith("expected") for n in labels)
    assert any(n.startswith("empirical") for n in labels) and len(plot.data[0]["x"]) == len(LARGER.vocab)
    if name != "correct":
        assert IMPLEMENTATIONS[name].label in md and "after a rejection" in residual.layout["title"]["text"]


def test_exact_but_slower_and_fast_but_wrong_read_differently():
    table = lab_example("worked")
    slow = lab_run(table, 1.0, 10_000, 0, "exact-match")[3]
    wrong = lab_run(table, 1.0, 10_000, 0, "greedy-draft-softmax-q")[3]
    assert "exact but slower" in slow and "0.3150" in slow and "0.9000" in slow  # Σ p·q beside Σ min(p, q)
    assert "fast but wrong" in wrong and "TV(expected, p) = **0.4000**" in wrong
    same = lab_run(table, 1.0, 10_000, 0, "top20-target")[3]
    assert "no difference on this example" in same  # four tokens: the top-20 cut changes nothing
    cut = lab_run(lab_example("larger"), 1.0, 10_000, 0, "top20-target")[3]
    assert "TV(expected, p) = **0.1893**" in cut


def test_the_examples_fill_the_table_and_bad_choices_say_so():
    for key, example in EXAMPLES.items():
        rows = lab_example(key)
        assert [r[0] for r in rows] == list(example.vocab) and [r[1] for r in rows] == list(example.p)
    with pytest.raises(gr.Error, match="Implementation menu"):
        lab_run(lab_example("worked"), 1.0, 100, 0, "nope")
    with pytest.raises(gr.Error, match="lenience slider to 1"):
        lab_run(lab_example("worked"), 0.5, 100, 0, "wrong-q")


def test_converge_runs_the_picked_implementation(monkeypatch):
    monkeypatch.setattr("app.lab.events.time.sleep", lambda s: None)
    mds = [out[3] for out in lab_converge(lab_example("worked"), 1.0, 0, "resample-from-p")]
    assert len(mds) == 5 and all("fast but wrong" in md for md in mds)
