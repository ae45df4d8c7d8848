"""Drafters that pay: the hybrid lookup/model drafter and a draft head restricted to frequent tokens.

Both must keep speculative decoding exact: greedy output equal to greedy autoregressive output in
float32, sampled output with the target's two-token distribution (chi-square), and the q in the
trace equal to the q each token was drawn from.
"""

import pytest
import torch

from decoding.drafters.hybrid import HybridDrafter
from decoding.drafters.model import ModelDrafter
from decoding.methods.base import RunConfig
from decoding.methods.speculative import ChainStep
from decoding.rules.warp import SamplingConfig, warp_logits
from decoding.run.pair import Draft
from decoding.run.runner import decode

from _siblings import load_test_module

test_speculative = load_test_module("decoding/methods/test_speculative.py")
GREEDY = SamplingConfig(temperature=0.0)
REPEATING = "the cat sat on the mat. the cat sat on the"  # a long repeated span: lookup fires
# a repeated span whose copied next token the tiny target gives probability ~0.5 (top-k 4, T = 2):
# acceptance and rejection both happen, so the chi-square test sees both paths of the copy
COPYING = "pvuwzlcpvuwz"


def _hybrid(pair, **kw):
    target, draft = pair
    width = min(target.vocab_size, draft.vocab_size)
    return HybridDrafter(ModelDrafter(draft.model, draft.device, width, draft.name), width, target.device, **kw)


def test_hybrid_chooses_its_source_from_the_context_and_reports_the_q_it_drew_from(tiny_pair):
    target, draft = tiny_pair
    hybrid = _hybrid(tiny_pair, min_match=3, lookup_tokens=6)
    sampling = SamplingConfig(temperature=0.9, top_k=8)
    ids = target.encode_prompt(REPEATING, chat=False)
    p = hybrid.propose(ids, 2, sampling, torch.Generator().manual_seed(0))
    assert p.source == "lookup" and p.match_length >= 3 and len(p.tokens) == 6  # longer than gamma
    assert torch.equal(p.q_rows, torch.nn.functional.one_hot(torch.tensor(p.tokens), p.q_rows.shape[-1]).float())
    assert p.tokens == ids[ids.index(ids[-1], 0) + 1:][:6] or p.tokens[0] in ids  # copied from the context
    other = target.encode_prompt("qzx vbn", chat=False)
    m = hybrid.propose(other, 3, sampling, torch.Generator().manual_seed(0))
    assert m.source == "model" and m.match_length is None and len(m.tokens) == 3
    with torch.inference_mode():
        fresh = draft.model(torch.tensor([other])).logits[0, -1:].float()
    assert torch.allclose(m.q_rows[:1], warp_logits(fresh, sampling), atol=1e-5)  # q of the first model token


def test_hybrid_greedy_equals_autoregressive_and_uses_both_sources(tiny_pair):
    target, draft = tiny_pair
    hybrid = Draft.of_model(draft).hybrid()
    ids = target.encode_prompt(REPEATING, chat=False)
    base = RunConfig(method="autoregressive", max_new_tokens=40, sampling=GREEDY, stop_at_eos=False)
    expected = [t.token_id for r in decode(target, None, ids, base) for t in r.emitted]
    for gamma in (2, 4):
        config = RunConfig(method="speculative", max_new_tokens=40, sampling=GREEDY, gamma=gamma, stop_at_eos=False)
        records = list(decode(target, hybrid, ids, config))
        assert [t.token_id for r in records for t in r.emitted] == expected
        sources = {ChainStep.of(r).source for r in records if r.draft}
        assert sources == {"lookup", "model"}, sources
        for r in records:  # each token's own source: the copied tail of a continued model draft is lookup
            copied = ChainStep.of(r).copied or 0
            assert [d.source for d in r.draft] == ([ChainStep.of(r).source] * (len(r.draft) - copied)
                                                   + ["lookup"] * copied)


@pytest.mark.parametrize("prompt, source", [(COPYING, "lookup"), (test_speculative.PROMPT, "model")])
def test_hybrid_sampled_output_has_the_target_distribution(tiny_close_pair, prompt, source, monkeypatch):
    """The two-token chi-square test of test_speculative, through the hybrid drafter, once where its
    first draft is copied and once where the model drafts it."""
    target, draft = tiny_close_pair
    seen = set()
    original = HybridDrafter.propose

    def spy(self, *a, **k):
        proposal = original(self, *a, **k)
        seen.add(proposal.source)
        return proposal

    monkeypatch.setattr(HybridDrafter, "propose", spy)
    monkeypatch.setattr(test_speculative, "PROMPT", prompt)
    test_speculative.test_sampled_speculative_matches_target_distribution((target, Draft.of_model(draft).hybrid()))
    assert seen == {source}


