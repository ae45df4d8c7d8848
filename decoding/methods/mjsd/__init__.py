"""Multi-token joint speculative decoding, MJSD (Qin et al.; docs/papers.md).

- `joint.py`      the building blocks: beam drafting on the draft model, joint likelihoods after the
                  run's warping, and joint-likelihood verification against the threshold tau
- `generator.py`  the method: one iteration per record, its settings (`MjsdSettings`) and trace data
                  (`MjsdStep`)
"""
