"""The speculative-decoding engine, in layers: a module imports only from its own layer or lower ones.

    layer 0  trace/     the per-iteration record, plain-data checks, run statistics, draft sources;
             errors.py, paths.py (the exceptions users see; where the repository's files live)
    layer 1  rules/     pure tensor maths: warping, acceptance rules, the mentored rule, theory, the lab
    layer 2  lm/        models: loading, the cached LM and its KV cache, batching, devices, prompt files
    layer 3  drafters/  what proposes draft tokens (model, lookup, corpus, hybrid, feature) and how many
    layer 4  methods/   one generator per method (the registry, settings, speculative, mentored, MJSD, PPD)
    layer 5  run/       loading a pair, running a method, trace files
    layer 6  eval/      the benchmark, the GPU check, draft evaluation, energy meters
    top      cli.py, __main__.py: `python -m decoding ...`

`LAYERS` below is that table as data; tests/decoding/test_layers.py checks every import against it.
Nothing in this package imports Gradio, the app or the trainers (`training/` imports from here); the
app, the CLI, the benchmark and the tests all read the trace records that the methods yield.
Reading order for a newcomer: trace/record.py, rules/acceptance.py, methods/speculative.py,
drafters/hybrid.py, methods/registry.py, run/runner.py, cli.py.
"""

# Bottom to top: (layer name, the modules and packages it holds, as dotted names under `decoding`).
LAYERS = (
    ("trace", ("errors", "paths", "trace")),
    ("rules", ("rules",)),
    ("lm", ("lm",)),
    ("drafters", ("drafters",)),
    ("methods", ("methods",)),
    ("run", ("run",)),
    ("eval", ("eval",)),
    ("top", ("cli", "__main__")),
)
