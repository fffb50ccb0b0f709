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

.PHONY: demo test install install-check bench clean help

help:
	@echo "make demo   - set up .venv, install, run the default chip + workload, write $(DEMO_OUT)/"
	@echo "make test   - set up .venv, install, run the whole test suite"
	@echo "make bench  - run the speed/memory benchmarks in benchmarks/"
	@echo "make install-check - build the wheel, pip install it with its dependencies into a brand-new"
	@echo "             venv outside the checkout (needs the network; not part of make test), run the quick tour"

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

# every extra is installed, so a skipped test is one that did not run: tests/conftest.py lists
# every skip and fails the run on one it does not expect
test: $(STAMP)
	SIM_TEST_NO_SKIPS=1 $(BIN)/python -m pytest -n 2 --dist worksteal -q tests

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

# A new user's install: wheel -> fresh venv -> pip install with dependencies from the
# registry (torch pinned away) -> sim --version, list chips, gemm, the demo, from outside the
# checkout, with timings.  Needs the network, so `make test` does not run it.
install-check:
	PYTHON=$(PYTHON) benchmarks/fresh_install.sh

clean:
	rm -rf $(VENV) reports .pytest_cache
