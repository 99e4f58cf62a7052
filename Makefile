# wireup: `make run` (bootstrap, benchmark and launch on the default cluster) and `make test`.
# The testbed targets need root (network namespaces, systemd-nspawn).
THIS_MAKEFILE := $(abspath $(lastword $(MAKEFILE_LIST)))
REPO_DIR := $(dir $(THIS_MAKEFILE))
SHELL := /bin/bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The ansible-core versions wireup supports (meta/runtime.yml). .venv has the oldest, 2.19: the
# newest that runs on Debian 12's python3 (3.11); make run, lint and the integration suite use it.
# 2.20 and 2.21 need Python 3.12 or later on the controller and have venvs of their own, for the
# unit suite (the newest) and ansible-test sanity (each): the first Python of the list that runs.
ANSIBLE_CORES := 2.19 2.20 2.21
VENV_2.19 := $(VENV)
VENV_2.20 := .venv-2.20
VENV_2.21 := .venv-2.21
VENV_IMPORTER := .venv-importer
PYTHON_2.20 ?= $(shell $(REPO_DIR).ci/find_python 3.12 3.13)
PYTHON_2.21 ?= $(shell $(REPO_DIR).ci/find_python 3.13 3.12)
PYTHON_IMPORTER ?= $(PYTHON_2.21)
NODES ?= 3
TESTBED ?= default
# Empty: bring up the local testbed and use it. Otherwise: your inventory (file or folder).
INVENTORY ?=
TESTBED_INVENTORY := .testbed/$(TESTBED)/inventory.yml
RUN_INVENTORY = $(if $(INVENTORY),$(INVENTORY),$(TESTBED_INVENTORY))
ENTRY_PLAYBOOKS := site.yml bench.yml launch.yml jobs.yml repair.yml

.PHONY: help venv venv-2.19 venv-2.20 venv-2.21 venv-importer deps deps-test run lint metrics unit unit-2.21 \
  collection sanity sanity-2.19 sanity-2.20 sanity-2.21 importer integration test testbed-up testbed-down \
  bench-provision perf-fleet clean

help:  ## list the targets
	@grep -E '^[a-z0-9.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

# $(call MAKE_VENV,python,venv,requirements file,constraints): the venv, pip and the pinned tools;
# its ansible-playbook's time stamp says when (the rule's target).
define MAKE_VENV
$(1) -m venv $(2)
$(2)/bin/pip install --quiet --constraint constraints.txt --upgrade pip
$(2)/bin/pip install --quiet $(if $(4),--constraint $(4) )-r $(3)
touch $(2)/bin/ansible-playbook
endef
# $(call NO_PYTHON,target,variable): what to do when no Python >= 3.12 was found.
NO_PYTHON = { echo "make $(1): ansible-core 2.20 and later need Python 3.12 or later on the controller and none" \
  "was found (python3.13, python3.12, pyenv's versions): install one, or name it: make $(1) $(2)=/path/to/python3.12" >&2; exit 1; }
TOOLS := requirements-tools.txt constraints.txt

# Debian's python3 makes venvs only with python3-venv (ensurepip) installed: a fresh machine gets it.
$(BIN)/ansible-playbook: requirements.txt $(TOOLS)
	$(PYTHON) -c 'import ensurepip' 2>/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; }
	$(call MAKE_VENV,$(PYTHON),$(VENV),requirements.txt,constraints.txt)

$(VENV_2.20)/bin/ansible-playbook: requirements-2.20.txt $(TOOLS)
	@[ -n "$(PYTHON_2.20)" ] || $(call NO_PYTHON,venv-2.20,PYTHON_2.20)
	$(call MAKE_VENV,$(PYTHON_2.20),$(VENV_2.20),requirements-2.20.txt,constraints.txt)

$(VENV_2.21)/bin/ansible-playbook: requirements-2.21.txt $(TOOLS)
	@[ -n "$(PYTHON_2.21)" ] || $(call NO_PYTHON,venv-2.21,PYTHON_2.21)
	$(call MAKE_VENV,$(PYTHON_2.21),$(VENV_2.21),requirements-2.21.txt,constraints.txt)

# galaxy-importer pins attrs<24, which the tools do not share: a venv of its own, every pin in its file.
$(VENV_IMPORTER)/bin/ansible-playbook: requirements-importer.txt constraints.txt
	@[ -n "$(PYTHON_IMPORTER)" ] || $(call NO_PYTHON,venv-importer,PYTHON_IMPORTER)
	$(call MAKE_VENV,$(PYTHON_IMPORTER),$(VENV_IMPORTER),requirements-importer.txt,)

venv: $(BIN)/ansible-playbook  ## create .venv with the pinned control-node tools (ansible-core 2.19)
venv-2.19: venv
venv-2.20: $(VENV_2.20)/bin/ansible-playbook  ## create .venv-2.20: the same tools on ansible-core 2.20 (Python >= 3.12)
venv-2.21: $(VENV_2.21)/bin/ansible-playbook  ## create .venv-2.21: the same tools on ansible-core 2.21 (Python >= 3.12)
venv-importer: $(VENV_IMPORTER)/bin/ansible-playbook  ## create .venv-importer: galaxy-importer (make importer)

