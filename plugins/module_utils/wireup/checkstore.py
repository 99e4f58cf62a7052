"""The quick check's run on the controller (bench.yml --tags quick), stored and reported like a
bench run: ``<results_dir>/quick/<run id>/<host>.json`` (created exclusively, atomically, strict
JSON, 0640 in 0750 folders: results.reserve_run and atomicfile, as bench records are) and
``report.md``, plus one summary line per host for the play output (pure Python, stdlib only).

What a node printed (wireup-check --json) is not trusted: its verdict must be one wireup-check
gives (else the record says ERROR), its lines are cut to one line each and escaped in report.md.
"""

from __future__ import annotations

import os

from . import atomicfile, results, validate

VERDICTS = ("PASS", "FAIL", "ERROR", "NO_BASELINE")
FAILING = ("FAIL", "ERROR", "NO_BASELINE", "UNREACHABLE")
MAX_TEXT = 600


def _text(value):
    return " ".join(str("" if value is None else value).split())[:MAX_TEXT]


def parse_output(host, stdout, stderr="", rc=None) -> dict:
    """What ``wireup-check --json`` printed on a node, as a dict; an output that is not its JSON
    (wireup-check missing, a crash) is an ERROR result naming what it said instead."""
    import json

    try:
        found = json.loads(stdout or "")
        if isinstance(found, dict):
            return found
    except ValueError:
        pass
    lines = (stderr or stdout or "").strip().splitlines()
    said = _text(lines[-1] if lines else "no output")
    line = f"wireup-check: ERROR {host}: no result from wireup-check (exit code {rc}): {said}"
    return {"verdict": "ERROR", "line": line, "errors": [line], "problems": [], "notes": []}


def gather(hosts, facts) -> dict:
    """{"results": {host: the node's result}, "lost": [hosts without one]} from each host's
    node_check_result fact (facts: {host: its variables}). Hosts that did not take part in the run
    (no wireup_node: preflight did not reach them, or --limit left them out) are not listed."""
    out = {"results": {}, "lost": []}
    for host in sorted(hosts):
        found = facts.get(host) or {}
        if isinstance(found.get("node_check_result"), dict):
            out["results"][host] = found["node_check_result"]
        elif "wireup_node" in found:
            out["lost"].append(host)
    return out


def record(host, run_id, result) -> dict:
    """One host's record from what its wireup-check printed (checkrun._public's shape)."""
    verdict = result.get("verdict") if result.get("verdict") in VERDICTS else "ERROR"
    problems = [
        {"part": _text(p.get("part")), "message": _text(p.get("message"))}
        for p in result.get("problems") or []
        if isinstance(p, dict)
    ]
    base = result.get("baseline") if isinstance(result.get("baseline"), dict) else {}
    return {
        "schema": 1,
        "kind": "quick",
        "host": host,
        "run_id": run_id,
        "verdict": verdict,
        "line": _text(result.get("line")),
        "problems": problems,
        "errors": [_text(e) for e in result.get("errors") or []],
        "notes": [_text(n) for n in result.get("notes") or []],
        "seconds": result.get("seconds") if isinstance(result.get("seconds"), int | float) else None,
        "baseline": {k: base.get(k) for k in ("run_id", "time", "taken")},
        "bench": result.get("bench") if isinstance(result.get("bench"), dict) else {},
    }


def lost_record(host, run_id, reason) -> dict:
    """A host that gave no result (unreachable, or failed before its check)."""
    line = f"wireup-check: UNREACHABLE {host}: no result ({reason or 'failed earlier in the run'})"
    return {**record(host, run_id, {"verdict": "ERROR", "line": line}), "verdict": "UNREACHABLE"}


def summary_line(rec) -> str:
    """'node1: PASS - <the check's line> (0.4 s)'."""
    said = rec["line"].split(": ", 2)[-1] if rec["line"].startswith("wireup-check: ") else rec["line"]
    took = f" ({rec['seconds']:.1f} s)" if rec.get("seconds") is not None else ""
    return f"{rec['host']}: {rec['verdict']} - {said}{took}"


def report_md(run_id, records) -> str:
    """report.md of one quick run: a table of hosts, verdicts and lines (what nodes said escaped)."""
    from .report import _md_table

    rows = [[h, r["verdict"], r["line"], r["seconds"]] for h, r in sorted(records.items())]
    failing = sorted(h for h, r in records.items() if r["verdict"] in FAILING)
    head = [
        f"# Quick node check (run {run_id})",
        "",
        f"{len(records)} node(s) checked against the baseline of their last passing bench; "
        + (f"not healthy: {', '.join(failing)}." if failing else "every node healthy."),
        "",
    ]
    return "\n".join(head + _md_table(["host", "verdict", "line", "seconds"], rows)) + "\n"


def store(results_dir, run_id, gathered, lost_reasons=None):
    """Write the run: (run id, run folder, {host: record}). gathered: gather()'s dict;
    lost_reasons: {host: why} (Ansible's answer for a node it cannot reach)."""
    run_id, run_dir = results.reserve_run(results_dir, run_id, kind="quick")
    records = {h: record(h, run_id, r) for h, r in gathered["results"].items()}
    for host in gathered["lost"]:
        records[host] = lost_record(host, run_id, (lost_reasons or {}).get(host, ""))
    for host, rec in records.items():
        if not validate.is_inventory_host(host):
            raise ValueError(f"host name {host!r} cannot be a file name")
        atomicfile.write_json(os.path.join(run_dir, f"{host}.json"), rec, exclusive=True)
    atomicfile.write_text(os.path.join(run_dir, "report.md"), report_md(run_id, records), exclusive=True)
    return run_id, run_dir, records
