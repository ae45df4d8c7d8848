"""Train a feature draft (decoding/feature_draft.py) on the target's features (`distill features`).

EAGLE's objective (arXiv:2401.15077, section 3.3): for every position t the draft reads the
target's feature f_t (with uniform noise, so it learns to read its own imprecise predictions at
later draft steps) and the next token x_{t+1}, and predicts f_{t+1}. The loss is a smooth L1
regression onto f_{t+1} plus `CLS_WEIGHT` times the cross-entropy of its next-token distribution
(the target's head over the head's token subset) against the target's own top-k probabilities of
x_{t+2}, which the data stage stored. The layer starts from the target's last layer.
Checkpoints every few minutes; a rerun resumes. `--out` gets the finished draft.

    python -m distill train-features --config distill/configs/tasks.json --out runs/feature-draft
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
import torch.nn.functional as F

from .config import REPO, DistillConfig, get_config, setup_threads
from .features import features_dir
from .train import make_batches  # groups of similar length; a sequence's features count its positions

CLS_WEIGHT = 0.1  # EAGLE's weight of the classification loss beside the feature regression
NOISE = 0.2  # half-width of the uniform noise on input features (their RMS is about 2 for SmolLM2)


def load_sequences(cfg: DistillConfig, n_prompts: int):
    """(train, holdout) lists of (tokens (L,), features (L, d), prompt length, topk ids, topk p)."""
    from .train import holdout_set

    hold = holdout_set(cfg, n_prompts)
    train, val = [], []
    for path in sorted(features_dir(cfg).glob("part-*.pt")):
        for rec in torch.load(path, weights_only=True):
            for c in rec["conts"]:
                seq = (torch.cat([rec["prompt"], c["tokens"]]), torch.cat([rec["prompt_features"], c["features"]]),
                       len(rec["prompt"]), c["topk_ids"].long(), c["topk_p"].float())
                (val if rec["prompt_index"] in hold else train).append(seq)
    return train, val


def collate(seqs, which: list[int], table: torch.Tensor):
    """Right-padded pairs (f_t, x_{t+1}) for t < L - 1, regression targets f_{t+1}, and for the
    positions whose x_{t+2} the target generated: its top-k probabilities mapped into the head."""
    width = max(len(seqs[i][0]) for i in which) - 1
    d = seqs[which[0]][1].shape[1]
    feats = torch.zeros(len(which), width, d)
    toks = torch.zeros(len(which), width, dtype=torch.long)
    goal = torch.zeros(len(which), width, d)
    mask = torch.zeros(len(which), width, dtype=torch.long)
    rows, cols, sid, sp = [], [], [], []
    for r, i in enumerate(which):
        tokens, f, p_len, ids, probs = seqs[i]
        n = len(tokens) - 1
        feats[r, :n] = f[:-1].float()
        toks[r, :n] = tokens[1:]
        goal[r, :n] = f[1:].float()
        mask[r, :n] = 1
        # the generated token j sits at p_len + j and is predicted at t = p_len + j - 2
        j = torch.arange(max(0, 2 - p_len), len(ids))
        rows.append(torch.full((len(j),), r))
        cols.append(p_len + j - 2)
        sid.append(ids[j])
        sp.append(probs[j])
    sid = torch.cat(sid)
    return feats, toks, goal, mask, torch.cat(rows), torch.cat(cols), table[sid], torch.cat(sp)


def losses(model, embedding, head_w, batch, noise: float = NOISE, generator=None):
    feats, toks, goal, mask, rows, cols, sub, sp = batch
    if noise:
        feats = feats + (torch.rand(feats.shape, generator=generator) * 2 - 1) * noise
    positions = torch.arange(feats.shape[1]).expand(feats.shape[0], -1)
    pred, _ = model(feats, embedding(toks), positions, attention_mask=mask)
    valid = mask.bool()
    reg = F.smooth_l1_loss(pred[valid].float(), goal[valid])
    logq = torch.log_softmax((pred[rows, cols] @ head_w.T).float(), dim=-1)
    inside = sub >= 0
    cls = -(sp * inside * logq.gather(1, sub.clamp(min=0))).sum(-1).mean()
    return reg, cls, logq, sub, sp


@torch.no_grad()
def evaluate(model, embedding, head_w, seqs, table, limit: int = 96) -> dict:
    """One draft step from true features on holdout sequences: how often the draft's top token is
    the target's, and sum(min(p, q)) over the target's top-k (a lower bound of alpha at T=1)."""
    model.eval()
    agree = alpha = n = 0.0
    for k in range(0, min(limit, len(seqs)), 16):
        which = list(range(k, min(k + 16, limit, len(seqs))))
        _, _, logq, sub, sp = losses(model, embedding, head_w, collate(seqs, which, table), 0.0)
        q = logq.exp()
        top = sub[:, 0]
        agree += float(((q.argmax(-1) == top) & (top >= 0)).sum())
        alpha += float((torch.minimum(sp, q.gather(1, sub.clamp(min=0))) * (sub >= 0)).sum())
        n += len(sub)
    model.train()
    return {"top1_agreement": agree / max(n, 1), "alpha_topk_lb": alpha / max(n, 1), "positions": int(n)}


def train(cfg: DistillConfig, out_dir: Path, epochs: float, batch_tokens: int, lr: float, head_tokens: int,
          max_seconds: float = 0.0, fresh: bool = False, target=None, log=print, cls_weight: float = CLS_WEIGHT,
          noise: float = NOISE, layers: int = 1) -> dict:
    from decoding.feature_draft import FeatureDraftModel, draft_layer_config
    from decoding.models import load_model
    from decoding.output_head import OutputHead, frequent_tokens

    setup_threads()
    ckpt = cfg.path("ckpt_dir") / f"feature-{out_dir.name}.pt"  # one checkpoint per output folder
    state = None if fresh or not ckpt.exists() else torch.load(ckpt, weights_only=False)
    if target is None:
        target = load_model(cfg.target, device="cpu", dtype=torch.float32)
    train_seqs, val_seqs = load_sequences(cfg, len(cfg.prompt_texts()))
    if not train_seqs:
        raise SystemExit("train-features: no features; run `python -m distill features` first")
    embedding = target.model.get_input_embeddings()
    ids = state["head_tokens"] if state else frequent_tokens([s[0][s[2]:] for s in train_seqs], head_tokens,
                                                             target.eos_token_ids(cfg.chat))
    head_w = target.model.get_output_embeddings().weight.detach()[torch.tensor(ids)].float()
    table = torch.full((target.vocab_size,), -1, dtype=torch.long)
    table[torch.tensor(ids)] = torch.arange(len(ids))
    model = FeatureDraftModel(draft_layer_config(target.model.config, layers))
    model.init_from_target(target.model)
    model.float().train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    per_epoch = len(make_batches(train_seqs, batch_tokens, 0))
    total = max(1, int(epochs * per_epoch))
    step, history, spent = 0, [], 0.0
    if state:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step, history, spent, total = state["step"], state["history"], state["seconds"], state["total_steps"]
        log(f"train-features: resuming at step {step}/{total}")
    n_tok = sum(len(s[0]) for s in train_seqs)
    log(f"train-features: {len(train_seqs)} sequences, {n_tok} positions; holdout {len(val_seqs)}; "
        f"{total} steps ({per_epoch}/epoch); head {len(ids)} tokens; "
        f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params")
    warmup = min(50, total // 10 + 1)

    def save(finished: bool) -> None:
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step, "total_steps": total,
                    "history": history, "seconds": spent + time.time() - t0, "head_tokens": ids,
                    "finished": finished}, ckpt)

    t0, last = time.time(), time.time()
    gen = torch.Generator().manual_seed(step)
    epoch_batches, epoch = None, -1
    while step < total:
        if step // per_epoch != epoch:
            epoch = step // per_epoch
            epoch_batches = make_batches(train_seqs, batch_tokens, epoch)
        for g in opt.param_groups:
            g["lr"] = lr * (min(1.0, (step + 1) / warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / total))))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.bf16_autocast):
            reg, cls, *_ = losses(model, embedding, head_w, collate(train_seqs, epoch_batches[step % per_epoch], table),
                                  noise, gen)
            loss = reg + cls_weight * cls
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        step += 1
        if step % 10 == 0:
            log(f"train-features: step {step}/{total} reg {reg.item():.4f} cls {cls.item():.3f} "
                f"({time.time() - t0:.0f} s)")
        stop = bool(max_seconds) and time.time() - t0 > max_seconds
        if step == total or stop or time.time() - last > 300:
            metrics = evaluate(model, embedding, head_w, val_seqs, table)
            history.append({"step": step, "reg": reg.item(), "cls": cls.item(),
                            "seconds": spent + time.time() - t0, **metrics})
            log(f"train-features: step {step} {metrics}")
            save(step == total)
            last = time.time()
        if stop:
            break
    if step == total:
        model.save(out_dir, {"target": cfg.target, "chat": cfg.chat})
        OutputHead(torch.tensor(ids), head_w).save(out_dir, with_weight=False)
        (out_dir / "training.json").write_text(json.dumps(
            {"steps": step, "train_seconds": spent + time.time() - t0, "train_positions": n_tok,
             "sequences": len(train_seqs), "head_tokens": len(ids), "lr": lr, "batch_tokens": batch_tokens,
             "epochs": epochs, "layers": layers, "noise": noise, "cls_weight": cls_weight, "history": history,
             "config": json.loads(cfg.to_json())}, indent=1))
        log(f"train-features: wrote {out_dir}")
    return {"step": step, "total": total, "history": history}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m distill train-features")
    ap.add_argument("--config", default="full")
    ap.add_argument("--out", default="runs/feature-draft")
    ap.add_argument("--epochs", type=float, default=4.0)
    ap.add_argument("--batch-tokens", type=int, default=4096)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--head-tokens", type=int, default=8192)
    ap.add_argument("--max-seconds", type=float, default=0.0)
    ap.add_argument("--cls-weight", type=float, default=CLS_WEIGHT, help="weight of the next-token loss")
    ap.add_argument("--noise", type=float, default=NOISE, help="half-width of the uniform noise on input features")
    ap.add_argument("--layers", type=int, default=1, help="decoder layers of the draft (EAGLE: 1)")
    ap.add_argument("--fresh", action="store_true")
    args = ap.parse_args(argv)
    if args.epochs <= 0 or args.batch_tokens < 1 or args.lr <= 0 or args.head_tokens < 1:
        ap.error("--epochs, --batch-tokens, --lr and --head-tokens must be positive")
    if args.layers < 1:
        ap.error("--layers must be >= 1")
    if args.cls_weight < 0 or args.noise < 0:
        ap.error("--cls-weight and --noise must be >= 0")
    cfg = get_config(args.config)
    if not any(features_dir(cfg).glob("part-*.pt")):
        print(f"error: no target features in {features_dir(cfg)}; run `python -m distill features --config "
              f"{args.config}` first", file=sys.stderr)
        return 2
    out = Path(args.out)
    train(cfg, out if out.is_absolute() else REPO / out, args.epochs,
          args.batch_tokens, args.lr, args.head_tokens, args.max_seconds, args.fresh, cls_weight=args.cls_weight,
          noise=args.noise, layers=args.layers)
    return 0
