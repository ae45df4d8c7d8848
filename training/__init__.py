"""Every trainer in one place: the distilled draft, the feature draft and PPD's prompt tokens.

`python -m training <stage> ...` (`__main__.py`); each stage has --help. Imports from `decoding`,
never the other way round; nothing here imports gradio.

The distilled draft (`make distill` = `python -m training all`):
- `config.py`     one `DistillConfig` drives every stage (`configs/*.json`, or `--config smoke|full`)
- `data.py`       `data`: sample continuations from the target on `prompts_train.jsonl` and store its
                  top-k probabilities beside every token (sharded, resumable)
- `train.py`      `train`: knowledge distillation on those soft labels (resumable checkpoints)
- `export.py`     `export`: write the draft and its model card to `assets/draft-smollm2-135m/`
- `pipeline.py`   `all`: the three in order, then eval-draft and the card
- `model.py`, `head.py`  the draft's architecture and its untied frequent-token head
- `trim_head.py`  `trim-head`: give a trained draft a head over the target's most frequent tokens
The feature draft (EAGLE-style, `decoding/drafters/feature.py`):
- `features.py`   `features`: the target's hidden states over the distillation data
- `feature_train.py`  `train-features`: train the draft layer on them
PPD's prompt tokens (`decoding/methods/ppd/`):
- `ppd_train.py`  `train-ppd`: the prompt-token embeddings by KD against the frozen target

The distillation stages in detail: `data` stores the target's top-k probabilities beside every generated
token in one pass (finished shards are skipped on restart); `train` minimizes the forward KL on the
renormalized top-k plus a little cross-entropy on the sampled token, with fixed seeds and a checkpoint
every few minutes that an interrupted run resumes from; `export` writes config.json, fp16 safetensors,
the tokenizer and a model card, loadable by `decoding.lm.models.load_model`.
Optional: `python -m training data --onpolicy CKPT` samples continuations from a draft checkpoint
and has the target score them in one teacher-forced pass (on-policy data, DistillSpec-style);
training takes up those shards too. `train --grow` trains beside a running data stage, taking
up new shards at every epoch start (how the shipped draft was made; see its model card).

`--config smoke` runs the same pipeline with tiny models in seconds (the test suite does).
"""
