"""Test modules that reuse another test module's checks (the CUDA tests run the CPU tests' bodies on the
GPU; the drafters' tests reuse the speculative exactness checks) load it by its path under tests/.

pytest imports a test module under its file's name (tests/ has no __init__.py, so every test file's name
is unique); `load_test_module` does the same, so either import finds the other's module object.
"""

import importlib.util
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def load_test_module(path: str):
    """The test module at `path` (relative to tests/), imported once under its file's name."""
    name = Path(path).stem
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, TESTS / path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return module
