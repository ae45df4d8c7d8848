"""`python -m decoding bench`: speed, acceptance, quality, memory and energy of the decoding methods,
with Hugging Face transformers' own `generate()` and assisted generation measured in the same run,
per prompt category and overall.

- `variants.py` the variants (from the method registry) and what a run measures
- `ours.py`     our engine's runs
- `runs.py`     one run of any variant
- `hf_peer.py`  HF generate() and assisted generation (a draft model or prompt lookup)
- `hf_fast.py`  HF generate() in its fastest configuration: a static cache and a compiled step
- `memory.py`   peak memory of each variant in its own process
- `stats.py`    the figures of each variant and category (definitions: `decoding/trace/metrics.py`)
- `report.py`   markdown tables and charts
- `driver.py`   the protocol of one run (warm-up, interleaved repeats, quality runs)
- `cli.py`      the command line
- `__main__.py` a memory child (`python -m decoding.eval.bench --memory-child`)
- `ceiling.py`  how fast copying could make greedy decoding: a fixed output replayed under drafting rules
- `tree_ceiling.py`  the same replay with a draft's chains or trees at each position, measured or modelled
  (a stronger draft, a cheaper verify), its accepted length a distribution taken in exact expectation
- `verify_cost.py`  `python -m decoding verify-cost`: one target pass over k new tokens against one token

Figures per variant: tokens/s (median and range over repeats of total tokens / total time),
speedup = (total tokens / total time) over the same for our autoregressive run in this run,
mean accepted length, tokens per target call, alpha, c = draft step time / autoregressive target
step time (both from this run), the speedup predicted by Theorem 3.8 from those
(`theory.improvement_factor`), by the measured cost model (`theory.measured_improvement` with the
measured verify time of gamma + 1 tokens) and by the trace cost model (each iteration's k draft
steps + the measured verify time of its k + 1 tokens: what the time would be without any overhead
outside the two models), target perplexity, peak memory, energy (meter or null with the reason)
and the weight-bytes-per-token proxy.
"""

from .cli import add_parser, run_cli
from .driver import machine_info, run_bench
from .memory import measure_memory
from .report import markdown_report, markdown_table, write_outputs
from .runs import run_variant
from .variants import RunStats, Variant, build_variants, parse_gammas

__all__ = ["add_parser", "run_cli", "run_bench", "machine_info", "measure_memory", "markdown_report",
           "markdown_table", "write_outputs", "RunStats", "Variant", "build_variants", "parse_gammas", "run_variant"]
