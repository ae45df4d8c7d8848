"""The corpus lookup: the target's own earlier answers as a third source of the hybrid drafter.

The corpus index on hand-written documents (longest match, the vote on the next token, document
boundaries), its files, and the exactness of the hybrid that copies from it: greedy output equal to
autoregressive in float32, the target's two-token distribution when sampled (chi-square), q one-hot.
"""

import pytest
import torch

from decoding.drafters.corpus import TextCorpus
from decoding.drafters.hybrid import HybridDrafter
from decoding.drafters.model import ModelDrafter
from decoding.errors import ModelLoadError
from decoding.methods.base import RunConfig
from decoding.methods.speculative import ChainStep
from decoding.rules.warp import SamplingConfig
from decoding.run.pair import Draft, load_draft_value
from decoding.run.runner import decode
from decoding.trace.metrics import source_key
from decoding.trace.source import MODEL_SOURCE

from _siblings import load_test_module

test_speculative = load_test_module("decoding/methods/test_speculative.py")
GREEDY = SamplingConfig(temperature=0.0)
DOCS = [[1, 2, 3, 4, 5], [9, 2, 3, 4, 7], [8, 2, 3, 4, 7, 6]]


def test_find_takes_the_longest_held_suffix_and_the_continuation_seen_most():
    corpus = TextCorpus(DOCS)
    match = corpus.find([0, 0, 2, 3, 4])  # 2 3 4 was followed by 5 once and by 7 twice
    assert match.length == 3 and corpus.continuation(match, 8) == [7, 6]  # the latest 7, in the third answer
    longer = corpus.find([9, 2, 3, 4])  # 9 2 3 4 was followed by 7, at the end of the second answer
    assert longer.length == 4 and corpus.continuation(longer, 8) == [7] and longer.available == 1
    assert corpus.find([5, 3, 4]) is None  # only 2 tokens match: below the shortest indexed length
    assert corpus.find([4, 7, 6]) is None  # nothing followed it: a continuation never crosses an answer's end
    assert corpus.find([2, 3]) is None and len(corpus) == 16


def test_save_and_load_round_trip(tmp_path):
    corpus = TextCorpus(DOCS, {"target": "tiny"})
    corpus.save(tmp_path / "c")
    again = TextCorpus.load(tmp_path / "c")
    assert again.tokens == corpus.tokens and again.ends == corpus.ends and again.meta == {"target": "tiny"}
    assert again.index == corpus.index
    with pytest.raises(ValueError, match="holds no corpus.safetensors"):
        TextCorpus.load(tmp_path)


def _hybrid(pair, corpus):
    target, draft = pair
    width = min(target.vocab_size, draft.vocab_size)
    return HybridDrafter(ModelDrafter(draft.model, draft.device, width, draft.name), width, target.device,
                         corpus=corpus)


def _greedy(target, ids, n):
    config = RunConfig(method="autoregressive", max_new_tokens=n, sampling=GREEDY, stop_at_eos=False)
    return [t.token_id for r in decode(target, None, ids, config) for t in r.emitted]


def test_hybrid_offers_the_corpus_and_copies_from_it_with_one_hot_q(tiny_pair):
    target, _ = tiny_pair
    ids = target.encode_prompt("qzx vbn", chat=False)
    corpus = TextCorpus([ids[-3:] + [11, 12, 13]])
    hybrid = _hybrid(tiny_pair, corpus)
    sources = hybrid.sources(ids)
    known = [s for s in sources if s.kind == "corpus"]
    assert len(known) == 1 and known[0].key == "corpus" and known[0].available == 3 and sources[-1] == MODEL_SOURCE
    p = hybrid.propose(ids, 2, GREEDY, torch.Generator(), source=known[0], exact=True)
    assert p.source == "corpus" and p.tokens == [11, 12] and p.match_length == 3
    assert torch.equal(p.q_rows, torch.nn.functional.one_hot(torch.tensor([11, 12]), p.q_rows.shape[-1]).float())
    fixed = hybrid.propose(ids, 3, GREEDY, torch.Generator())  # the fixed rule: no long repeat, the corpus holds it
    assert fixed.source == "corpus" and fixed.tokens == [11, 12, 13]
    assert "corpus" in hybrid.name and "corpus" not in _hybrid(tiny_pair, None).name


