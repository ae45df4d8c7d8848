"""Build a corpus of the target's own answers for the hybrid's corpus lookup (`decoding/drafters/corpus.py`).

Decodes every prompt of the given files greedily with the target (batched, left-padded, through
transformers' generate) and keeps each answer up to its end of sequence. The shipped corpus:

    .venv/bin/python scripts/build_corpus.py --out assets/corpus-smollm2-135m

The prompts are the project's own training prompts; Spec-Bench's must never be among them (the
benchmark would then measure a corpus that already holds its answers).
"""

from __future__ import annotations

import argparse
import sys
import time

DEFAULT_PROMPTS = "training/prompts_train.jsonl,training/prompts_tasks.jsonl"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="default")
    ap.add_argument("--prompts", default=DEFAULT_PROMPTS, help="comma-separated prompt files")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no-chat", dest="chat", action="store_false")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.max_new_tokens < 1 or args.batch < 1:
        print("error: --max-new-tokens and --batch must be >= 1", file=sys.stderr)
        return 2
    import torch
    from tqdm import tqdm

    from decoding.drafters.corpus import TextCorpus
    from decoding.lm.models import load_model
    from decoding.lm.prompt_files import read_prompt_rows
    from decoding.paths import display_command

    try:
        rows = [row for path in args.prompts.split(",") for row in read_prompt_rows(path.strip())]
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    spec_bench = {r.prompt for r in read_prompt_rows("benchmarks/spec_bench.jsonl")}
    if any(r.prompt in spec_bench for r in rows):
        print("error: a prompt of Spec-Bench is among the corpus prompts", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_model(args.target, dtype=args.dtype)
    eos = target.eos_token_ids(args.chat)
    pad = eos[0] if eos else 0
    encoded = [target.encode_prompt(r.prompt, args.chat) for r in rows]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))  # batches of similar length pad little
    answers: dict[int, list[int]] = {}
    started = time.time()
    for b in tqdm(range(0, len(order), args.batch), desc="answering", unit="batch", mininterval=10):
        idx = order[b: b + args.batch]
        width = max(len(encoded[i]) for i in idx)
        ids = torch.tensor([[pad] * (width - len(encoded[i])) + encoded[i] for i in idx], device=target.device)
        mask = torch.tensor([[0] * (width - len(encoded[i])) + [1] * len(encoded[i]) for i in idx],
                            device=target.device)
        with torch.inference_mode():
            out = target.model.generate(ids, attention_mask=mask, max_new_tokens=args.max_new_tokens,
                                        do_sample=False, eos_token_id=eos, pad_token_id=pad)
        for row, i in zip(out[:, width:].tolist(), idx):
            stop = next((k for k, t in enumerate(row) if t in eos), None)
            answers[i] = row if stop is None else row[: stop + 1]
    documents = [answers[i] for i in range(len(rows))]
    meta = {"target": args.target, "prompts": args.prompts, "documents": len(documents),
            "tokens": sum(map(len, documents)), "max_new_tokens": args.max_new_tokens, "decoding": "greedy",
            "chat": args.chat, "dtype": args.dtype, "seconds": round(time.time() - started, 1),
            "command": display_command("python scripts/build_corpus.py", sys.argv[1:] if argv is None else argv)}
    TextCorpus(documents, meta).save(args.out)
    print(f"wrote {args.out}: {meta['documents']} answers, {meta['tokens']} tokens in {meta['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
