"""The fabric bench's judgement, record, history and report section (pure Python, stdlib only).

The bench role runs the pairs that :func:`pairwise.plan` asks for (one two-node torchrun job per
pair, NCCL_DEBUG=INFO); after each round the controller hands every pair's logs here:

* :func:`pair_result` reads one pair's logs: busbw at the largest size from the benchmark's JSON
  line (bench_output.parse_torch), what NCCL chose on each node (ncclinfo.parse_nccl_info), the
  transport findings, and the expectation for that pair (nics.expected_busbw from both nodes'
  NIC facts and the transport NCCL really used). CPU/gloo pairs have no expectation: gloo's speed
  on CPU tensors depends on the CPUs more than on the link, so they are judged against the median.
* :func:`judge` runs the planner over all results so far and adds the node findings (NIC facts,
  GPU-NIC closeness, nodes that disagree on rates, MTUs or transport).
* :func:`build_record`, :func:`compare` (history: a changed NIC rate or a node whose best pair
  dropped against its last passing run) and :func:`markdown` make what the store writes.
* :func:`refusals` is launch's rule: the nodes a host record refuses (record/gate.py: per capability,
  its newest record FAILed or cannot be read) or the latest fabric run named bad.

The whole-group run after the pairs goes through the same :func:`pair_result` (its members in
``pair``, ``kind="group"``); :func:`judge` keeps its verdict apart (``group``): it names no node,
but a FAILed group fails the bench on its members (``failed`` in the record) and is a finding.

A failing job is rerun once before it counts (judge/pairwise.py, "Confirmation before naming"): the rerun
comes back as another result of the same members with ``confirms`` (the round it reruns); the
record keeps both figures per pair and for the group (``first``, ``confirmation``, ``used``) and
the report section shows both.
"""

from __future__ import annotations

import dataclasses
from typing import TypedDict

from ..probe import bench_output, ncclinfo
from ..probe import nics as probe_nics
from ..probe.health import finding
from ..report.assemble import md_text
from . import bandwidth, pairwise


def _busbw(text):
    """(busbw GB/s at the largest size, size, backend) from the benchmark's JSON lines."""
    try:
        parsed = bench_output.parse_torch(text or "")
    except ValueError:
        return None, None, None
    rows = [r for r in parsed.get("rows", []) if (r.get("in_place") or {}).get("busbw") is not None]
    if not rows:
        return None, None, (parsed.get("config") or {}).get("backend")
    top = max(rows, key=lambda r: r.get("size") or 0)
    return float(top["in_place"]["busbw"]), top.get("size"), (parsed.get("config") or {}).get("backend")


def _transport_summary(info):
    return {
        "network": info.get("network"),
        "inter_node": info.get("inter_node"),
        "gdrdma": info.get("gdrdma"),
        "ib_devices": [f"{d['device']}:{d['port']}/{d['link_layer']}" for d in info.get("ib_devices", [])],
        "socket_interfaces": [s["name"] for s in info.get("socket_interfaces", [])],
        "intra_node": info.get("intra_node", []),
        "channels": info.get("channels"),
        "ib_no_device": info.get("ib_no_device"),
        "evidence": info.get("evidence", {}).get("inter_node") or info.get("evidence", {}).get("network"),
    }


@dataclasses.dataclass(frozen=True)
class NodeFacts:
    """What the controller knows of the group's nodes, for pair_result and judge: nics {host:
    gpu_topology_nics}, topologies {host: gpu_topology_facts}, gpus_per_node {host: ranks it runs},
    intra_node_gbs {host: the node's intra-node expected busbw} (bounds a pair's expectation)."""

    nics: dict | None = None
    topologies: dict | None = None
    gpus_per_node: dict | None = None
    intra_node_gbs: dict | None = None


