"""Layer 4, the methods: one generator per decoding method, yielding one `IterationRecord` per iteration.

- `registry.py`        the method registry (`METHODS`): each method's generator, settings, trace data, view
- `view.py`            what a method shows (`MethodView`): its rule's columns, panel kind, baseline, theory
- `settings.py`        a method's own settings as dataclass fields made with `knob()` (default, range,
                       help, CLI flag, app label)
- `base.py`            what every method shares: `RunConfig`, `RunState` (cut at end-of-sequence or
                       max-new-tokens, timing, energy, records)
- `autoregressive.py`  plain decoding, the baseline
- `speculative.py`     speculative sampling (Leviathan et al.): a chain drafted, verified in one pass
- `mentored.py`        the chain with mentored decoding's lossy rule (the rule: `rules/mentored.py`)
- `mjsd/`              multi-token joint speculative decoding: beam drafts, joint-likelihood verify
- `ppd/`               parallel prompt decoding: prompt tokens, sparse trees, hardware-aware tree size
- `tree_draft.py`      speculative sampling with a draft tree (`--draft-tree`): one pass, rule per sibling
- `tree_tune.py`       the tuned draft-tree size per device and precision (`--draft-tree auto` reads it)

A method is `method(target, drafter, prompt_ids, config, meter)`: it checks its settings, then returns
a generator. Adding a method means one registry entry and its own files here. Imports only the
trace, rules, lm and drafters layers.
"""
