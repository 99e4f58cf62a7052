"""Print the time per test file from pytest JUnit XML reports (the end of `.ci/run`).

    python3 .ci/times.py results/ci/unit.xml results/ci/integration.xml

A test's time in JUnit XML includes its setup and teardown, so a module fixture (a testbed, the
torch venvs) counts in the file that brought it up first. Files are listed slowest first, then
the total per report; an unreadable or missing report is named and makes the exit code 1.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def file_times(path: str) -> dict[str, tuple[float, int]]:
    """{test file: (seconds, test count)} of one JUnit XML report."""
    per_file: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").split("::")[0]
        parts = module.split(".")
        while parts and parts[-1][:1].isupper():  # a test class: its module is the file
            parts.pop()
        name = "/".join(parts) + ".py" if parts else "?"
        per_file[name][0] += float(case.get("time") or 0)
        per_file[name][1] += 1
    return {name: (secs, count) for name, (secs, count) in per_file.items()}


def main(paths: list[str]) -> int:
    status = 0
    for path in paths:
        try:
            times = file_times(path)
        except (OSError, ET.ParseError) as err:
            print(f"[times] {path}: unreadable ({err})")
            status = 1
            continue
        print(f"[times] {path}: seconds per test file (setup and teardown included)")
        for name, (secs, count) in sorted(times.items(), key=lambda kv: -kv[1][0]):
            print(f"[times] {secs:8.1f} s  {count:4d} tests  {name}")
        total = sum(secs for secs, _ in times.values())
        print(f"[times] {total:8.1f} s  {sum(c for _, c in times.values()):4d} tests  total")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
