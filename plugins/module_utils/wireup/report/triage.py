"""The bench report's first screen at any fleet size (issue 39): what failed, each node named with
its finding, and which nodes the report shows in detail (their tables) and draws (their plots).

report/assemble.py puts failed_sections first, right after the run's counts: at 1,024 nodes the
few bad ones must be read without scrolling through a thousand good ones. A fleet of at most
SMALL_FLEET nodes keeps every node's detail and plots (the testbed's 3 nodes read as before);
above it, the nodes that did not PASS get their detail, and the worst PLOTTED_HOSTS of them their
plots (a node's plots cost about a second of CPU each on a loaded 2-core machine:
docs/performance.md, issue 39). bench_report_detail (judge/bench_settings.REPORT_DETAIL) chooses.
"""

from __future__ import annotations

import collections
import json

from ..capability import gpu_trial_report
from ..judge.bench_settings import REPORT_DETAIL
from ..render.markdown import fmt

SMALL_FLEET = 16
PLOTTED_HOSTS = 3
FINDINGS_NAMED = 2
MESSAGE_CHARS = 200
NAMES_LISTED = 8
# Worst first: a node that could not be judged, then one that was not reached, FAIL, WARN.
_RANK = {"DAMAGED": 0, "UNREACHABLE": 1, "FAIL": 2, "WARN": 3}
_BAD = ("critical", "warning")


def check_detail(detail):
    """ValueError naming bench_report_detail unless detail is one of REPORT_DETAIL."""
    if detail not in REPORT_DETAIL:
        raise ValueError(f"bench_report_detail={detail!r} must be one of {', '.join(REPORT_DETAIL)}")


def failed_hosts(records):
    """Every host whose verdict is not PASS, worst first (then by name)."""
    bad = [h for h, r in records.items() if r.get("verdict", "N/A") != "PASS"]
    return sorted(bad, key=lambda h: (_RANK.get(records[h].get("verdict"), 4), h))


def everything(records, detail):
    """Whether every node gets its detail and plots: detail 'all', or 'auto' on a small fleet."""
    return detail == "all" or (detail == "auto" and len(records) <= SMALL_FLEET)


def detail_hosts(records, detail):
    """The hosts shown in detail, by name."""
    return sorted(records) if everything(records, detail) else sorted(failed_hosts(records))


def plotted_hosts(records, detail):
    """The hosts whose own plots are drawn: every detail host, or at fleet size the worst
    PLOTTED_HOSTS of those that measured something."""
    if everything(records, detail):
        return sorted(records)
    measured = [h for h in failed_hosts(records) if records[h].get("collectives") or records[h].get("torch")]
    return sorted(measured[:PLOTTED_HOSTS])


def usual_topology(records):
    """The commonest GPU link matrix of the fleet, as JSON text ('' on a small fleet: every
    node's heatmap is drawn there). A plotted node whose matrix is this one gets no heatmap: it
    would show what every node has."""
    if len(records) <= SMALL_FLEET:
        return ""
    counts = collections.Counter(_matrix_key(r) for r in records.values())
    return counts.most_common(1)[0][0] if counts else ""


def topology_drawn(record, usual):
    return not usual or _matrix_key(record) != usual


def _matrix_key(record):
    return json.dumps((record.get("topology") or {}).get("matrix") or {}, sort_keys=True)


def names(hosts):
    """'a, b, c', or '1003 nodes' past NAMES_LISTED: a sentence on the first screen stays short."""
    hosts = list(hosts)
    return ", ".join(hosts) if len(hosts) <= NAMES_LISTED else f"{len(hosts)} nodes"


