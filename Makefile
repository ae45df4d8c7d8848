# Two commands for a fresh machine: `make demo` (set up, launch the app) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test cli-demo distill

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
