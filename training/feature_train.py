"""Train a feature draft (decoding/drafters/feature.py) on the target's features (`training features`).

EAGLE's objective (arXiv:2401.15077, section 3.3): for every position t the draft reads the
target's feature f_t (with uniform noise, so it learns to read its own imprecise predictions at
later draft steps) and the next token x_{t+1}, and predicts f_{t+1}. The loss is a smooth L1
regression onto f_{t+1} plus `CLS_WEIGHT` times the cross-entropy of its next-token distribution
(the target's head over the head's token subset) against the target's own top-k probabilities of
x_{t+2}, which the data stage stored. The layer starts from the target's last layer (or, with
`--init`, from a finished feature draft).
`--unroll-steps K` adds EAGLE-3's training-time test (arXiv:2503.01840): draft steps 2..K are run
on the draft's own predicted features, with the attention a draft's later tokens have at
inference (`unrolled_mask`), and their losses join the first step's with weights STEP_DECAY^(k-1).
Checkpoints every few minutes; a rerun resumes. `--out` gets the finished draft. `--device cuda`
trains on a GPU (batches are put together on the CPU and moved there).

    python -m training train-features --config training/configs/tasks.json --out runs/feature-draft
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

from .config import REPO, DistillConfig, get_config, setup_threads, stage_device
from .features import features_dir
from decoding.paths import display_path

from .train import make_batches  # groups of similar length; a sequence's features count its positions

CLS_WEIGHT = 0.1  # EAGLE's weight of the classification loss beside the feature regression
NOISE = 0.2  # half-width of the uniform noise on input features (their RMS is about 2 for SmolLM2)
STEP_DECAY = 0.8  # unrolled step k's losses weigh STEP_DECAY ** (k - 1): a later token counts only if the earlier ones hold
EVAL_STEPS = 3  # the holdout always reports draft steps 1..3


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


def unrolled_mask(length: int, step: int, batch: int) -> torch.Tensor:
    """Attention of unrolled draft step `step` (>= 2) over the keys of steps 1..step (EAGLE-3's
    training-time test, arXiv:2503.01840, section 3). At inference the step-th draft token at
    position s reads the true pairs at positions <= s - step + 1 and the pairs the draft itself made
    at steps 2..step, which sit at positions s - step + 2 .. s; with the keys of each unrolled step
    stacked after the previous ones, query s of step k may see step-1 key j <= s - k + 1 and the
    key of step m (2 <= m <= k) at position s - k + m. Shape (batch, 1, length, step * length)."""
    s = torch.arange(length).unsqueeze(1)
    j = torch.arange(length).unsqueeze(0)
    blocks = [j <= s - step + 1] + [j == s - step + m for m in range(2, step + 1)]
    return torch.cat(blocks, dim=1).expand(batch, 1, length, step * length)


def head_table(ids, vocab_size: int) -> torch.Tensor:
    """Vocabulary id -> its row in the draft's head (-1 outside it): how collate maps the target's labels."""
    table = torch.full((vocab_size,), -1, dtype=torch.long)
    table[torch.as_tensor(ids)] = torch.arange(len(ids))
    return table


def lr_factor(step: int, total: int, warmup: int) -> float:
    """The learning rate's share of its peak: linear warmup over `warmup` steps, cosine down to 5%."""
    return min(1.0, (step + 1) / warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / total)))


def unrolled_loss(per_step, cls_weight: float) -> torch.Tensor:
    """The training loss over `losses`' unrolled steps: step k's (regression + cls_weight x next-token) weighs
    STEP_DECAY ** (k - 1)."""
    return sum(STEP_DECAY ** k * (reg + cls_weight * cls) for k, (reg, cls, *_) in enumerate(per_step))


def to_device(batch: tuple, device: torch.device) -> tuple:
    """A collated batch on `device` (collate builds it on the CPU)."""
    return tuple(t.to(device, non_blocking=True) for t in batch)


