"""Print the static cache's GPU smoke check as JSON (decoding/eval/static_smoke.py): tokens/s of plain decoding
of the default target on the dynamic cache, the eager static cache and the static cache with CUDA graphs, in
bfloat16 and float32, whether their tokens match, and the capture error if any.

    python scripts/gpu_static_smoke.py [--device cuda] [--tokens 64] [--dtypes bfloat16,float32]

Exits 1 when capture failed, the graphs' tokens differ from the eager static cache's, or in float32 any two
backends' tokens differ (bfloat16 may part between differently shaped kernels); else 0."""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from decoding.eval.static_smoke import static_smoke  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--dtypes", default="bfloat16,float32")
    args = parser.parse_args(argv)
    result = static_smoke(args.device, args.tokens, tuple(d for d in args.dtypes.split(",") if d))
    print(json.dumps(result, indent=1))
    bad = [d for d, row in result["rows"].items()
           if row["capture_error"] or not row["graphs_equal_eager"] or (d == "float32" and not row["same_tokens"])]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