# ---------------------------------------------------------------- what failed
def _part_failures(record):
    """['all_reduce FAIL 120.0/360.0 GB/s', 'torch single_node WARN', 'GPU3 FAIL']: the parts of a
    record that did not pass."""
    out = []
    for name, coll in sorted((record.get("collectives") or {}).items()):
        v = coll.get("verdict") or {}
        if v.get("verdict") in ("FAIL", "WARN"):
            out.append(
                f"{name} {v['verdict']} {fmt(v.get('measured_busbw'))}/{fmt(v.get('expected_busbw'))} GB/s"
            )
    for name, item in sorted((record.get("torch") or {}).items()):
        verdict = (item.get("verdict") or {}).get("verdict")
        if verdict in ("FAIL", "WARN"):
            out.append(f"torch {name} {verdict}")
    for gpu in (record.get("gpu_trial") or {}).get("gpus") or []:
        if gpu.get("verdict", "PASS") not in ("PASS", "N/A"):
            out.append(f"GPU{gpu.get('index')} {gpu['verdict']}")
    return out


def _findings_text(record):
    """The node's critical and warning findings, critical first, the first FINDINGS_NAMED of them
    and how many more."""
    bad = [f for f in record.get("findings") or [] if f.get("severity") in _BAD]
    bad.sort(key=lambda f: _BAD.index(f["severity"]))
    text = "; ".join(
        f"{f['severity']}: {_short(f.get('message') or f.get('code', ''))}" for f in bad[:FINDINGS_NAMED]
    )
    more = len(bad) - FINDINGS_NAMED
    return text + (f" (+{more} more in its detail)" if more > 0 else "") if bad else "-"


def _short(text):
    text = str(text)
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


def failed_rows(records):
    return [
        [host, records[host].get("verdict", "N/A"), ", ".join(_part_failures(records[host])) or "-",
         _findings_text(records[host])]
        for host in failed_hosts(records)
    ]  # fmt: skip


def _gpu_rows(records, hosts):
    """gpu_trial_report's GPU rows of the hosts' GPUs that did not pass."""
    return [
        row
        for row in gpu_trial_report.gpu_rows({h: records[h] for h in hosts})
        if row[4] not in ("PASS", "N/A")
    ]


def failed_sections(records):
    """'What failed': every node that did not PASS with what failed and its findings, worst first,
    then every GPU that did not pass; one line when nothing failed."""
    rows = failed_rows(records)
    out = [("h", (2, "What failed"))]
    if not rows:
        return [*out, ("p", f"Nothing: every node of {len(records)} passed.")]
    named = ", ".join(f"{host} {verdict}" for host, verdict, _what, _found in rows)
    out.append(("p", f"Did not pass ({len(rows)} of {len(records)}): {named}."))
    out.append(("table", (["host", "verdict", "what failed", "findings (critical, warning)"], rows)))
    gpus = _gpu_rows(records, failed_hosts(records))
    if gpus:
        header = ["GPU", "bus id", "serial", "model", "verdict", "health", "throttled"]
        out += [("p", "GPUs that did not pass:"), ("table", (header, gpus))]
    return out


def detail_note(records, detail, shown, plotted):
    """What the per-node part shows when it is not every node (None when it is)."""
    if everything(records, detail):
        return None
    return (
        f"Per-node detail below: the {len(shown)} node(s) that did not PASS of {len(records)} "
        f"(bench_report_detail: {detail}; 'all' shows every node; 'auto' shows every node of a fleet of "
        f"at most {SMALL_FLEET}); their own plots for {len(plotted)} of them, worst first."
    )


def findings_by_code(records, hosts):
    """The findings of the hosts not shown in detail, one row per severity and code: how many
    nodes, the first ones named."""
    seen = collections.defaultdict(list)
    for host in hosts:
        for item in records[host].get("findings") or []:
            key = (item.get("severity", "info"), item.get("source", "topology"), item.get("code", ""))
            if not seen[key] or seen[key][-1] != host:
                seen[key].append(host)
    order = {s: i for i, s in enumerate(("critical", "warning", "info"))}
    return [
        [severity, source, code, len(found), names(found)]
        for (severity, source, code), found in sorted(
            seen.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0])
        )
    ]
