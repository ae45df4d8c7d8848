"""Parallel prompt decoding, PPD (Chen et al.; docs/papers.md).

- `generator.py`  the method: one iteration per record, its settings (`PPDSettings`) and trace data
- `prompts.py`    the prompt tokens: trained embeddings appended after the context, loaded or untrained
- `tree.py`       sparse candidate trees, their attention masks and the acceptance table they grow from
- `engine.py`     one tree forward pass, tree verification (exact or typical) and KV compaction
- `tuning.py`     the hardware-aware tree size cached per device
- `hardware.py`   measuring L(n) (latency per tree size) and T(n) (tokens per step) to choose it
- `report.py`     accepted length, tokens/s and speedup against autoregressive per tree size
- `__main__.py`   `python -m decoding.methods.ppd {tune,report}`

Training the prompt tokens is in `training/ppd_train.py` (`python -m training train-ppd`).
"""