def pair_result(round_no, pair, logs, launch, *, kind="pair", confirms=0, **facts):
    """Judge-ready result of one pair's job (or of the whole-group run: ``kind="group"``, its
    members in ``pair``; the expectation is then the group's, from every member's facts).

    logs: {host: log text or None}; launch: {host: {ok, reason}} (the launch role's verdict as each
    member saw it); confirms: the round whose failing figure this job reruns (0: a first figure);
    facts: NodeFacts' fields by name."""
    facts = NodeFacts(**facts)
    busbw, size, backend = _job_busbw(pair, logs)
    transports, findings = _transports(pair, logs, facts.nics or {})
    errors = [
        f"{h}: {v.get('reason') or 'failed'}" for h, v in sorted(launch.items()) if not v.get("ok", False)
    ]
    error = "; ".join(dict.fromkeys(errors))
    if not error and busbw is None:
        error = "the job ended without a bandwidth line (see its logs)"
    return {
        "round": round_no,
        "pair": sorted(pair),
        "kind": kind,
        "confirms": int(confirms or 0),
        "busbw": busbw if not error else None,
        "measured_busbw": busbw,
        "size": size,
        "backend": backend,
        "error": error,
        "expected": _pair_expectation(pair, backend, transports, facts),
        "transports": transports,
        "findings": findings,
    }


def _job_busbw(pair, logs):
    """(busbw, size, backend) of the first member (sorted) whose log has the figure."""
    for host in sorted(pair):
        value, size, backend = _busbw(logs.get(host))
        if value is not None:
            return value, size, backend
    return None, None, None


def _transports(pair, logs, nics):
    """({host: what NCCL used there}, the transport findings) from each member's NCCL INFO log."""
    transports, findings = {}, []
    for host in sorted(pair):
        info = _nccl_info(logs.get(host))
        if info:
            transports[host] = _transport_summary(info)
            findings += [
                dict(f, nodes=[host]) for f in ncclinfo.transport_findings(info, nics.get(host), host=host)
            ]
    return transports, findings


def _nccl_info(text):
    """ncclinfo.parse_nccl_info of a member's log; None without a log or an INFO line to read."""
    try:
        return ncclinfo.parse_nccl_info(text) if text else None
    except ValueError:
        return None


def _pair_expectation(pair, backend, transports, facts):
    """nics.expected_busbw for the job from its members' NIC facts and the transport NCCL used
    (the interface it names, for sockets); None for gloo or a member without facts."""
    nics = facts.nics or {}
    if backend != "nccl" or not all(nics.get(h) for h in pair):
        return None
    used = next((t["inter_node"] for t in transports.values() if t.get("inter_node")), None)
    gdr = next((t["gdrdma"] for t in transports.values() if t.get("gdrdma") is not None), None)
    ranks = min((facts.gpus_per_node or {}).get(h) or 1 for h in pair)
    intra = [v for h, v in (facts.intra_node_gbs or {}).items() if h in pair and v and ranks > 1]
    members = {h: nics[h] for h in pair}
    if used == "socket":
        # The expectation follows the interface NCCL used, where its log names one.
        members = {
            h: probe_nics.on_interface(f, (transports.get(h, {}).get("socket_interfaces") or [None])[0])
            for h, f in members.items()
        }
    return probe_nics.expected_busbw(
        members,
        ranks,
        intra_node_gbs=min(intra) if intra else None,
        transport=used if used in ("ib", "socket") else None,
        gdr=gdr,
    )


def node_findings(nics, topologies=None):
    """Findings from the facts alone: each node's NIC findings, GPU-NIC closeness, cross-node."""
    out = []
    for host, facts in sorted((nics or {}).items()):
        if facts:
            out += _host_findings(host, facts, (topologies or {}).get(host))
    present = {h: f for h, f in (nics or {}).items() if f}
    if len(present) >= 2:
        out.extend(probe_nics.cross_node_findings(present))
    return out


def judge(nodes, pair_results, *, unreachable=(), pass_ratio=0.7, max_rounds=6, **facts):
    """The planner over every pair result so far, plus the findings. Returns pairwise.plan's dict
    with ``pair_details`` (the results as given), ``findings`` and ``verdicts`` {host: PASS|FAIL|
    UNREACHABLE|N/A} (N/A: undetermined). facts: NodeFacts' fields by name (nics, topologies)."""
    facts = NodeFacts(**facts)
    pair_results = list(pair_results)
    p = pairwise.plan(
        nodes,
        [_planner_result(r) for r in pair_results],
        expected_gbs=_expectations(pair_results),
        pass_ratio=pass_ratio,
        unreachable=unreachable,
        max_rounds=max_rounds,
        cpu_bound=cpu_bound(pair_results),
    )
    if p.get("errors"):
        return p
    findings = node_findings(facts.nics, facts.topologies)
    for r in pair_results:
        findings.extend(r.get("findings", []))
    # The whole-group run meets the same NCCL choices as the pairs did: say each one once.
    findings = list({(f.get("code"), f.get("message")): f for f in findings}.values())
    verdict = {"good": "PASS", "bad": "FAIL", "unreachable": "UNREACHABLE"}
    p["verdicts"] = {h: verdict.get(s["state"], "N/A") for h, s in p["nodes"].items()}
    p["pair_details"] = pair_results
    p["findings"] = findings + _verdict_findings(p)
    p["failed"] = failures(p)
    return p


