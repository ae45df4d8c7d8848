"""One configuration object for the whole distillation pipeline.

`FULL` is the configuration the shipped draft was trained with; `SMOKE` is the same pipeline
shrunk so the test suite runs it in seconds on tiny models. Paths are relative to the repo root
unless absolute.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent


@dataclass
class DistillConfig:
    # --- models and files -------------------------------------------------------------------
    target: str = "default"  # any decoding.lm.models.load_model spec
    prompts: str = "training/prompts_train.jsonl"  # one file, or several joined by commas (read in order)
    data_dir: str = "data/distill"  # generated shards (gitignored)
    ckpt_dir: str = "checkpoints/distill"  # training checkpoints (gitignored)
    out_dir: str = "assets/draft-smollm2-135m"  # the shipped draft
    chat: bool = True  # prompts are wrapped as one user turn by the chat template
    # --- data generation --------------------------------------------------------------------
    samples_per_prompt: int = 8  # rounds over the prompt set; round 0 is greedy, others T=1
    greedy_rounds: int = 1
    max_new_tokens: int = 128
    gen_batch: int = 64
    sort_by_length: bool = False  # batch prompts of similar length together (less padding in the prefill)
    top_k: int = 32  # soft labels kept per generated position
    data_seed: int = 1234
    onpolicy_dir: str = "data/distill-onpolicy"  # draft-sampled, target-scored data (optional stage)
    onpolicy_rounds: int = 4
    # --- draft architecture (a Llama: same tokenizer and vocabulary as the target) -----------
    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 4
    intermediate_size: int = 1024
    init_embeddings_from_target: bool = True  # PCA of the target's (tied) embedding matrix
    head_tokens: int = 0  # >0: an untied output head over this many frequent tokens only (training/head.py)
    # --- training ---------------------------------------------------------------------------
    epochs: float = 3.0
    batch_tokens: int = 2048  # generated tokens per optimizer step (approximately)
    lr: float = 2e-3
    embed_lr_scale: float = 0.3
    warmup_steps: int = 30
    weight_decay: float = 0.01
    hard_label_weight: float = 0.1
    # >0: the loss's softmax runs over the batch's soft-label and hard-label tokens plus this many
    # uniformly sampled other tokens (their mass scaled up to the whole rest of the vocabulary):
    # ~4x less work in the 49152-wide head than the full softmax. 0: full softmax.
    negatives: int = 2048  # CE on the sampled token, beside the soft-label KL
    train_seed: int = 0
    ckpt_every_s: float = 300.0
    max_train_seconds: float = 0.0  # >0: stop (after a checkpoint) when a stage exceeds this
    bf16_autocast: bool = True  # bf16 matmuls on CPUs that support them / on GPU
    use_onpolicy: bool = True  # also train on onpolicy_dir's shards when present
    train_onpolicy_shards: int = 0
    train_shards: int = 0  # >0: train on shards 0..N-1 only (what the shipped draft used)
    holdout_prompts: int = 16  # prompts whose samples are kept out of training (validation)
    # --- export -----------------------------------------------------------------------------
    export_dtype: str = "float16"
    extra: dict = field(default_factory=dict)

    def path(self, name: str) -> Path:
        p = Path(getattr(self, name))
        return p if p.is_absolute() else REPO / p

    def prompt_texts(self) -> list[str]:
        """Every training prompt, in order (the files of `prompts`, one after the other)."""
        from decoding.lm.prompt_files import read_prompts

        out = []
        for part in str(self.prompts).split(","):
            path = Path(part.strip())
            out += read_prompts(path if path.is_absolute() else REPO / path)
        return out

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)


FULL = DistillConfig()

SMOKE = DistillConfig(
    data_dir="data/distill-smoke",
    onpolicy_dir="data/distill-smoke-onpolicy",
    ckpt_dir="checkpoints/distill-smoke",
    out_dir="runs/draft-smoke",
    samples_per_prompt=2,
    max_new_tokens=8,
    gen_batch=4,
    top_k=8,
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=2,
    intermediate_size=64,
    epochs=1.0,
    batch_tokens=64,
    warmup_steps=1,
    ckpt_every_s=0.0,
    holdout_prompts=1,
    bf16_autocast=False,
)

CONFIGS = {"full": FULL, "smoke": SMOKE}


class ConfigError(ValueError):
    """A stage option that cannot be used: a --config that names no built-in configuration and no
    readable JSON file of its fields, or a --device this machine does not have."""


def get_config(name: str = "full", **overrides) -> DistillConfig:
    if name in CONFIGS:
        base = CONFIGS[name]
    else:
        try:
            base = DistillConfig(**json.loads(Path(name).read_text()))
        except (OSError, json.JSONDecodeError, TypeError) as exc:
            raise ConfigError(f"--config {name}: not {' or '.join(CONFIGS)} and not a JSON file of the "
                              f"configuration's fields ({exc})") from None
    return dataclasses.replace(base, **{k: v for k, v in overrides.items() if v is not None})


def stage_device(text: str) -> torch.device:
    """A stage's --device (cpu, cuda, cuda:N, auto) as a torch.device; ConfigError if unusable here."""
    from decoding.lm.models import ModelLoadError, resolve_device

    try:
        return resolve_device(text)
    except ModelLoadError as err:
        raise ConfigError(f"--device: {err}") from None


def setup_threads() -> None:
    """torch threads for a distillation stage: $DISTILL_THREADS, else every core."""
    n = int(os.environ.get("DISTILL_THREADS", "0") or 0) or (os.cpu_count() or 1)
    torch.set_num_threads(n)
