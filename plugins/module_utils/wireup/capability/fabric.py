"""The fabric capability (issue 35): the fabric run's record (build_record), its comparison with
the previous run, its report section (markdown, plot) and the store's newest fabric record
(load_fabric_record, latest_fabric). The judging of pairs is judge/fabric_run.py; launch's gate
rule is record/gate.py."""

from __future__ import annotations

import os
from typing import TypedDict

from ..core import atomicfile
from ..judge.fabric_run import group_line
from ..probe.health import finding
from ..render import markdown as render
from ..render.markdown import md_text, save_figure
from ..store import query
from ..store import results as store
from ..store.results import DamagedRecord, read_strict_json


def build_record(run_id, judged, nics):
    """The run's JSON record (results/fabric/<run id>/fabric.json)."""
    return {
        "run_id": run_id,
        "kind": "fabric",
        "reference_kind": judged.get("reference_kind"),
        "reference_gbs": judged.get("reference_gbs"),
        "pairs": judged.get("pairs", []),
        "pair_details": judged.get("pair_details", []),
        "nodes": judged.get("nodes", {}),
        "verdicts": judged.get("verdicts", {}),
        "bad": judged.get("bad", []),
        "unreachable": judged.get("unreachable", []),
        "rounds": _pair_rounds(judged.get("pairs", [])),
        "group": judged.get("group") or {},
        "group_line": group_line(judged["group"]) if judged.get("group") else "",
        "failed": judged.get("failed", {}),
        "findings": judged.get("findings", []),
        # Each node's NIC facts as gpu_topology_nics gave them (ports, interfaces, peermem, IOMMU).
        "nics": {h: f for h, f in (nics or {}).items() if f},
    }


def _confirmed_in(entry):
    """'>R' for a job confirmed in round R, '' otherwise."""
    again = entry.get("confirmation") or {}
    return f">{again['round']}" if again.get("round") else ""


def _pair_rounds(pairs):
    """The last round of the pairs, their reruns included."""
    return max([_last_round_of(p) for p in pairs] or [0])


def _last_round_of(entry):
    return ((entry.get("confirmation") or {}).get("round")) or entry.get("round") or 0


def _best(record, host):
    figures = [
        p["busbw"] for p in record.get("pairs", []) if host in p["pair"] and p.get("busbw") is not None
    ]
    return max(figures) if figures else None


def compare(current, previous, tolerance=0.10):
    """Findings against the last run: a node's usable NIC bandwidth that changed, and a node whose
    best pair figure dropped by more than ``tolerance`` against the last run where it PASSed."""
    if not previous:
        return []
    hosts = sorted(current.get("nics", {}))
    return [
        *(f for host in hosts if (f := _nic_changed(host, current, previous))),
        *(
            f
            for host in sorted(current.get("verdicts", {}))
            if (f := _pair_dropped(host, current, previous, tolerance))
        ),
    ]


def _nic_changed(host, current, previous):
    now, before = current["nics"][host], previous.get("nics", {}).get(host)
    if not before or _rails(before) == _rails(now):
        return None
    return finding(
        "warning",
        "fabric_nic_changed",
        f"{host}: usable NICs changed from {before.get('rails')} x {before.get('rail_gbps')} Gb/s "
        f"to {now.get('rails')} x {now.get('rail_gbps')} Gb/s since run {previous.get('run_id')}",
        nodes=[host],
    )


def _rails(facts):
    return facts.get("rails"), facts.get("rail_gbps")


def _pair_dropped(host, current, previous, tolerance):
    if previous.get("verdicts", {}).get(host) != "PASS":
        return None
    now, before = _best(current, host), _best(previous, host)
    if now is None or not before or now >= (1 - tolerance) * before:
        return None
    return finding(
        "warning",
        "fabric_pair_dropped",
        f"{host}: best pair busbw {now:.3g} GB/s, {100 * (1 - now / before):.0f}% below "
        f"{before:.3g} GB/s in its last passing run {previous.get('run_id')}",
        nodes=[host],
    )


