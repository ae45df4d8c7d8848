# Two commands for a fresh machine: `make demo` (set up, launch the app) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test cli-demo distill gpu-check class-check class-soak class-hall

setup: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml scripts/setup.sh
	bash scripts/setup.sh $(VENV)
	touch $(STAMP)

demo: setup
	$(PY) app.py

# The suite in this process (TEST_WORKERS=1, what CI runs), or on TEST_WORKERS processes (pytest-xdist), each test
# file whole on one worker in its own order (--dist loadfile), the slowest files first. Two workers load the machine
# enough to bring out races that one process hides (a lesson chapter's Run it live taken by a page load's queued
# event was one); CI moves to two once a clean clone passes there repeatedly.
TEST_WORKERS ?= 1
test: setup
	$(PY) -m pytest -q -ra $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)

cli-demo: setup
	$(PY) -m decoding generate --prompt "Explain why the sky is blue in two sentences." --chat --temperature 0 --max-new-tokens 48

# Distill the draft for the default target (resumable stages of <= 40 min; run again to continue).
distill: setup
	$(PY) -m training all

# Check and measure the GPU path into docs/gpu.md with the Python already on the machine (no setup,
# no network): `make gpu-check PYTHON=python3 [PART=bench|energy|tests|ppd] [BUDGET=360]`, in about
# BUDGET seconds; GPU_CHECK_COPY_TO=<dir> gets copies of the report, the choice and the results JSON
# after each step. Without a GPU it prints one line and exits 0.
PYTHON ?= $(if $(wildcard $(PY)),$(PY),python3)
gpu-check:
	@$(PYTHON) -m decoding gpu-check $(if $(PART),--part $(PART)) $(if $(BUDGET),--budget-s $(BUDGET))

# A class at once against a freshly started app on its own port (stopped at the end): 30 clients
# press Run within 5 s (32 new tokens, the default pair and pacing), after a warm-up that loads the
# pair and measures this machine's plain speed; result.json and summary.md go to
# docs/bench/class-check-<precision>/ (docs/classroom.md's table comes from there). class-soak: ten
# such bursts of new sessions in a row, the app's memory after each; class-hall: 60 clients within 10 s.
CLASS_PORT ?= 7870
CLASS_LOAD := $(PY) scripts/classroom_load.py --start-app --port $(CLASS_PORT)
class-check: setup
	$(CLASS_LOAD) --clients 30 --within 5 --out 'docs/bench/class-check-{precision}'

class-soak: setup
	$(CLASS_LOAD) --clients 30 --within 5 --bursts 10 --out 'docs/bench/class-soak-{precision}'

class-hall: setup
	$(CLASS_LOAD) --clients 60 --within 10 --out 'docs/bench/class-hall-{precision}'
