"""Would the feature draft accept more if it read several of the target's layers (EAGLE-3's fused features)?

EAGLE-3 (Li, Wei, Zhang, Zhang, "EAGLE-3: Scaling up Inference Acceleration of Large Language Models
via Training-Time Test", arXiv:2503.01840, section 3) feeds its draft a fusion of the target's low,
middle and high layer states instead of the last one alone. This A/B asks whether that would raise
the shipped feature draft's acceptance on the default target before anyone builds it into the engine:

1. The target (bfloat16) reads each training prompt and its own greedy answer (the shipped corpus,
   assets/corpus-smollm2-135m, same prompts and holdout as the distillation data) once, keeping the
   final normed state and the states after layers `--layers`, and its top-32 next-token
   probabilities over the answer (the labels). Cached under `--data-dir` (git-ignored).
2. Two arms start from the shipped draft and train alike (EAGLE-3's unrolled training, 3 steps, the
   losses of `training train-features`): *control* reads the final state only; *fused* reads
   fuse([final ; norm(h_a) ; norm(h_b) ; norm(h_c)]), a learned linear layer that starts as "take
   the final state", so both arms start from the same draft. They run side by side, one thread each.
3. Both report the holdout prompts' agreement (the draft's top token is the target's) at draft steps
   1-3 and a lower bound of alpha at T=1, before and after; `--out` gets the JSON.

    .venv/bin/python experiments/multilayer_features.py --out docs/bench/multilayer-features.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decoding.paths import display_command  # noqa: E402 (after the path insert)

DRAFT = "assets/feature-draft-smollm2-135m"
CORPUS = "assets/corpus-smollm2-135m"
CONFIG = "training/configs/tasks.json"
UNROLL, CLS_WEIGHT, BATCH_TOKENS, WARMUP = 3, 1.0, 4096, 20  # as the shipped draft's stage 2 (its model card)


def extract(data_dir: Path, layers: list[int], threads: int) -> Path:
    """The target's states (final normed, then each of `layers`) and top-32 labels over prompt + answer."""
    import torch
    from safetensors.torch import load_file
    from tqdm import tqdm

    from decoding.lm.models import load_model
    from training.config import get_config

    path = data_dir / ("states-" + "-".join(map(str, layers)) + ".pt")
    if path.exists():
        return path
    torch.set_num_threads(threads)
    prompts = get_config(CONFIG).prompt_texts()
    corpus = load_file(f"{CORPUS}/corpus.safetensors")
    ends = corpus["ends"].tolist()
    if len(ends) != len(prompts):
        raise SystemExit(f"error: the corpus holds {len(ends)} answers for {len(prompts)} training prompts")
    starts = [0] + ends[:-1]
    target = load_model("default", dtype="bfloat16")
    decoder, head = target.model.get_decoder(), target.model.get_output_embeddings()
    records = []
    for i in tqdm(range(len(prompts)), desc="target states", mininterval=10):
        prompt = target.encode_prompt(prompts[i], True)
        ids = torch.tensor([prompt + corpus["tokens"][starts[i]: ends[i]].long().tolist()])
        with torch.inference_mode():
            out = decoder(input_ids=ids, output_hidden_states=True)
            states = torch.cat([out.last_hidden_state[0]] + [out.hidden_states[k][0] for k in layers], -1)
            probs = torch.softmax(head(out.last_hidden_state[0, len(prompt) - 1: -1]).float(), -1)
            top_p, top_ids = probs.topk(32, -1)
        records.append({"prompt_index": i, "tokens": ids[0], "states": states.to(torch.bfloat16),
                        "prompt_length": len(prompt), "topk_ids": top_ids.int(), "topk_p": top_p.half()})
    data_dir.mkdir(parents=True, exist_ok=True)
    torch.save(records, path)
    return path


def make_fused(draft, blocks: int, width: int):
    """The shipped draft behind a fuse of `blocks` states (or alone, blocks == 1)."""
    import torch
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    class FusedDraft(torch.nn.Module):
        """fuse_in: [final ; norm(h_1) ; ...] -> one state for `draft` (training.feature_train.unroll reads it)."""

        def __init__(self):
            super().__init__()
            self.draft = draft
            self.norms = torch.nn.ModuleList(LlamaRMSNorm(width, eps=1e-5) for _ in range(blocks - 1))
            self.fuse = torch.nn.Linear(blocks * width, width, bias=False)
            with torch.no_grad():  # starts as the final state alone: the shipped draft, unchanged
                self.fuse.weight.zero_()
                self.fuse.weight[:, :width].copy_(torch.eye(width))

        def fuse_in(self, feats):
            if blocks == 1:
                return feats
            parts = [feats[..., :width]] + [norm(feats[..., (k + 1) * width: (k + 2) * width])
                                            for k, norm in enumerate(self.norms)]
            return self.fuse(torch.cat(parts, -1))

    return FusedDraft()


