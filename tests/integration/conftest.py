"""Fixtures for the integration tests: the local testbed, brought up once per session.

    def test_site(testbed, tmp_path):
        from tests.integration.harness import run_playbook
        result = run_playbook("site.yml", testbed.inventory, private_data_dir=tmp_path)
        assert result.failed_hosts == []

Environment:
  WIREUP_TESTBED_NAME   name of the session's testbed (default it-PID, so parallel sessions
                        of other engineers in the same checkout never collide)
  WIREUP_TESTBED_NODES  its node count (default 3)
  WIREUP_TESTBED_KEEP=1 reuse that testbed when it is already up, and leave it up at the end
                        (fast edit-test loops; remove it with `python -m tests.testbed down --name NAME`)
"""

from __future__ import annotations

import contextlib
import os

import pytest

from tests.testbed import Testbed, TestbedError, all_testbeds

# Each xdist worker has its own: by default it-PID (the worker's process); a name given in
# WIREUP_TESTBED_NAME gets the worker's number from the second worker on (NAME, NAME-w1, ...).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
SESSION_NAME = (
    os.environ["WIREUP_TESTBED_NAME"] + ("" if _WORKER == "0" else f"-w{_WORKER}")
    if "WIREUP_TESTBED_NAME" in os.environ
    else f"it-{os.getpid()}"
)


# Under `pytest -n 2` (make integration) each module is one unit of work, whole on one worker, and
# the workers take the next unit as they finish one, so both stay busy to the end; each worker has
# a session testbed of its own (SESSION_NAME names it after the worker's process), brought up on
# first use (about 5 s; a module that needs torch on it installs it once: ensure_torch_venvs).
# With the session testbed's modules all on one worker and the modules with testbeds of their own
# on the other, the two overlapped little: 40:01 for 2,749 s of tests (docs/testing.md).
# LONGEST_FIRST orders the units, the longest first (their seconds in the last CI run, ci-*.txt),
# after test_testbed, whose tests check the nodes as the testbed made them; a module not named
# runs after those named. test_fabric is one of them (it ran alone after them before: its verdicts
# no longer depend on spare CPU, docs/testing.md). The grouping is a scheduler of our own (xdist's
# pytest_xdist_make_scheduler hook): xdist 3.8's `--dist loadgroup` marks are lost under pytest
# 9.2, which keeps a node's id in `_id` where xdist still writes `_nodeid`.
FIRST = "test_testbed"
LONGEST_FIRST = (
    "test_slurm",
    "test_launch",
    "test_fabric",
    "test_bench",
    "test_site",
    "test_pytorch_venv",
    "test_bootstrap",
    "test_driver_branches",
    "test_faults",
    "test_gpu_trial",
    "test_drift",
    "test_prometheus",
    "test_collection",
)


def module_of(nodeid: str) -> str:
    """The test module's name of a test's node id ('test_launch' of 'tests/.../test_launch.py::x')."""
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


def unit_order(module: str) -> tuple[int, int]:
    """Where a module's unit goes in the workers' queue: FIRST, then LONGEST_FIRST, then the rest."""
    if module == FIRST:
        return (0, 0)
    if module in LONGEST_FIRST:
        return (1, LONGEST_FIRST.index(module))
    return (2, 0)


def pytest_xdist_make_scheduler(config, log):
    """Under -n: one unit of work per module, in unit_order (collection order: no reordering by size)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return module_of(nodeid)

    config.option.loadscopereorder = False
    return ByModule(config, log)


def pytest_collection_modifyitems(items):
    """The modules in unit_order, each module's tests in their own order (a stable sort)."""
    items.sort(key=lambda item: unit_order(module_of(item.nodeid)))


def _alive(pid) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_session_testbeds():
    """Testbeds of earlier pytest sessions (it-*) whose session process is gone: take them down."""
    for name in all_testbeds():
        if not name.startswith("it-") or name == SESSION_NAME:
            continue
        tb = Testbed(name)
        if not _alive(tb.state.get("owner_pid")):
            with contextlib.suppress(TestbedError, OSError):
                tb.down()


@pytest.fixture(scope="session")
def testbed():
    """The session's testbed (a tests.testbed.Testbed, up): .inventory, .nodes, .address(node),
    .ssh(node, cmd), .stop_node(node), .start_node(node), .www_dir, .www_url, .iptables_rules()."""
    keep = os.environ.get("WIREUP_TESTBED_KEEP") == "1"
    nodes = int(os.environ.get("WIREUP_TESTBED_NODES", "3"))
    _remove_stale_session_testbeds()
    tb = Testbed(SESSION_NAME)
    try:
        tb.up(nodes=nodes)
        yield tb
    finally:
        if not keep:
            tb.down()


@pytest.fixture(scope="session")
def testbed_factory():
    """make(suffix, nodes=1, suites=None) -> another Testbed (fresh nodes, own bridge/subnet/port), up.
    All of them are taken down at the end of the session."""
    made = []

    def make(suffix: str, nodes: int = 1, suites=None):
        tb = Testbed(f"{SESSION_NAME}-{suffix}")
        made.append(tb)
        return tb.up(nodes=nodes, suites=suites)

    try:
        yield make
    finally:
        errors = []
        for tb in reversed(made):
            try:
                tb.down()
            except TestbedError as exc:
                errors.append(str(exc))
        if errors:
            raise TestbedError("; ".join(errors))
