"""The node_check role's plan (issue 26) and the quick check as a capability of the host record
and the report. Pure Python, stdlib only (wireup-check, judge/quick.py and check/run.py, runs this
package on the nodes; this module runs on the controller).

- plan: what the role does on one node: wireup-check's settings file (check.json) and the
  command lines it runs (the quick check, the baseline after a bench, the bench's textfile).
- read_store: what the controller's store gives a node after a bench: the bench part of its
  baseline (only when its newest bench record PASSed) and its figures for node_exporter;
  baseline_line: what became of the baseline, in one line.
- result: what a node's ``wireup-check --json`` printed, as the controller keeps it (nothing a
  node printed is trusted: verdicts it does not know are ERROR, text is cut to one line).
- section (results.SECTIONS), summary_line and report_sections (assemble.REPORT_PARTS): a quick run
  (``bench.yml --tags quick``) is stored and reported like a bench run, by bench_report, under
  ``results/quick/<run id>/`` (kind quick), never under ``results/bench/``. The launch gate
  (record/gate.py, per capability) reads it as the capability node_check only: a quick FAIL newer than
  the node's last bench that measured its links refuses the node, and a quick PASS never hides a
  bench FAIL (it says nothing of the links, torch, stepcost or the GPU trial).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TypedDict

from ..core import shape
from ..judge import quick
from ..probe.health import finding

SOURCE = "node_check"
KIND = "quick"
MAX_TEXT = 600


@dataclasses.dataclass(frozen=True)
class CheckSettings:
    """The node_check_* settings the plan reads, by name without the prefix (a misspelt or
    missing one is a TypeError)."""

    path: str
    config: str
    baseline: str
    textfile_dir: str
    textfile: str
    nvidia_smi: str
    require_baseline: bool
    timeout: int
    bench: bool
    bench_bytes: str
    bench_tolerance: float
    bench_iterations: int
    drain_max_share: int  # wireup_drain_max_share (the blast radius, issue 37)
    drain_max_nodes: int  # wireup_drain_max_nodes


class BenchConfig(TypedDict):
    run: bool
    size: int
    tolerance: float
    iterations: int


class CheckConfig(TypedDict):
    """check.json (run.DEFAULTS' keys)."""

    host: str
    baseline: str
    textfile_dir: str
    textfile: str
    nvidia_smi: str
    require_baseline: bool
    timeout: int
    slurm_node: str
    drain_max_share: int
    drain_max_nodes: int
    bench: BenchConfig


class NodeCheckPlan(TypedDict):
    """plan's answer: config (check.json's content), quick_argv (``bench.yml --tags quick``),
    baseline_argv (after a passing bench, the bench part on stdin), textfile_argv (the bench's
    figures on stdin)."""

    config: CheckConfig
    quick_argv: list[str]
    baseline_argv: list[str]
    textfile_argv: list[str]


class StoreRead(TypedDict):
    """read_store's answer: bench_part (quick.BenchPart; {} when the newest bench record did
    not PASS or there is none), textfile (wireup_bench.prom's text, '' when the store has nothing
    for the node), textfiles (the texts to write, the list the write loops over: [textfile], or []
    when it is '' or node_check_textfile is never), note (why no baseline is written, '' when one
    is)."""

    bench_part: quick.BenchPart
    textfile: str
    textfiles: list[str]
    note: str


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


def plan(host, node, settings, *, check_mode=False) -> NodeCheckPlan:
    """Every decision of the role on one node. node: wireup_node (its hostname is the node's
    Slurm name: slurm.node_name, the drain's rule; nvidia-smi where preflight found it);
    settings: CheckSettings. In check mode the quick check writes no textfile."""
    from ..core.watchsettings import size_bytes
    from ..launch.slurm import node_name

    facts = node or {}
    config = {
        "host": str(host),
        "baseline": settings.baseline,
        "textfile_dir": settings.textfile_dir,
        "textfile": settings.textfile,
        "nvidia_smi": settings.nvidia_smi or str((facts.get("gpu") or {}).get("nvidia_smi") or ""),
        "require_baseline": bool(settings.require_baseline),
        "timeout": int(settings.timeout),
        "slurm_node": node_name(str(host), facts),
        "drain_max_share": int(settings.drain_max_share),
        "drain_max_nodes": int(settings.drain_max_nodes),
        "bench": {
            "run": False,
            "size": size_bytes(settings.bench_bytes),
            "tolerance": float(settings.bench_tolerance),
            "iterations": int(settings.bench_iterations),
        },
    }
    head = [settings.path, "--config", settings.config]
    return {
        "config": config,
        "quick_argv": [
            *head,
            "--json",
            *(["--bench"] if settings.bench else []),
            *(["--textfile", "never"] if check_mode else []),
        ],
        "baseline_argv": [*head, "--write-baseline", "--json"],
        "textfile_argv": [*head, "--write-textfile", "wireup_bench.prom", "--json"],
    }


def read_store(results_dir, host, *, build=None, size="1G", textfile="auto") -> StoreRead:
    """The baseline's bench part from the host's newest bench record when it PASSed (the baseline
    of the last passing bench stays otherwise) and wireup_bench.prom's text, from the store;
    textfile: node_check_textfile (never: no text to write)."""
    from ..core.watchsettings import size_bytes
    from ..report import metrics

    latest = metrics.latest_record(str(results_dir), str(host))
    part, note = {}, ""
    if not latest:
        note = "no bench record of it in the store"
    elif latest["verdict"] != "PASS":
        note = f"its latest bench record ({latest['run_id']}) is {latest['verdict']}, not PASS"
    else:
        part = quick.bench_part(latest["record"], dict(build or {}), size_bytes(size))
    text = metrics.controller_text(str(results_dir), str(host))
    return {
        "bench_part": part,
        "textfile": text,
        "textfiles": [text] if text and textfile != "never" else [],
        "note": note,
    }


def baseline_line(read: StoreRead, written, host, *, check_mode=False) -> str:
    """The line after the baseline step: wireup-check's own line where it ran (written: the step's
    registered result, its stdout wireup-check's JSON), else why the baseline was not written: check
    mode (the step would have run) or read_store's note (it kept the old one)."""
    stdout = str((written or {}).get("stdout") or "")
    if stdout:
        return (
            _said_line(stdout)
            or f"wireup-check: baseline of {host}: no line in its answer: {_text(stdout)[:200]}"
        )
    if check_mode and read.get("bench_part"):
        return f"wireup-check: baseline of {host} not written (check mode)"
    return f"wireup-check: baseline of {host} kept: {read.get('note', '')}"


def _said_line(stdout: str) -> str:
    """The line of wireup-check's JSON answer, as one line of text ('' when there is none): the
    node printed it, so it is not trusted to be JSON, a mapping or one line."""
    try:
        said = json.loads(stdout)
    except ValueError:
        return ""
    return _text(said.get("line")) if isinstance(said, dict) and said.get("line") else ""


# ------------------------------------------------------------------------------ the node's answer
def _text(value):
    return " ".join(str("" if value is None else value).split())[:MAX_TEXT]


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _problems(given):
    kinds = set(quick.RANKS)
    return [
        {
            "kind": p.get("kind") if p.get("kind") in kinds else "unknown",
            "part": _text(p.get("part")),
            "message": _text(p.get("message")),
        }
        for p in given or []
        if isinstance(p, dict)
    ]


def _baseline_id(given):
    if not isinstance(given, dict):
        return None
    return {
        "run_id": _text(given["run_id"]) if given.get("run_id") is not None else None,
        "time": _number(given.get("time")),
        "taken": _text(given["taken"]) if given.get("taken") is not None else None,
    }


def _measured(given):
    if not isinstance(given, dict) or not given:
        return {}
    return {
        "collective": _text(given.get("collective")),
        "size": _number(given.get("size")),
        "busbw": _number(given.get("busbw")),
        "error": _text(given.get("error")),
    }


def _no_result(host, stdout, stderr, rc):
    lines = (stderr or stdout or "").strip().splitlines()
    said = _text(lines[-1] if lines else "no output")
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
    errors = [_text(e) for e in found.get("errors") or []]
    if verdict not in quick.EXIT:
        errors.append(f"wireup-check on {host} gave the verdict {_text(verdict)!r}, which it never gives")
        verdict = "ERROR"
    return {
        "host": str(host),
        "verdict": verdict,
        "exit": _number(found.get("exit")),
        "line": _text(found.get("line")),
        "problems": _problems(found.get("problems")),
        "errors": errors,
        "notes": [_text(n) for n in found.get("notes") or []],
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
    rule for this part (its type is _RECORD_PARTS')."""
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


def summary_line(record) -> str:
    """'node1: PASS - 0 GPU(s), 1 NIC port(s) as at ... (0.4 s)'; the check's own verdict follows
    the record's where they differ ('node3: FAIL - ERROR: the baseline ...')."""
    check = record.get("node_check") or {}
    said = record.get("skipped") or _reason(check) or "no result"
    if check and check.get("verdict") != record.get("verdict"):
        said = f"{check['verdict']}: {said}"
    took = f" ({check['seconds']:.1f} s)" if isinstance(check.get("seconds"), (int, float)) else ""
    return f"{record.get('host', '?')}: {record.get('verdict', 'N/A')} - {said}{took}"


def _row(host, record):
    check = record.get("node_check") or {}
    base = check.get("baseline") or {}
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
