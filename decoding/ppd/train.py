"""Train PPD prompt-token embeddings by knowledge distillation against the frozen target
(`002_*`, section 3.3). Resumable; uses the GPU when present.

    python -m decoding.ppd train [--target default] [--out checkpoints/ppd] [--max-minutes 55]

Data: the target's own continuations of the training prompts (self-distillation): either read
from the draft-distillation shards (`--shards data/distill`: prompt_ids + tokens per sample), or
generated here greedily in batches (`--prompts distill/prompts_train.jsonl`, cached in
`<out>/data.pt`, resumable per batch).

One training step, per sequence x (<= seq_len tokens): `inserts` random positions i are drawn
anywhere in x (random insertion); after each, the m prompt tokens (x EPT copies) are appended to
the same forward pass: prompt (i, k, j) sits at position i + k, sees x_0..x_i and the prompt
tokens (i, k' <= k, j) of its EPT group (the inference mask). The rows of x itself see only x, so
the same pass gives the teacher's logits. Loss (decayed KL, eq. 1):
    L = mean over insertions i of 1/m sum_{k=1..m} alpha^{k-1} KL(Q_{i+k} || P_{i,k})
with Q_{i+k} = softmax of the target's logits at position i + k (the distribution of x_{i+k+1}),
P_{i,k} = softmax of the EPT-averaged logits of prompt token k at insertion i; alpha = 0.8.
(Eq. 1 writes D_KL(P_i || Q_i); the authors' DistillationTrainer computes
F.kl_div(log_softmax(student), softmax(teacher)) = KL(teacher || student), as we do by default;
`--reverse-kl` switches.) Adam, cosine learning rate from 0.01 (the paper's), no warmup.

Checkpoints (`<out>/ckpt.pt`: embeddings, optimizer, step, RNG) every `--save-every` steps and at
the time limit; run the same command again to continue. `--export` writes
`assets/ppd/<model>/prompt_tokens.pt` and `card.json` with top-1/top-5 accuracy at distances 1
and 2 on `--dev` prompts.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import torch

from .engine import additive_mask
from .prompts import PromptTokens, asset_path, untrained_prompt_tokens

DEV = Path(__file__).resolve().parents[3] / "shared" / "prompts" / "dev.jsonl"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="default")
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None, help="model dtype (default: per device); embeddings train in fp32")
    p.add_argument("--out", default="checkpoints/ppd")
    p.add_argument("--prompts", default="distill/prompts_train.jsonl", help="training prompts (jsonl with 'prompt')")
    p.add_argument("--shards", default=None, help="read sequences from draft-distillation shards in this dir instead")
    p.add_argument("--gen-tokens", type=int, default=128, help="greedy continuation length when generating data")
    p.add_argument("--gen-batch", type=int, default=16)
    p.add_argument("--limit-prompts", type=int, default=0, help="use only the first N prompts/sequences (0: all)")
    p.add_argument("--m", type=int, default=3, help="prompt tokens")
    p.add_argument("--ept", type=int, default=1, help="ensemble embeddings per prompt token")
    p.add_argument("--alpha", type=float, default=0.8, help="decay ratio of the KL loss")
    p.add_argument("--reverse-kl", action="store_true", help="KL(P || Q) as eq. 1 is written")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--steps", type=int, default=600, help="optimizer steps (the shipped embeddings: 600)")
    p.add_argument("--batch", type=int, default=4, help="sequences per step")
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--inserts", type=int, default=16, help="random insertion points per sequence")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-every", type=int, default=50)
    p.add_argument("--max-minutes", type=float, default=0.0, help="stop (and checkpoint) after this long; 0: no limit")
    p.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    p.add_argument("--export", action="store_true", help="write the asset + card after training")
    p.add_argument("--asset", default=None, help="export path (default assets/ppd/<model>/prompt_tokens.pt)")
    p.add_argument("--dev", default=str(DEV))
    p.add_argument("--dev-tokens", type=int, default=48)


# ---- data ------------------------------------------------------------------------------------

def _load_prompts(path) -> list[str]:
    return [json.loads(line)["prompt"] for line in Path(path).read_text().splitlines() if line.strip()]


def sequences_from_shards(directory, limit: int = 0) -> list[list[int]]:
    out = []
    for shard in sorted(Path(directory).glob("shard-*.pt")):
        data = torch.load(shard, map_location="cpu", weights_only=False)
        for prompt_ids, tokens in zip(data["prompt_ids"], data["tokens"]):
            out.append([int(t) for t in list(prompt_ids) + list(tokens)])
            if limit and len(out) >= limit:
                return out
    return out


@torch.inference_mode()
def greedy_continuations(target, prompt_ids: list[list[int]], new_tokens: int, batch: int = 16) -> list[list[int]]:
    """prompt + greedy continuation for each prompt (left-padded batched generate)."""
    out = []
    pad = target.tokenizer.pad_token_id
    pad = int(pad if pad is not None else (target.tokenizer.eos_token_id or 0))
    for b in range(0, len(prompt_ids), batch):
        chunk = prompt_ids[b : b + batch]
        width = max(len(p) for p in chunk)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk], device=target.device)
        att = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=target.device)
        gen = target.model.generate(input_ids=ids, attention_mask=att, max_new_tokens=new_tokens, do_sample=False,
                                    pad_token_id=pad)
        eos = set(target.eos_token_ids(True))
        for p, row in zip(chunk, gen[:, width:].tolist()):
            cont = []
            for t in row:
                cont.append(t)
                if t in eos:
                    break
            out.append(p + cont)
    return out


def build_data(target, args, out: Path, log=print) -> list[list[int]]:
    if args.shards:
        seqs = sequences_from_shards(args.shards, args.limit_prompts)
        log(f"data: {len(seqs)} sequences from shards in {args.shards}")
        return seqs
    path = out / "data.pt"
    prompts = _load_prompts(args.prompts)
    if args.limit_prompts:
        prompts = prompts[: args.limit_prompts]
    done = torch.load(path, weights_only=False) if path.exists() else {"sequences": []}
    seqs = done["sequences"]
    ids = [target.encode_prompt(p, True) for p in prompts]
    while len(seqs) < len(ids):
        batch = ids[len(seqs) : len(seqs) + args.gen_batch]
        seqs.extend(greedy_continuations(target, batch, args.gen_tokens, args.gen_batch))
        torch.save({"sequences": seqs}, path.with_suffix(".tmp"))
        path.with_suffix(".tmp").replace(path)
        log(f"data: {len(seqs)}/{len(ids)} greedy continuations")
    return seqs


# ---- the training forward --------------------------------------------------------------------

def insertion_forward(model, x: torch.Tensor, points: list[int], prompts: PromptTokens):
    """One pass over x (L,) plus m * ept prompt tokens after each insertion point. Returns
    (logits of x rows (L, V), prompt logits (len(points), m, V) averaged over EPT)."""
    L, m, ept = x.shape[0], prompts.m, prompts.ept
    embed = model.get_input_embeddings()
    dtype = embed.weight.dtype
    P = len(points) * m * ept
    prompt_embeds = prompts.weight[None].expand(len(points), m, ept, prompts.hidden).reshape(P, -1).to(dtype)
    inputs = torch.cat([embed(x[None])[0], prompt_embeds], dim=0)[None]
    pts = torch.tensor(points, dtype=torch.long)
    k = torch.arange(1, m + 1)
    # prompt row order: (point, k, j)
    row_point = pts[:, None, None].expand(len(points), m, ept).reshape(-1)
    row_k = k[None, :, None].expand(len(points), m, ept).reshape(-1)
    row_j = torch.arange(ept)[None, None, :].expand(len(points), m, ept).reshape(-1)
    row_ins = torch.arange(len(points))[:, None, None].expand(len(points), m, ept).reshape(-1)
    positions = torch.cat([torch.arange(L), row_point + row_k])[None].to(x.device)
    allowed = torch.zeros(L + P, L + P, dtype=torch.bool)
    allowed[:L, :L] = torch.ones(L, L, dtype=torch.bool).tril()
    allowed[L:, :L] = torch.arange(L)[None, :] <= row_point[:, None]
    allowed[L:, L:] = ((row_ins[:, None] == row_ins[None, :]) & (row_j[:, None] == row_j[None, :])
                       & (row_k[None, :] <= row_k[:, None]))
    mask = additive_mask(allowed.to(x.device), dtype)[None, None]
    logits = model(inputs_embeds=inputs, attention_mask=mask, position_ids=positions, use_cache=False).logits[0]
    teacher = logits[:L].detach().float()
    student = logits[L:].float().reshape(len(points), m, ept, -1).mean(dim=2)
    return teacher, student


def decayed_kl(teacher: torch.Tensor, student: torch.Tensor, points: list[int], alpha: float,
               reverse: bool = False) -> torch.Tensor:
    """Eq. (1), averaged over insertions: 1/m sum_k alpha^{k-1} KL at distance k (N = m prompt
    tokens; terms past the end of x are skipped)."""
    L, m = teacher.shape[0], student.shape[1]
    total = student.new_zeros(())
    for n, i in enumerate(points):
        for k in range(1, m + 1):
            if i + k >= L:
                break
            log_q = torch.log_softmax(teacher[i + k], -1)
            log_p = torch.log_softmax(student[n, k - 1], -1)
            kl = (log_p.exp() * (log_p - log_q)).sum() if reverse else (log_q.exp() * (log_q - log_p)).sum()
            total = total + alpha ** (k - 1) * kl
    return total / (max(1, len(points)) * m)


# ---- evaluation ------------------------------------------------------------------------------

@torch.no_grad()
def prediction_accuracy(target, prompts: PromptTokens, sequences: list[tuple[int, list[int]]], tops=(1, 5),
                        distances=(1, 2)) -> dict:
    """Top-k accuracy of prompt token k (distance k) against the greedy tokens actually there:
    every position i of the continuation is an insertion point; correct when x_{i+k+1} is in the
    top-k of the prompt's prediction. `sequences`: (prompt length, prompt + greedy continuation)."""
    hits = {(d, t): 0 for d in distances for t in tops}
    count = {d: 0 for d in distances}
    for start, seq in sequences:
        x = torch.tensor(seq, device=target.device)
        points = list(range(max(0, start - 1), len(seq) - 1))
        if not points:
            continue
        _, student = insertion_forward(target.model, x, points, prompts)
        for n, i in enumerate(points):
            for d in distances:
                if d > prompts.m or i + d + 1 >= len(seq):
                    continue
                count[d] += 1
                ranked = torch.topk(student[n, d - 1], max(tops)).indices.tolist()
                for t in tops:
                    hits[(d, t)] += seq[i + d + 1] in ranked[:t]
    return {f"@{d}_top{t}": (hits[(d, t)] / count[d] if count[d] else None) for d in distances for t in tops}


