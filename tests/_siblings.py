"""Test modules that reuse another test module's checks (the CUDA tests run the CPU tests' bodies on the
GPU; the drafters' tests reuse the speculative exactness checks) load it by its path under tests/.

pytest imports a test module under its file's name, with the file's folder on sys.path (tests/ has no
__init__.py, so every test file's name is unique); `load_test_module` imports it the same way, through
the import system, so pytest's assertion rewriting applies and either import finds the other's module.
"""

import importlib
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def load_test_module(path: str):
    """The test module at `path` (relative to tests/), imported once under its file's name."""
    file = TESTS / path
    if file.stem in sys.modules:
        return sys.modules[file.stem]
    folder = str(file.parent)
    sys.path.insert(0, folder)
    try:
        return importlib.import_module(file.stem)
    finally:
        sys.path.remove(folder)
