# Two commands for a newcomer: `make run` (the main job) and `make test`.
# Each creates .venv on first use and reinstalls only when pyproject.toml or
# constraints.txt change. torch is pinned to the CPU build in constraints.txt.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/forecast demo

# One torch thread per process: the suite's tiny models run faster without intra-op threading, and
# pytest-xdist runs a process per core (at most 4), each test file in one process (its module fixtures
# built once). The same Hypothesis examples every run (tests/conftest.py): a failure means a change.
test: $(STAMP)
	MPLBACKEND=Agg OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q --hypothesis-profile=deterministic \
		-n auto --maxprocesses 4 --dist loadfile

clean:
	rm -rf $(VENV) .pytest_cache
