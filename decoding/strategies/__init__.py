"""One generator per decoding method; `METHODS` maps the CLI/app name to it."""

from .autoregressive import autoregressive
from .base import MAX_GAMMA, RunConfig, RunState
from .speculative import speculative
from .mentored import mentored
from .mjsd import mjsd
from .ppd import ppd

METHODS = {
    "autoregressive": autoregressive,
    "speculative": speculative,
    "mentored": mentored,
    "mjsd": mjsd,
    "ppd": ppd,
}
USES_DRAFTER = {"speculative", "mentored", "mjsd"}

__all__ = ["METHODS", "USES_DRAFTER", "MAX_GAMMA", "RunConfig", "RunState", "autoregressive", "speculative", "mentored", "mjsd"]
