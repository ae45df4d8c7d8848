"""One run of any variant: ours (`ours.py`) or Hugging Face's (`hf_peer.py`)."""

from __future__ import annotations

from .hf_peer import run_hf
from .ours import run_ours
from .variants import RunStats, Variant


def run_variant(variant: Variant, target, draft, prompt_ids, args, timing: bool, meter=None) -> RunStats:
    """`draft`: the variant's pair.Draft (None for variants without a drafter)."""
    if variant.engine == "hf":
        return run_hf(variant, target, draft, prompt_ids, args, timing, meter)
    return run_ours(variant, target, draft, prompt_ids, args, timing, meter)
