"""The node_check capability (issue 26's quick check): wireup-check's answer as the record keeps it
(result), its record section, its problem check, its gate rule (check_verdict) and its report part.
The role's plan is plans/node_check.py; the check's rules are judge/quick.py."""

from __future__ import annotations

import json
from typing import TypedDict

from ..core import checks, shape
from ..judge import quick
from ..probe.health import finding

SOURCE = "node_check"
KIND = "quick"
MAX_TEXT = 600


class Problem(TypedDict):
    kind: str
    part: str
    message: str


class BaselineId(TypedDict):
    run_id: str | None
    time: float | None
    taken: str | None


class Measured(TypedDict, total=False):
    collective: str
    size: float | None  # _number's: a JSON number, or null
    busbw: float | None
    error: str


class CheckResult(TypedDict):
    """A node's wireup-check answer as the controller keeps it (__node_check_result)."""

    host: str
    verdict: str
    exit: float | None  # _number's: a JSON number, or null
    line: str
    problems: list[Problem]
    errors: list[str]
    notes: list[str]
    seconds: float | None
    time: float | None
    baseline: BaselineId | None
    bench: Measured


class QuickNode(TypedDict, total=False):
    """A node of a quick check's run as bench_report.gather_quick hands it to the store: its
    answer, or (it reached the check but kept none) failed and skipped. The store checks each
    node's against it (bench_report.store_nodes, core/shape.py)."""

    node_check: CheckResult
    failed: bool
    skipped: str


# ------------------------------------------------------------------------------ the node's answer
def one_line(value):
    return " ".join(str("" if value is None else value).split())[:MAX_TEXT]


def _number(value):
    return value if checks.is_number(value) else None


def _problems(given):
    kinds = set(quick.RANKS)
    return [
        {
            "kind": p.get("kind") if p.get("kind") in kinds else "unknown",
            "part": one_line(p.get("part")),
            "message": one_line(p.get("message")),
        }
        for p in given or []
        if isinstance(p, dict)
    ]


def _baseline_id(given):
    if not isinstance(given, dict):
        return None
    return {
        "run_id": one_line(given["run_id"]) if given.get("run_id") is not None else None,
        "time": _number(given.get("time")),
        "taken": one_line(given["taken"]) if given.get("taken") is not None else None,
    }


def _measured(given):
    if not isinstance(given, dict) or not given:
        return {}
    return {
        "collective": one_line(given.get("collective")),
        "size": _number(given.get("size")),
        "busbw": _number(given.get("busbw")),
        "error": one_line(given.get("error")),
    }


def _no_result(host, stdout, stderr, rc):
    lines = (stderr or stdout or "").strip().splitlines()
    said = one_line(lines[-1] if lines else "no output")
    line = f"wireup-check: ERROR {host}: no result from wireup-check (exit code {rc}): {said}"
    return {"verdict": "ERROR", "line": line, "errors": [line]}


def result(host, *, stdout="", stderr="", rc=None) -> CheckResult:
    """What ``wireup-check --json`` printed on ``host``, checked: an output that is not its JSON
    (wireup-check missing, a crash) is an ERROR naming what it said instead; a verdict it does not
    give is ERROR; every text one line of at most MAX_TEXT characters."""
    try:
        found = json.loads(stdout or "")
    except ValueError:
        found = None
    if not isinstance(found, dict):
        found = _no_result(host, stdout, stderr, rc)
    verdict = found.get("verdict")
    errors = [one_line(e) for e in found.get("errors") or []]
    if verdict not in quick.EXIT:
        errors.append(f"wireup-check on {host} gave the verdict {one_line(verdict)!r}, which it never gives")
        verdict = "ERROR"
    return {
        "host": str(host),
        "verdict": verdict,
        "exit": _number(found.get("exit")),
        "line": one_line(found.get("line")),
        "problems": _problems(found.get("problems")),
        "errors": errors,
        "notes": [one_line(n) for n in found.get("notes") or []],
        "seconds": _number(found.get("seconds")),
        "time": _number(found.get("time")),
        "baseline": _baseline_id(found.get("baseline")),
        "bench": _measured(found.get("bench")),
    }


