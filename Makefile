# Two commands for a fresh machine: `make demo` (set up, launch the app) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test cli-demo distill gpu-check

setup: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt scripts/setup.sh
	bash scripts/setup.sh $(VENV)
	touch $(STAMP)

demo: setup
	$(PY) app.py

test: setup
	$(PY) -m pytest -q -ra

cli-demo: setup
	$(PY) -m decoding generate --prompt "Explain why the sky is blue in two sentences." --chat --temperature 0 --max-new-tokens 48

# Distill the draft for the default target (resumable stages of <= 40 min; run again to continue).
distill: setup
	$(PY) -m distill all

# Check and measure the GPU path into docs/gpu.md with the Python already on the machine (no setup,
# no network): `make gpu-check PYTHON=python3 [PART=tests|bench|energy|ppd]`. Without a GPU it
# prints one line and exits 0.
PYTHON ?= $(if $(wildcard $(PY)),$(PY),python3)
gpu-check:
	@$(PYTHON) -m decoding gpu-check $(if $(PART),--part $(PART))
