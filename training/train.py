"""Stage 2: knowledge distillation of a small Llama on the target's soft labels.

Loss per generated position, with the target's top-k ids S, probabilities p_S and the rest
r = 1 - sum p_S lumped into one bucket (exact KL between the two coarse-grained distributions):

    KD = - sum_{x in S} p(x) log q(x) - r log(1 - sum_{x in S} q(x))

plus `hard_label_weight` x cross-entropy on the token the target actually emitted. Only the
generated positions are scored (the prompt is context). The draft's tied embedding is
initialized from the top principal directions of the target's embedding matrix, so it starts
with the target's notion of which tokens are alike.

Fixed seeds; the batch order of epoch e is a function of (train_seed, e). A checkpoint
(`ckpt_dir/last.pt`: weights, optimizer, step, the list of shards used) is written every
`ckpt_every_s` seconds and at the end; running again resumes from it.

    python -m training train [--config full|smoke|FILE] [--max-seconds S] [--fresh] [--warm-start CKPT]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import time
from pathlib import Path

import torch

from decoding.lm.devices import pick_device

from .config import DistillConfig, get_config, setup_threads
from .head import choose_tokens, covered_mass, kd_loss_subset, subset_q
from .model import build_draft


# ------------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------------


def holdout_set(cfg: DistillConfig, n_prompts: int) -> set[int]:
    order = list(range(n_prompts))
    random.Random(cfg.data_seed - 1).shuffle(order)
    return set(order[: cfg.holdout_prompts])


def list_shards(cfg: DistillConfig) -> list[str]:
    """Shard files to train on: `data_dir`'s (the first `train_shards` when set), then the
    on-policy ones (the first `train_onpolicy_shards` when set), as '<dir key>/<file name>'."""
    names = sorted(p.name for p in cfg.path("data_dir").glob("shard-*.pt"))
    if cfg.train_shards:
        wanted = {f"shard-{b:05d}.pt" for b in range(cfg.train_shards)}
        names = [n for n in names if n in wanted]
    out = [f"data_dir/{n}" for n in names]
    on_dir = cfg.path("onpolicy_dir")
    if cfg.use_onpolicy and on_dir.is_dir():
        on = sorted(p.name for p in on_dir.glob("shard-*.pt"))
        if cfg.train_onpolicy_shards:
            wanted = {f"shard-{b:05d}.pt" for b in range(cfg.train_onpolicy_shards)}
            on = [n for n in on if n in wanted]
        out += [f"onpolicy_dir/{n}" for n in on]
    return out


def shard_file(cfg: DistillConfig, name: str) -> Path:
    key, _, file = name.partition("/")
    return cfg.path(key) / file if file else cfg.path("data_dir") / name


def load_examples(cfg: DistillConfig, shard_names: list[str], n_prompts: int):
    """(train, holdout) lists of examples (prompt_ids, tokens, topk_ids, topk_p)."""
    hold = holdout_set(cfg, n_prompts)
    train, val = [], []
    for name in shard_names:
        shard = torch.load(shard_file(cfg, name), weights_only=True)
        for j in range(len(shard["tokens"])):
            if len(shard["tokens"][j]) == 0:
                continue
            ex = (list(shard["prompt_ids"][j]), shard["tokens"][j], shard["topk_ids"][j], shard["topk_p"][j])
            (val if shard["prompt_index"][j] in hold else train).append(ex)
    return train, val


def make_batches(examples, batch_tokens: int, seed: int) -> list[list[int]]:
    """Group examples of similar length into batches of about `batch_tokens` generated tokens."""
    rng = random.Random(seed)
    idx = list(range(len(examples)))
    rng.shuffle(idx)
    idx.sort(key=lambda i: len(examples[i][0]) + len(examples[i][1]))
    batches, cur, cur_tok = [], [], 0
    for i in idx:
        cur.append(i)
        cur_tok += len(examples[i][1])
        if cur_tok >= batch_tokens:
            batches.append(cur)
            cur, cur_tok = [], 0
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def collate(examples, which: list[int], pad_id: int):
    """Right-padded inputs, and for every generated position its (row, column) in the batch,
    the hard label, the soft-label ids and probabilities."""
    seqs = []
    for i in which:
        prompt, toks = examples[i][0], examples[i][1]
        seqs.append(prompt + toks[:-1].tolist())
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    rows, cols, hard, sid, sp = [], [], [], [], []
    for r, (i, s) in enumerate(zip(which, seqs)):
        ids[r, : len(s)] = torch.tensor(s)
        mask[r, : len(s)] = 1
        p_len, g = len(examples[i][0]), len(examples[i][1])
        rows.append(torch.full((g,), r))
        cols.append(torch.arange(p_len - 1, p_len - 1 + g))
        hard.append(examples[i][1])
        sid.append(examples[i][2].long())
        sp.append(examples[i][3].float())
    return ids, mask, torch.cat(rows), torch.cat(cols), torch.cat(hard), torch.cat(sid), torch.cat(sp)


# ------------------------------------------------------------------------------------------
# model
# ------------------------------------------------------------------------------------------


# ------------------------------------------------------------------------------------------
# loss and evaluation
# ------------------------------------------------------------------------------------------


def kd_loss(hidden, lm_head, hard, sid, sp, hard_weight: float, chunk: int = 1024):
    """Mean over positions of the lumped-tail KD loss (+ hard-label CE); chunked over positions
    so the (positions x vocabulary) logits never all live at once."""
    total = hidden.new_zeros((), dtype=torch.float32)
    n = hidden.shape[0]
    for s in range(0, n, chunk):
        logits = lm_head(hidden[s : s + chunk]).float()
        logq = torch.log_softmax(logits, dim=-1)
        lq_s = logq.gather(1, sid[s : s + chunk])
        p_s = sp[s : s + chunk]
        rest_p = (1 - p_s.sum(1)).clamp(min=0)
        rest_q = torch.log1p(-lq_s.exp().sum(1).clamp(max=1 - 1e-6))
        kd = -(p_s * lq_s).sum(1) - rest_p * rest_q
        ce = -logq.gather(1, hard[s : s + chunk, None]).squeeze(1)
        total = total + (kd + hard_weight * ce).sum()
    return total / n


def kd_loss_sampled(hidden, weight, hard, sid, sp, hard_weight: float, negatives: int, generator):
    """`kd_loss` with the softmax restricted to the candidate tokens C (every soft-label and hard
    label id of the batch) plus `negatives` tokens R drawn uniformly from the rest; the partition
    function is estimated as sum_C e^l + (|rest| / |R|) sum_R e^l (sampled softmax)."""
    vocab = weight.shape[0]
    cand = torch.unique(torch.cat([sid.flatten(), hard]))  # sorted
    keep = torch.ones(vocab, dtype=torch.bool, device=weight.device)
    keep[cand] = False
    rest = keep.nonzero().squeeze(1)
    if negatives and len(rest) > negatives:
        pick = torch.randperm(len(rest), generator=generator)[:negatives].to(rest.device)
        neg = rest[pick]
    else:
        neg = rest
    cols = torch.cat([cand, neg])
    logits = (hidden @ weight[cols].T).float()
    shift = torch.zeros(len(cols), device=logits.device)
    if len(neg):
        shift[len(cand):] = math.log(len(rest) / len(neg))
    log_z = torch.logsumexp(logits + shift, dim=1, keepdim=True)
    lq_s = logits.gather(1, torch.searchsorted(cand, sid)) - log_z
    lq_h = logits.gather(1, torch.searchsorted(cand, hard.contiguous())[:, None]).squeeze(1) - log_z.squeeze(1)
    rest_p = (1 - sp.sum(1)).clamp(min=0)
    rest_q = torch.log1p(-lq_s.exp().sum(1).clamp(max=1 - 1e-6))
    kd = -(sp * lq_s).sum(1) - rest_p * rest_q
    return (kd - hard_weight * lq_h).mean()


@torch.no_grad()
def evaluate(model, examples, pad_id: int, device, max_examples: int = 64, head=None):
    """Holdout proxies: mean sum_{x in top-k of p} min(p, q) (a lower bound of alpha on the
    target's sampled text) and top-1 agreement. `head`: (weight, token ids) of a restricted head."""
    model.eval()
    mins, agree, n = 0.0, 0, 0
    for s in range(0, min(len(examples), max_examples), 8):
        which = list(range(s, min(s + 8, len(examples), max_examples)))
        ids, mask, rows, cols, hard, sid, sp = collate(examples, which, pad_id)
        h = model.model(input_ids=ids.to(device), attention_mask=mask.to(device)).last_hidden_state
        h = h[rows.to(device), cols.to(device)]
        if head is not None:
            q = subset_q(h, head[0], head[1], model.get_input_embeddings().weight.shape[0])
        else:
            q = torch.softmax(model.lm_head(h).float(), -1).cpu()
        mins += torch.minimum(q.gather(1, sid), sp).sum().item()
        agree += (q.argmax(1) == sid[:, 0]).sum().item()
        n += len(hard)
    model.train()
    return {"alpha_topk_lb": mins / max(n, 1), "top1_agreement": agree / max(n, 1), "positions": n}


# ------------------------------------------------------------------------------------------
# training loop
# ------------------------------------------------------------------------------------------


def warm_start_weights(source: str) -> dict:
    """Initial weights: a training checkpoint's model, or an exported draft directory's safetensors."""
    path = Path(source)
    if path.is_dir():
        from safetensors.torch import load_file

        weights = load_file(str(path / "model.safetensors"))
        return {k: v.float() for k, v in weights.items()}
    return torch.load(path, weights_only=False)["model"]


def _save(path: Path, state: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def train(cfg: DistillConfig, target=None, max_seconds: float = 0.0, fresh: bool = False,
          warm_start: str | None = None, grow: bool = False, total_steps: int = 0, log=print) -> dict:
    """Train (or resume) the draft. `grow`: at every epoch start, take up the shards that data
    generation has added meanwhile (so training can run beside a data stage). `total_steps`
    fixes the schedule's length (default: `epochs` x the steps of one epoch at the start)."""
    from decoding.lm.models import load_model


    setup_threads()
    device = pick_device()
    ckpt_path = cfg.path("ckpt_dir") / "last.pt"
    n_prompts = len(cfg.prompt_texts())
    state = None
    if ckpt_path.exists() and not fresh:
        state = torch.load(ckpt_path, weights_only=False)
        if state.get("finished") and not warm_start:
            log(f"train: {ckpt_path} is finished (step {state['step']}); use --fresh or --warm-start to train again")
            return state
        shard_names = [s for s in state["shards"] if shard_file(cfg, s).exists()]
        if len(shard_names) != len(state["shards"]):
            raise SystemExit("train: shards of the checkpoint are missing; run with --fresh")
        log(f"train: resuming from step {state['step']} ({len(shard_names)} shards)")
    else:
        shard_names = list_shards(cfg)
    if not shard_names:
        raise SystemExit("train: no data shards; run `python -m training data` first")
    train_ex, val_ex = load_examples(cfg, shard_names, n_prompts)
    n_tok = sum(len(e[1]) for e in train_ex)
    log(f"train: {len(train_ex)} sequences, {n_tok} generated tokens; holdout {len(val_ex)} sequences")

    if target is None:
        target = load_model(cfg.target, device="cpu")
    pad_id = target.tokenizer.pad_token_id if target.tokenizer.pad_token_id is not None else 0
    model = build_draft(cfg, target.model, cfg.train_seed)
    if warm_start:
        missing, unexpected = model.load_state_dict(warm_start_weights(warm_start), strict=False)
        if unexpected or set(missing) - {"lm_head.weight"}:  # a tied head is saved once, as the embedding
            raise SystemExit(f"train: {warm_start} does not fit this draft: missing {missing}, unexpected {unexpected}")
        model.tie_weights()
        log(f"train: warm start from {warm_start}")
    model.to(device).train()

    # an untied head over the most frequent tokens only (training/head.py), when asked for
    head_w = subset = None
    if cfg.head_tokens:
        chosen = (state or {}).get("head_tokens") or choose_tokens(train_ex, cfg.head_tokens,
                                                                   target.eos_token_ids(cfg.chat))
        subset = torch.tensor(chosen, dtype=torch.long, device=device)
        head_w = torch.nn.Parameter(model.get_input_embeddings().weight.detach()[subset].clone())
        log(f"train: head over {len(chosen)} tokens, {covered_mass(train_ex, chosen):.3f} of the target's "
            "soft-label mass")

    embed = model.get_input_embeddings().weight
    others = [p for n, p in model.named_parameters() if p is not embed] + ([head_w] if head_w is not None else [])
    decay = [p for p in others if p.dim() >= 2]
    no_decay = [p for p in others if p.dim() < 2]
    opt = torch.optim.AdamW([
        {"params": [embed], "lr": cfg.lr * cfg.embed_lr_scale, "weight_decay": 0.0},
        {"params": decay, "lr": cfg.lr, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "lr": cfg.lr, "weight_decay": 0.0},
    ], betas=(0.9, 0.98), eps=1e-8)
    base_lrs = [g["lr"] for g in opt.param_groups]

    steps_per_epoch = len(make_batches(train_ex, cfg.batch_tokens, cfg.train_seed))
    steps_arg = total_steps
    total_steps = steps_arg or max(1, int(round(cfg.epochs * steps_per_epoch)))
    step, elapsed_before, epoch, epoch_step = 0, 0.0, 0, 0
    history = []
    if state is not None and not fresh and not (state.get("finished") and warm_start):
        model.load_state_dict(state["model"])
        if head_w is not None and "head" in state:
            head_w.data.copy_(state["head"])
        opt.load_state_dict(state["optimizer"])
        step, elapsed_before, history = state["step"], state.get("train_seconds", 0.0), state.get("history", [])
        total_steps = steps_arg or state["total_steps"]  # --steps on resume changes the schedule
        epoch, epoch_step = state.get("epoch", step // steps_per_epoch), state.get("epoch_step", step % steps_per_epoch)

    autocast = cfg.bf16_autocast and (device.type == "cuda" or _cpu_has_bf16())
    log(f"train: {total_steps} steps ({steps_per_epoch}/epoch), device {device}, bf16 autocast {autocast}, "
        f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params")

    def lr_at(s: int) -> float:
        if s < cfg.warmup_steps:
            return (s + 1) / cfg.warmup_steps
        prog = (s - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps)
        return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, prog)))

    def checkpoint(finished: bool) -> dict:
        st = {
            "model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
            "total_steps": total_steps, "shards": shard_names, "epoch": epoch, "epoch_step": epoch_step, "train_seconds": elapsed_before + (time.time() - t0),
            "train_tokens_per_epoch": n_tok, "history": history, "finished": finished,
            "config": cfg.to_json(),
            **({"head": head_w.detach().cpu(), "head_tokens": subset.tolist()} if head_w is not None else {}),
        }
        _save(ckpt_path, st)
        return st

    from tqdm import tqdm

    neg_gen = torch.Generator().manual_seed(cfg.train_seed + 7919 * step)
    t0 = time.time()
    last_ckpt = time.time()
    bar = tqdm(total=total_steps, initial=step, desc="distilling", unit="step", mininterval=10)
    epoch_batches = make_batches(train_ex, cfg.batch_tokens, cfg.train_seed + 1000 * epoch)
    loss_ema = None
    while step < total_steps:
        if epoch_step >= len(epoch_batches):
            epoch, epoch_step = epoch + 1, 0
            if grow:
                names = list_shards(cfg)
                if names != shard_names:
                    shard_names = names
                    train_ex, val_ex = load_examples(cfg, shard_names, n_prompts)
                    n_tok = sum(len(e[1]) for e in train_ex)
                    log(f"train: epoch {epoch} takes up {len(shard_names)} shards, {n_tok} tokens")
            epoch_batches = make_batches(train_ex, cfg.batch_tokens, cfg.train_seed + 1000 * epoch)
        which = epoch_batches[epoch_step]
        epoch_step += 1
        ids, mask, rows, cols, hard, sid, sp = collate(train_ex, which, pad_id)
        for g, base in zip(opt.param_groups, base_lrs):
            g["lr"] = base * lr_at(step)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            h = model.model(input_ids=ids.to(device), attention_mask=mask.to(device)).last_hidden_state
            h = h[rows.to(device), cols.to(device)]
            if head_w is not None:
                loss = kd_loss_subset(h, head_w, subset, hard.to(device), sid.to(device), sp.to(device),
                                      cfg.hard_label_weight)
            elif cfg.negatives:
                loss = kd_loss_sampled(h, model.lm_head.weight, hard.to(device), sid.to(device), sp.to(device),
                                       cfg.hard_label_weight, cfg.negatives, neg_gen)
            else:
                loss = kd_loss(h, model.lm_head, hard.to(device), sid.to(device), sp.to(device), cfg.hard_label_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        loss_ema = loss.item() if loss_ema is None else 0.95 * loss_ema + 0.05 * loss.item()
        bar.update(1)
        bar.set_postfix_str(f"loss {loss_ema:.3f}")
        now = time.time()
        stop = bool(max_seconds) and now - t0 > max_seconds
        if step == total_steps or stop or (cfg.ckpt_every_s and now - last_ckpt > cfg.ckpt_every_s):
            metrics = evaluate(model, val_ex, pad_id, device,
                               head=(head_w.detach(), subset) if head_w is not None else None) if val_ex else {}
            history.append({"step": step, "loss": loss_ema, "seconds": elapsed_before + now - t0, **metrics})
            log(f"train: step {step}/{total_steps} loss {loss_ema:.3f} {metrics}")
            state = checkpoint(step == total_steps)
            last_ckpt = time.time()
        if stop and step < total_steps:
            log(f"train: stopping after {now - t0:.0f}s at step {step}; run again to resume")
            break
    bar.close()
    return state


def _cpu_has_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training train")
    ap.add_argument("--config", default="full")
    ap.add_argument("--max-seconds", type=float, default=0.0)
    ap.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    ap.add_argument("--warm-start", help="initialize weights from this checkpoint, new schedule")
    ap.add_argument("--epochs", type=float)
    ap.add_argument("--steps", type=int, default=0, help="schedule length in steps (default: epochs x steps/epoch)")
    ap.add_argument("--grow", action="store_true", help="take up new data shards at every epoch start")
    ap.add_argument("--lr", type=float)
    args = ap.parse_args(argv)
    cfg = get_config(args.config, epochs=args.epochs, lr=args.lr)
    train(cfg, max_seconds=args.max_seconds, fresh=args.fresh, warm_start=args.warm_start, grow=args.grow,
          total_steps=args.steps)
    return 0