class ScriptedModel:
    """A stand-in for the ModelDrafter that drafts fixed tokens (q: a row per token with its mass
    spread over it and one other token), honouring `stop_after` as the real one does."""

    name = "scripted"

    def __init__(self, script, width):
        self.script, self.width = script, width

    def sources(self, sequence):
        from decoding.trace.source import MODEL_SOURCE

        return [MODEL_SOURCE]  # a model drafter can always draft here

    def propose(self, sequence, gamma, sampling, generator, keep_going=None, source=None, exact=False,
                stop_after=None):
        from decoding.drafters.base import Proposal

        tokens = []
        for i in range(gamma):
            tokens.append(self.script[i])
            if i + 1 < gamma and stop_after is not None and stop_after(tokens):
                break
        rows = torch.zeros(len(tokens), self.width)
        for i, t in enumerate(tokens):
            rows[i, t], rows[i, (t + 1) % self.width] = 0.75, 0.25
        return Proposal(tokens, rows)


def test_a_model_draft_that_makes_the_context_repeat_is_continued_by_a_copy():
    #            0  1  2  3  4  5  6 | model drafts 2, 3: "2 3" repeats positions 1-2
    sequence = [1, 2, 3, 4, 5, 9, 8]
    model = ScriptedModel([2, 3, 7, 7], 12)
    hybrid = HybridDrafter(model, 12, torch.device("cpu"), min_match=2, lookup_tokens=4)
    p = hybrid.propose(sequence, 4, GREEDY, torch.Generator())
    # the model stopped after "2 3" (no forward pass for a third token); what followed "2 3" was copied
    assert p.tokens == [2, 3, 4, 5, 9, 8] and p.source == "model" and p.copied == 4 and p.match_length == 2
    assert [p.source_of(i) for i in range(6)] == ["model"] * 2 + ["lookup"] * 4
    assert torch.equal(p.q_rows[:2], model.propose(sequence, 2, GREEDY, None).q_rows)  # the model's own q
    assert torch.equal(p.q_rows[2:], torch.nn.functional.one_hot(torch.tensor([4, 5, 9, 8]), 12).float())
    cut = p.truncated(3)  # the copied tail shrinks first
    assert cut.tokens == [2, 3, 4] and cut.copied == 1 and p.truncated(1).copied == 0
    # gamma 2: the repeat shows after the model's last token, and is continued all the same
    assert hybrid.propose(sequence, 2, GREEDY, None).tokens == [2, 3, 4, 5, 9, 8]
    # no repeat: the model's draft as it is; switched off: the same
    plain = HybridDrafter(ScriptedModel([7, 6], 12), 12, torch.device("cpu"))
    assert plain.propose(sequence, 2, GREEDY, None).tokens == [7, 6]
    off = HybridDrafter(ScriptedModel([2, 3, 7, 7], 12), 12, torch.device("cpu"), continue_with_copy=False)
    assert off.propose(sequence, 4, GREEDY, None).tokens == [2, 3, 7, 7]
    longer = HybridDrafter(ScriptedModel([2, 3, 7, 7], 12), 12, torch.device("cpu"), continue_min_match=3)
    assert longer.propose(sequence, 4, GREEDY, None).tokens == [2, 3, 7, 7]  # "2 3" is a 2-token repeat only


def test_the_explainer_says_when_a_model_draft_was_continued_by_a_copy(tiny_pair, monkeypatch):
    from app import render

    target, draft = tiny_pair
    monkeypatch.setattr(HybridDrafter, "__init__", _with(HybridDrafter.__init__, continue_min_match=1))
    config = RunConfig(method="speculative", max_new_tokens=30, sampling=GREEDY, gamma=3, stop_at_eos=False)
    records = list(decode(target, Draft.of_model(draft).hybrid(), target.encode_prompt("qzx vbn", chat=False), config))
    continued = [r for r in records if ChainStep.of(r).copied]
    assert continued, "no model draft was continued on this prompt"
    record = continued[0]
    html = render.draft_row_html(record)
    copied = ChainStep.of(record).copied
    assert "Proposed by the draft model</b>, then <b>continued by a copy</b>" in html
    assert f"the {copied} tokens that followed it were added" in html
    assert [d.source for d in record.draft][-copied:] == ["lookup"] * copied
    from app.lesson.widgets import _proposal  # the guided lesson's "not checked yet" caption

    caption = _proposal(records, records.index(record), None)
    assert "proposed by the draft model and continued by a copy from the context" in caption


