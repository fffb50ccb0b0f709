# Two commands do everything on a fresh machine:
#   make demo   - create .venv if missing, install, run the main job (default chip + workload)
#   make test   - install and run the whole test suite
# PYTHON may point at any Python >= 3.10 used to create the environment.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# torch is pinned: the CPU wheel for 2.13.0 is on the build machines' disk, while an
# unpinned torch pulls a multi-GB CUDA build.  The simulator core never imports torch.
TORCH_PIN ?= torch==2.13.0
DEMO_OUT ?= reports/demo

.PHONY: demo test install bench clean help

help:
	@echo "make demo   - set up .venv, install, run the default chip + workload, write $(DEMO_OUT)/"
	@echo "make test   - set up .venv, install, run the whole test suite"
	@echo "make bench  - run the speed/memory benchmarks in benchmarks/"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_PIN)"
	$(BIN)/python -m pip install -q -e ".[torch,sweep,serving,notebooks,test]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/sim demo --out $(DEMO_OUT)

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q tests

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) reports .pytest_cache