# deps: what `make run` needs, the testbed's host packages (docs/make-run.md counts them); deps-test
# adds the tools only the checks use (shellcheck, chromium, prometheus for promtool). DEPS_LOG: a file
# that gets apt's own output instead of the terminal (make run keeps it in its run folder).
DEPS_LOG ?=
deps:  ## install the system packages the testbed needs (root, Debian/Ubuntu): what make run installs
	$(PYTHON) -m tests.testbed deps$(if $(DEPS_LOG), --apt-log $(DEPS_LOG))

deps-test:  ## install the testbed's packages and the tools the checks use (root): what make test installs
	$(PYTHON) -m tests.testbed deps --tests$(if $(DEPS_LOG), --apt-log $(DEPS_LOG))

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
# run (as before), and either way the run ends with wireup.report.runsummary's lines: per node bootstrap's
# counts, the bench verdict and the job's result, the report, the logs, what to run next.
# ansible-playbook run by hand keeps Ansible's own output: only this target summarises. The inner
# make takes the venv as run found it (run's own prerequisite already checked it).
RUN_DIR := results/run-$(shell date -u +%Y%m%dT%H%M%SZ)
# Standard library only: the system's python3, from this Makefile's folder whatever the cwd (the
# collection's name through the link in .collections; plain namespace packages, no Ansible).
RUN_SUMMARY = PYTHONPATH=$(REPO_DIR).collections $(PYTHON) -m ansible_collections.wireup.cluster.plugins.module_utils.wireup.report.runsummary
# Ansible's default output, but a play's banner only above what the play prints, once per play
# (plugins/callback/wireup_run.py): bench.yml alone has eleven plays, most with nothing to do.
RUN_PLAYBOOK = ANSIBLE_STDOUT_CALLBACK=wireup.cluster.wireup_run $(BIN)/ansible-playbook
# $(call RUN_PHASE,name,command): run command, tee'd into RUN_DIR/name.log, noted in phases.tsv.
RUN_PHASE = ( t0=$$(date +%s); rc=0; { $(2); } 2>&1 | $(RUN_SUMMARY) tee $(RUN_DIR)/$(1).log || rc=$$?; \
  printf '%s\t%s\t%s\n' $(1) $$rc $$(( $$(date +%s) - t0 )) >>$(RUN_DIR)/phases.tsv; [ $$rc -eq 0 ] )

run: venv  ## bootstrap, benchmark and launch on INVENTORY (default: the local testbed); ends with a summary
	@mkdir -p $(RUN_DIR)
	@rc=0; \
	{ if [ -z "$(INVENTORY)" ]; then $(call RUN_PHASE,testbed,$(MAKE) -f $(THIS_MAKEFILE) --no-print-directory -o $(BIN)/ansible-playbook deps testbed-up DEPS_LOG=$(RUN_DIR)/apt.log); fi \
	  && $(call RUN_PHASE,site,$(RUN_PLAYBOOK) -i $(RUN_INVENTORY) site.yml) \
	  && $(call RUN_PHASE,bench,$(RUN_PLAYBOOK) -i $(RUN_INVENTORY) bench.yml) \
	  && $(call RUN_PHASE,launch,$(RUN_PLAYBOOK) -i $(RUN_INVENTORY) launch.yml $(LAUNCH_ARGS)); } || rc=$$?; \
	$(RUN_SUMMARY) summary $(RUN_DIR) --inventory $(RUN_INVENTORY) $(if $(INVENTORY),,--testbed $(TESTBED)); \
	exit $$rc

