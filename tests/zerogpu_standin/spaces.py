"""A stand-in for Hugging Face's `spaces` package (tests/app/test_zerogpu.py puts this folder first on
the path): `spaces.GPU` records what it wraps and every call with its asked duration, and passes
arguments and results through pickle, as ZeroGPU does between the app and its GPU worker."""

import functools
import inspect
import json
import os
import pickle


def _log(entry: dict) -> None:
    with open(os.environ["STANDIN_SPACES_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def _cross(value):
    return pickle.loads(pickle.dumps(value))


def GPU(task=None, *, duration=None, size=None):
    def wrap(fn):
        _log({"event": "wrap", "name": fn.__name__})

        def asked(args, kwargs):
            return duration(*args, **kwargs) if callable(duration) else duration

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def generator(*args, **kwargs):
                args, kwargs = _cross((args, kwargs))
                _log({"event": "call", "name": fn.__name__, "duration": asked(args, kwargs)})
                for item in fn(*args, **kwargs):
                    yield _cross(item)
            return generator

        @functools.wraps(fn)
        def regular(*args, **kwargs):
            args, kwargs = _cross((args, kwargs))
            _log({"event": "call", "name": fn.__name__, "duration": asked(args, kwargs)})
            return _cross(fn(*args, **kwargs))
        return regular

    return wrap(task) if callable(task) else wrap
