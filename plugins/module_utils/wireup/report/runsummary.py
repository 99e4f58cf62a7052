"""The end of ``make run``: one line per node and phase, the report, the logs, what to run next.

``make run`` tees each playbook's output into results/run-RUN/PHASE.log (this module's ``tee``:
the terminal gets Ansible's output as it comes, the file the same without colour codes) and
notes ``PHASE<TAB>RC<TAB>SECONDS`` per phase in phases.tsv; then ``summary`` reads them and
prints what a person came for: per node, bootstrap's counts from site.yml's PLAY RECAP, the bench
verdict from the bench run's records (the run that bench.log names), the job's result from the
launch's summary.json (the folder that launch.log names), and for a phase that failed, the node,
the task and the cause with the log line to read. ``.venv/bin/ansible-playbook`` run by hand keeps
Ansible's own output: only this wrapper summarises.

    python3 -m M tee LOG            (stdin to stdout and, without colours, to LOG)
    python3 -m M summary RUN_DIR [--inventory I] [--testbed NAME]

with M = ansible_collections.wireup.cluster.plugins.module_utils.wireup.report.runsummary and the
repository's .collections on PYTHONPATH (the Makefile's RUN_SUMMARY).

Pure functions (text in, lines out) with unit tests in tests/unit/test_runsummary.py; stdlib only.
Nothing read is trusted: the log's paths are used only when they lie under the results folder
the run dir is in, the JSON's values are printed through :func:`_clean`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
RECAP_LINE = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:[a-z]+=\d+\s*)+)$")
FATAL = re.compile(r"^fatal: \[(?P<host>[^\]]+)\]")
TASK = re.compile(r"^TASK \[(?P<name>.*)\] \**$")
# Ansible's yaml result format folds long messages at spaces: any run of whitespace between words.
BENCH_REPORT = re.compile(r"bench\s+report:\s+(?P<html>\S+/report\.html)")
JOB_DIR = re.compile(r"logs\s+and\s+summary\s+in\s+(?P<dir>\S+?)/?(?:[\"'\s]|$)")
PHASES = (
    ("testbed", "testbed (deps, testbed-up)"),
    ("site", "site.yml (bootstrap)"),
    ("bench", "bench.yml (wiring proof)"),
    ("launch", "launch.yml (Example 2)"),
)


def _clean(value, limit: int = 160) -> str:
    text = " ".join("".join(c if c.isprintable() else " " for c in str(value)).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def parse_recap(text: str) -> dict:
    """{host: {ok, changed, unreachable, failed, skipped, rescued, ignored}} from the last PLAY
    RECAP of an ansible-playbook output (the counts of every play of the playbook)."""
    lines = strip_ansi(text).splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("PLAY RECAP ")]
    if not starts:
        return {}
    out = {}
    for line in lines[starts[-1] + 1 :]:
        match = RECAP_LINE.match(line.strip())
        if not match:
            if line.strip():
                break
            continue
        counts = dict(pair.split("=") for pair in match["counts"].split())
        out[match["host"]] = {k: int(v) for k, v in counts.items()}
    return out


def _cause_after(lines: list[str], start: int) -> str:
    """The first line of the msg of the failure that starts at lines[start] (yaml or JSON form)."""
    head = lines[start]
    found = re.search(r'"msg": "((?:[^"\\]|\\.)*)"', head)
    if found:
        return found[1].encode().decode("unicode_escape", "replace").splitlines()[0] if found[1] else ""
    for index in range(start + 1, min(start + 40, len(lines))):
        match = re.match(r"^\s*msg:\s*(.*)$", lines[index])
        if match:
            value = match[1].strip()
            if value in ("", "|", "|-", ">", ">-", "|+", ">+"):
                following = [x.strip() for x in lines[index + 1 : index + 4] if x.strip()]
                return following[0] if following else ""
            return value.strip("'\"")
    return ""


def parse_failures(text: str) -> list[dict]:
    """Each ``fatal: [host]`` of an output: {host, task, cause, line} (line: 1-based in the log)."""
    lines = strip_ansi(text).splitlines()
    task, out = "", []
    for index, line in enumerate(lines):
        header = TASK.match(line)
        if header:
            task = header["name"]
            continue
        fatal = FATAL.match(line)
        if fatal:
            out.append(
                {"host": fatal["host"], "task": task, "cause": _cause_after(lines, index), "line": index + 1}
            )
    return out


def _under(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([os.path.realpath(path), os.path.realpath(root)]) == os.path.realpath(root)
    except ValueError:
        return False


def bench_records(bench_log: str, results_dir: str) -> tuple[str, dict]:
    """(report.html path, {host: record}) of the bench run that bench.log names; ('', {}) when it
    names none (bench.yml failed before its report) or one outside results_dir."""
    found = BENCH_REPORT.findall(strip_ansi(bench_log))
    if not found or not _under(found[-1], results_dir):
        return "", {}
    run_dir = os.path.dirname(found[-1])
    records = {}
    for name in sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else []:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(run_dir, name), encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("host") == name[: -len(".json")]:
            records[name[: -len(".json")]] = record
    return found[-1], records


def job_summary(launch_log: str, results_dir: str) -> tuple[str, dict]:
    """(the job's results folder, its summary.json) as launch.log names it; ('', {}) when none."""
    found = [m.rstrip("/") for m in JOB_DIR.findall(strip_ansi(launch_log))]
    if not found or not _under(found[-1], results_dir):
        return "", {}
    try:
        with open(os.path.join(found[-1], "summary.json"), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return found[-1], {}
    return found[-1], data if isinstance(data, dict) else {}


def bootstrap_cell(counts: dict | None) -> str:
    if not counts:
        return "not run"
    if counts.get("unreachable"):
        return "UNREACHABLE"
    word = "FAILED" if counts.get("failed") else "ok"
    return f"{word} (changed {counts.get('changed', 0)}, ok {counts.get('ok', 0)})"


def bench_cell(record: dict | None) -> str:
    if not record:
        return "no record"
    verdict = _clean(record.get("verdict") or "N/A", 20)
    if verdict in ("FAIL", "WARN", "UNREACHABLE"):
        severity = {"FAIL": "critical", "WARN": "warning"}.get(verdict)
        why = [f.get("message") for f in record.get("findings") or [] if f.get("severity") == severity]
        why = why or [record.get("skipped")]
        if why and why[0]:
            return f"{verdict}: {_clean(why[0], 80)}"
    return verdict


def job_cell(node: dict | None) -> str:
    if not node:
        return "not run"
    state = _clean(node.get("state") or "?", 20)
    rc = node.get("rc")
    said = {"exited": f"exited {rc}"}.get(state, state)
    elapsed = node.get("elapsed")
    try:
        return f"{said} after {float(elapsed):.1f} s"
    except (TypeError, ValueError):
        return said


def read_phases(text: str) -> list[tuple[str, int, int]]:
    """phases.tsv: ``PHASE<TAB>RC<TAB>SECONDS`` per line, in the order they ran."""
    out = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[1].lstrip("-").isdigit() and parts[2].isdigit():
            out.append((parts[0], int(parts[1]), int(parts[2])))
    return out


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


# How every command wireup prints starts: the venv's program written out, run from the repository
# root, works when pasted after `make venv` with nothing activated (docs/DEVELOPING.md, issue 38).
ANSIBLE_PLAYBOOK = ".venv/bin/ansible-playbook"


def next_steps(phases, failures, inventory: str, testbed: str) -> list[str]:
    """What to run next: fix the first failed phase, else launch your own job. Each command is in
    backticks, as pasted (tests/unit/test_readme_commands.py runs them against the set-up)."""
    playbook = f"{ANSIBLE_PLAYBOOK} -i {inventory}" if inventory else ANSIBLE_PLAYBOOK
    failed = [name for name, rc, _seconds in phases if rc != 0]
    out = []
    if failed:
        phase = failed[0]
        log = f"{phase}.log"
        first = failures.get(phase) or []
        where = f" (line {first[0]['line']})" if first else ""
        out.append(
            f"Next: read {log}{where}, fix the cause, then rerun `make run` (every phase is idempotent)."
        )
        if phase == "bench":
            out.append(
                "      launch.yml refuses nodes whose bench verdict FAILed; without them: "
                f"`{playbook} launch.yml -e torchrun_launch_on_failed=skip`."
            )
    else:
        out.append(
            f"Next: your own job: `{playbook} launch.yml "
            "-e torchrun_launch_program=/path/on/nodes.py -e torchrun_launch_job=NAME` "
            "(detached on a real cluster); follow it with "
            f"`{playbook} jobs.yml -e torchrun_launch_job=NAME`."
        )
    if testbed:
        suffix = "" if testbed == "default" else f" TESTBED={testbed}"
        out.append(f"      The testbed is still up; remove it with: `make testbed-down{suffix}`")
    return out


def summary(run_dir: str, results_dir: str, *, inventory: str = "", testbed: str = "") -> list[str]:
    """The closing lines of ``make run`` from its run folder (phases.tsv and PHASE.log files)."""

    def read(name):
        try:
            with open(os.path.join(run_dir, name), encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return ""

    phases = read_phases(read("phases.tsv"))
    logs = {name: read(f"{name}.log") for name, _rc, _seconds in phases}
    recaps = {name: parse_recap(text) for name, text in logs.items()}
    failures = {name: parse_failures(text) for name, text in logs.items()}
    report, records = bench_records(logs.get("bench", ""), results_dir)
    job_dir, job = job_summary(logs.get("launch", ""), results_dir)
    return compose(
        phases, recaps, failures, records, job, report=report, job_dir=job_dir,
        run_dir=run_dir, inventory=inventory, testbed=testbed,
    )  # fmt: skip


def _hosts(recaps, records, job) -> list[str]:
    """The cluster's nodes, in the recaps' order: not localhost where it only ran the controller
    plays (preflight, the bench report), unless it is a node (a one-node inventory of this machine)."""
    nodes = set(records) | set(job.get("nodes") or {})
    hosts = []
    for name in ("site", "bench", "launch"):
        recap = recaps.get(name, {})
        for host in recap:
            alone = list(recap) == ["localhost"]
            if host not in hosts and (host != "localhost" or alone or host in nodes):
                hosts.append(host)
    return hosts + [h for h in sorted(nodes) if h not in hosts]


@dataclass(frozen=True)
class Where:
    """Where the summary points: the bench report, the job's folder, the run's folder, and what
    ``make run`` was given (its inventory, the testbed it left up)."""

    report: str
    job_dir: str
    run_dir: str
    inventory: str = ""
    testbed: str = ""


def _node_rows(recaps, records, job) -> list[str]:
    hosts = _hosts(recaps, records, job)
    if not hosts:
        return []
    nodes = job.get("nodes") or {}
    rows = [["node", "bootstrap (site.yml)", "bench verdict", "job"]]
    for host in hosts:
        node = nodes.get(host) if isinstance(nodes.get(host), dict) else None
        site = recaps.get("site", {}).get(host)
        rows.append([_clean(host, 60), bootstrap_cell(site), bench_cell(records.get(host)), job_cell(node)])
    return ["", *_table(rows)]


def _failure_lines(phases, failures) -> list[str]:
    out = []
    for name, _rc, _seconds in phases:
        for failure in failures.get(name, [])[:5]:
            cause = f": {_clean(failure['cause'])}" if failure["cause"] else ""
            out.append(
                f"  {name} failed on {_clean(failure['host'], 60)} at '{_clean(failure['task'], 80)}'"
                f"{cause} ({name}.log line {failure['line']})"
            )
    return out


def _job_line(job, job_dir: str) -> list[str]:
    if not job:
        return []
    verdict = job.get("verdict") or {}
    word = "ok" if verdict.get("ok") else "FAILED"
    return [
        f"Job:          {_clean(job.get('job'), 60)} run {_clean(job.get('run_id'), 40)}: {word}, "
        f"{_clean(verdict.get('reason') or '?')}; logs and summary.json in {job_dir}/"
    ]


def compose(phases, recaps, failures, records, job, **where) -> list[str]:
    """The summary's lines from what :func:`summary` read (pure: the unit tests' entry);
    ``where``: Where's fields."""
    w = Where(**where)
    titles = dict(PHASES)
    rows = [["phase", "result", "time"]]
    for name, rc, seconds in phases:
        rows.append([titles.get(name, name), "ok" if rc == 0 else f"FAILED (exit {rc})", f"{seconds} s"])
    out = ["", "== make run: summary ==", *_table(rows), *_node_rows(recaps, records, job)]
    out += [*_failure_lines(phases, failures), ""]
    out += [f"Bench report: {w.report} (and report.md)"] if w.report else []
    out += _job_line(job, w.job_dir)
    names = ", ".join(f"{name}.log" for name, _rc, _seconds in phases)
    out.append(f"Full output:  {w.run_dir}/ ({names})")
    return out + next_steps(phases, failures, w.inventory, w.testbed)


def tee(path: str, source=None, sink=None) -> None:
    """Copy source (stdin) to sink (stdout) as it comes and to path without colour codes."""
    source = source or sys.stdin
    sink = sink or sys.stdout
    with open(path, "a", encoding="utf-8", errors="replace") as log:
        for line in source:
            sink.write(line)
            sink.flush()
            log.write(strip_ansi(line))
            log.flush()


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="runsummary")
    sub = parser.add_subparsers(dest="action", required=True)
    t = sub.add_parser("tee")
    t.add_argument("log")
    s = sub.add_parser("summary")
    s.add_argument("run_dir")
    s.add_argument("--inventory", default="")
    s.add_argument("--testbed", default="")
    args = parser.parse_args(argv)
    if args.action == "tee":
        tee(args.log)
        return 0
    run_dir = os.path.abspath(args.run_dir)
    lines = summary(run_dir, os.path.dirname(run_dir), inventory=args.inventory, testbed=args.testbed)
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


# A command-line entry point in module_utils: it writes and exits without print() and sys.exit(),
# which module code may not call (ansible-test sanity's pylint).
if __name__ == "__main__":
    raise SystemExit(main())
