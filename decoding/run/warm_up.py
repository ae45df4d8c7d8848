"""A pair warmed up before its first visitor: on a CUDA GPU the static path compiles the lean layer's step once per
process (`lm/compiled_body.py`; 24.6 s on an H200) and captures a graph per pass shape at its first sightings
(`lm/cuda_graphs.py`), so the first run of a freshly started app would otherwise wait that long with nothing to
show. `warm_up` decodes a few greedy speculative tokens with the pair (the drafter's passes and the verify pass
included), which leaves the compiled step in the process and the graphs with the cached LMs' spares.
"""

from __future__ import annotations

import time

from ..methods.base import RunConfig
from ..rules.warp import SamplingConfig
from .runner import decode

WARM_UP_PROMPT = "Hello"
WARM_UP_TOKENS = 8


def warm_up(target, draft, tokens: int = WARM_UP_TOKENS) -> float:
    """Decode `tokens` greedy speculative tokens with the pair (`draft`: as for `runner.decode`), unseen;
    returns the seconds it took."""
    config = RunConfig(method="speculative", max_new_tokens=tokens, gamma=4, stop_at_eos=False, lean=True,
                       sampling=SamplingConfig(temperature=0.0))
    started = time.perf_counter()
    for _ in decode(target, draft, target.encode_prompt(WARM_UP_PROMPT, chat=False), config):
        pass
    return time.perf_counter() - started
