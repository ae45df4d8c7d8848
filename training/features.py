"""Stage for the feature draft: the target's last hidden states over the distillation data.

A feature draft (EAGLE: Li, Wei, Zhang, Zhang, "EAGLE: Speculative Sampling Requires Rethinking
Feature Uncertainty", arXiv:2401.15077) predicts the target's next feature vector from its
current one and the next token. Training needs those features for every position of the
distillation sequences (prompt + the target's own continuation). This stage runs the target once
over each prompt and then over that prompt's kept continuations as one batch that shares the
prompt's KV cache, and writes the final-norm hidden states (bfloat16) in resumable parts.

    python -m training features --config training/configs/tasks.json [--rounds 0,1,2] [--worker I/N] [--device auto]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

from decoding.lm.hf_cache import cache_kwargs, grown_cache

from .config import DistillConfig, get_config, setup_threads, stage_device

PART_PROMPTS = 32  # prompts per output part (a restart redoes at most one part)


def features_dir(cfg: DistillConfig) -> Path:
    return cfg.path("data_dir").with_name(cfg.path("data_dir").name + "-features")


def gather(cfg: DistillConfig, rounds: set[int]) -> dict[int, dict]:
    """prompt index -> {"prompt": ids, "conts": [(round, tokens, topk_ids, topk_p)]} over all shards."""
    by_prompt: dict[int, dict] = {}
    for path in sorted(cfg.path("data_dir").glob("shard-*.pt")):
        shard = torch.load(path, weights_only=True)
        for j, r in enumerate(shard["round"]):
            if r not in rounds or len(shard["tokens"][j]) < 2:
                continue
            entry = by_prompt.setdefault(shard["prompt_index"][j], {"prompt": list(shard["prompt_ids"][j]), "conts": []})
            entry["conts"].append((r, shard["tokens"][j], shard["topk_ids"][j], shard["topk_p"][j]))
    for entry in by_prompt.values():
        entry["conts"].sort(key=lambda c: c[0])
    return by_prompt


@torch.inference_mode()
def prompt_features(decoder, prompt: list[int], conts: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Final hidden states of the prompt (P, d) and of each continuation (len, d): the prompt is
    run once; the continuations run as one right-padded batch on copies of its cache. The states come
    back on the CPU, whichever device the decoder runs on."""
    from transformers import DynamicCache

    device = next(decoder.parameters()).device
    cache = DynamicCache(config=decoder.config)
    p = decoder(input_ids=torch.tensor([prompt], device=device), **cache_kwargs(decoder, cache), use_cache=True)
    cache = grown_cache(p)
    cache.batch_repeat_interleave(len(conts))
    width = max(len(c) for c in conts)
    ids = torch.zeros(len(conts), width, dtype=torch.long)
    mask = torch.zeros(len(conts), len(prompt) + width, dtype=torch.long)
    mask[:, : len(prompt)] = 1
    for i, c in enumerate(conts):
        ids[i, : len(c)] = c
        mask[i, len(prompt): len(prompt) + len(c)] = 1
    positions = torch.arange(len(prompt), len(prompt) + width).expand(len(conts), -1)
    out = decoder(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                  **cache_kwargs(decoder, cache), use_cache=True)
    hidden = out.last_hidden_state.to(torch.bfloat16).cpu()
    return (p.last_hidden_state[0].to(torch.bfloat16).cpu(),
            [hidden[i, : len(c)].clone() for i, c in enumerate(conts)])


def run(cfg: DistillConfig, rounds: set[int], worker: tuple[int, int] = (0, 1), max_seconds: float = 0.0,
        target=None, log=print, device: str = "cpu") -> Path:
    from decoding.lm.models import load_model

    setup_threads()
    out_dir = features_dir(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    by_prompt = gather(cfg, rounds)
    order = sorted(by_prompt)
    parts = [order[i: i + PART_PROMPTS] for i in range(0, len(order), PART_PROMPTS)]
    if target is None:
        target = load_model(cfg.target, device=device)
    decoder = target.model.get_decoder().to(torch.bfloat16 if cfg.bf16_autocast else torch.float32).eval()
    started = time.perf_counter()
    me, n = worker
    for k, part in enumerate(parts):
        path = out_dir / f"part-{k:04d}.pt"
        if k % n != me or path.exists():
            continue
        if max_seconds and time.perf_counter() - started > max_seconds:
            log(f"features: stopping after {max_seconds:.0f} s (rerun to resume)")
            break
        records = []
        for index in part:
            entry = by_prompt[index]
            pf, cf = prompt_features(decoder, entry["prompt"], [c[1] for c in entry["conts"]])
            records.append({"prompt_index": index, "prompt": torch.tensor(entry["prompt"]), "prompt_features": pf,
                            "conts": [{"round": c[0], "tokens": c[1], "topk_ids": c[2], "topk_p": c[3], "features": f}
                                      for c, f in zip(entry["conts"], cf)]})
        tmp = path.with_suffix(".tmp")
        torch.save(records, tmp)
        os.replace(tmp, path)
        log(f"features: part {k + 1}/{len(parts)} ({time.perf_counter() - started:.0f} s)")
    return out_dir


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training features")
    ap.add_argument("--config", default="full")
    ap.add_argument("--rounds", default="0,1,2", help="which sampling rounds of each prompt to keep (0: greedy)")
    ap.add_argument("--worker", default="0/1", help="I/N: this process makes parts k with k %% N == I")
    ap.add_argument("--max-seconds", type=float, default=0.0)
    ap.add_argument("--device", default="cpu", help="where the target runs: cpu, cuda, cuda:N or auto")
    args = ap.parse_args(argv)
    cfg = get_config(args.config)
    try:
        rounds = {int(r) for r in args.rounds.split(",")}
        me, n = (int(v) for v in args.worker.split("/"))
    except ValueError:
        ap.error(f"--rounds takes integers joined by commas and --worker I/N (got {args.rounds!r}, {args.worker!r})")
    if not 0 <= me < n:
        ap.error(f"--worker {args.worker}: I must lie in 0..N-1")
    device = stage_device(args.device)
    if not any(cfg.path("data_dir").glob("shard-*.pt")):
        print(f"error: no data shards in {cfg.data_dir}; run `python -m training data` first", file=sys.stderr)
        return 2
    run(cfg, rounds, (me, n), args.max_seconds, device=device)
    return 0
