"""Train PPD prompt-token embeddings by knowledge distillation against the frozen target
(Chen et al., section 3.3). Resumable; uses the GPU when present.

    python -m training train-ppd [--target default] [--out checkpoints/ppd] [--max-minutes 55]

Data: the target's own continuations of the training prompts (self-distillation): either read
from the draft-distillation shards (`--shards data/distill`: prompt_ids + tokens per sample), or
generated here greedily in batches (`--prompts training/prompts_train.jsonl`, cached in
`<out>/data.pt`, resumable per batch).

One training step, per sequence x (<= seq_len tokens): `inserts` random positions i are drawn in
x's continuation (random insertion; the chat template before it is never decoded by PPD); after
each, the m prompt tokens (x EPT copies) follow: prompt (i, k, j) sits at position i + k, sees
x_0..x_i and the prompt tokens (i, k' <= k, j) of its EPT group (the inference mask). The pass
runs in two parts (`cached_insertion_step`): x alone, without gradients, into a KV cache (the
frozen target's rows never see prompt tokens), then all prompt rows over that cache with
gradients, so backward touches only the prompt rows. Loss (decayed KL, eq. 1):
    L = mean over insertions i of 1/m sum_{k=1..m} alpha^{k-1} KL(Q_{i,k} || P_{i,k})
P_{i,k} = softmax of the EPT-averaged logits of prompt token k at insertion i; alpha = 0.8.
Q_{i,k} (`--labels`): "chain" (default) the target's distribution after its own greedy
continuation g_1..g_k of x_0..x_i (m extra no-grad passes of one row per insertion): what greedy
PPD verifies against, also where x itself was sampled at temperature 1; "data" the target's
distribution at x_{i+k} of the training text, eq. 1 as written.
(Eq. 1 writes D_KL(P_i || Q_i); the authors' DistillationTrainer computes
F.kl_div(log_softmax(student), softmax(teacher)) = KL(teacher || student), as we do by default;
`--reverse-kl` switches.) Adam, cosine learning rate from 0.01 (the paper's), no warmup.
`--dtype bfloat16` runs the frozen target in bfloat16 (faster on a CPU with native bfloat16;
the embeddings stay float32, and the card's accuracy is measured with the float32 target).

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
import sys
import time
from pathlib import Path

import torch

from decoding.paths import DEV_PROMPTS, display_path
from decoding.lm.hf_cache import cache_kwargs
from decoding.lm.prompt_files import read_prompts
from decoding.methods.ppd.engine import additive_mask
from decoding.methods.ppd.prompts import PromptTokens, asset_path, untrained_prompt_tokens



def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m training train-ppd",
                                     description="train prompt-token embeddings (KD against the frozen target)")
    add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        print(json.dumps(train(args)))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="default")
    p.add_argument("--device", default=None)
    p.add_argument("--dtype", default=None, help="model dtype (default: per device); embeddings train in fp32")
    p.add_argument("--out", default="checkpoints/ppd")
    p.add_argument("--prompts", default="training/prompts_train.jsonl", help="training prompts (jsonl with 'prompt')")
    p.add_argument("--shards", default=None, help="read sequences from draft-distillation shards in this dir instead")
    p.add_argument("--gen-tokens", type=int, default=128, help="greedy continuation length when generating data")
    p.add_argument("--gen-batch", type=int, default=16)
    p.add_argument("--limit-prompts", type=int, default=0, help="use only the first N prompts/sequences (0: all)")
    p.add_argument("--m", type=int, default=3, help="prompt tokens")
    p.add_argument("--ept", type=int, default=1, help="ensemble embeddings per prompt token")
    p.add_argument("--alpha", type=float, default=0.8, help="decay ratio of the KL loss")
    p.add_argument("--reverse-kl", action="store_true", help="KL(P || Q) as eq. 1 is written")
    p.add_argument("--hard-weight", type=float, default=0.0,
                   help="mix in cross-entropy on the teacher's argmax: (1 - w) KL + w CE (0: the paper's pure KD)")
    p.add_argument("--init", default=None,
                   help="start from these prompt embeddings (prompt_tokens.pt; an EPT-1 file seeds every ensemble "
                        "copy, with small noise) instead of the neutral-token initialization")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--steps", type=int, default=650, help="optimizer steps (the shipped embeddings: 650)")
    p.add_argument("--batch", type=int, default=2, help="sequences per step")
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--inserts", type=int, default=64, help="random insertion points per sequence (in its continuation)")
    p.add_argument("--labels", choices=("chain", "data"), default="chain",
                   help="teacher of prompt k after x_i: the target after its greedy continuation of x_0..x_i "
                        "(chain, what greedy PPD verifies) or after the data's own x_{i+1..i+k} (data, eq. 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-every", type=int, default=50)
    p.add_argument("--max-minutes", type=float, default=0.0, help="stop (and checkpoint) after this long; 0: no limit")
    p.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    p.add_argument("--export", action="store_true", help="write the asset + card after training")
    p.add_argument("--asset", default=None, help="export path (default assets/ppd/<model>/prompt_tokens.pt)")
    p.add_argument("--dev", default=str(DEV_PROMPTS))
    p.add_argument("--dev-tokens", type=int, default=48)


# ---- data ------------------------------------------------------------------------------------

def sequences_from_shards(directory, limit: int = 0) -> list[tuple[int, list[int]]]:
    """(prompt length, prompt + continuation) per sample of the distillation shards."""
    out = []
    for shard in sorted(Path(directory).glob("shard-*.pt")):
        data = torch.load(shard, map_location="cpu", weights_only=False)
        for prompt_ids, tokens in zip(data["prompt_ids"], data["tokens"]):
            out.append((len(prompt_ids), [int(t) for t in list(prompt_ids) + list(tokens)]))
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


def build_data(target, args, out: Path, log=print) -> list[tuple[int, list[int]]]:
    """(prompt length, prompt + continuation) pairs: insertion points are drawn in the continuation."""
    if args.shards:
        seqs = sequences_from_shards(args.shards, args.limit_prompts)
        log(f"data: {len(seqs)} sequences from shards in {args.shards}")
        return seqs
    path = out / "data.pt"
    prompts = read_prompts(args.prompts)
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
    return [(len(p), s) for p, s in zip(ids, seqs)]


# ---- the training forward --------------------------------------------------------------------

def _prompt_rows(prompts: PromptTokens, points: torch.Tensor, L: int, dtype):
    """The m * EPT prompt rows after each insertion point, in (point, k, j) order: their input
    embeddings (P, H), positions i + k (P,), which x columns they see (P, L: x_0..x_i) and which
    prompt rows they see (P, P: the rows (i, k' <= k, j) of their own EPT group)."""
    N, m, ept = points.shape[0], prompts.m, prompts.ept
    device = points.device
    grid = lambda t: t.expand(N, m, ept).reshape(-1)  # noqa: E731
    row_point = grid(points[:, None, None])
    row_k = grid(torch.arange(1, m + 1, device=device)[None, :, None])
    row_j = grid(torch.arange(ept, device=device)[None, None, :])
    row_ins = grid(torch.arange(N, device=device)[:, None, None])
    sees_x = torch.arange(L, device=device)[None, :] <= row_point[:, None]
    sees_prompts = ((row_ins[:, None] == row_ins[None, :]) & (row_j[:, None] == row_j[None, :])
                    & (row_k[None, :] <= row_k[:, None]))
    embeds = prompts.weight[None].expand(N, m, ept, prompts.hidden).reshape(N * m * ept, -1).to(dtype)
    return embeds, row_point + row_k, sees_x, sees_prompts


def insertion_forward(model, x: torch.Tensor, points: list[int], prompts: PromptTokens):
    """One pass over x (L,) plus m * ept prompt tokens after each insertion point. Returns
    (logits of x rows (L, V), prompt logits (len(points), m, V) averaged over EPT)."""
    L, m, ept = x.shape[0], prompts.m, prompts.ept
    embed = model.get_input_embeddings()
    dtype = embed.weight.dtype
    pts = torch.tensor(points, dtype=torch.long, device=x.device)
    prompt_embeds, prompt_positions, sees_x, sees_prompts = _prompt_rows(prompts, pts, L, dtype)
    P = prompt_embeds.shape[0]
    inputs = torch.cat([embed(x[None])[0], prompt_embeds], dim=0)[None]
    positions = torch.cat([torch.arange(L, device=x.device), prompt_positions])[None]
    allowed = torch.zeros(L + P, L + P, dtype=torch.bool, device=x.device)
    allowed[:L, :L] = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()
    allowed[L:, :L] = sees_x
    allowed[L:, L:] = sees_prompts
    mask = additive_mask(allowed, dtype)[None, None]
    logits = model(inputs_embeds=inputs, attention_mask=mask, position_ids=positions, use_cache=False).logits[0]
    teacher = logits[:L].detach().float()
    student = logits[L:].float().reshape(len(points), m, ept, -1).mean(dim=2)
    return teacher, student


def _extend_cache_forward(model, cache, inputs_embeds, positions, allowed, grad: bool):
    """Rows `inputs_embeds` (R, H) at `positions` (R,) over the cache plus themselves; `allowed`
    (R, cached + R) bool. Returns the rows' float32 logits; the cache grows by R entries."""
    dtype = inputs_embeds.dtype
    mask = additive_mask(allowed, dtype)[None, None]
    with torch.set_grad_enabled(grad):
        out = model(inputs_embeds=inputs_embeds[None], attention_mask=mask, position_ids=positions[None],
                    **cache_kwargs(model, cache), use_cache=True)
    return out.logits[0].float()


def cached_insertion_step(model, x: torch.Tensor, points: list[int], prompts: PromptTokens, labels: str = "chain"):
    """The training pass in two parts, so that backward runs over the prompt rows only:
    (1) no grad: x once with a KV cache (the frozen target's rows never see prompt tokens, so
    they need no gradient) and the teacher distributions; (2) with grad: the m * EPT prompt
    tokens of every insertion point over that cache, masked exactly as in `insertion_forward`.

    labels = "data": the teacher of prompt (i, k) is the target's distribution at x_{i+k}
    (eq. 1 as written: the next token of the training text). labels = "chain": the teacher is the
    target's distribution after its own greedy continuation g_1..g_k of x_0..x_i, computed in m
    extra no-grad passes of one row per point. Greedy PPD verifies against exactly that chain,
    so these labels match what inference asks of prompt token k even when x was sampled.
    Returns (teacher (len(points), m, V), student (len(points), m, V)); teacher rows past the end
    of x (data labels) are NaN and skipped by `decayed_kl`."""
    from transformers import DynamicCache

    L, m, ept, N = x.shape[0], prompts.m, prompts.ept, len(points)
    device = x.device
    embed = model.get_input_embeddings()
    dtype = embed.weight.dtype
    pts = torch.tensor(points, dtype=torch.long, device=device)
    cache = DynamicCache()
    cols_x = torch.arange(L, device=device)
    with torch.no_grad():
        if labels == "chain":
            keep = pts
        elif labels == "data":
            keep = torch.clamp(pts[:, None] + torch.arange(1, m + 1, device=device)[None], max=L - 1).reshape(-1)
        else:
            raise ValueError(f"labels must be 'chain' or 'data', not {labels!r}")
        logits = model(input_ids=x[None], **cache_kwargs(model, cache), use_cache=True, logits_to_keep=keep).logits[0].float()
        if labels == "data":
            teacher = logits.reshape(N, m, -1).clone()
            past_end = (pts[:, None] + torch.arange(1, m + 1, device=device)[None]) >= L
            teacher[past_end] = float("nan")
        else:
            # chain pass k feeds g_k (the argmax so far) at position i + k; it sees x_0..x_i and
            # g_1..g_{k-1} of its own point. Its logits are the teacher of prompt token k.
            rows, nxt = [], logits.argmax(-1)
            own = torch.eye(N, dtype=torch.bool, device=device)
            for k in range(1, m + 1):
                allowed = torch.cat([cols_x[None, :] <= pts[:, None]] + [own] * k, dim=1)
                out = _extend_cache_forward(model, cache, embed(nxt), pts + k, allowed, grad=False)
                rows.append(out)
                nxt = out.argmax(-1)
            teacher = torch.stack(rows, dim=1)
    extra = cache.get_seq_length() - L  # chain rows, hidden from the prompts
    prompt_embeds, positions, sees_x, sees_prompts = _prompt_rows(prompts, pts, L, dtype)
    hidden_chain = torch.zeros(sees_x.shape[0], extra, dtype=torch.bool, device=device)
    allowed = torch.cat([sees_x, hidden_chain, sees_prompts], dim=1)
    student = _extend_cache_forward(model, cache, prompt_embeds, positions, allowed, grad=True)
    return teacher, student.reshape(N, m, ept, -1).mean(dim=2)


def decayed_kl(teacher: torch.Tensor, student: torch.Tensor, alpha: float, reverse: bool = False,
               hard_weight: float = 0.0) -> torch.Tensor:
    """Eq. (1) on aligned rows: teacher/student (N, m, V); 1/m sum_k alpha^{k-1} KL at distance k,
    averaged over the N insertions; NaN teacher rows (past the end of x) count as absent.
    hard_weight w > 0 mixes in cross-entropy on the teacher's argmax: (1 - w) KL + w CE per row.
    Greedy verification accepts a candidate only when it IS that argmax, so the hard term spends
    the prompt tokens' little capacity on ranking it first rather than on the teacher's tail."""
    N, m = student.shape[0], student.shape[1]
    present = ~torch.isnan(teacher[..., 0])
    log_q = torch.log_softmax(torch.nan_to_num(teacher), -1)
    log_p = torch.log_softmax(student, -1)
    per_row = ((log_p.exp() * (log_p - log_q)) if reverse else (log_q.exp() * (log_q - log_p))).sum(-1)
    if hard_weight:
        ce = -log_p.gather(-1, log_q.argmax(-1, keepdim=True)).squeeze(-1)
        per_row = (1.0 - hard_weight) * per_row + hard_weight * ce
    weights = alpha ** torch.arange(m, dtype=per_row.dtype, device=per_row.device)
    return (per_row * weights * present).sum() / (max(1, N) * m)


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
    prompts = read_prompts(path)
    ids = [target.encode_prompt(p, True) for p in prompts]
    seqs = greedy_continuations(target, ids, new_tokens)
    return [(len(p), s) for p, s in zip(ids, seqs)]


# ---- the loop --------------------------------------------------------------------------------

def train(args, log=print) -> dict:
    from decoding.lm.models import load_model

    t_start = time.time()
    target = load_model(args.target, device=args.device, dtype=args.dtype)
    model = target.model
    for param in model.parameters():
        param.requires_grad_(False)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seqs = [(start, s[: args.seq_len]) for start, s in build_data(target, args, out, log)
            if min(len(s), args.seq_len) - start >= 2]
    if not seqs:
        raise ValueError("no training sequences")
    prompts = untrained_prompt_tokens(target, args.m, args.ept).float()
    if args.init:
        seed = PromptTokens.load(args.init).weight.detach()
        if seed.shape[0] != args.m or seed.shape[1] not in (1, args.ept) or seed.shape[2] != prompts.hidden:
            raise ValueError(f"--init {args.init} holds {tuple(seed.shape)}; need ({args.m}, 1 or {args.ept}, {prompts.hidden})")
        init = seed.expand(args.m, args.ept, prompts.hidden).clone()
        if seed.shape[1] == 1 and args.ept > 1:  # break the symmetry of the copies
            init += 0.01 * init.std() * torch.randn(init.shape, generator=torch.Generator().manual_seed(args.seed))
        prompts.weight.data.copy_(init.to(prompts.weight.device))
    prompts.weight.requires_grad_(True)
    opt = torch.optim.Adam([prompts.weight], lr=args.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, args.steps) / max(1, args.steps))))
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
            start, seq = seqs[rng.randrange(len(seqs))]
            x = torch.tensor(seq, device=target.device)
            span = range(max(0, start - 1), len(seq) - 1)  # after the last prompt token .. x_{L-2}
            points = sorted(rng.sample(span, min(args.inserts, len(span))))
            teacher, student = cached_insertion_step(model, x, points, prompts, args.labels)
            loss = decayed_kl(teacher, student, args.alpha, args.reverse_kl, args.hard_weight) / args.batch
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
    if target.model.get_input_embeddings().weight.dtype != torch.float32:
        target.model.to(torch.float32)  # accuracy as inference sees it: the float32 target
    final = final.to(target.device)
    dev = dev_sequences(target, args.dev, args.dev_tokens)
    acc = prediction_accuracy(target, final, dev)
    meta = {"target": target.name, "m": prompts.m, "ept": prompts.ept, "steps": step, "final_loss": history[-1],
            "alpha": args.alpha, "lr": args.lr, "batch": args.batch, "seq_len": args.seq_len,
            "inserts": args.inserts, "labels": args.labels, "hard_weight": args.hard_weight, "init": args.init, "model_dtype": args.dtype or "per device", "data": args.shards or args.prompts, "dev": display_path(args.dev),
            "dev_accuracy": acc, "bytes": final.nbytes(),
            "model_bytes": sum(t.numel() * t.element_size() for t in target.model.parameters())}  # float32 now
    final.save(path, meta)
    path.with_name("card.json").write_text(json.dumps(meta, indent=1))
    log(f"exported {path}: {json.dumps(acc)}")
    return path
