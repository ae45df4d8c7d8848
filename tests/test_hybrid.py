"""Drafters that pay: the hybrid lookup/model drafter and a draft head restricted to frequent tokens.

Both must keep speculative decoding exact: greedy output equal to greedy autoregressive output in
float32, sampled output with the target's two-token distribution (chi-square), and the q in the
trace equal to the q each token was drawn from.
"""

import pytest
import torch

from decoding.drafters.hybrid import HybridDrafter
from decoding.drafters.model import ModelDrafter
from decoding.drafters.lookup import suffix_match
from decoding.drafters.output_head import frequent_tokens, load_head, subset_head
from decoding.run.pair import Draft, load_draft_value
from decoding.run.runner import decode
from decoding.methods.base import RunConfig
from decoding.methods.speculative import ChainStep
from decoding.rules.warp import SamplingConfig, warp_logits

import test_engine

GREEDY = SamplingConfig(temperature=0.0)
REPEATING = "the cat sat on the mat. the cat sat on the"  # a long repeated span: lookup fires
# a repeated span whose copied next token the tiny target gives probability ~0.5 (top-k 4, T = 2):
# acceptance and rejection both happen, so the chi-square test sees both paths of the copy
COPYING = "pvuwzlcpvuwz"


def test_suffix_match_finds_the_longest_most_recent_span():
    assert suffix_match([1, 2, 3, 4, 1, 2], 8) == (2, 2)
    assert suffix_match([5, 1, 2, 9, 1, 2, 7, 1, 2], 8) == (6, 2)  # equally long: the most recent
    assert suffix_match([7, 1, 2, 3, 9, 2, 3, 1, 2, 3], 8) == (4, 3)  # the longer one wins
    assert suffix_match([1, 2, 1, 2, 1, 2], 3) == (4, 3)  # capped at 3: the most recent capped match
    assert suffix_match([1, 2, 3], 8) is None and suffix_match([4], 8) is None


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


@pytest.mark.parametrize("prompt, source", [(COPYING, "lookup"), (test_engine.PROMPT, "model")])
def test_hybrid_sampled_output_has_the_target_distribution(tiny_close_pair, prompt, source, monkeypatch):
    """The two-token chi-square test of test_engine, through the hybrid drafter, once where its
    first draft is copied and once where the model drafts it."""
    target, draft = tiny_close_pair
    seen = set()
    original = HybridDrafter.propose

    def spy(self, *a, **k):
        proposal = original(self, *a, **k)
        seen.add(proposal.source)
        return proposal

    monkeypatch.setattr(HybridDrafter, "propose", spy)
    monkeypatch.setattr(test_engine, "PROMPT", prompt)
    test_engine.test_sampled_speculative_matches_target_distribution((target, Draft.of_model(draft).hybrid()))
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
    from app.lesson_widgets import _proposal  # the guided lesson's "not checked yet" caption

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
    test_engine.check_two_token_distribution(target, Draft.of_model(draft).hybrid(), "hello world, the cab",
                                             max_new_tokens=3)
    assert sum(continued) > 0.3 * len(continued), (sum(continued), len(continued))


def test_hybrid_loads_by_name_with_the_default_draft(tiny_target_dir, tiny_draft_dir, tiny_pair):
    from decoding.errors import ModelLoadError

    target, _ = tiny_pair
    value = load_draft_value(f"hybrid:{tiny_draft_dir}", target, "float32")
    assert value.kind == "hybrid" and value.model is not None and isinstance(value.drafter(target), HybridDrafter)
    with pytest.raises(ModelLoadError, match="hybrid drafter needs a draft model"):
        load_draft_value("hybrid", target, target_spec=str(tiny_target_dir))  # no default draft model for it


# ------------------------------------------------------------------ a head over frequent tokens only
def _outside(target, ids, sampling, k=2):
    """The target's top tokens at the prompt's next position: the ones to keep out of the head."""
    with torch.inference_mode():
        p = warp_logits(target.model(torch.tensor([ids])).logits[0, -1].float(), sampling)
    return torch.topk(p, k).indices.tolist()


