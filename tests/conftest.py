import os
import pathlib
import sys

import pytest

# wireup as the collection wireup.cluster (.collections/ansible_collections/wireup/cluster links to the
# repository root): tests import ansible_collections.wireup.cluster.plugins.module_utils.wireup.*, the
# same modules the plugins import.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / ".collections"))


# `make test` (and CI) set WIREUP_NO_SKIP=1 after installing every tool the checks use (make deps):
# there a skipped check is a failure, so a missing tool can never pass unseen. `make unit` alone
# (no root, nothing installed) still skips, and pytest's -ra summary lists each skip and its reason.
NO_SKIP = os.environ.get("WIREUP_NO_SKIP") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if NO_SKIP and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped where every check must run (WIREUP_NO_SKIP=1, make test): {reason}"
