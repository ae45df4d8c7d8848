"""Layer 6, evaluation: measuring the methods and the drafts (nothing below imports it).

- `bench/`           `python -m decoding bench`: speed, acceptance, quality, memory and energy of the
                     methods beside Hugging Face's own generate() and assisted generation
- `gpu_check/`       `python -m decoding gpu-check`: the GPU path checked and measured in one command
- `eval_draft.py`    `python -m decoding eval-draft`: how good a draft is for a target (alpha, greedy
                     agreement, tokens per call, c)
- `eval_feature.py`  eval-draft's figures for a feature draft
- `lookup_eval.py`   how long the context must repeat before copying beats the draft model
                     (`eval-draft --match-lengths`)
- `energy.py`        energy meters (NVML, RAPL or none, never an invented number) and the
                     weight-bytes-read proxy
- `procstat.py`      a process's memory figures from /proc (the benchmark's memory children, the app)
- `tree_tune.py`     measures this device's draft-tree size (`python -m decoding.eval.tree_tune`)
- `static_smoke.py`  the static cache's GPU smoke check: plain decoding on the dynamic cache, the eager
                     static cache and CUDA graphs, tokens/s and token equality (scripts/gpu_static_smoke.py)
"""