def losses(model, embedding, head_w, batch, noise: float = NOISE, generator=None, steps: int = 1):
    """Per unrolled step k = 1..steps: (regression loss, next-token loss, log q at the labelled
    positions, their head ids, their target probabilities). Step 1 reads the true (noised) features;
    step k >= 2 reads step k-1's predictions one position back, so it sees what the draft's k-th
    token sees at inference (its earlier tokens taken as the true ones). A step's losses cover the
    positions whose whole chain exists (s >= k - 1)."""
    feats, toks, goal, mask, rows, cols, sub, sp = batch
    if noise:  # drawn on the CPU (the generator lives there), so a seed gives the same noise on any device
        feats = feats + ((torch.rand(feats.shape, generator=generator) * 2 - 1) * noise).to(feats.device)
    out = []
    for k, pred in enumerate(unroll(model, feats, embedding(toks), mask, steps), start=1):
        valid = mask.bool()
        valid[:, :k - 1] = False
        labelled = cols >= k - 1
        reg = F.smooth_l1_loss(pred[valid].float(), goal[valid][..., :pred.shape[-1]])  # a fused input's first block
        logq = torch.log_softmax((pred[rows[labelled], cols[labelled]] @ head_w.T).float(), dim=-1)
        ids, probs = sub[labelled], sp[labelled]
        inside = ids >= 0
        cls = -(probs * inside * logq.gather(1, ids.clamp(min=0))).sum(-1).mean()
        out.append((reg, cls, logq, ids, probs))
    return out


def unroll(model, feats, embeds, mask, steps: int) -> list[torch.Tensor]:
    """The predicted features of unrolled draft steps 1..steps, each (batch, length, d): step 1 from
    the input features, step k from step k-1's predictions one position back, its attention given
    by `unrolled_mask` over the keys of all steps so far (kept in one cache). A model with a
    `fuse_in` (experiments/multilayer_features.py) maps wider input features to d before step 1 and
    runs its `draft` on them."""
    batch_size, length = mask.shape
    if hasattr(model, "fuse_in"):  # a draft reading several of the target's layers folds them to one state first
        feats, model = model.fuse_in(feats), model.draft
    positions = torch.arange(length, device=mask.device).expand(batch_size, -1)
    preds, cache = [], None
    for k in range(1, steps + 1):
        if k == 1:
            inputs, attention = feats, mask
        else:
            inputs = torch.cat([feats[:, :1], preds[-1][:, :-1].to(feats.dtype)], dim=1)
            attention = unrolled_mask(length, k, batch_size).to(mask.device)
        pred, cache = model(inputs, embeds, positions, cache=cache, attention_mask=attention,
                            use_cache=steps > 1)
        preds.append(pred)
    return preds


