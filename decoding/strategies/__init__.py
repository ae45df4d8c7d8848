"""One generator per decoding method (`decoding.methods.METHODS` registers them with their settings).

A strategy is `method(target, drafter, prompt_ids, config, meter)`: it checks its settings, then
returns a generator yielding one `IterationRecord` per iteration (see `base.py`).
"""

from .autoregressive import autoregressive
from .base import MAX_GAMMA, RunConfig, RunState
from .mentored import mentored
from .mjsd import mjsd
from .ppd import ppd
from .speculative import speculative

__all__ = ["MAX_GAMMA", "RunConfig", "RunState", "autoregressive", "speculative", "mentored", "mjsd", "ppd"]
