"""`python -m training trim-head`: give a trained draft an output head over the target's most frequent tokens.

A draft step reads its whole output head; for the shipped draft (4 layers, hidden 256) the tied
49152 x 256 head is 12.6M of its 16.8M parameters and about half of a step's time. FR-Spec (Zhao
et al., 2025, "FR-Spec: Accelerating Large-Vocabulary Language Models via Frequency-Ranked
Speculative Sampling", arXiv:2502.14856) keeps only the rows of the most frequent tokens, with no
retraining: the draft's q then puts explicit zeros on every other token and the residual
max(0, p - q) gives the target's mass there back, so the rule stays exact (`decoding/drafters/output_head.py`).

The K tokens are the most frequent generated tokens of the target in the distillation data's
training shards (the holdout prompts excluded), plus the end-of-sequence ids. `head.safetensors`,
written beside a copy of the draft (or beside the draft itself with `--in-place`), holds their ids
only: the loader takes their rows from the draft's own head. Printed: how much of the target's
output the subset covers on the holdout, by token count and by the target's top-k probability mass.

    python -m training trim-head --config training/configs/tasks.json --draft assets/draft-smollm2-135m \
        --tokens 8192 --out runs/draft-head-8192
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from .config import get_config


def token_share(examples, tokens: list[int]) -> float:
    """The share of the generated tokens of `examples` that lie in `tokens`."""
    keep = set(tokens)
    total = sum(len(e[1]) for e in examples)
    inside = sum(int(t) in keep for e in examples for t in e[1].tolist())
    return inside / total if total else 0.0


def trim(cfg, draft_dir: Path, k: int, out: Path, target=None, log=print, command: str = "") -> dict:
    """Write `out` (a copy of `draft_dir`, or the same folder) with a head over k tokens; the figures."""
    import torch

    from decoding.lm.models import load_model
    from decoding.drafters.output_head import HEAD_FILE, subset_head

    from .head import choose_tokens, covered_mass
    from .train import list_shards, load_examples

    shards = list_shards(cfg)
    if not shards:
        raise ValueError(f"no data shards in {cfg.path('data_dir')} to rank the tokens by; "
                         "run `python -m training data` first")
    train_ex, holdout = load_examples(cfg, shards, len(cfg.prompt_texts()))
    if target is None:
        target = load_model(cfg.target, device="cpu")
    chosen = choose_tokens(train_ex, k, target.eos_token_ids(cfg.chat))
    draft = load_model(str(draft_dir), device="cpu", dtype=torch.float16)
    vocab = draft.model.get_output_embeddings().weight.shape[0]
    if k >= vocab:
        raise ValueError(f"--tokens {k} is not fewer than the draft's vocabulary ({vocab})")
    figures = {
        "head_tokens": len(chosen),
        "train_tokens": sum(len(e[1]) for e in train_ex),
        "holdout_token_share": round(token_share(holdout, chosen), 4),
        "holdout_soft_label_mass": round(covered_mass(holdout, chosen), 4),
        "head_params": len(chosen) * draft.model.config.hidden_size,
    }
    if out.resolve() != draft_dir.resolve():
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(draft_dir, out, ignore=shutil.ignore_patterns(HEAD_FILE))
    subset_head(draft.model, chosen).save(out, with_weight=False)  # rows come from the draft's own head
    training = out / "training.json"
    if training.is_file():  # the model card's record of how the draft was made
        record = json.loads(training.read_text())
        record["head_tokens"] = len(chosen)
        record["trimmed_head"] = {**figures, "command": command or f"python -m training trim-head --tokens {k}",
                                  "from": "the rows of the draft's own tied head (no retraining)"}
        training.write_text(json.dumps(record, indent=1))
    log(f"trim-head: {len(chosen)} tokens cover {figures['holdout_token_share']:.3f} of the target's holdout "
        f"tokens and {figures['holdout_soft_label_mass']:.3f} of its top-k mass; head written to {out / HEAD_FILE}")
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training trim-head", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="full", help="the distillation config whose data shards rank the tokens")
    ap.add_argument("--draft", required=True, type=Path, help="the trained draft's folder")
    ap.add_argument("--tokens", required=True, type=int, help="how many tokens the head keeps (K)")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", type=Path, help="write a copy of the draft with the head here")
    where.add_argument("--in-place", action="store_true", help="write the head beside the draft itself")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    if args.tokens < 1:
        print("error: --tokens must be >= 1", file=sys.stderr)
        return 2
    if not (args.draft / "config.json").is_file():
        print(f"error: --draft {args.draft}: no config.json there (not a draft folder)", file=sys.stderr)
        return 2
    command = " ".join(["python -m training trim-head", *(sys.argv[1:] if argv is None else argv)])
    try:
        figures = trim(get_config(args.config), args.draft, args.tokens, args.draft if args.in_place else args.out,
                       command=command)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