def _fmt(value, spec):
    return format(value, spec) if value is not None else "n/a"


def _cell(value):
    return md_text(value).replace("|", "\\|")


def markdown(record):
    """The report section (Markdown); what nodes said is escaped (markdown.md_text)."""
    ref = record.get("reference_kind")
    judged = (
        "each pair judged against its expected busbw (NIC facts x transport efficiency)"
        if ref == "expected"
        else f"pairs judged against the median of the first round ({record.get('reference_gbs')} GB/s)"
    )
    lines = [
        f"## Fabric (run {record['run_id']})",
        "",
        f"{len(record.get('verdicts', {}))} node(s) in {record.get('rounds', 0)} round(s) of disjoint pairs; "
        f"{judged}. A node is named only when its pair with a known-good node fails twice running: "
        "such a pair (and one whose members cannot be paired again) runs once more in the next round, "
        "its confirmation, and its verdict is the confirmation's.",
        "",
        "| round | pair | busbw GB/s | reference GB/s | ratio | confirmation: round, busbw GB/s, ratio "
        "| verdict | transport |",
        "|---|---|---|---|---|---|---|---|",
        *_pair_lines(record),
    ]
    g = record.get("group") or {}
    if g:
        lines += ["", "### Whole-group run", "", md_text(group_line(g)) + "."]
    lines += ["", "| node | verdict | evidence |", "|---|---|---|"]
    for host, v in sorted(record.get("verdicts", {}).items()):
        ev = "; ".join(record.get("nodes", {}).get(host, {}).get("evidence", []))
        lines.append(f"| {_cell(host)} | {_cell(v)} | {_cell(ev)} |")
    if record.get("findings"):
        lines += ["", "Findings:", "", *(_finding_line(f) for f in record["findings"])]
    return "\n".join(lines) + "\n"


def _pair_lines(record):
    """One table row per pair: its first figure, its rerun's, the verdict and which one it used
    (each error on a row of its own), the transports NCCL used."""
    details = {(d["round"], "+".join(d["pair"])): d for d in record.get("pair_details", [])}
    lines = []
    for p in record.get("pairs", []):
        d = details.get((p["round"], "+".join(p["pair"])), {})
        kinds = sorted(
            {t.get("inter_node") or t.get("network") or "?" for t in d.get("transports", {}).values()}
        )
        first = p.get("first") or p
        ref_gbs = p.get("reference_gbs") or record.get("reference_gbs")
        lines.append(
            f"| {p['round']} | {_cell(' + '.join(p['pair']))} | "
            f"{_fmt(first.get('busbw'), '.3g')} | {_fmt(ref_gbs, '.3g')} | "
            f"{_fmt(first.get('ratio'), '.2f')} | {_rerun_cell(p)} | {_verdict_cell(p)} | "
            f"{_cell(', '.join(kinds) if kinds else d.get('backend') or 'n/a')} |"
        )
        for what, figure in (("error", first), ("confirmation's error", p.get("confirmation") or {})):
            if figure.get("error"):
                lines.append(f"|  | {what}: {_cell(figure['error'][:200])} |  |  |  |  |  |  |")
    return lines


def _rerun_cell(p):
    """The confirmation's round, figure and ratio; or why there is none ('' for a pair that passed)."""
    again = p.get("confirmation")
    if again:
        return f"{again['round']}: {_fmt(again.get('busbw'), '.3g')}, {_fmt(again.get('ratio'), '.2f')}"
    return _cell(p.get("confirmation_note") or "")


def _verdict_cell(p):
    """The verdict, marked when FAIL, and which figure it used."""
    mark = " **<-**" if p["verdict"] == "FAIL" else ""
    used = {"confirmation": " (the confirmation's)", "pending": " (confirmation next)"}.get(p.get("used"), "")
    return f"{p['verdict']}{mark}{used}"