def dev_sequences(target, path, new_tokens: int) -> list[tuple[int, list[int]]]:
    prompts = _load_prompts(path)
    ids = [target.encode_prompt(p, True) for p in prompts]
    seqs = greedy_continuations(target, ids, new_tokens)
    return [(len(p), s) for p, s in zip(ids, seqs)]


# ---- the loop --------------------------------------------------------------------------------

def train(args, log=print) -> dict:
    from ..models import load_model

    t_start = time.time()
    target = load_model(args.target, device=args.device, dtype=args.dtype)
    model = target.model
    for param in model.parameters():
        param.requires_grad_(False)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seqs = [s[: args.seq_len] for s in build_data(target, args, out, log) if len(s) >= args.m + 2]
    if not seqs:
        raise ValueError("no training sequences")
    prompts = untrained_prompt_tokens(target, args.m, args.ept).float()
    prompts.weight.requires_grad_(True)
    opt = torch.optim.Adam([prompts.weight], lr=args.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, args.steps) / args.steps)))
    step, history, rng = 0, [], random.Random(args.seed)
    ckpt = out / "ckpt.pt"
    if ckpt.exists() and not args.fresh:
        state = torch.load(ckpt, map_location="cpu", weights_only=False)
        if state["m"] != args.m or state["ept"] != args.ept or state["target"] != target.name:
            raise ValueError(f"{ckpt} is for another setup ({state['target']}, m={state['m']}, ept={state['ept']}); use --fresh")
        prompts.weight.data.copy_(state["weight"].to(prompts.weight.device))
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step, history = state["step"], state["history"]
        rng.setstate(state["rng"])
        log(f"resumed from {ckpt} at step {step}")

    def save() -> None:
        tmp = ckpt.with_suffix(".tmp")
        torch.save({"weight": prompts.weight.detach().cpu(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                    "step": step, "history": history, "rng": rng.getstate(), "m": args.m, "ept": args.ept,
                    "target": target.name, "args": vars(args)}, tmp)
        tmp.replace(ckpt)

    model.train(False)
    while step < args.steps:
        if args.max_minutes and time.time() - t_start > 60 * args.max_minutes:
            log(f"time limit reached at step {step}; checkpointed, run again to continue")
            break
        opt.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for _ in range(args.batch):
            seq = seqs[rng.randrange(len(seqs))]
            x = torch.tensor(seq, device=target.device)
            points = sorted(rng.sample(range(len(seq) - 1), min(args.inserts, len(seq) - 1)))
            teacher, student = insertion_forward(model, x, points, prompts)
            loss = decayed_kl(teacher, student, points, args.alpha, args.reverse_kl) / args.batch
            loss.backward()
            loss_sum += float(loss.detach())
        opt.step()
        sched.step()
        step += 1
        history.append(loss_sum)
        if step % 10 == 0 or step == 1:
            log(f"step {step}/{args.steps} loss {loss_sum:.4f} lr {sched.get_last_lr()[0]:.5f}")
        if step % args.save_every == 0:
            save()
    save()
    result = {"step": step, "loss": history[-1] if history else None, "seconds": time.time() - t_start,
              "ckpt": str(ckpt)}
    if args.export and step >= args.steps:
        result["asset"] = str(export(target, prompts, args, step, history, log))
    return result


def export(target, prompts: PromptTokens, args, step: int, history: list[float], log=print) -> Path:
    path = Path(args.asset) if args.asset else asset_path(target)
    final = PromptTokens(prompts.m, prompts.ept, prompts.hidden, trained=True)
    final.weight.data.copy_(prompts.weight.detach().cpu())
    final = final.to(target.device)
    dev = dev_sequences(target, args.dev, args.dev_tokens)
    acc = prediction_accuracy(target, final.to(target.model.get_input_embeddings().weight.dtype), dev)
    meta = {"target": target.name, "m": prompts.m, "ept": prompts.ept, "steps": step, "final_loss": history[-1],
            "alpha": args.alpha, "lr": args.lr, "batch": args.batch, "seq_len": args.seq_len,
            "inserts": args.inserts, "data": args.shards or args.prompts, "dev": str(args.dev),
            "dev_accuracy": acc, "bytes": final.nbytes(), "model_bytes": target.weight_bytes}
    final.save(path, meta)
    path.with_name("card.json").write_text(json.dumps(meta, indent=1))
    log(f"exported {path}: {json.dumps(acc)}")
    return path
