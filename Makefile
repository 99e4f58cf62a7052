# wireup: `make run` (bootstrap, benchmark and launch on the default cluster) and `make test`.
# The testbed targets need root (network namespaces, systemd-nspawn).
REPO_DIR := $(dir $(abspath $(lastword $(MAKEFILE_LIST))))
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

.PHONY: help venv deps run lint metrics unit collection sanity integration test testbed-up testbed-down bench-provision perf-fleet clean

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

# Each phase's output goes to the terminal as it comes and, without colours, to
# results/run-RUN/PHASE.log; its exit status and seconds to phases.tsv. A phase that fails ends the
# run (as before), and either way the run ends with wireup.runsummary's lines: per node bootstrap's
# counts, the bench verdict and the job's result, the report, the logs, what to run next.
# ansible-playbook run by hand keeps Ansible's own output: only this target summarises. The inner
# make takes the venv as run found it (run's own prerequisite already checked it).
RUN_DIR := results/run-$(shell date -u +%Y%m%dT%H%M%SZ)
# Standard library only: the system's python3, from this Makefile's folder whatever the cwd (the
# collection's name through the link in .collections; plain namespace packages, no Ansible).
RUN_SUMMARY = PYTHONPATH=$(REPO_DIR).collections $(PYTHON) -m ansible_collections.wireup.cluster.plugins.module_utils.wireup.runsummary
# $(call RUN_PHASE,name,command): run command, tee'd into RUN_DIR/name.log, noted in phases.tsv.
RUN_PHASE = ( t0=$$(date +%s); rc=0; { $(2); } 2>&1 | $(RUN_SUMMARY) tee $(RUN_DIR)/$(1).log || rc=$$?; \
  printf '%s\t%s\t%s\n' $(1) $$rc $$(( $$(date +%s) - t0 )) >>$(RUN_DIR)/phases.tsv; [ $$rc -eq 0 ] )

run: venv  ## bootstrap, benchmark and launch on INVENTORY (default: the local testbed); ends with a summary
	@mkdir -p $(RUN_DIR)
	@rc=0; \
	{ if [ -z "$(INVENTORY)" ]; then $(call RUN_PHASE,testbed,$(MAKE) --no-print-directory -o $(BIN)/ansible-playbook deps testbed-up); fi \
	  && $(call RUN_PHASE,site,$(BIN)/ansible-playbook -i $(RUN_INVENTORY) site.yml) \
	  && $(call RUN_PHASE,bench,$(BIN)/ansible-playbook -i $(RUN_INVENTORY) bench.yml) \
	  && $(call RUN_PHASE,launch,$(BIN)/ansible-playbook -i $(RUN_INVENTORY) launch.yml $(LAUNCH_ARGS)); } || rc=$$?; \
	$(RUN_SUMMARY) summary $(RUN_DIR) --inventory $(RUN_INVENTORY) $(if $(INVENTORY),,--testbed $(TESTBED)); \
	exit $$rc

lint: venv  ## static checks: ansible-lint (production), yamllint, ruff, syntax-check
	$(BIN)/yamllint --strict .
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/ansible-lint --strict
	# Every module's DOCUMENTATION and every role's argument_specs render (ansible-doc), by FQCN.
	$(BIN)/ansible-doc $$(ls plugins/modules | sed -n 's/^\(.*\)\.py$$/wireup.cluster.\1/p') >/dev/null
	$(BIN)/ansible-doc -t role $$(ls roles | sed 's/^/wireup.cluster./') >/dev/null
	for playbook in $(ENTRY_PLAYBOOKS); do \
	  $(BIN)/ansible-playbook -i inventory/local.yml --syntax-check $$playbook; \
	  $(BIN)/ansible-playbook -i inventory/example --syntax-check $$playbook; \
	done

metrics: venv  ## the code's shape (docs/DEVELOPING.md "Shape"): function lengths, complexity, task YAML, duplicates
	$(BIN)/python -m tests.metrics

# Both suites run on 2 workers (pytest-xdist). The integration suite's modules are grouped by the
# testbed they use (tests/integration/conftest.py: OWN_TESTBEDS), so each testbed comes up once.
# The fabric test then runs alone: its gloo figures on CPU nodes are CPU-bound, and a second
# worker's load made a healthy whole-group run read 0.57 of its pairs (FAIL) once.
# Every run keeps JUnit XML in results/ci/ and ends with the seconds per test file (.ci/times.py),
# failing or not; the integration run also lists every test's duration.
PYTEST_WORKERS ?= 2
CI_TIMES := results/ci
ALONE := tests/integration/test_fabric.py