def _finding_line(f):
    quote = f" (NCCL: {md_text(f['evidence'])})" if f.get("evidence") else ""
    return f"- {md_text(f['severity'])} {md_text(f['code'])}: {md_text(f['message'])}{quote}"


def fabric_record_problem(record):
    """What makes a stored fabric record unusable for the gate ('' when nothing)."""
    if not isinstance(record, dict):
        return f"is a JSON {type(record).__name__}, not a fabric record (an object)"
    verdicts = record.get("verdicts")
    if not isinstance(verdicts, dict) or not all(isinstance(v, str) for v in verdicts.values()):
        return "verdicts is not an object of host -> verdict"
    return _nodes_problem(record.get("nodes", {}))


def _nodes_problem(nodes):
    """nodes that is not an object of host -> state with a list of evidence strings ('' when it is)."""
    if not isinstance(nodes, dict) or not all(isinstance(n, dict) for n in nodes.values()):
        return "nodes is not an object of host -> state"
    for host, node in nodes.items():
        evidence = node.get("evidence", [])
        if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
            return f"nodes.{host}.evidence is not a list of strings"
    return ""


def load_fabric_record(path):
    """The fabric record at ``path``; FileNotFoundError when there is none, results.DamagedRecord
    naming the file and what is wrong when it cannot be used (read as the host records are:
    results.read_strict_json)."""
    record = read_strict_json(path)
    problem = fabric_record_problem(record)
    if problem:
        raise DamagedRecord(f"{path}: {problem}")
    return record


def _fabric_runs(results_dir):
    """The fabric runs' folder names, newest first (the store's one query: query.runs)."""
    return [run_id for _kind, run_id in query.runs(results_dir, ("fabric",))]


def latest_fabric(results_dir):
    """The newest fabric record ({damaged, run_id} when it cannot be read; None without one)."""
    for name in _fabric_runs(results_dir):
        try:
            return load_fabric_record(os.path.join(results_dir, "fabric", name, "fabric.json"))
        except FileNotFoundError:
            continue
        except ValueError as err:
            return {"damaged": str(err), "run_id": name}
    return None


# ------------------------------------------------------------------------------ each host's part
# A fabric run's folder keeps, beside fabric.json, each host's part of it (SLICES/HOST.json): what
# the node's textfile needs (its verdict, the pairs it took part in), so each node reads its own
# part (O(1) in the fleet) instead of the whole record (O(N) each, O(N^2) for the fleet). A part
# names the record it was cut from by the record's file (inode, size, mtime: atomicfile replaces
# the file on every write) and is used only while that file is still the record: a record
# rewritten since, a part missing or damaged, and the whole record is read (fail closed).
SLICES = "hosts"


class FabricSlice(TypedDict):
    """One host's part of a fabric record (SLICES/HOST.json), shaped as a record for
    report.metrics.fabric_families: the record's run_id and kind, the host's verdict, its pairs."""

    run_id: str
    kind: str
    host: str
    verdicts: dict
    pairs: list
    record: dict


def host_slices(record) -> dict:
    """{host: FabricSlice without ``record``} of every host with a verdict, in one pass."""
    verdicts = record.get("verdicts") or {}
    pairs = {host: [] for host in verdicts}
    for p in record.get("pairs") or []:
        for member in {str(m) for m in p.get("pair") or []}:
            if member in pairs:
                pairs[member].append(p)
    return {
        host: {
            "run_id": record.get("run_id"),
            "kind": "fabric",
            "host": host,
            "verdicts": {host: verdict},
            "pairs": pairs[host],
        }
        for host, verdict in verdicts.items()
    }