# ------------------------------------------------------------------------------ the host record
def _findings(check):
    """A finding per problem and per error (critical: each fails the node), and NO_BASELINE's."""
    out = [
        finding("critical", f"node_check_{p['kind']}", p["message"], source=SOURCE, part=p["part"])
        for p in check["problems"]
    ]
    out += [finding("critical", "node_check_error", e, source=SOURCE) for e in check["errors"]]
    if check["verdict"] == "NO_BASELINE":
        message = f"{check['host']} has no quick-check baseline and node_check_require_baseline is true"
        out.append(finding("critical", "node_check_no_baseline", message, source=SOURCE))
    return out


def section(node, record, ctx):
    """The record's node_check part: the quick check's answer (result's dict, the node data's
    ``node_check``); a check that did not PASS fails the host, each problem a critical finding.
    Nothing when the node data has no check (a bench run). An answer that is not a CheckResult
    is shape.Malformed: the store records the node DAMAGED (it is never read as no check)."""
    check = node.get("node_check")
    if check is None:
        return {}, [], []
    shape.check(check, CheckResult, "node_check")
    return dict(check), _findings(check), [check_verdict(check)]


def check_verdict(check) -> str:
    """The host's verdict from a quick check's answer (the record's section and the launch gate,
    gate.capability_verdicts): PASS only when wireup-check said PASS, FAIL for anything else."""
    return "PASS" if check.get("verdict") == "PASS" else "FAIL"


def part_problem(record) -> str:
    """What makes a stored record's node_check part unusable ('' when nothing): record_problem's
    rule for this part (record_problem checks first that it is an object)."""
    check = record.get("node_check")
    if not check:
        return ""  # a bench record's (its part is {}), or a record from before issue 26
    if not isinstance(check, dict):
        return "node_check is not an object"
    if check.get("verdict") not in quick.EXIT:
        return f"node_check.verdict is {check.get('verdict')!r}, not one of {', '.join(quick.EXIT)}"
    if not isinstance(check.get("problems"), list) or not all(isinstance(p, dict) for p in check["problems"]):
        return "node_check.problems is not a list of objects"
    return ""


def _reason(check):
    """The check's line without its 'wireup-check: VERDICT HOST: ' head."""
    line = check.get("line") or ""
    return line.split(": ", 2)[-1] if line.startswith("wireup-check: ") else line


def summary_line(record, verdict_said=None) -> str:
    """'node1: PASS, compared with run X - 0 GPU(s), 1 NIC port(s) as at ... (0.4 s)'; the check's
    own verdict follows the record's where they differ ('node3: FAIL, ... - ERROR: the baseline
    ...'). verdict_said: the verdict and what it was compared with (results.verdict_said, which
    assemble.summary_line passes: results imports this module), else the verdict alone."""
    check = record.get("node_check") or {}
    said = record.get("skipped") or _reason(check) or "no result"
    if check and check.get("verdict") != record.get("verdict"):
        said = f"{check['verdict']}: {said}"
    took = f" ({check['seconds']:.1f} s)" if isinstance(check.get("seconds"), (int, float)) else ""
    return f"{record.get('host', '?')}: {verdict_said or record.get('verdict', 'N/A')} - {said}{took}"


def _row(host, record):
    check = record.get("node_check") or {}
    # The record's baseline part (results.Baseline, made by results.baseline_part from this check's
    # baseline): the one the report's summary table shows too.
    base = record.get("baseline") or {}
    return [
        host,
        record.get("verdict", "N/A"),
        check.get("verdict", "-"),
        _reason(check) or record.get("skipped") or "-",
        "-" if check.get("seconds") is None else f"{check['seconds']:.1f}",
        base.get("run_id") or "-",
    ]


def report_sections(records):
    """The quick check's part of the report: one row per host (its line, how long, the bench run
    its baseline came from). Nothing when no record has a quick check."""
    rows = [_row(h, r) for h, r in sorted(records.items()) if r.get("node_check") or r.get("kind") == KIND]
    if not rows:
        return []
    failing = [row[0] for row in rows if row[1] != "PASS"]
    said = f"not healthy: {', '.join(failing)}." if failing else "every node healthy."
    header = ["host", "verdict", "wireup-check", "line", "seconds", "baseline (bench run)"]
    return [
        ("h", (2, "Quick node check")),
        ("p", f"{len(rows)} node(s) checked against the baseline of their last passing bench; {said}"),
        ("table", (header, rows)),
    ]
