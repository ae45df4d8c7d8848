"""Layer 0, the trace: the plain data every part of the engine and every reader share.

- `record.py`   the per-iteration record (`IterationRecord`), the run summary and their parts: the
                contract between the methods and the app, CLI, benchmark and tests
- `plain.py`    plain JSON data <-> typed dataclasses, every field's type checked on the way in
- `metrics.py`  one definition of each run statistic (tokens per call, alpha, c, ...), read off records
- `source.py`   where a draft's tokens come from (`DraftSource`, the copying kinds); it sits here,
                below the drafters, because the statistics and the gamma policy group by it too

Imports nothing from the layers above (rules, lm, drafters, methods, run, eval).
"""
