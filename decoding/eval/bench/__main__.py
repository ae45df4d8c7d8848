"""`python -m decoding.eval.bench --memory-child SPEC`: one variant's memory, measured in a child process."""

import sys

from .memory import memory_child

if len(sys.argv) == 3 and sys.argv[1] == "--memory-child":
    sys.exit(memory_child(sys.argv[2]))
print("usage: python -m decoding bench ...", file=sys.stderr)
sys.exit(2)
