"""The feature draft (EAGLE): drafting from the target's own hidden states must keep speculative
decoding exact (greedy equal to autoregressive in float32, the two-token chi-square test, q in
the trace equal to the q drawn from), its cache must equal a fresh pass after any rollback, and
the distill stages that make one (features, train-features) must run and resume."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from decoding.drafters.feature import FeatureDrafter, FeatureDraftModel, draft_layer_config, is_feature_draft
from decoding.drafters.hybrid import HybridDrafter
from decoding.drafters.output_head import OutputHead
from decoding.errors import ModelLoadError
from decoding.lm.cached_lm import CachedLM
from decoding.methods.base import RunConfig
from decoding.methods.speculative import ChainStep
from decoding.rules.warp import SamplingConfig, warp_logits
from decoding.run.pair import load_draft_value
from decoding.run.runner import decode

from _siblings import load_test_module
from conftest import requires_embedded_target

test_speculative = load_test_module("decoding/methods/test_speculative.py")
REPEATING = load_test_module("decoding/drafters/test_hybrid.py").REPEATING
GREEDY = SamplingConfig(temperature=0.0)


@pytest.fixture(scope="module")
def feature_dir(tiny_feature_dir):
    """conftest's tiny feature draft (its head leaves out the target's 3 likeliest first tokens after
    test_speculative.PROMPT)."""
    assert test_speculative.PROMPT == "hello world, the cat"
    return tiny_feature_dir


@pytest.fixture(scope="module")
def feature(feature_dir, tiny_pair):
    return load_draft_value(str(feature_dir), tiny_pair[0], "float32")


def test_a_feature_draft_folder_loads_as_one(feature, feature_dir, tiny_pair):
    target, _ = tiny_pair
    assert is_feature_draft(feature_dir) and feature.feature is not None and feature.model is None
    assert feature.kind == "model" and feature.head.size == target.vocab_size - 3
    assert feature.n_params == sum(p.numel() for p in feature.feature.parameters()) > 0
    assert isinstance(feature.drafter(target), FeatureDrafter)
    assert isinstance(feature.hybrid().drafter(target), HybridDrafter)


def test_a_feature_draft_for_another_width_is_refused(tmp_path, tiny_pair, tiny_draft_dir):
    from decoding.lm.models import load_model

    target, _ = tiny_pair
    other = load_model(str(tiny_draft_dir), device="cpu", dtype="float32")  # 32 wide, the target 64
    FeatureDraftModel(draft_layer_config(other.model.config)).save(tmp_path)
    OutputHead(torch.arange(5), torch.zeros(5, 32)).save(tmp_path, with_weight=False)
    with pytest.raises(ModelLoadError, match="32-wide hidden states; this target's are 64 wide"):
        load_draft_value(str(tmp_path), target, "float32")


def test_the_target_keeps_its_hidden_states_through_rollbacks(tiny_pair):
    target, _ = tiny_pair
    ids = target.encode_prompt(REPEATING, chat=False)
    lm = CachedLM(target.model, target.device, target.vocab_size)
    lm.keep_features()
    plain = CachedLM(target.model, target.device, target.vocab_size)
    assert torch.allclose(lm.extend(ids[:10], keep=1), plain.extend(ids[:10], keep=1), atol=1e-5)
    lm.extend(ids[:10], [5, 6, 7])  # a draft of three tokens, all rejected
    lm.rollback(10)
    lm.extend(ids[:len(ids)])
    with torch.inference_mode():
        fresh = target.model.get_decoder()(input_ids=torch.tensor([ids])).last_hidden_state[0]
    assert torch.allclose(lm.features[: len(ids)], fresh, atol=1e-5)


def test_feature_draft_greedy_equals_autoregressive(tiny_pair, feature):
    target, _ = tiny_pair
    ids = target.encode_prompt(REPEATING, chat=False)
    base = RunConfig(method="autoregressive", max_new_tokens=30, sampling=GREEDY, stop_at_eos=False)
    expected = [t.token_id for r in decode(target, None, ids, base) for t in r.emitted]
    for draft, gamma in ((feature, 3), (feature, "auto"), (feature.hybrid(), 3)):
        config = RunConfig(method="speculative", max_new_tokens=30, sampling=GREEDY, stop_at_eos=False,
                           **({"gamma": 4, "extra": {"gamma_schedule": "auto"}} if gamma == "auto" else {"gamma": gamma}))
        records = list(decode(target, draft, ids, config))
        assert [t.token_id for r in records for t in r.emitted] == expected
        assert sum(len(r.draft) for r in records) > 0
    sources = {ChainStep.of(r).source for r in decode(target, feature.hybrid(), ids, config) if r.draft}
    assert sources == {"lookup", "model"}, sources


def test_feature_draft_sampled_output_has_the_target_distribution(tiny_pair, feature):
    target, _ = tiny_pair
    test_speculative.check_two_token_distribution(target, feature, test_speculative.PROMPT, max_new_tokens=3)


def test_q_in_the_trace_is_the_draft_from_a_fresh_cache(tiny_pair, feature):
    """After every iteration (rollbacks, catch-ups), the q the trace shows for a draft's first
    token equals the q of a new drafter that reads the whole context in one pass."""
    target, _ = tiny_pair
    sampling = SamplingConfig(temperature=0.8, top_k=6)
    ids = target.encode_prompt("qzx vbn", chat=False)
    config = RunConfig(method="speculative", max_new_tokens=24, sampling=sampling, gamma=3, seed=3,
                       stop_at_eos=False)
    records = list(decode(target, feature, ids, config))
    sequence = list(ids)
    checked = 0
    for r in records:
        if r.draft:
            lm = CachedLM(target.model, target.device, target.vocab_size)
            lm.keep_features()
            lm.extend(sequence[:-1])
            fresh = feature.drafter(target)
            fresh.attach_target(lm)
            q = fresh.propose(sequence, 1, sampling, torch.Generator().manual_seed(0)).q_rows[0]
            assert abs(float(q[r.draft[0].token_id]) - r.draft[0].q) < 1e-4
            checked += 1
        sequence += [t.token_id for t in r.emitted]
    assert checked >= 5


def test_feature_draft_q_is_zero_outside_its_head(tiny_pair, feature):
    target, _ = tiny_pair
    ids = target.encode_prompt(test_speculative.PROMPT, chat=False)
    lm = CachedLM(target.model, target.device, target.vocab_size)
    lm.extend(ids[:-1])
    drafter = feature.drafter(target)
    drafter.attach_target(lm)
    assert lm.features is not None
    lm.rollback(0)
    lm.extend(ids[:-1])
    q = drafter.propose(ids, 3, SamplingConfig(temperature=1.0), torch.Generator().manual_seed(1)).q_rows
    outside = torch.ones(target.vocab_size, dtype=torch.bool)
    outside[feature.head.token_ids] = False
    assert q.shape == (3, target.vocab_size) and float(q[:, outside].abs().max()) == 0.0
    assert torch.allclose(q.sum(-1), torch.ones(3))


def test_mjsd_refuses_a_feature_draft(tiny_pair, feature):
    target, _ = tiny_pair
    config = RunConfig(method="mjsd", max_new_tokens=4, sampling=GREEDY, gamma=2)
    with pytest.raises(ValueError, match="not prompt lookup or a feature draft"):
        list(decode(target, feature, target.encode_prompt("hi", chat=False), config))


def test_the_draft_q_matches_the_head_over_the_predicted_feature(tiny_pair, feature):
    """One draft step by hand: fc and the layer over the true pairs, the head over the last output."""
    target, _ = tiny_pair
    ids = target.encode_prompt("hello there", chat=False)
    lm = CachedLM(target.model, target.device, target.vocab_size)
    drafter = feature.drafter(target)
    drafter.attach_target(lm)
    lm.extend(ids[:-1])
    sampling = SamplingConfig(temperature=1.0)
    q = drafter.propose(ids, 1, sampling, torch.Generator().manual_seed(0)).q_rows[0]
    with torch.inference_mode():
        f = target.model.get_decoder()(input_ids=torch.tensor([ids[:-1]])).last_hidden_state
        e = target.model.get_input_embeddings()(torch.tensor([ids[1:]]))
        pred, _ = feature.feature(f, e, torch.arange(len(ids) - 1)[None])
        logits = feature.head.logits(pred[0, -1:], target.vocab_size)[0]
    assert torch.allclose(q, warp_logits(logits, sampling), atol=1e-5)


# ---- the shipped feature draft ------------------------------------------------------------------

@requires_embedded_target
def test_shipped_feature_draft_is_exact_and_the_app_offers_it(embedded_target):
    """`--draft feature` loads the shipped folder for the offline target (head rows from the
    target's head, eos inside); greedy output equals autoregressive in float32, with tokens
    accepted; the app lists its preset and says what it drafts from."""
    from app.explainer.handlers import load_models
    from app.presets import presets
    from decoding.paths import SHIPPED_FEATURE_DRAFT

    assert (SHIPPED_FEATURE_DRAFT / "README.md").is_file()
    assert sum(f.stat().st_size for f in SHIPPED_FEATURE_DRAFT.iterdir()) < 10_000_000
    target = embedded_target
    draft = load_draft_value("feature", target, "float32")
    assert draft.feature is not None and draft.head.size == 8192
    assert set(target.eos_token_ids(True)) <= set(draft.head.token_ids.tolist())
    assert torch.equal(draft.head.weight, target.model.get_output_embeddings().weight[draft.head.token_ids])
    ids = target.encode_prompt("Name three colors of the rainbow.", chat=True)
    config = RunConfig(method="speculative", gamma=4, max_new_tokens=24, sampling=GREEDY, chat=True)
    spec = list(decode(target, draft, ids, config))
    auto = list(decode(target, None, ids, dataclasses.replace(config, method="autoregressive")))
    assert [t.token_id for r in spec for t in r.emitted] == [t.token_id for r in auto for t in r.emitted]
    assert len(spec) < len(auto)  # some draft tokens were accepted
    label = next(p.label for p in presets() if p.key == "default-feature")
    message = load_models(label, "", "", "float32", progress=lambda *a, **k: None)
    assert "drafting from the target's own hidden states over the target's 8,192 most frequent tokens" in message
    label = next(p.label for p in presets() if p.key == "default-hybrid-feature")
    message = load_models(label, "", "", "float32", progress=lambda *a, **k: None)
    assert "hybrid" in message and "feature-draft-smollm2-135m" in message, message
