"""Distilling a small draft model for the offline default target (SmolLM2-135M-Instruct).

Three resumable stages, each a module with a `main()` and each driven by one `DistillConfig`
(`distill/config.py`):

1. `distill.data`   sample continuations from the target on `distill/prompts_train.jsonl` and
                    store the target's top-k probabilities beside every generated token (one pass);
                    sharded files, finished shards are skipped on restart.
2. `distill.train`  knowledge distillation on those soft labels (forward KL on the renormalized
                    top-k, plus a little cross-entropy on the sampled token); fixed seeds; a
                    checkpoint every few minutes that an interrupted run resumes from.
3. `distill.export` write the draft (config.json + fp16 safetensors + tokenizer + model card)
                    to `assets/draft-smollm2-135m/`, loadable by `decoding.lm.models.load_model`.

Optional: `python -m distill data --onpolicy CKPT` samples continuations from a draft checkpoint
and has the target score them in one teacher-forced pass (on-policy data, DistillSpec-style);
training takes up those shards too. `train --grow` trains beside a running data stage, taking
up new shards at every epoch start (how the shipped draft was made; see its model card).

`python -m distill all` runs the three in order (`make distill`); `--config smoke` runs the same
pipeline with tiny models in seconds (the test suite does). Nothing here imports gradio.
"""
