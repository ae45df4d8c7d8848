"""Layer 3, the drafters: what proposes the draft tokens, and how many to propose.

- `base.py`          the `Drafter` interface every drafter implements (vocab_width, calls,
                     attach_target, sources, propose, rollback; explicit no-ops where a drafter has
                     nothing to do) and `Proposal` (draft tokens with q, the distribution each was
                     drawn from)
- `model.py`         the draft model: a small causal LM with its own KV cache (`ModelDrafter`)
- `lookup.py`        prompt lookup: copy what followed the context's longest earlier suffix match
- `corpus.py`        a corpus of the target's own earlier answers as a source of copies
- `hybrid.py`        a copy where the context repeats a long enough span, the model elsewhere
- `feature.py`       a feature draft that drafts from the target's own hidden states (EAGLE)
- `chain_graph.py`   the feature draft's and the draft model's greedy chains as bodies for one CUDA graph
                     (lm/chain_graphs.py; off by default)
- `output_head.py`   a draft's output head restricted to the tokens the target writes (FR-Spec)
- `gamma_policy.py`  how many tokens to draft next: fixed, automatic (per source, and for the model a
                     tree or a chain, by expected tokens per second) or HF's heuristic; when a
                     chain or a tree stops growing
- `tree.py`          draft trees as plain data: growth by path confidence, tree masks, Gumbel-top-k

`DraftSource` (one way to draft an iteration) lives in the trace layer (`decoding/trace/source.py`),
since the run statistics group by it too. Imports only the trace, rules and lm layers.
"""
