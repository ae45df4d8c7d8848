"""The slow path that decoding/lm/models/head_layout.py works around, measured on this machine.

Times the offline default target's LM head (bfloat16 where the machine has it) on one row laid out
afresh and on the same row as `logits_to_keep` slices it from a longer pass (hidden[:, -1:, :]),
then one prefill with logits_to_keep=1 with and without the workaround's pre-hook.

    .venv/bin/python experiments/head_layout.py [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args(argv)
    if args.threads < 1 or args.repeats < 1:
        print("error: --threads and --repeats must be >= 1", file=sys.stderr)
        return 2
    import torch

    from decoding.lm.models import load_model

    torch.set_num_threads(args.threads)
    target = load_model("default")
    head = target.model.get_output_embeddings()
    hidden = torch.randn(1, 44, head.in_features, dtype=head.weight.dtype)

    def ms(fn) -> float:
        fn()
        t0 = time.perf_counter()
        for _ in range(args.repeats):
            fn()
        return 1000 * (time.perf_counter() - t0) / args.repeats

    ids = torch.tensor([target.encode_prompt("Name three animals that start with the letter A.", True)])
    hooks = dict(head._forward_pre_hooks)
    with torch.inference_mode():
        row = torch.empty(1, 1, hidden.shape[-1], dtype=hidden.dtype).copy_(hidden[:, -1:, :])
        fresh = ms(lambda: torch.nn.functional.linear(row, head.weight))
        sliced = ms(lambda: torch.nn.functional.linear(hidden[:, -1:, :], head.weight))
        with_hook = ms(lambda: target.model(input_ids=ids, logits_to_keep=1))
        head._forward_pre_hooks.clear()
        without_hook = ms(lambda: target.model(input_ids=ids, logits_to_keep=1))
        head._forward_pre_hooks.update(hooks)
    print(f"head {tuple(head.weight.shape)} in {str(head.weight.dtype).removeprefix('torch.')}, "
          f"torch threads {args.threads}")
    print(f"one row laid out afresh {fresh:.1f} ms; the same row sliced by logits_to_keep {sliced:.1f} ms")
    print(f"prefill of {ids.shape[1]} tokens, logits_to_keep=1: with the pre-hook {with_hook:.1f} ms, "
          f"without {without_hook:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
