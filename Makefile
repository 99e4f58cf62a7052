# wireup: `make run` (bootstrap, benchmark and launch on the default cluster) and `make test`.
# The testbed targets need root (network namespaces, systemd-nspawn).
SHELL := /bin/bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
NODES ?= 3
TESTBED ?= default
# Empty: bring up the local testbed and use it. Otherwise: your inventory (file or folder).
INVENTORY ?=
TESTBED_INVENTORY := .testbed/$(TESTBED)/inventory.yml
RUN_INVENTORY = $(if $(INVENTORY),$(INVENTORY),$(TESTBED_INVENTORY))
ENTRY_PLAYBOOKS := site.yml bench.yml launch.yml jobs.yml

.PHONY: help venv deps run lint unit integration test testbed-up testbed-down bench-provision clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

# Debian's python3 makes venvs only with python3-venv (ensurepip) installed: a fresh machine gets it.
$(BIN)/ansible-playbook: requirements.txt
	$(PYTHON) -c 'import ensurepip' 2>/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	touch $@

venv: $(BIN)/ansible-playbook  ## create .venv with the pinned control-node tools

deps:  ## install the system packages the testbed and the checks need (root, Debian/Ubuntu)
	$(PYTHON) -m tests.testbed deps

testbed-up: venv  ## bring up NODES (3) local testbed nodes (root)
	$(BIN)/python -m tests.testbed up --name $(TESTBED) --nodes $(NODES)

testbed-down: venv  ## remove the local testbed (root)
	$(BIN)/python -m tests.testbed down --name $(TESTBED)

# On the testbed (CPU nodes, gloo) Example 2 runs 2 processes per node, so ranks cross nodes and
# processes, and launch.yml waits for its result; on a real cluster one process per GPU
# (wireup_nproc_per_node: auto) and the job starts detached (follow it with jobs.yml).
LAUNCH_ARGS ?= $(if $(INVENTORY),,-e wireup_nproc_per_node=2 -e torchrun_launch_wait=true)

# Each phase says how long it took when it ends (and the whole list at the end), so a slow phase
# is seen without reading ~1,500 lines of play output; .run-phases.log keeps them for this run.
PHASE = t0=$$(date +%s); trap 'echo "[phase] $(1): $$(( $$(date +%s) - t0 )) s" | tee -a .run-phases.log' EXIT;

run: venv  ## bootstrap, benchmark and launch on INVENTORY (default: the local testbed)
	@: > .run-phases.log
	@if [ -z "$(INVENTORY)" ]; then $(call PHASE,host packages and testbed) $(MAKE) --no-print-directory deps testbed-up; fi
	@$(call PHASE,site.yml (bootstrap)) $(BIN)/ansible-playbook -i $(RUN_INVENTORY) site.yml
	@$(call PHASE,bench.yml (wiring proof)) $(BIN)/ansible-playbook -i $(RUN_INVENTORY) bench.yml
	@$(call PHASE,launch.yml (Example 2)) $(BIN)/ansible-playbook -i $(RUN_INVENTORY) launch.yml $(LAUNCH_ARGS)
	@echo
	@echo "Done: site.yml (bootstrap), bench.yml (wiring proof) and launch.yml (Example 2) ran against"
	@echo "$(RUN_INVENTORY). Time per phase:"
	@sed 's/^\[phase\] /  /' .run-phases.log
	@echo "Bench report: $$(ls -1d $(CURDIR)/results/bench/*/ | tail -n 1)report.html (and report.md)"
	@echo "Job logs:     $$(ls -1dt $(CURDIR)/results/jobs/ddp-multinode-*/ | head -n 1)"
	@if [ -z "$(INVENTORY)" ]; then echo "The testbed is still up; remove it with: make testbed-down"; fi

lint: venv  ## static checks: ansible-lint (production), yamllint, ruff, syntax-check
	$(BIN)/yamllint --strict .
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/ansible-lint --strict
	# Every module's DOCUMENTATION and every role's argument_specs render (ansible-doc).
	for module in plugins/modules/*.py; do \
	  $(BIN)/ansible-doc -M plugins/modules "$$(basename "$$module" .py)" >/dev/null; \
	done
	$(BIN)/ansible-doc -t role -r roles $$(ls roles) >/dev/null
	for playbook in $(ENTRY_PLAYBOOKS); do \
	  $(BIN)/ansible-playbook -i inventory/local.yml --syntax-check $$playbook; \
	  $(BIN)/ansible-playbook -i inventory/example --syntax-check $$playbook; \
	done

unit: lint  ## static checks and unit tests (no root, no testbed)
	$(BIN)/pytest -q tests/unit tests/perf

integration: venv  ## integration tests on the local testbed (root)
	$(BIN)/pytest -q tests/integration

# What CI runs (.ci/run), from a fresh clone: the venv, the system packages (deps), then every
# check; a check that would skip fails instead (WIREUP_NO_SKIP, tests/conftest.py).
test: export WIREUP_NO_SKIP := 1
test: venv deps unit integration  ## everything: installs what it needs, then static checks, unit and integration tests

bench-provision: venv  ## provisioning-speed benchmark on the local testbed (root; ~30-40 min; docs/performance.md)
	$(BIN)/python -m tests.perf.provision_bench $(BENCH_ARGS)

clean:  ## remove the venv and caches (not results/)
	rm -rf $(VENV) .pytest_cache .ruff_cache .ansible .run-phases.log