def test_restricted_head_saves_loads_and_scores_only_its_tokens(tiny_pair, tmp_path):
    _, draft = tiny_pair
    head = subset_head(draft.model, [3, 5, 7])
    head.save(tmp_path)
    back = load_head(tmp_path, torch.float32, "cpu")
    assert back.token_ids.tolist() == [3, 5, 7] and torch.equal(back.weight, head.weight)
    logits = back.logits(torch.randn(2, back.weight.shape[1]), 20)
    assert torch.isinf(logits[:, [0, 1, 2, 4, 6, 8]]).all() and torch.isfinite(logits[:, [3, 5, 7]]).all()
    narrow = back.logits(torch.randn(2, back.weight.shape[1]), 6)  # a vocabulary that ends before id 7
    assert narrow.shape == (2, 6) and torch.isfinite(narrow[:, [3, 5]]).all() and torch.isinf(narrow[:, [0, 1, 2, 4]]).all()
    assert frequent_tokens([[1, 1, 2], [2, 2, 9]], 2, always=[0]) == [0, 2]
    # a head of token ids only (trim-head's) takes its rows from the model's own head when it loads
    head.save(tmp_path, with_weight=False)
    ids_only = load_head(tmp_path, torch.float32, "cpu", draft.model)
    assert ids_only.token_ids.tolist() == [3, 5, 7] and torch.equal(ids_only.weight, head.weight)
    with pytest.raises(ValueError, match="token ids only"):
        load_head(tmp_path, torch.float32, "cpu")
    # the energy proxy: a step reads the body and the head's 3 rows, not the whole output head
    from decoding.run.pair import Draft

    out = draft.model.get_output_embeddings().weight
    rest = sum(p.numel() * p.element_size() for p in draft.model.parameters() if p is not out)
    assert Draft.of_model(draft, head).weight_bytes == rest + 3 * out.shape[1] * out.element_size()
    assert Draft.of_model(draft).weight_bytes == draft.weight_bytes
    # the distillation shards hold tensors: counted by value, returned as ints
    ranked = frequent_tokens([torch.tensor([1, 1, 2]), torch.tensor([2, 2, 9])], 2, always=[0])
    assert ranked == [0, 2] and all(type(t) is int for t in ranked)


def test_restricted_head_sampled_output_has_the_target_distribution(tiny_close_pair):
    """The target's two likeliest next tokens are outside the head: q is 0 there, and the residual
    must bring the target's mass back exactly."""
    target, draft = tiny_close_pair
    sampling = SamplingConfig(temperature=2.0, top_k=4)
    ids = target.encode_prompt(test_engine.PROMPT, chat=False)
    outside = set(_outside(target, ids, sampling))
    head = subset_head(draft.model, [t for t in range(draft.vocab_size) if t not in outside])
    restricted = Draft.of_model(draft, head)
    proposal = restricted.drafter(target).propose(ids, 1, sampling, torch.Generator().manual_seed(0))
    assert all(float(proposal.q_rows[0, t]) == 0.0 for t in outside)  # explicit zeros outside the head
    test_engine.test_sampled_speculative_matches_target_distribution((target, restricted))


def test_restricted_head_greedy_equals_autoregressive_when_the_target_argmax_is_outside(tiny_pair):
    target, draft = tiny_pair
    ids = target.encode_prompt(test_engine.PROMPT, chat=False)
    base = RunConfig(method="autoregressive", max_new_tokens=30, sampling=GREEDY, stop_at_eos=False)
    expected = [t.token_id for r in decode(target, None, ids, base) for t in r.emitted]
    banned = sorted(set(expected[:10]))[:3]  # tokens the target's greedy output uses
    head = subset_head(draft.model, [t for t in range(draft.vocab_size) if t not in banned])
    config = RunConfig(method="speculative", max_new_tokens=30, sampling=GREEDY, gamma=3, stop_at_eos=False)
    records = list(decode(target, Draft.of_model(draft, head), ids, config))
    assert [t.token_id for r in records for t in r.emitted] == expected
    assert not any(d.token_id in banned for r in records for d in r.draft)  # never drafted
    assert any(t.token_id in banned for r in records for t in r.emitted)  # yet in the output


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


def test_model_draft_reports_its_prefill_apart_from_its_steps(tiny_pair):
    target, draft = tiny_pair
    drafter = ModelDrafter(draft.model, draft.device, min(target.vocab_size, draft.vocab_size), draft.name)
    ids = target.encode_prompt(REPEATING + " and the dog sat on the log", chat=False)
    first = drafter.propose(ids, 2, GREEDY, torch.Generator())
    assert len(ids) > 8 and first.catch_up_seconds > 0  # the prompt's pass is a prefill
    nxt = drafter.propose(ids + first.tokens, 2, GREEDY, torch.Generator())
    assert nxt.catch_up_seconds == 0.0  # two new tokens: an ordinary step


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


def test_default_drafter_is_the_fastest_measured_one_for_the_embedded_target(tiny_target_dir):
    """With no --draft, the embedded target drafts with the hybrid over the feature draft (the app's default
    preset, the fastest configuration on Spec-Bench); MJSD, which beam-searches a draft model, gets the
    distilled draft; any other target gets prompt lookup, as before."""
    from decoding.lm.models import DEFAULT_TARGET
    from decoding.run.pair import default_draft_spec, default_drafter_spec
    from decoding.paths import SHIPPED_DRAFT, SHIPPED_FEATURE_DRAFT

    shipped = (SHIPPED_FEATURE_DRAFT / "config.json", SHIPPED_DRAFT / "config.json")
    if not all(path.is_file() for path in shipped):
        pytest.skip("the shipped drafts are not in this checkout")
    assert default_drafter_spec(DEFAULT_TARGET) == "hybrid:feature"
    assert default_drafter_spec(DEFAULT_TARGET, needs_draft_model=True) == default_draft_spec(DEFAULT_TARGET) \
        == str(SHIPPED_DRAFT)
    assert default_drafter_spec(str(tiny_target_dir)) == "prompt-lookup"