def _planner_result(result):
    """What pairwise.plan reads of a pair_result."""
    return {
        "round": result["round"],
        "pair": result["pair"],
        "kind": result.get("kind", "pair"),
        "confirms": result.get("confirms") or 0,
        "busbw": result["busbw"],
        "error": result["error"],
    }


def cpu_bound(pair_results):
    """Whether the run's figures are CPU ones: every job that said its backend said gloo (torch on
    CPU nodes). Their speed follows the CPU each rank gets (judge/pairwise.py: the group's CPU share)."""
    backends = {r.get("backend") for r in pair_results if r.get("backend")}
    return backends == {"gloo"}


def _host_findings(host, facts, topo):
    """A node's NIC findings and, with its topology, its GPU-NIC closeness ones, naming it."""
    found = list(facts.get("findings", []))
    if topo and topo.get("nics"):
        found += probe_nics.gpu_nic_closeness(topo, facts)["findings"]
    return [dict(f, nodes=[host], message=f"{host}: {f['message']}") for f in found]


def _expectations(pair_results):
    """{pair key: expected GB/s} when every pair has an expectation (else None: the median
    judges); the whole-group run's joins them then, and without one the group is judged against
    the slowest passing pair."""
    pairs_only = [r for r in pair_results if r.get("kind", "pair") == "pair"]
    if not pairs_only or not all((r.get("expected") or {}).get("expected_gbs") for r in pairs_only):
        return None
    return {
        pairwise.pair_key(r["pair"]): r["expected"]["expected_gbs"]
        for r in pair_results
        if (r.get("expected") or {}).get("expected_gbs")
    }


def _verdict_findings(judged):
    """fabric_bad_node, fabric_unreachable and fabric_group_failed, each naming its nodes."""
    out = [
        finding(
            "critical",
            "fabric_bad_node",
            f"{host}: every pair with it failed, with a known-good node twice running: "
            + "; ".join(judged["nodes"][host]["evidence"]),
            nodes=[host],
        )
        for host in judged["bad"]
    ]
    out += [
        finding("critical", "fabric_unreachable", f"{host}: unreachable, not tested", nodes=[host])
        for host in judged["unreachable"]
    ]
    g = judged["group"]
    if g["verdict"] == "FAIL":
        out.append(
            finding(
                "critical",
                "fabric_group_failed",
                f"{group_line(g)}; its nodes passed their pairs or were undecided: look at what only the "
                "whole group shares (a switch uplink, a node slowed by more peers) or at the job's error",
                nodes=list(g["members"]),
            )
        )
    return out


def group_line(group):
    """One sentence on the whole-group run: its first figure, then its confirmation's (the
    verdict's) or why there is none."""
    who = f"whole-group run of {len(group['members'])} node(s) ({', '.join(group['members'])})"
    first = group.get("first")
    if group["verdict"] in ("NOT RUN", "PENDING") and not first:
        return f"{who}: {group['verdict'].lower()}" + (f" ({group['note']})" if group.get("note") else "")
    first = first or group  # a record written before confirmation had its figure at the top
    line = f"{who} round {first.get('round')}: {_figure_said(first)}{_group_against(group)}"
    line += f"{_ratio_said(first)} {first['verdict']}{_error_said(first)}"
    again = group.get("confirmation")
    if again:
        line += (
            f"; confirmation round {again['round']}: {_figure_said(again)}{_ratio_said(again)} "
            f"{again['verdict']}{_error_said(again)} (the verdict's)"
        )
    elif group.get("confirmation_note"):
        line += f"; {group['confirmation_note']}"
    return line


def _figure_said(figure):
    return f"{figure['busbw']:.3g} GB/s" if figure.get("busbw") is not None else "no figure"


