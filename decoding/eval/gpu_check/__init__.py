"""`python -m decoding gpu-check` (`make gpu-check`): the GPU path checked and measured in one command.

The suite tests every CUDA and NVML line with fakes; this command does the checks that need a GPU,
wherever a CUDA machine is at hand, with the Python already there (no network). Parts, each runnable
alone with `--part`:

- `tests`  the suite's CUDA-marked tests (tests/decoding/test_cuda.py) in a pytest subprocess  (`tests_part.py`)
- `bench`  a short benchmark of the pairs that load there, float32 and half precision, with the
           HF peers, through the benchmark's own command line                        (`bench_part.py`)
- `energy` NVML joules per token over windows of at least one second, or the meter's reason
                                                                                       (`energy_part.py`)
- `ppd`    the PPD hardware tune: does the chosen tree size move on a GPU?            (`ppd_part.py`)

The command line is `cli.py`, what a run is asked to do `settings.py`, which models it loads
`pairs.py`, and the drafter a GPU Space should start with, from the bench part's figures, `choice.py`.
The results go to docs/gpu.md with the device, driver, CUDA/torch versions and the date
(`report.py`, `device.py`). Without CUDA the command prints one line and exits 0, writing nothing.
"""

from .cli import add_parser, run_cli
from .settings import PARTS

__all__ = ["add_parser", "run_cli", "PARTS"]
