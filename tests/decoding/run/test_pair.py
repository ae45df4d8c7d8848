"""A run's pair (`decoding/run/pair.py`): drafts loaded by name, the default drafter, the app's shared
feature draft."""

from __future__ import annotations

import pytest

from decoding.drafters.hybrid import HybridDrafter
from decoding.run.pair import load_draft_value

from _siblings import load_test_module

test_feature = load_test_module("decoding/drafters/test_feature.py")
feature_dir = test_feature.feature_dir


def test_hybrid_loads_by_name_with_the_default_draft(tiny_target_dir, tiny_draft_dir, tiny_pair):
    from decoding.errors import ModelLoadError

    target, _ = tiny_pair
    value = load_draft_value(f"hybrid:{tiny_draft_dir}", target, "float32")
    assert value.kind == "hybrid" and value.model is not None and isinstance(value.drafter(target), HybridDrafter)
    with pytest.raises(ModelLoadError, match="hybrid drafter needs a draft model"):
        load_draft_value("hybrid", target, target_spec=str(tiny_target_dir))  # no default draft model for it


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


def test_the_app_loads_a_feature_draft_once_for_every_run(feature_dir, tiny_pair):
    """load_draft_value(cached=True), the app's path: every run of a class shares one feature draft
    (one copy of its layer and head rows; one model whose passes the cross-run batcher can share)."""
    from decoding.run.pair import clear_draft_cache

    target, _ = tiny_pair
    first = load_draft_value(f"hybrid:{feature_dir}", target, "float32", cached=True)
    again = load_draft_value(f"hybrid:{feature_dir}", target, "float32", cached=True)
    assert again is first and first.feature is not None
    assert load_draft_value(str(feature_dir), target, "float32", cached=True).feature is not None
    assert load_draft_value(f"hybrid:{feature_dir}", target, "float32").feature is not first.feature  # uncached
    clear_draft_cache()
    assert load_draft_value(f"hybrid:{feature_dir}", target, "float32", cached=True) is not first
