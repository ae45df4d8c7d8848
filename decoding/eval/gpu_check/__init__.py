"""`python -m decoding gpu-check` (`make gpu-check`): the GPU path checked and measured in one command,
in a time budget (`--budget-s`, default 6 minutes).

The suite tests every CUDA and NVML line with fakes; this command does the checks that need a GPU,
wherever a CUDA machine is at hand, with the Python already there (no network). Parts, in running
order, each runnable alone with `--part`:

- `bench`  the Spec-Bench subset in benchmark jobs (`plan.py`, `jobs.py`, `bench_part.py`): our
           decoding with the static cache and CUDA graphs, plain and every offline drafter at gamma 4
           and auto, in half precision and (plain and the hybrid) in float32 for greedy equality; plain
           with the dynamic cache (before); HF generate() compiled with a static cache, and HF's eager
           generate() and assisted generation. Each job on as many prompts as the budget allows.
- `energy` NVML joules per token over windows of at least two seconds, plain against the fastest
           drafter, static backend, or the meter's reason                             (`energy_part.py`)
- `tests`  the suite's CUDA-marked tests (tests/decoding/test_cuda.py) in a pytest subprocess  (`tests_part.py`)
- `ppd`    the PPD hardware tune, only when the budget has room for it                (`ppd_part.py`)

The command line is `cli.py`, what a run is asked to do `settings.py`, which models it loads
`pairs.py`, the GPU backend's goals `goals.py`, and the drafter a GPU Space starts with `choice.py`. After
each part and each benchmark job, docs/gpu.md (`report.py`, `device.py`), the results JSON and
assets/gpu-choice.json are written, and copied to `$GPU_CHECK_COPY_TO` (`publish.py`). Without CUDA
the command prints one line and exits 0, writing nothing.
"""

from .cli import add_parser, run_cli
from .settings import PARTS

__all__ = ["add_parser", "run_cli", "PARTS"]
