"""Stage 1: sample continuations from the target and keep its top-k probabilities (soft labels).

Every generated position stores the target's top-k token ids and probabilities at temperature 1,
computed in the same forward pass that produced the token, so data and labels cost one pass.
Round 0 (`greedy_rounds`) decodes greedily (what greedy speculative decoding drafts against),
the other rounds sample at temperature 1 (what alpha is measured on).

Work is cut into fixed batches of (prompt, round) jobs in a seeded order; batch b is written to
`data_dir/shard-{b:05d}.pt` atomically, so a restart skips finished shards and resumes.

    python -m training data [--config full|smoke|FILE.json] [--max-seconds S] [--limit-shards N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

import torch


from decoding.lm.hf_cache import cache_kwargs

from .config import DistillConfig, get_config


def job_batches(cfg: DistillConfig, n_prompts: int, lengths: list[int] | None = None) -> list[list[tuple[int, int]]]:
    """Deterministic list of batches of (prompt index, round) jobs. With `cfg.sort_by_length` (and the
    prompts' token lengths) each round's prompts are ordered by length, so a batch pads little."""
    jobs: list[tuple[int, int]] = []
    for r in range(cfg.samples_per_prompt):
        order = list(range(n_prompts))
        random.Random(cfg.data_seed + r).shuffle(order)
        if cfg.sort_by_length and lengths is not None:
            order.sort(key=lambda i: lengths[i])  # stable: the shuffle breaks ties
        jobs.extend((i, r) for i in order)
    b = cfg.gen_batch
    return [jobs[i : i + b] for i in range(0, len(jobs), b)]


@torch.inference_mode()
def sample_batch(model, prompts: list[list[int]], greedy: list[bool], max_new_tokens: int, top_k: int,
                 eos_ids: list[int], pad_id: int, generator: torch.Generator, device: torch.device):
    """Decode a left-padded batch with a KV cache. Returns per row: generated ids (up to and
    including the first eos), top-k ids (int32) and top-k probabilities (float16) per position."""
    from transformers import DynamicCache

    n = len(prompts)
    width = max(len(p) for p in prompts)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache(config=model.config)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions,
                **cache_kwargs(model, cache), use_cache=True, logits_to_keep=1)
    logits = out.logits[:, -1].float()
    next_pos = positions[:, -1] + 1
    greedy_t = torch.tensor(greedy, device=device)
    eos_t = torch.tensor(eos_ids, device=device)
    done = torch.zeros(n, dtype=torch.bool, device=device)
    lengths = torch.zeros(n, dtype=torch.long, device=device)
    toks, top_ids, top_ps = [], [], []
    for _ in range(max_new_tokens):
        probs = torch.softmax(logits, dim=-1)
        tp, ti = torch.topk(probs, top_k, dim=-1)
        sampled = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        x = torch.where(greedy_t, ti[:, 0], sampled)
        x = torch.where(done, torch.full_like(x, pad_id), x)
        lengths += (~done).long()
        toks.append(x)
        top_ids.append(ti.to(torch.int32))
        top_ps.append(tp.to(torch.float16))
        done |= torch.isin(x, eos_t)
        if bool(done.all()):
            break
        mask = torch.cat([mask, torch.ones((n, 1), dtype=mask.dtype, device=device)], dim=1)
        out = model(input_ids=x[:, None], attention_mask=mask, position_ids=next_pos[:, None],
                    **cache_kwargs(model, cache), use_cache=True)
        logits = out.logits[:, -1].float()
        next_pos = next_pos + 1
    toks_t = torch.stack(toks, 1).cpu()
    ids_t = torch.stack(top_ids, 1).cpu()
    ps_t = torch.stack(top_ps, 1).cpu()
    rows = []
    for i in range(n):
        k = int(lengths[i])
        rows.append((toks_t[i, :k].clone(), ids_t[i, :k].clone(), ps_t[i, :k].clone()))
    return rows


DATA_FIELDS = ("target", "prompts", "chat", "samples_per_prompt", "greedy_rounds", "max_new_tokens",
               "gen_batch", "top_k", "data_seed", "sort_by_length")


def check_data_config(cfg: DistillConfig, out_dir: Path) -> None:
    """Shards of one data directory must come from one data configuration."""
    path = out_dir / "config.json"
    if path.is_file():
        old = json.loads(path.read_text())
        changed = [f for f in DATA_FIELDS if f in old and old[f] != getattr(cfg, f)]
        if changed:
            raise SystemExit(f"data: {out_dir} holds shards made with other settings ({', '.join(changed)}); "
                             "use another data_dir or delete it")
    else:
        path.write_text(cfg.to_json())


def shard_path(cfg: DistillConfig, b: int) -> Path:
    return cfg.path("data_dir") / f"shard-{b:05d}.pt"


def generate(cfg: DistillConfig, target=None, max_seconds: float = 0.0, limit_shards: int = 0,
             worker: tuple[int, int] = (0, 1), log=print) -> int:
    """Write missing shards; return the number of shards present afterwards."""
    from decoding.lm.models import load_model

    from .config import setup_threads

    setup_threads()
    prompts = cfg.prompt_texts()
    if target is None:
        target = load_model(cfg.target)
    encoded = [target.encode_prompt(p, cfg.chat) for p in prompts]
    batches = job_batches(cfg, len(prompts), [len(e) for e in encoded])
    out_dir = cfg.path("data_dir")
    out_dir.mkdir(parents=True, exist_ok=True)
    check_data_config(cfg, out_dir)
    todo = [b for b in range(len(batches)) if not shard_path(cfg, b).exists() and b % worker[1] == worker[0]]
    if limit_shards:
        todo = todo[:limit_shards]
    log(f"data: {len(batches)} shards planned, {len(todo)} to do by this worker")
    if not todo:
        return len(batches)
    model, tok, device = target.model, target.tokenizer, target.device
    eos = target.eos_token_ids(cfg.chat)
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos[0]
    t_start = time.time()
    made_tokens = 0
    try:
        from tqdm import tqdm
        bar = tqdm(todo, desc="sampling target", unit="batch", mininterval=10)
    except ImportError:  # pragma: no cover
        bar = todo
    for b in bar:
        if shard_path(cfg, b).exists():  # made by another worker meanwhile
            continue
        jobs = batches[b]
        gen = torch.Generator(device=device).manual_seed(cfg.data_seed * 100003 + b)
        t0 = time.time()
        rows = sample_batch(model, [encoded[i] for i, _ in jobs], [r < cfg.greedy_rounds for _, r in jobs],
                            cfg.max_new_tokens, cfg.top_k, eos, pad, gen, device)
        shard = {
            "prompt_index": [i for i, _ in jobs],
            "round": [r for _, r in jobs],
            "prompt_ids": [encoded[i] for i, _ in jobs],
            "tokens": [r[0] for r in rows],
            "topk_ids": [r[1] for r in rows],
            "topk_p": [r[2] for r in rows],
        }
        tmp = shard_path(cfg, b).with_suffix(".tmp")
        torch.save(shard, tmp)
        os.replace(tmp, shard_path(cfg, b))
        n_tok = sum(len(r[0]) for r in rows)
        made_tokens += n_tok
        dt = time.time() - t0
        msg = f"shard {b}: {n_tok} tokens in {dt:.1f}s ({n_tok / dt:.0f} tok/s); total {made_tokens} tokens"
        if hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(f"{n_tok / dt:.0f} tok/s, {made_tokens} tok")
        log(msg)
        if max_seconds and time.time() - t_start > max_seconds:
            log(f"data: stopping after {time.time() - t_start:.0f}s (resume by running again)")
            break
    return sum(1 for b in range(len(batches)) if shard_path(cfg, b).exists())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training data")
    ap.add_argument("--config", default="full")
    ap.add_argument("--max-seconds", type=float, default=0.0)
    ap.add_argument("--limit-shards", type=int, default=0)
    ap.add_argument("--onpolicy", metavar="CKPT", help="instead: draft-sampled continuations scored by the target, "
                    "with the draft of this training checkpoint (frozen in a snapshot on first use)")
    ap.add_argument("--worker", default="0/1", help="I/N: this process makes shards b with b %% N == I")
    ap.add_argument("--gen-batch", type=int)
    ap.add_argument("--samples-per-prompt", type=int)
    args = ap.parse_args(argv)
    cfg = get_config(args.config, gen_batch=args.gen_batch, samples_per_prompt=args.samples_per_prompt)
    i, n = (int(v) for v in args.worker.split("/"))
    if args.onpolicy:
        generate_onpolicy(cfg, args.onpolicy, max_seconds=args.max_seconds, worker=(i, n))
    else:
        generate(cfg, max_seconds=args.max_seconds, limit_shards=args.limit_shards, worker=(i, n))
    return 0


# ------------------------------------------------------------------------------------------
# On-policy data: continuations sampled from a draft snapshot, scored by the target
# ------------------------------------------------------------------------------------------


@torch.inference_mode()
def score_batch(model, prompts: list[list[int]], conts: list[list[int]], top_k: int, pad_id: int,
                device: torch.device, chunk: int = 512):
    """The target's top-k probabilities (T=1) at every position of each continuation, from one
    teacher-forced forward pass over right-padded prompt + continuation."""
    seqs = [p + c[:-1] for p, c in zip(prompts, conts)]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    hidden = model.model(input_ids=ids.to(device), attention_mask=mask.to(device)).last_hidden_state
    rows = torch.cat([torch.full((len(c),), i) for i, c in enumerate(conts)])
    cols = torch.cat([torch.arange(len(p) - 1, len(p) - 1 + len(c)) for p, c in zip(prompts, conts)])
    h = hidden[rows.to(device), cols.to(device)]
    ids_out, ps_out = [], []
    for s in range(0, h.shape[0], chunk):
        probs = torch.softmax(model.lm_head(h[s : s + chunk]).float(), dim=-1)
        tp, ti = torch.topk(probs, top_k, dim=-1)
        ids_out.append(ti.to(torch.int32).cpu())
        ps_out.append(tp.to(torch.float16).cpu())
    ids_all, ps_all = torch.cat(ids_out), torch.cat(ps_out)
    out, start = [], 0
    for c in conts:
        out.append((ids_all[start : start + len(c)].clone(), ps_all[start : start + len(c)].clone()))
        start += len(c)
    return out


def onpolicy_shard_path(cfg: DistillConfig, b: int) -> Path:
    return cfg.path("onpolicy_dir") / f"shard-{b:05d}.pt"


def generate_onpolicy(cfg: DistillConfig, draft_ckpt: str, target=None, max_seconds: float = 0.0,
                      worker: tuple[int, int] = (0, 1), log=print) -> int:
    """Sample continuations (T=1) from the draft snapshot `draft_ckpt` on the training prompts and
    store the target's top-k probabilities on them (DistillSpec-style on-policy data: the draft
    learns where its own continuations lead). Target cost is one prefill-style pass per batch."""
    from decoding.lm.models import load_model

    from .config import setup_threads
    from .model import build_draft

    setup_threads()
    prompts = cfg.prompt_texts()
    ocfg = DistillConfig(**{**json.loads(cfg.to_json()), "samples_per_prompt": cfg.onpolicy_rounds,
                            "greedy_rounds": 0, "data_seed": cfg.data_seed + 77})
    batches = job_batches(ocfg, len(prompts))
    out_dir = cfg.path("onpolicy_dir")
    out_dir.mkdir(parents=True, exist_ok=True)
    snap = out_dir / "draft-snapshot.pt"
    if not snap.exists():
        state = torch.load(draft_ckpt, weights_only=False)
        torch.save({"model": state["model"], "step": state["step"]}, snap)
        log(f"onpolicy: snapshot of {draft_ckpt} at step {state['step']}")
    todo = [b for b in range(len(batches)) if not onpolicy_shard_path(cfg, b).exists() and b % worker[1] == worker[0]]
    log(f"onpolicy: {len(batches)} shards planned, {len(todo)} to do by this worker")
    if not todo:
        return len(batches)
    if target is None:
        target = load_model(cfg.target)
    device = target.device
    draft = build_draft(cfg, target.model, cfg.train_seed)
    draft.load_state_dict(torch.load(snap, weights_only=False)["model"])
    draft.to(device).eval()
    eos = target.eos_token_ids(cfg.chat)
    pad = target.tokenizer.pad_token_id if target.tokenizer.pad_token_id is not None else eos[0]
    encoded = [target.encode_prompt(p, cfg.chat) for p in prompts]
    t_start, made = time.time(), 0
    for b in todo:
        if onpolicy_shard_path(cfg, b).exists():
            continue
        jobs = batches[b]
        gen = torch.Generator(device=device).manual_seed(ocfg.data_seed * 100003 + b)
        t0 = time.time()
        rows = sample_batch(draft, [encoded[i] for i, _ in jobs], [False] * len(jobs), cfg.max_new_tokens, 1,
                            eos, pad, gen, device)
        t1 = time.time()
        keep = [(i, r) for (i, _), r in zip(jobs, rows) if len(r[0]) > 0]
        labels = score_batch(target.model, [encoded[i] for i, _ in keep], [r[0].tolist() for _, r in keep],
                             cfg.top_k, pad, device)
        shard = {
            "prompt_index": [i for i, _ in keep],
            "round": [1 for _ in keep],
            "prompt_ids": [encoded[i] for i, _ in keep],
            "tokens": [r[0] for _, r in keep],
            "topk_ids": [lab[0] for lab in labels],
            "topk_p": [lab[1] for lab in labels],
        }
        tmp = onpolicy_shard_path(cfg, b).with_suffix(".tmp")
        torch.save(shard, tmp)
        os.replace(tmp, onpolicy_shard_path(cfg, b))
        n_tok = sum(len(r[0]) for _, r in keep)
        made += n_tok
        dt = time.time() - t0
        log(f"onpolicy shard {b}: {n_tok} tokens in {dt:.1f}s (draft {t1 - t0:.1f}s; {n_tok / dt:.0f} tok/s); total {made}")
        if max_seconds and time.time() - t_start > max_seconds:
            log(f"onpolicy: stopping after {time.time() - t_start:.0f}s (resume by running again)")
            break
    return sum(1 for b in range(len(batches)) if onpolicy_shard_path(cfg, b).exists())