def train_arm(arm: str, states: Path, epochs: float, lr: float, out: Path) -> None:
    """One arm, one thread: fine-tune from the shipped draft, evaluating on the holdout as it goes."""
    import torch

    from decoding.drafters.feature import load_feature_draft
    from decoding.lm.models import load_model
    from training import feature_train as ft
    from training.config import get_config
    from training.train import holdout_set, make_batches

    torch.set_num_threads(1)
    torch.manual_seed(0)
    target = load_model("default", dtype=torch.float32)
    width = target.model.get_input_embeddings().weight.shape[1]
    records = torch.load(states, weights_only=True)
    blocks = records[0]["states"].shape[1] // width if arm == "fused" else 1
    hold = holdout_set(get_config(CONFIG), len(records))
    train, val = [], []
    for r in records:
        seq = (r["tokens"], r["states"][:, : blocks * width], r["prompt_length"], r["topk_ids"].long(),
               r["topk_p"].float())
        (val if r["prompt_index"] in hold else train).append(seq)
    draft, head = load_feature_draft(DRAFT, target.model, torch.float32, "cpu")
    model = make_fused(draft, blocks, width).float().train()
    embedding = target.model.get_input_embeddings()
    head_w = target.model.get_output_embeddings().weight.detach()[head.token_ids].float()
    table = ft.head_table(head.token_ids, target.vocab_size)
    fuse_params = [p for n, p in model.named_parameters() if n.startswith(("fuse", "norms"))]
    groups = [{"params": list(draft.parameters()), "peak": lr}]
    if fuse_params:
        groups.append({"params": fuse_params, "peak": 3 * lr})  # new weights learn faster than the trained layer
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    per_epoch = len(make_batches(train, BATCH_TOKENS, 0))
    total = max(1, int(epochs * per_epoch))
    history = [{"step": 0, **ft.evaluate(model, embedding, head_w, val, table, limit=len(val), steps=UNROLL)}]
    gen, started, batches = torch.Generator().manual_seed(0), time.time(), []
    for step in range(total):
        if step % per_epoch == 0:
            batches = make_batches(train, BATCH_TOKENS, step // per_epoch)
        for g in opt.param_groups:
            g["lr"] = g["peak"] * ft.lr_factor(step, total, WARMUP)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            per_step = ft.losses(model, embedding, head_w, ft.collate(train, batches[step % per_epoch], table),
                                 ft.NOISE, gen, UNROLL)
            loss = ft.unrolled_loss(per_step, CLS_WEIGHT)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        if (step + 1) % max(1, total // 6) == 0 or step + 1 == total:
            history.append({"step": step + 1, "seconds": round(time.time() - started),
                            **ft.evaluate(model, embedding, head_w, val, table, limit=len(val), steps=UNROLL)})
            print(f"{arm}: {history[-1]}", flush=True)
    out.write_text(json.dumps({"arm": arm, "blocks": blocks, "train_sequences": len(train),
                               "train_positions": sum(len(s[0]) for s in train), "holdout_sequences": len(val),
                               "steps": total, "history": history}, indent=1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="3,15,28", help="the target's layers fused beside its final state")
    ap.add_argument("--epochs", type=float, default=6.0)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--threads", type=int, default=2, help="threads for the target's pass over the data")
    ap.add_argument("--data-dir", default="data/multilayer-features")
    ap.add_argument("--out", required=True)
    ap.add_argument("--arm", choices=["extract", "control", "fused"], help=argparse.SUPPRESS)  # a child's stage
    ap.add_argument("--arm-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        layers = [int(v) for v in args.layers.split(",")]
    except ValueError:
        ap.error(f"--layers takes layer numbers joined by commas (got {args.layers!r})")
    if not layers or any(not 1 <= k <= 29 for k in layers):
        ap.error("--layers: pick among the default target's layers 1..29 (its final layer, 30, is always read)")
    if args.epochs <= 0 or args.lr <= 0 or args.threads < 1:
        ap.error("--epochs, --lr and --threads must be positive")
    if args.arm == "extract":
        extract(Path(args.data_dir), layers, args.threads)
        return 0
    if args.arm:
        train_arm(args.arm, extract(Path(args.data_dir), layers, args.threads), args.epochs, args.lr,
                  Path(args.arm_out))
        return 0
    common = [sys.executable, __file__, "--layers", args.layers, "--epochs", str(args.epochs), "--lr", str(args.lr),
              "--threads", str(args.threads), "--data-dir", args.data_dir, "--out", args.out]
    # each stage in its own process: the pass over the data leaves the allocator holding several GB
    if subprocess.call(common + ["--arm", "extract"]):
        print("error: the pass over the data failed (see above)", file=sys.stderr)
        return 1
    started = time.time()
    children = {arm: Path(args.data_dir) / f"{arm}.json" for arm in ("control", "fused")}
    procs = [subprocess.Popen(common + ["--arm", arm, "--arm-out", str(path)]) for arm, path in children.items()]
    if any(p.wait() for p in procs):
        print("error: an arm failed (see above)", file=sys.stderr)
        return 1
    arms = {arm: json.loads(path.read_text()) for arm, path in children.items()}
    command = display_command("python experiments/multilayer_features.py", sys.argv[1:] if argv is None else argv)
    result = {"command": command,
              "date": time.strftime("%Y-%m-%d %H:%M"), "draft": DRAFT, "data": CORPUS, "layers": layers,
              "epochs": args.epochs, "lr": args.lr, "unroll_steps": UNROLL, "seconds": round(time.time() - started),
              "arms": arms}
    Path(args.out).write_text(json.dumps(result, indent=1))
    for arm, r in arms.items():
        first, last = r["history"][0], r["history"][-1]
        print(f"{arm}: top-1 agreement {first['top1_agreement']:.3f} -> {last['top1_agreement']:.3f}, "
              f"step 3 {first['top1_agreement_step3']:.3f} -> {last['top1_agreement_step3']:.3f}, "
              f"alpha lower bound {first['alpha_topk_lb']:.3f} -> {last['alpha_topk_lb']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
