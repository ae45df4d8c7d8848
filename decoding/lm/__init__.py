"""Layer 2, the language models: loading them, running them with a KV cache, and what they read.

- `models/`          loading a target or draft (the embedded GGUF default, a directory, a .gguf file,
                     a hub id) into a `LoadedModel`; its attention kernel and head layout
- `cached_lm.py`     a causal LM with a KV cache that extends by any number of tokens and rolls back
- `kv_cache.py`      the cache's layers, grown in place rather than copied on every pass; PPD's compaction
- `static_lm.py`     the same LM on a preallocated static-shape cache: every pass of n tokens runs fixed
                     shapes (writes at explicit slots, a 4D mask over the whole buffer), rollback moves a length
- `static_kernels.py` cheaper kernels for the static LM's short passes (slot attention, fused RMS norms)
- `lean_layer.py`    our own Llama decoder layer for those passes (fused q|k|v and gate|up weights), one
                     function of tensors that torch.compile compiles once for every layer
- `lean_dynamic.py`  the dynamic path's short CPU passes as HF's ops without HF's modules, bit-identical
                     (on by default; SPECDEC_LEAN_DYNAMIC=0 runs HF's modules)
- `compiled_body.py` those passes through torch.compile (the lean layer's step, on CUDA by default), still captured
                     by ours
- `cuda_graphs.py`   the static LM's passes captured as CUDA graphs, one per pass shape, replayed
- `chain_graphs.py`  a greedy draft chain's gamma - 1 passes captured as one CUDA graph (off by default)
- `backend.py`       the one factory (`make_lm`) choosing the dynamic or the static path (SPECDEC_BACKEND,
                     --backend; static with graphs on CUDA by default), and what a run summary records of it
- `batching.py`      concurrent runs on one model sharing its forward passes (a class's runs)
- `hf_cache.py`      the name a model call takes and returns its KV cache by (`cache`, or `past_key_values`
                     in transformers before the rename), so no call warns in any version allowed
- `devices.py`       which device and dtype a run uses; waiting for queued GPU work before a clock
- `scoring.py`       teacher-forced scoring of a continuation in one pass
- `tree_pass.py`     a pass over a draft tree (tree mask, explicit positions) and compaction of its accepted path
- `prompt_files.py`  the one reader of prompt files (JSON lines or plain lines); it sits this low
                     because PPD's own report (a method) reads prompt files too

A model's weight bytes (`models/loaded.py: model_weight_bytes`) are counted here, where the loader
reports them; the energy meters above re-export it. Imports only the trace and rules layers.
"""
