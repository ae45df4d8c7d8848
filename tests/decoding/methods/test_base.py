"""What every method shares (`decoding/methods/base.py`): end-of-sequence stops a run and is included."""

from decoding.methods.base import RunConfig
from decoding.rules.warp import SamplingConfig
from decoding.run.runner import decode

GREEDY = SamplingConfig(temperature=0.0)
PROMPT = "hello world, the cat"


def test_eos_stops_and_is_included(tiny_pair):
    target, draft = tiny_pair
    prompt_ids = target.encode_prompt(PROMPT, chat=False)
    # find what greedy produces, then declare its 5th token an end-of-sequence token
    base = RunConfig(method="autoregressive", max_new_tokens=12, sampling=GREEDY, stop_at_eos=False)
    free = [t.token_id for r in decode(target, None, prompt_ids, base) for t in r.emitted]
    stop_id = free[4]
    first = free.index(stop_id)
    original = target.eos_token_ids
    target.eos_token_ids = lambda chat: [stop_id]
    try:
        for method in ("autoregressive", "speculative"):
            config = RunConfig(method=method, max_new_tokens=12, sampling=GREEDY, gamma=4)
            records = list(decode(target, draft, prompt_ids, config))
            ids = [t.token_id for r in records for t in r.emitted]
            assert ids == free[: first + 1]
            assert records[-1].finished and records[-1].stop_reason == "eos"
    finally:
        target.eos_token_ids = original
