"""The bench_report role's plan (the report play on the controller): which nodes took part in the
run and what each kept for the report (gather), then every host's node data as the store judges
it (store_nodes: the run-wide settings, the nodes lost, the torch and DDP step logs read back).
results.build_record judges each host (one section per capability) and report.write_report
writes the report; this module only assembles their input.

A new capability that lands in the host record adds, here, what its role keeps on each node (a
list beside ``results`` in gather) and, in results.SECTIONS, how it is judged.
"""

from __future__ import annotations

from typing import TypedDict

from . import stepcost
from .bench import NO_DATA
from .health import finding


class ReportRun(TypedDict):
    """gather's answer: hosts (those that reached the bench role), lost (nodes lost before it),
    run_id, nodes ({host: bench.node_results' data}), torch_logs ({host: {kind: log path}}),
    multi_skipped (why the torch jobs across the group did not run, '' when they did)."""

    hosts: list[str]
    lost: list[str]
    run_id: str
    nodes: dict[str, dict]
    torch_logs: dict[str, dict]
    multi_skipped: str


class ReportPaths(TypedDict, total=False):
    md: str
    html: str
    pngs: list[str]
    plots: bool


class StoreAnswer(TypedDict):
    """What wireup_bench_store returns (its RETURN documents each)."""

    changed: bool
    run_id: str
    run_dir: str
    report: ReportPaths
    verdicts: dict[str, str]
    summary: list[str]
    failed_hosts: list[str]


def gather(group, *, name, run_ids, results, torch_logs, multi):
    """The run as the report play sees it (a ReportRun). group: the node group's hosts; run_ids,
    results, torch_logs, multi: per host of group, in its order, what the bench role kept there
    (__bench_run_id, __bench_result, __bench_torch_logs, __bench_multi; '' / None / {} where a
    host has none). A host that reached the role (it has the run id) but kept no result stopped
    midway: its data says so (bench.NO_DATA). Raises ValueError when no host reached the role."""
    kept = dict(zip(group, zip(run_ids, results, torch_logs, multi, strict=True), strict=True))
    hosts = [h for h in group if kept[h][0]]
    if not hosts:
        raise ValueError(
            f"No host of group {name} reached the bench role (all failed or unreachable, or the run was "
            "limited to other hosts): nothing to report."
        )
    first = kept[hosts[0]][3] or {}
    return {
        "hosts": hosts,
        "lost": sorted(set(first.get("lost") or []) - set(hosts)),
        "run_id": kept[hosts[0]][0],
        "nodes": {h: kept[h][1] or dict(NO_DATA) for h in hosts},
        "torch_logs": {h: kept[h][2] or {} for h in hosts},
        "multi_skipped": first.get("skipped", ""),
    }


def _multi_node_skipped(reason):
    message = f"torch benchmark across all nodes skipped: {reason}"
    return finding("warning", "bench_torch_multi_skipped", message, source="torch")


def _torch_texts(nodes, torch_logs, read):
    """Each node's torch all-reduce logs read back ({kind: text}). Only global rank 0 prints the
    group's results (or, when none did, the first host's log becomes a finding); every node that
    took part ran each of those all-reduces, so each keeps them: a GPU-less node is judged on them
    against its own last passing run (issue 12)."""
    multi = {}
    for host, given in sorted(torch_logs.items()):
        if host not in nodes:
            continue
        logs = {kind: path for kind, path in (given or {}).items() if not kind.startswith("stepcost_")}
        if logs.get("multi_node"):
            multi[host] = read(logs.pop("multi_node"))
        nodes[host]["torch"] = {kind: read(path) for kind, path in logs.items() if path}
    if multi:
        printed = [host for host, text in multi.items() if '"wireup_bench"' in text]
        owner = printed[0] if printed else sorted(multi)[0]
        for host in multi:
            nodes[host].setdefault("torch", {})["multi_node"] = multi[owner]


def _stepcost_texts(nodes, torch_logs, read):
    """The DDP step benchmark's logs (stepcost_single_node, stepcost_multi_node; issue 16)."""
    steps = {
        host: {
            kind[9:]: read(path)
            for kind, path in (given or {}).items()
            if kind.startswith("stepcost_") and path
        }
        for host, given in torch_logs.items()
        if host in nodes
    }
    for host, texts in stepcost.spread_logs(steps).items():
        if texts:
            nodes[host]["stepcost"] = texts


def store_nodes(params, read):
    """{host: node data} as results.store_run judges them, from wireup_bench_store's arguments:
    each node with the run-wide settings (thresholds, efficiency, secret_env: the report play's
    own, not the hosts' facts), the cross-node skip as a finding, lost nodes (unreachable with
    Ansible's reason, else no data), the torch and DDP step logs read back with ``read(path)``."""
    run_wide = {
        "thresholds": params["thresholds"],
        "efficiency": params.get("efficiency") or {},
        "secret_env": params.get("secret_env") or [],
    }
    nodes = {host: dict(node or {}, **run_wide) for host, node in params["nodes"].items()}
    skipped = params.get("multi_node_skipped")
    for node in nodes.values() if skipped else ():
        node["findings"] = [*node.get("findings", []), _multi_node_skipped(skipped)]
    for host, reason in sorted((params.get("lost") or {}).items()):
        nodes[host] = {"unreachable": str(reason)} if reason else dict(NO_DATA, **run_wide)
    torch_logs = params.get("torch_logs") or {}
    _torch_texts(nodes, torch_logs, read)
    _stepcost_texts(nodes, torch_logs, read)
    return nodes