def _ratio_said(figure):
    return f", ratio {figure['ratio']:.2f}" if figure.get("ratio") is not None else ""


def _error_said(figure):
    return f": {figure['error']}" if figure.get("error") else ""


def _group_against(group):
    """' against N GB/s (what N is)', '' without a reference; on CPU, the share it was scaled by."""
    ref = {"expected": "its expectation", "slowest_pair": "the slowest passing pair"}.get(
        group.get("reference_kind"), "no reference"
    )
    share = group.get("cpu_share")
    if share is not None and share < 1:
        ref += f" x {share:.2f}, a rank's CPU share in the group against that pair's round"
    return f" against {group['reference_gbs']:.3g} GB/s ({ref})" if group.get("reference_gbs") else ""


def summary_line(record, md_path):
    """The play's one line on the run: each node's verdict, the rounds, the bad and unreachable
    nodes, the whole-group run, the report."""
    verdicts = ", ".join(f"{host} {verdict}" for host, verdict in record.get("verdicts", {}).items())
    bad = f": bad {', '.join(record['bad'])}" if record.get("bad") else ""
    lost = f"; unreachable {', '.join(record['unreachable'])}" if record.get("unreachable") else ""
    rounds = f"{record.get('rounds', 0)} round(s)"
    return f"fabric: {verdicts} in {rounds}{bad}{lost}; {record.get('group_line', '')}; report {md_path}"


def job_results(results, read):
    """{(round, members, kind): {logs: {host: text}, launch: {host: {ok, reason}}, confirms}} from
    the nodes' results (bench_fabric.result); read(path) gives a log's text (None when
    unreadable). A member that never reported (lost mid-round) failed its part of the job."""
    jobs = {}
    for r in results:
        key = (int(r.get("round") or 0), tuple(sorted(r.get("pair") or [])), r.get("kind") or "pair")
        job = jobs.setdefault(key, {"logs": {}, "launch": {}, "confirms": int(r.get("confirms") or 0)})
        host = r.get("host")
        if host:
            job["logs"][host] = read(r.get("log"))
            job["launch"][host] = {"ok": bool(r.get("ok")), "reason": r.get("reason") or ""}
    for (_round, members, _kind), job in jobs.items():
        for host in members:
            job["launch"].setdefault(
                host, {"ok": False, "reason": "no result (unreachable or failed during the round)"}
            )
    return jobs


def intra_node_expectations(topologies):
    """{host: the node's intra-node expected all-reduce busbw, or None}: bounds a pair's figure."""
    out = {}
    for host, topo in (topologies or {}).items():
        try:
            out[host] = bandwidth.expected_busbw(topo, "all_reduce")["expected_busbw"] if topo else None
        except (KeyError, TypeError, ValueError):
            out[host] = None
    return out


def judge_round(params, read):
    """wireup_fabric_bench's judgement: every job's result so far (pair_result), judged (judge).
    params: the module's nodes, results, unreachable, nics, topologies, ranks, pass_ratio, max_rounds."""
    facts = {"nics": params["nics"], "gpus_per_node": params["ranks"]}
    intra = intra_node_expectations(params["topologies"])
    pair_results = [
        pair_result(
            round_no,
            list(members),
            job["logs"],
            job["launch"],
            kind=kind,
            confirms=job["confirms"],
            intra_node_gbs=intra,
            **facts,
        )
        for (round_no, members, kind), job in sorted(job_results(params["results"], read).items())
    ]
    return judge(
        params["nodes"],
        pair_results,
        unreachable=params["unreachable"],
        nics=params["nics"],
        topologies=params["topologies"],
        pass_ratio=params["pass_ratio"],
        max_rounds=params["max_rounds"],
    )


def failures(judged):
    """{host: why the bench fails it}: a node named bad (its evidence), and each member of a
    whole-group run that FAILed (the group's line)."""
    out = {}
    for host, verdict in sorted(judged.get("verdicts", {}).items()):
        if verdict == "FAIL":
            out[host] = "named bad: " + "; ".join(judged["nodes"][host]["evidence"])
    g = judged.get("group") or {}
    if g.get("verdict") == "FAIL":
        for host in g["members"]:
            out[host] = "; ".join(x for x in (out.get(host), group_line(g)) if x)
    return out


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
    """The report section (Markdown); what nodes said is escaped (assemble.md_text)."""
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