def _with(init, **fixed):
    def patched(self, *a, **k):
        init(self, *a, **{**k, **fixed})
    return patched


def test_continued_drafts_keep_the_target_distribution(tiny_close_pair, monkeypatch):
    """Chi-square on two tokens where the first draft is a model token continued by a copy: a
    1-token match suffices here, and the prompt's last character occurs nowhere before it, so the
    model drafts first and the copy follows whatever it sampled."""
    target, draft = tiny_close_pair
    continued = []
    original = HybridDrafter.propose

    def spy(self, *a, **k):
        self.min_match = self.continue_min_match = 1
        proposal = original(self, *a, **k)
        continued.append(proposal.source == "model" and proposal.copied > 0)
        return proposal

    monkeypatch.setattr(HybridDrafter, "propose", spy)
    test_speculative.check_two_token_distribution(target, Draft.of_model(draft).hybrid(), "hello world, the cab",
                                             max_new_tokens=3)
    assert sum(continued) > 0.3 * len(continued), (sum(continued), len(continued))


def test_hybrid_offers_its_sources_and_drafts_exactly_from_the_chosen_one(tiny_pair):
    from decoding.trace.source import MODEL_SOURCE

    target, draft = tiny_pair
    hybrid = _hybrid(tiny_pair)
    sampling = SamplingConfig(temperature=0.9, top_k=8)
    ids = target.encode_prompt(REPEATING, chat=False)
    copy, model = hybrid.sources(ids)
    assert model == MODEL_SOURCE and copy.kind == "lookup" and copy.key == "lookup" and copy.match_length >= 2
    assert copy.available == len(ids) - copy.start
    p = hybrid.propose(ids, 3, sampling, torch.Generator().manual_seed(0), source=copy, exact=True)
    assert p.source == "lookup" and p.tokens == ids[copy.start: copy.start + 3]  # exactly gamma tokens
    assert torch.equal(p.q_rows, torch.nn.functional.one_hot(torch.tensor(p.tokens), p.q_rows.shape[-1]).float())
    m = hybrid.propose(ids, 2, sampling, torch.Generator().manual_seed(0), source=model, exact=True)
    assert m.source == "model" and len(m.tokens) == 2  # the model, though the context repeats
    with torch.inference_mode():
        fresh = draft.model(torch.tensor([ids])).logits[0, -1:].float()
    assert torch.allclose(m.q_rows[:1], warp_logits(fresh, sampling), atol=1e-5)
    short = hybrid.sources([5, 6, 7, 5])  # a 1-token match: its own estimate bucket
    assert short[0].key == "lookup-short" and short[0].available == 3 and short[1] == MODEL_SOURCE
    assert hybrid.sources([1, 2, 3]) == [MODEL_SOURCE]


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_hybrid_auto_schedule_uses_both_sources_and_keeps_greedy_output(tiny_pair, temperature):
    target, draft = tiny_pair
    hybrid = Draft.of_model(draft).hybrid()
    ids = target.encode_prompt(REPEATING, chat=False)
    sampling = SamplingConfig(temperature=temperature)
    base = RunConfig(method="autoregressive", max_new_tokens=48, sampling=GREEDY, stop_at_eos=False)
    expected = [t.token_id for r in decode(target, None, ids, base) for t in r.emitted]
    config = RunConfig(method="speculative", max_new_tokens=48, sampling=sampling, gamma=3, stop_at_eos=False,
                       extra={"gamma_schedule": "auto"})
    records = list(decode(target, hybrid, ids, config))
    if sampling.greedy:
        assert [t.token_id for r in records for t in r.emitted] == expected
    sources = {ChainStep.of(r).source for r in records if r.draft}
    assert sources == {"lookup", "model"}, sources
    learned = records[-1].extra["gamma_policy"]["sources"]
    assert "model" in learned and any(key.startswith("lookup") for key in learned)
    for r in records:  # every drafted token's q is the one it was drawn from: one-hot for a copy
        for d in r.draft:
            assert d.source == ChainStep.of(r).source
