"""Layer 1, the rules: pure tensor maths over probability distributions (no models, no caches).

- `warp.py`        temperature, top-k and top-p: logits -> the one distribution p or q is
- `draw.py`        one token drawn from a probability row (inverse CDF; the decoding loops' draws)
- `acceptance.py`  the strict and lenient acceptance rules, the residual, verifying a chain
- `tree_acceptance.py`  verifying a draft tree: recursive rejection over siblings (exact at any temperature)
- `mentored.py`    mentored decoding's rule: the most acceptance within a KL(target || output) bound
- `theory.py`      Leviathan et al.'s closed forms (tokens per call, speedup) and a measured cost model
- `lab.py`         the single-step sampling lab: a rule applied N times to hand-written p and q
- `implementations.py`  the lab's switch: the correct step and five public mistakes, closed form and sampler
- `examples.py`    the lab's shipped p and q: the worked example and a 47-token Zipf-like vocabulary

Imports only the trace layer below it.
"""
