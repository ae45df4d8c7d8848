"""Reading prompt files: the one reader of every command (bench, eval-draft, PPD tuning and
training, distillation).

A prompt file holds JSON lines with a "prompt" field (and optionally "id" and a "category", which
the training and dev files call "kind"), or plain lines, one prompt each.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PromptRow", "read_prompt_rows", "read_prompts"]


@dataclass(frozen=True)
class PromptRow:
    prompt: str
    id: str = ""
    category: str = ""  # Spec-Bench's category, or the "kind" of the project's own prompt files


def read_prompt_rows(path: str | Path) -> list[PromptRow]:
    """Every prompt of the file, in order; ValueError naming the line of a malformed one."""
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if not line.startswith("{"):
            rows.append(PromptRow(line))
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}, line {number}: not JSON ({exc.msg})") from None
        if not isinstance(data, dict) or not isinstance(data.get("prompt"), str):
            raise ValueError(f"{path}, line {number}: no \"prompt\" text")
        category = data.get("category", data.get("kind", ""))
        rows.append(PromptRow(data["prompt"], str(data.get("id", "")), str(category or "")))
    if not rows:
        raise ValueError(f"no prompts in {path}")
    return rows


def read_prompts(path: str | Path) -> list[str]:
    return [row.prompt for row in read_prompt_rows(path)]