unit: lint  ## static checks and unit tests (no root, no testbed)
	@mkdir -p $(CI_TIMES)
	$(BIN)/pytest -q tests/unit tests/perf -n $(PYTEST_WORKERS) --junitxml=$(CI_TIMES)/unit.xml \
	  || { rc=$$?; $(BIN)/python .ci/times.py $(CI_TIMES)/unit.xml; exit $$rc; }
	@$(BIN)/python .ci/times.py $(CI_TIMES)/unit.xml

integration: venv  ## integration tests on the local testbed (root)
	@mkdir -p $(CI_TIMES)
	rc=0; \
	$(BIN)/pytest -q tests/integration -n $(PYTEST_WORKERS) --ignore=$(ALONE) --durations=0 \
	  --junitxml=$(CI_TIMES)/integration.xml || rc=$$?; \
	$(BIN)/pytest -q $(ALONE) --durations=0 --junitxml=$(CI_TIMES)/integration-alone.xml || { s=$$?; [ $$rc -ne 0 ] || rc=$$s; }; \
	$(BIN)/python .ci/times.py $(CI_TIMES)/integration.xml $(CI_TIMES)/integration-alone.xml; \
	exit $$rc

# The repository is the collection wireup.cluster (galaxy.yml). `collection` builds its artifact into
# results/collection/; `sanity` installs it into a temporary .../ansible_collections/wireup/cluster
# (ansible-test runs only there) and runs ansible-test sanity on it for the venv's Python.
# ansible-test makes a venv per sanity test (~/.ansible/test/venv) and fills it from PyPI; it
# bootstraps pip with a get-pip.py from a host CI cannot reach, so .ci/get_pip.py stands in for it
# (ANSIBLE_TEST_PIP: ansible-test's pip, tests/unit/test_collection.py keeps it in step).
COLLECTION_DIR := results/collection
ANSIBLE_TEST_PIP := 24.2
GET_PIP := $(HOME)/.ansible/test/cache/get_pip_$(subst .,_,$(ANSIBLE_TEST_PIP)).py

collection: venv  ## build the collection's artifact (ansible-galaxy collection build) into results/collection/
	rm -rf $(COLLECTION_DIR) && mkdir -p $(COLLECTION_DIR)
	$(BIN)/ansible-galaxy collection build --output-path $(COLLECTION_DIR) .

sanity: collection  ## ansible-test sanity on the built collection (needs PyPI the first time)
	[ -e $(GET_PIP) ] || install -D -m 0644 .ci/get_pip.py $(GET_PIP)
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	ANSIBLE_COLLECTIONS_PATH=$$tmp $(BIN)/ansible-galaxy collection install -p $$tmp $(COLLECTION_DIR)/wireup-cluster-*.tar.gz && \
	cd $$tmp/ansible_collections/wireup/cluster && \
	$(abspath $(BIN))/ansible-test sanity --color no \
	  --python $$($(abspath $(BIN))/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# What CI runs (.ci/run), from a fresh clone: the venv, the system packages (deps), then every
# check; a check that would skip fails instead (WIREUP_NO_SKIP, tests/conftest.py).
test: export WIREUP_NO_SKIP := 1
test: venv deps unit sanity integration  ## everything: installs what it needs, then static checks, unit tests, the collection's sanity and integration tests

bench-provision: venv  ## provisioning-speed benchmark on the local testbed (root; ~30-40 min; docs/performance.md)
	$(BIN)/python -m tests.perf.provision_bench $(BENCH_ARGS)

# The controller's steps at fleet scale (issue 39, tests/perf/README.md): a synthetic fleet of 64 and
# 256 nodes of 8 GPUs, each step's CPU seconds and Python calls; fails when a step grows faster than
# linear or the gate reads every record of a host. The bench report with plots is left out here
# (minutes at 256 nodes); the whole table: docs/performance.md.
PERF_FLEET_ARGS ?= --sizes 64,256 --days 3 --history-hosts 4 --check \
  --steps store,peers,report_text,launch_plan,textfiles,gate,gate_history,fabric
perf-fleet: venv  ## the controller's steps on a synthetic fleet of 64 and 256 nodes; fails when one grows faster than linear
	$(BIN)/python -m tests.perf.fleet $(PERF_FLEET_ARGS)

clean:  ## remove the venv and caches (not results/)
	rm -rf $(VENV) .pytest_cache .ruff_cache .ansible
