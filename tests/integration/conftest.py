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
# `pytest -n 2 --dist loadgroup` (make integration) they run in one worker while every module of
# the session testbed runs in the other, so each testbed is brought up once and the two halves
# take about as long (docs/testing.md has the figures).
OWN_TESTBEDS = frozenset({"test_fabric", "test_site"})


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items):
    """The testbed's own tests first: they check the nodes as the testbed made them, before
    other tests' playbooks change them (torchrun_launch, for one, manages /etc/hosts). Each
    module joins its xdist group (OWN_TESTBEDS or the session testbed's)."""
    items.sort(key=lambda item: item.module.__name__.rsplit(".", 1)[-1] != "test_testbed")
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        if module in OWN_TESTBEDS and "testbed" in item.fixturenames:
            raise pytest.UsageError(
                f"{item.nodeid} uses the session testbed although {module} is in OWN_TESTBEDS "
                "(tests/integration/conftest.py): use the module's own testbed, or move the test"
            )
        item.add_marker(pytest.mark.xdist_group("own-testbeds" if module in OWN_TESTBEDS else "session"))


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
