"""What a session keeps (app/session.py, app/live.py): a finished run releases its generator, the KV
caches of its target and drafter and the target's kept hidden states; the session then holds its
packed records, summary and settings, a few kB beyond the records' bytes (app/footprint.py)."""

import gc
import weakref

import pytest

from app import live
from app.footprint import session_bytes
from app.packed import PackedRecords
from app.session import Session
from app.settings import make_settings
from decoding.lm import cached_lm


def _settings(target_dir, draft: str, method="speculative", max_new_tokens=24):
    return make_settings("the cat sat on the mat, the cat", False, method, 4, 0.8, 0, 1.0, 1.0, 3, max_new_tokens,
                         str(target_dir), draft, dtype="float32")


@pytest.fixture
def made_lms(monkeypatch):
    """Weak references to every CachedLM (a target's, a draft model's, a feature draft's) made from now on."""
    made = []
    real = cached_lm.CachedLM.__init__

    def init(self, *args, **kwargs):
        real(self, *args, **kwargs)
        made.append(weakref.ref(self))

    monkeypatch.setattr(cached_lm.CachedLM, "__init__", init)
    return made


@pytest.mark.parametrize("draft", ["hybrid:{feature}", "{draft}"])
def test_a_finished_run_releases_its_caches_and_keeps_only_its_records(tiny_target_dir, tiny_draft_dir,
                                                                         tiny_feature_dir, made_lms, draft):
    session = Session()
    settings = _settings(tiny_target_dir, draft.format(feature=tiny_feature_dir, draft=tiny_draft_dir))
    live.start(session, settings, None)
    generator = weakref.ref(session.generator)
    live.advance(session)
    lms = [ref() for ref in made_lms]  # while it runs: the target's and the drafter's caches
    assert len(lms) >= 2 and any(lm.features is not None for lm in lms) == draft.startswith("hybrid")
    del lms
    while live.advance(session) is not None and session.generator is not None:
        pass
    gc.collect()
    assert generator() is None, "the finished run's generator is still referenced"
    assert all(ref() is None for ref in made_lms), "a finished run's KV cache (or hidden states) is still held"
    assert session.summary is not None and session.generator is None and session.meter is None
    assert isinstance(session.records, PackedRecords) and len(session.records) == session.summary.iterations
    held, unpacked = session_bytes(session), session_bytes(list(session.records))
    assert held < session.records.nbytes + 16_000 and held < unpacked / 4, (held, session.records.nbytes, unpacked)


def test_a_stopped_run_keeps_its_caches_for_step_and_reset_releases_them(tiny_target_dir, tiny_draft_dir, made_lms):
    session = Session()
    live.start(session, _settings(tiny_target_dir, str(tiny_draft_dir), max_new_tokens=40), None)
    live.advance(session)
    assert session.live and isinstance(session.records, list)  # Step continues it: nothing released
    gc.collect()
    assert any(ref() is not None for ref in made_lms)
    session.reset_run()
    gc.collect()
    assert all(ref() is None for ref in made_lms) and session.records == [] and session.summary is None