@pytest.mark.parametrize("schedule", ["fixed", "auto"])
def test_hybrid_with_a_corpus_keeps_greedy_output(tiny_pair, schedule):
    target, draft = tiny_pair
    ids = target.encode_prompt("qzx vbn mlk", chat=False)
    expected = _greedy(target, ids, 40)
    # the target's own answer to this prompt (its copies are accepted) and a wrong one (they are not)
    wrong = [(t + 7) % target.vocab_size for t in expected]
    corpus = TextCorpus([ids[-3:] + expected[:20], expected[10:30], ids[-3:] + wrong[:10]])
    config = RunConfig(method="speculative", max_new_tokens=40, sampling=GREEDY, gamma=3, stop_at_eos=False,
                       extra={"gamma_schedule": schedule})
    records = list(decode(target, Draft.of_model(draft).hybrid(corpus), ids, config))
    assert [t.token_id for r in records for t in r.emitted] == expected
    assert "corpus" in {ChainStep.of(r).source for r in records if r.draft}
    assert any(source_key(r) == "corpus" for r in records)
    from app import render

    for r in records:
        if ChainStep.of(r).source == "corpus":
            assert all(d.source == "corpus" for d in r.draft)
            # the explainer says where the tokens came from: the chips, their tooltips, the draft row
            assert "from-corpus" in "".join(render.record_chips(r))
            assert "earlier answers" in render.source_text(r, r.draft[0])
            assert "Copied from the target's earlier answers" in render.draft_row_html(r)


def test_hybrid_with_a_corpus_keeps_the_target_distribution(tiny_close_pair, monkeypatch):
    """The two-token chi-square test of test_speculative with the first draft copied from the corpus."""
    target, draft = tiny_close_pair
    ids = target.encode_prompt(test_speculative.PROMPT, chat=False)
    likely = _greedy(target, ids, 2)  # copies the target gives fair probability: accepted and rejected
    corpus = TextCorpus([ids[-3:] + likely])
    seen = set()
    original = HybridDrafter.propose

    def spy(self, *a, **k):
        proposal = original(self, *a, **k)
        seen.add(proposal.source)
        return proposal

    monkeypatch.setattr(HybridDrafter, "propose", spy)
    test_speculative.test_sampled_speculative_matches_target_distribution(
        (target, Draft.of_model(draft).hybrid(corpus)))
    assert "corpus" in seen


def test_the_shipped_corpus_is_the_default_targets_and_another_is_loaded_from_its_folder(
        tiny_pair, tiny_target_dir, tiny_draft_dir, tmp_path):
    target, _ = tiny_pair
    with pytest.raises(ModelLoadError, match="default target only"):
        load_draft_value("hybrid+corpus:distilled", target, target_spec=str(tiny_target_dir))
    with pytest.raises(ModelLoadError, match="needs a draft model"):
        load_draft_value("hybrid+corpus:prompt-lookup", target)
    TextCorpus(DOCS).save(tmp_path / "mine")
    tiny = {"target_spec": str(tiny_target_dir)}
    draft = load_draft_value(f"hybrid+corpus={tmp_path / 'mine'}:{tiny_draft_dir}", target, **tiny)
    assert draft.corpus.tokens == TextCorpus(DOCS).tokens
    assert draft.spec.startswith(f"hybrid+corpus={tmp_path / 'mine'}:")
    assert draft.drafter(target).corpus is draft.corpus
    TextCorpus([[1, 2, 3, target.vocab_size + 5]]).save(tmp_path / "other")
    with pytest.raises(ModelLoadError, match="beyond this target's vocabulary"):
        load_draft_value(f"hybrid+corpus={tmp_path / 'other'}:{tiny_draft_dir}", target, **tiny)
    with pytest.raises(ModelLoadError, match="cannot load the corpus"):
        load_draft_value(f"hybrid+corpus={tmp_path / 'none'}:{tiny_draft_dir}", target, **tiny)