def refusals(hosts, failures=None, fabric_record=None):
    """Launch's rule: {host: reason} for each host with a record that refuses it (``failures``
    {host: [gate.Failure]} from :func:`latest_verdicts`: per capability, its newest record FAILed
    or a newer record cannot be read) or whose latest fabric verdict is FAIL (a damaged fabric
    record refuses every host: it cannot tell which nodes it failed). A gate that cannot read a
    verdict refuses: it never fails open."""
    rec = fabric_record or {}
    reasons = {host: _refusal(host, (failures or {}).get(host) or [], rec) for host in hosts}
    return {host: reason for host, reason in reasons.items() if reason}


def _refusal(host, failures, rec):
    """Why launch must refuse host ('' when it need not): its host records' failures (each one's
    reason), else the fabric record's."""
    if failures:
        return "; ".join(f["reason"] for f in failures)
    return _fabric_refusal(host, rec)


def _fabric_refusal(host, rec):
    """Why the fabric record refuses host: it cannot be read, or it named host bad ('' when neither)."""
    if rec.get("damaged"):
        return (
            f"latest fabric record cannot be read: {rec['damaged']}; it cannot say whether {host} "
            "passed: rerun bench.yml --tags fabric (or move the file away)"
        )
    if rec.get("verdicts", {}).get(host) == "FAIL":
        ev = "; ".join(rec.get("nodes", {}).get(host, {}).get("evidence", []))
        return f"fabric run {rec.get('run_id', '?')} named {host} bad: {ev}"
    return ""


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
    from ..store.results import DamagedRecord, read_strict_json

    record = read_strict_json(path)
    problem = fabric_record_problem(record)
    if problem:
        raise DamagedRecord(f"{path}: {problem}")
    return record


def latest_verdicts(results_dir, hosts):
    """(failures, fabric_record) from the controller's store, for :func:`refusals`: failures
    {host: [gate.Failure]} for each host that a host record refuses (gate.host_failures: per
    capability, the newest bench or quick record that measured it FAILed, or a record newer than
    one capability's newest readable record cannot be read, naming the file) and the newest fabric
    run that has a record (results/fabric/<run>/fabric.json; ``{"damaged": why}`` when it cannot
    be read). A host never benchmarked has no failures; the gate never reads past a damaged record."""
    from ..record import gate
    from ..store import results as store

    runs = gate.store_runs(store, results_dir)
    failures = {host: gate.host_failures(store, results_dir, runs, host) for host in hosts}
    return {h: f for h, f in failures.items() if f}, latest_fabric(results_dir)


def _fabric_runs(results_dir):
    """The fabric runs' folder names, oldest first."""
    import os

    from ..store import results as store

    try:
        names = os.listdir(os.path.join(results_dir, "fabric"))
    except OSError:
        return []
    return sorted((d for d in names if store.RUN_ID_RE.fullmatch(d)), key=store._run_sort_key)


def latest_fabric(results_dir):
    """The newest fabric record ({damaged, run_id} when it cannot be read; None without one)."""
    import os

    for name in reversed(_fabric_runs(results_dir)):
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
    import os

    from ..core import atomicfile
    from ..store import results as store

    stamp = _file_stamp(os.stat(record_path))
    folder = os.path.join(run_dir, SLICES)
    os.makedirs(folder, exist_ok=True)
    for host, part in host_slices(record).items():
        if store._HOST_RE.fullmatch(host):
            atomicfile.write_json(os.path.join(folder, f"{host}.json"), dict(part, record=stamp))


def _read_slice(run_dir, name, host, st):
    """The host's part when it is the part of the record whose stat is ``st``; None otherwise."""
    import os

    from ..store import results as store

    if not store._HOST_RE.fullmatch(str(host)):
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
    import os

    for name in reversed(_fabric_runs(results_dir)):
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
    from ..report.assemble import _pyplot, save_figure

    pairs = [p for p in record.get("pairs", []) if p.get("busbw") is not None or p.get("error")]
    g = record.get("group") or {}
    if g.get("verdict") in ("PASS", "FAIL"):
        pairs.append(dict(g, pair=[f"group of {len(g['members'])}"]))
    plt = _pyplot() if pairs else None
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