@torch.no_grad()
def evaluate(model, embedding, head_w, seqs, table, limit: int = 96, steps: int = 1) -> dict:
    """Draft steps on holdout sequences: how often the draft's top token is the target's, and
    sum(min(p, q)) over the target's top-k (a lower bound of alpha at T=1). Step 1 reads true
    features; step k reads its own k-1 earlier predictions (the k-th token of a draft whose earlier
    tokens were right), reported as `top1_agreement_step{k}`. With more than `limit` sequences it
    reads every n-th, so the figure spans the holdout prompts whatever the rounds per prompt."""
    model.eval()
    seqs = seqs[:: max(1, len(seqs) // limit)][:limit]
    agree, alpha, n = [0.0] * steps, 0.0, [0.0] * steps
    for start in range(0, len(seqs), 16):
        which = list(range(start, min(start + 16, len(seqs))))
        batch = to_device(collate(seqs, which, table), head_w.device)
        for k, (_, _, logq, sub, sp) in enumerate(losses(model, embedding, head_w, batch, 0.0, steps=steps)):
            q = logq.exp()
            top = sub[:, 0]
            agree[k] += float(((q.argmax(-1) == top) & (top >= 0)).sum())
            n[k] += len(sub)
            if k == 0:
                alpha += float((torch.minimum(sp, q.gather(1, sub.clamp(min=0))) * (sub >= 0)).sum())
    model.train()
    out = {"top1_agreement": agree[0] / max(n[0], 1), "alpha_topk_lb": alpha / max(n[0], 1), "positions": int(n[0])}
    out.update({f"top1_agreement_step{k + 1}": agree[k] / max(n[k], 1) for k in range(1, steps)})
    return out


def _rel(path: Path) -> str:
    """`path` as training.json names it: relative to the repository inside it (display_path), else its
    folder name alone (no machine paths in a file that may be shipped)."""
    shown = display_path(path)
    return Path(shown).name if Path(shown).is_absolute() else shown


def init_training(init: Path) -> dict | None:
    """The training record of the draft a run went on from (its settings and holdout history, not its
    data config), so a draft made in two stages keeps both in its training.json."""
    path = Path(init) / "training.json"
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    record.pop("config", None)
    return record


def train(cfg: DistillConfig, out_dir: Path, epochs: float, batch_tokens: int, lr: float, head_tokens: int,
          max_seconds: float = 0.0, fresh: bool = False, target=None, log=print, cls_weight: float = CLS_WEIGHT,
          noise: float = NOISE, layers: int = 1, steps: int = 1, init: Path | None = None,
          device: str | torch.device = "cpu") -> dict:
    from decoding.drafters.feature import FeatureDraftModel, draft_layer_config
    from decoding.lm.models import load_model
    from decoding.drafters.output_head import OutputHead, frequent_tokens

    setup_threads()
    ckpt = cfg.path("ckpt_dir") / f"feature-{out_dir.name}.pt"  # one checkpoint per output folder
    state = None if fresh or not ckpt.exists() else torch.load(ckpt, weights_only=False, map_location="cpu")
    device = torch.device(device)
    if target is None:
        target = load_model(cfg.target, device=device, dtype=torch.float32)
    train_seqs, val_seqs = load_sequences(cfg, len(cfg.prompt_texts()))
    if not train_seqs:
        raise SystemExit("train-features: no features; run `python -m training features` first")
    embedding = target.model.get_input_embeddings()
    if init is not None:  # go on from a finished feature draft: its layers, and its head's tokens
        from decoding.drafters.feature import load_feature_draft

        model, init_head = load_feature_draft(init, target.model, torch.float32, device)
        ids = init_head.token_ids.tolist()
    else:
        model = FeatureDraftModel(draft_layer_config(target.model.config, layers))
        model.init_from_target(target.model)
        ids = frequent_tokens([s[0][s[2]:] for s in train_seqs], head_tokens, target.eos_token_ids(cfg.chat))
    if state:
        ids = state["head_tokens"]
    out_w = target.model.get_output_embeddings().weight.detach()
    head_w = out_w[torch.tensor(ids, device=out_w.device)].float().to(device)
    table = head_table(ids, target.vocab_size)
    model.float().to(device).train()
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
    if init is not None and not state:  # where training starts, on this data's holdout: the run's baseline
        baseline = evaluate(model, embedding, head_w, val_seqs, table, steps=max(steps, EVAL_STEPS))
        history.append({"step": 0, **baseline})
        log(f"train-features: step 0 (the --init draft) {history[-1]}")

    def save(finished: bool) -> None:
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step, "total_steps": total,
                    "history": history, "seconds": spent + time.time() - t0, "head_tokens": ids,
                    "finished": finished}, ckpt)

    t0, last = time.time(), time.time()
    gen = torch.Generator().manual_seed(step)
    epoch_batches, epoch, stop = None, -1, False
    while step < total:
        if step // per_epoch != epoch:
            epoch = step // per_epoch
            epoch_batches = make_batches(train_seqs, batch_tokens, epoch)
        for g in opt.param_groups:
            g["lr"] = lr * lr_factor(step, total, warmup)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.bf16_autocast):
            batch = to_device(collate(train_seqs, epoch_batches[step % per_epoch], table), device)
            per_step = losses(model, embedding, head_w, batch, noise, gen, steps)
            loss = unrolled_loss(per_step, cls_weight)
            reg, cls = per_step[0][:2]
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
            metrics = evaluate(model, embedding, head_w, val_seqs, table, steps=max(steps, EVAL_STEPS))
            history.append({"step": step, "reg": reg.item(), "cls": cls.item(),
                            "seconds": spent + time.time() - t0, **metrics})
            log(f"train-features: step {step} {metrics}")
            save(step == total)
            last = time.time()
        if stop:
            break
    if step == total or stop:  # a run stopped by --max-seconds writes the draft so far too (a rerun resumes)
        model.cpu().save(out_dir, {"target": cfg.target, "chat": cfg.chat})
        OutputHead(torch.tensor(ids), head_w.cpu()).save(out_dir, with_weight=False)
        (out_dir / "training.json").write_text(json.dumps(
            {"steps": step, "total_steps": total, "finished": step == total,
             "train_seconds": spent + time.time() - t0, "train_positions": n_tok, "sequences": len(train_seqs),
             "head_tokens": len(ids), "lr": lr, "batch_tokens": batch_tokens,
             "epochs": epochs, "layers": len(model.body.layers), "noise": noise, "cls_weight": cls_weight,
             "unroll_steps": steps, "step_decay": STEP_DECAY, "device": device.type,
             "init": None if init is None else _rel(init),
             "init_training": None if init is None else init_training(init),
             "history": history,
             "config": json.loads(cfg.to_json())}, indent=1))
        log(f"train-features: wrote {out_dir}" + ("" if step == total else f" (stopped at step {step} of {total})"))
    return {"step": step, "total": total, "history": history}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training train-features")
    ap.add_argument("--config", default="full")
    ap.add_argument("--out", default="runs/feature-draft")
    ap.add_argument("--epochs", type=float, default=4.0)
    ap.add_argument("--batch-tokens", type=int, default=4096)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--head-tokens", type=int, default=8192)
    ap.add_argument("--max-seconds", type=float, default=0.0,
                    help="stop after this many seconds, writing a checkpoint and the draft so far (a rerun resumes)")
    ap.add_argument("--cls-weight", type=float, default=CLS_WEIGHT, help="weight of the next-token loss")
    ap.add_argument("--noise", type=float, default=NOISE, help="half-width of the uniform noise on input features")
    ap.add_argument("--layers", type=int, default=1, help="decoder layers of the draft (EAGLE: 1)")
    ap.add_argument("--unroll-steps", type=int, default=1,
                    help="draft steps trained on the draft's own predictions (EAGLE-3's training-time test; 1: off)")
    ap.add_argument("--init", help="start from this finished feature draft instead of the target's last layer")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--device", default="cpu", help="where to train: cpu, cuda, cuda:N or auto")
    args = ap.parse_args(argv)
    if args.epochs <= 0 or args.batch_tokens < 1 or args.lr <= 0 or args.head_tokens < 1:
        ap.error("--epochs, --batch-tokens, --lr and --head-tokens must be positive")
    if args.layers < 1:
        ap.error("--layers must be >= 1")
    if not 1 <= args.unroll_steps <= 8:
        ap.error("--unroll-steps must be between 1 and 8")
    if args.cls_weight < 0 or args.noise < 0:
        ap.error("--cls-weight and --noise must be >= 0")
    init = None
    if args.init:
        from decoding.drafters.feature import is_feature_draft

        init = Path(args.init) if Path(args.init).is_absolute() else REPO / args.init
        if not is_feature_draft(init):
            print(f"error: --init {args.init} is not a feature draft's folder (no config.json with a "
                  f"'feature_draft' key)", file=sys.stderr)
            return 2
    device = stage_device(args.device)
    cfg = get_config(args.config)
    if not any(features_dir(cfg).glob("part-*.pt")):
        print(f"error: no target features in {features_dir(cfg)}; run `python -m training features --config "
              f"{args.config}` first", file=sys.stderr)
        return 2
    out = Path(args.out)
    train(cfg, out if out.is_absolute() else REPO / out, args.epochs,
          args.batch_tokens, args.lr, args.head_tokens, args.max_seconds, args.fresh, cls_weight=args.cls_weight,
          noise=args.noise, layers=args.layers, steps=args.unroll_steps, init=init, device=device)
    return 0
