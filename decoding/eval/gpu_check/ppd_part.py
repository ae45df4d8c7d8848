"""The `ppd` part: the PPD hardware tune on this GPU (`python -m decoding.methods.ppd tune`, not saved).

n* = argmax T(n) / L(n) is `CPU_TREE_SIZE` in every CPU configuration measured (docs: the PPD
table); the PPD paper finds L(n) nearly flat on GPUs for small trees, which would move n* up. This runs the tune's
own `cmd_tune` in float32 and in half precision and reports whether n* moved."""

from __future__ import annotations

from .pairs import check_pairs, half_dtype
from .settings import CheckSettings

CPU_TREE_SIZE = 4  # n* on the project's CPU, every configuration (README, PPD section)


def tune_argv(target: str, device: str, dtype: str) -> list[str]:
    """The tune's command line: its default sizes, prompts and limit; --no-save (a check, not a
    change of what `--method ppd` picks later)."""
    return ["tune", "--target", target, "--device", device, "--dtype", dtype, "--no-save"]


def summarize_entry(dtype: str, entry: dict) -> dict:
    """The figures docs/gpu.md shows from one tune entry."""
    sizes = sorted(int(n) for n in entry["latency_s"])
    return {"dtype": dtype, "tree_size": int(entry["tree_size"]), "sizes": sizes,
            "latency_ms": [1000 * entry["latency_s"][n] for n in sizes],
            "tokens_per_step": [entry["tokens_per_step"][n] for n in sizes],
            "speedup_rel": [entry["speedup_rel"][n] for n in sizes],
            "embeddings": entry.get("embeddings")}


def run(settings: CheckSettings) -> dict:
    from ...methods.ppd.__main__ import build_parser, cmd_tune

    pairs, _ = check_pairs()
    if not pairs:
        return {"status": "failed", "error": "no target to tune"}
    pair = pairs[0]
    rows = [summarize_entry(dtype, cmd_tune(build_parser().parse_args(tune_argv(pair.target, settings.device, dtype))))
            for dtype in ("float32", half_dtype())]
    return {"status": "ok", "target": pair.target_label, "cpu_tree_size": CPU_TREE_SIZE,
            "moved": any(r["tree_size"] != CPU_TREE_SIZE for r in rows), "rows": rows}
