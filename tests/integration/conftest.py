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

SESSION_NAME = os.environ.get("WIREUP_TESTBED_NAME", f"it-{os.getpid()}")


# Modules that bring up testbeds of their own (testbed_factory) and never use the session's: under
# `pytest -n 2` (make integration) they run in one worker while every module of the session
# testbed runs in the other, so each testbed comes up once (make integration then runs
# test_fabric alone: its CPU-bound gloo figures must not share the CPUs; docs/testing.md).
# The grouping is a scheduler of our own (xdist's
# pytest_xdist_make_scheduler hook): xdist 3.8's `--dist loadgroup` marks are lost under pytest 9.2,
# which keeps a node's id in `_id` where xdist still writes `_nodeid`.
OWN_TESTBEDS = frozenset({"test_fabric", "test_site"})


def testbed_group(nodeid: str) -> str:
    """The worker group of a test: 'own-testbeds' for OWN_TESTBEDS' modules, else 'session'."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    return "own-testbeds" if module in OWN_TESTBEDS else "session"


def pytest_xdist_make_scheduler(config, log):
    """Under -n: one work unit per testbed group, each whole on one worker, in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class ByTestbed(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return testbed_group(nodeid)

    return ByTestbed(config, log)


def pytest_collection_modifyitems(items):
    """The testbed's own tests first: they check the nodes as the testbed made them, before
    other tests' playbooks change them (torchrun_launch, for one, manages /etc/hosts). A test of
    an OWN_TESTBEDS module must not use the session testbed (its worker would bring up another)."""
    items.sort(key=lambda item: item.module.__name__.rsplit(".", 1)[-1] != "test_testbed")
    for item in items:
        if testbed_group(item.nodeid) == "own-testbeds" and "testbed" in item.fixturenames:
            raise pytest.UsageError(
                f"{item.nodeid} uses the session testbed although its module is in OWN_TESTBEDS "
                "(tests/integration/conftest.py): use the module's own testbed, or move the test"
            )


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
