"""Speculative-decoding engine: models, sampling, acceptance rules, strategies and traces.

Nothing in this package imports Gradio; the app, the CLI, the benchmark and the tests all read
the per-iteration trace records that the strategies in `decoding.methods` yield.
"""