lint: venv  ## static checks: ansible-lint (production), yamllint, ruff, changelog fragments, syntax-check
	$(BIN)/yamllint --strict .
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	# module_utils/wireup's import contracts (.importlinter): the layers, no cycles (issue 36).
	PYTHONPATH=.collections $(BIN)/lint-imports --no-cache
	# Every change is a fragment in changelogs/fragments/ (docs/DEVELOPING.md): each one parses and is RST.
	$(BIN)/antsibull-changelog lint
	$(BIN)/antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/ansible-lint --strict
	# Every module's DOCUMENTATION, every role's argument_specs and every filter's sidecar render (ansible-doc).
	$(BIN)/ansible-doc $$(ls plugins/modules | sed -n 's/^\(.*\)\.py$$/wireup.cluster.\1/p') >/dev/null
	$(BIN)/ansible-doc -t role $$(ls roles | sed 's/^/wireup.cluster./') >/dev/null
	$(BIN)/ansible-doc -t filter $$(ls plugins/filter/*.yml | sed 's|.*/\(.*\)\.yml$$|wireup.cluster.\1|') >/dev/null
	for playbook in $(ENTRY_PLAYBOOKS); do \
	  $(BIN)/ansible-playbook -i inventory/local.yml --syntax-check $$playbook; \
	  $(BIN)/ansible-playbook -i inventory/example --syntax-check $$playbook; \
	done

metrics: venv  ## the code's shape (docs/DEVELOPING.md "Shape"): function lengths, complexity, task YAML, duplicates
	$(BIN)/python -m tests.metrics

# Both suites run on 2 workers (pytest-xdist). The integration suite's modules are its units of work
# (tests/integration/conftest.py: each whole on one worker, the longest first, the next to the worker
# that is free; each worker has a session testbed of its own).
# test_fabric is one of those units: it ran alone after them until its verdicts stopped depending
# on spare CPU (issue 35: green beside two busy loops, docs/testing.md); alone it added 8:31 to CI.
# Every run keeps JUnit XML in results/ci/ and ends with the seconds per test file (.ci/times.py),
# failing or not; the integration run also lists every test's duration.
PYTEST_WORKERS ?= 2
CI_TIMES := results/ci

unit: lint  ## static checks and unit tests (no root, no testbed)
	@mkdir -p $(CI_TIMES)
	$(BIN)/pytest -q tests/unit tests/perf -n $(PYTEST_WORKERS) --junitxml=$(CI_TIMES)/unit.xml \
	  || { rc=$$?; $(BIN)/python .ci/times.py $(CI_TIMES)/unit.xml; exit $$rc; }
	@$(BIN)/python .ci/times.py $(CI_TIMES)/unit.xml

# The same unit tests on the newest ansible-core (.venv has the oldest); the tests that run Ansible's
# commands take them from the running venv (its bin first on PATH, VIRTUAL_ENV).
unit-2.21: venv-2.21  ## the unit tests on ansible-core 2.21 (make unit: 2.19)
	@mkdir -p $(CI_TIMES)
	PATH=$(abspath $(VENV_2.21))/bin:$$PATH VIRTUAL_ENV=$(abspath $(VENV_2.21)) $(VENV_2.21)/bin/pytest -q \
	  tests/unit tests/perf -n $(PYTEST_WORKERS) --junitxml=$(CI_TIMES)/unit-2.21.xml \
	  || { rc=$$?; $(BIN)/python .ci/times.py $(CI_TIMES)/unit-2.21.xml; exit $$rc; }
	@$(BIN)/python .ci/times.py $(CI_TIMES)/unit-2.21.xml

integration: venv  ## integration tests on the local testbed (root)
	@mkdir -p $(CI_TIMES)
	$(BIN)/pytest -q tests/integration -n $(PYTEST_WORKERS) --durations=0 --junitxml=$(CI_TIMES)/integration.xml \
	  || { rc=$$?; $(BIN)/python .ci/times.py $(CI_TIMES)/integration.xml; exit $$rc; }
	@$(BIN)/python .ci/times.py $(CI_TIMES)/integration.xml

# The repository is the collection wireup.cluster (galaxy.yml). `collection` builds its artifact into
# results/collection/. `sanity` checks it with ansible-test sanity on each supported ansible-core
# (.ci/sanity: in a temporary .../ansible_collections/wireup/cluster, with that venv's Python;
# ansible-test fills its own venvs from PyPI the first time) and with galaxy-importer as Galaxy
# imports it (.ci/importer: no container, no network, .ci/galaxy-importer.cfg).
COLLECTION_DIR := results/collection
ARTIFACT = $(COLLECTION_DIR)/wireup-cluster-$(shell sed -n 's/^version: *//p' galaxy.yml).tar.gz
SANITY := $(addprefix sanity-,$(ANSIBLE_CORES))

collection: venv  ## build the collection's artifact (ansible-galaxy collection build) into results/collection/
	rm -rf $(COLLECTION_DIR) && mkdir -p $(COLLECTION_DIR)
	$(BIN)/ansible-galaxy collection build --output-path $(COLLECTION_DIR) .

$(SANITY): sanity-%: collection venv-%
	.ci/sanity $(VENV_$*) $(ARTIFACT)

importer: collection venv-importer  ## the artifact through galaxy-importer, as Galaxy imports it (offline)
	.ci/importer $(VENV_IMPORTER) $(ARTIFACT)

# The four checks run side by side, each its output whole when it ends (--output-sync): each uses
# about half a core (ansible-test runs its tests one after another: sanity-2.21 took 146 s of wall
# for 82 s of CPU), so one after another they left a core idle for 6 minutes of CI.
sanity: venv $(addprefix venv-,$(ANSIBLE_CORES)) venv-importer  ## ansible-test sanity on the artifact for ansible-core 2.19, 2.20, 2.21 and galaxy-importer, side by side (PyPI the first time)
	$(MAKE) --no-print-directory --output-sync=target -j$(words $(SANITY) importer) $(SANITY) importer

# What CI runs (.ci/run), from a fresh clone: the venv, the system packages (deps), then every
# check; a check that would skip fails instead (WIREUP_NO_SKIP, tests/conftest.py).
test: export WIREUP_NO_SKIP := 1
test: venv deps-test unit unit-2.21 sanity integration  ## everything: installs what it needs, then static checks, unit tests (2.19 and 2.21), the collection's sanity and integration tests

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

clean:  ## remove the venvs and caches (not results/)
	rm -rf $(VENV) $(VENV_2.20) $(VENV_2.21) $(VENV_IMPORTER) .pytest_cache .ruff_cache .ansible
