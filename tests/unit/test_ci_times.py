""".ci/times.py: the seconds per test file at the end of a CI run, from pytest's JUnit XML."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("ci_times", REPO / ".ci/times.py")
times = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(times)

XML = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.integration.test_site" name="test_a" time="100.5"/>
<testcase classname="tests.integration.test_site" name="test_b[x]" time="0.5"/>
<testcase classname="tests.unit.test_fabric.TestRates" name="test_c" time="2"/>
<testcase classname="tests.integration.test_fabric" name="test_d" time="900"><failure/></testcase>
</testsuite></testsuites>"""


def test_file_times_add_up_per_file_and_fold_classes(tmp_path):
    report = tmp_path / "it.xml"
    report.write_text(XML)
    assert times.file_times(str(report)) == {
        "tests/integration/test_site.py": (101.0, 2),
        "tests/unit/test_fabric.py": (2.0, 1),
        "tests/integration/test_fabric.py": (900.0, 1),
    }


def test_main_lists_slowest_first_and_names_an_unreadable_report(tmp_path, capsys):
    report = tmp_path / "it.xml"
    report.write_text(XML)
    assert times.main([str(report), str(tmp_path / "missing.xml")]) == 1
    out = capsys.readouterr().out.splitlines()
    files = [line.split()[-1] for line in out if line.startswith("[times]") and "tests/" in line]
    assert files == [
        "tests/integration/test_fabric.py",
        "tests/integration/test_site.py",
        "tests/unit/test_fabric.py",
    ]
    assert any("1003.0 s" in line and line.endswith("total") for line in out)
    assert any("missing.xml: unreadable" in line for line in out)


def test_integration_units_name_real_modules_in_one_order():
    """make integration's workers take one module at a time, test_testbed first, then
    LONGEST_FIRST: it must name modules that exist (a typo would silently send a long module to the
    end of the queue, where one worker runs it while the other waits), each once."""
    from tests.integration import conftest

    for module in (conftest.FIRST, *conftest.LONGEST_FIRST):
        assert (REPO / "tests/integration" / f"{module}.py").is_file(), module
    assert len(set(conftest.LONGEST_FIRST)) == len(conftest.LONGEST_FIRST)
    assert conftest.module_of("tests/integration/test_fabric.py::test_x[a-b::c]") == "test_fabric"
    order = sorted(["test_new", "test_launch", "test_testbed", "test_slurm"], key=conftest.unit_order)
    assert order == ["test_testbed", "test_slurm", "test_launch", "test_new"]