def _file_stamp(st):
    return {"ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def write_slices(run_dir, record, record_path):
    """Each host's part of ``record`` (written at ``record_path`` just before) beside it, each
    written atomically; a host whose name cannot be a file name gets none (its textfile reads
    the record)."""
    stamp = _file_stamp(os.stat(record_path))
    folder = os.path.join(run_dir, SLICES)
    os.makedirs(folder, exist_ok=True)
    for host, part in host_slices(record).items():
        if store.HOST_RE.fullmatch(host):
            atomicfile.write_json(os.path.join(folder, f"{host}.json"), dict(part, record=stamp))


def _read_slice(run_dir, name, host, st):
    """The host's part when it is the part of the record whose stat is ``st``; None otherwise."""
    if not store.HOST_RE.fullmatch(str(host)):
        return None
    try:
        part = store.read_strict_json(os.path.join(run_dir, SLICES, f"{host}.json"))
    except (OSError, ValueError):
        return None
    if not isinstance(part, dict) or part.get("record") != _file_stamp(st):
        return None
    verdicts, pairs = part.get("verdicts"), part.get("pairs")
    if part.get("run_id") != name or part.get("host") != host or not isinstance(pairs, list):
        return None
    if not isinstance(verdicts, dict) or set(verdicts) != {host}:
        return None
    return {"run_id": name, "kind": "fabric", "verdicts": verdicts, "pairs": pairs}


def latest_fabric_of(results_dir, host):
    """What latest_fabric gives, for one host's textfile: the newest fabric run's part for
    ``host`` (its slice, while it is the record's), else that run's whole record ({damaged,
    run_id} when it cannot be read); None without a fabric run."""
    for name in _fabric_runs(results_dir):
        run_dir = os.path.join(results_dir, "fabric", name)
        path = os.path.join(run_dir, "fabric.json")
        try:
            st = os.stat(path)
        except FileNotFoundError:
            continue
        except OSError:
            st = None
        part = _read_slice(run_dir, name, host, st) if st else None
        if part is not None:
            return part
        try:
            return load_fabric_record(path)
        except FileNotFoundError:
            continue
        except ValueError as err:
            return {"damaged": str(err), "run_id": name}
    return None


def plot(record, path):
    """Bar chart of the pairs' busbw and the whole-group run's (failing ones red, marked), each
    one's reference as a line.
    Returns False when there is nothing to plot or matplotlib is missing (the report says so)."""
    pairs = [p for p in record.get("pairs", []) if p.get("busbw") is not None or p.get("error")]
    g = record.get("group") or {}
    if g.get("verdict") in ("PASS", "FAIL"):
        pairs.append(dict(g, pair=[f"group of {len(g['members'])}"]))
    plt = render.pyplot() if pairs else None
    if plt is None:
        return False
    # A confirmed job's bar is the figure its verdict used: the confirmation's ("r1>2": round 1's
    # job, confirmed in round 2).
    labels = [f"r{p['round']}{_confirmed_in(p)} {'+'.join(p['pair'])}" for p in pairs]
    values = [p.get("busbw") or 0.0 for p in pairs]
    # The group has a reference of its own (or none); a pair without one has the run's median.
    refs = [
        p.get("reference_gbs")
        if "reference_kind" in p
        else p.get("reference_gbs") or record.get("reference_gbs")
        for p in pairs
    ]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(pairs) + 2), 4), dpi=100)
    colors = ["tab:red" if p["verdict"] == "FAIL" else "tab:green" for p in pairs]
    bars = ax.bar(range(len(pairs)), values, color=colors)
    for i, ref in enumerate(refs):
        if ref:
            ax.hlines(ref, i - 0.45, i + 0.45, colors="black", linestyles="dashed")
    for rect, p in zip(bars, pairs, strict=True):
        if p["verdict"] == "FAIL":
            ax.annotate(
                "FAIL", (rect.get_x() + rect.get_width() / 2, rect.get_height()), ha="center", va="bottom"
            )
    ax.set_xticks(range(len(pairs)), labels, rotation=30, ha="right")
    ax.set_ylabel("all-reduce busbw (GB/s)")
    kind = "expected" if record.get("reference_kind") == "expected" else "median of round 1"
    ax.set_title(f"Fabric pairs, run {record.get('run_id')} (dashed: reference, {kind})")
    save_figure(plt, fig, path)
    return True
