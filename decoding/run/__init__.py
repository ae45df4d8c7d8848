"""Layer 5, a run: loading a pair, starting a method on it, and its trace as a file.

- `pair.py`        the target and what drafts for it, loaded and checked in one place (`load_pair`;
                   `Draft`: a draft model, prompt lookup, the hybrid, a feature draft)
- `runner.py`      `decode` / `generate` / `summarize`: the one path the CLI, the app and the tests share
- `trace_file.py`  a run as JSON lines (the CLI's `--json`, the app's download), checked whole on reading
- `warm_up.py`     a few unseen tokens with a pair, so a GPU's compile and graph captures happen before a visitor

Imports only the layers below it (trace, rules, lm, drafters, methods).
"""
