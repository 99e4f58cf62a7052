"""The bench_report role's plan (the report play on the controller): which nodes took part in the
run and what each kept for the report (gather), then every host's node data as the store judges
it (store_nodes: the run-wide settings, the nodes lost, the torch and DDP step logs read back).
host_record.build_record judges each host (one section per capability) and assemble.write_report
writes the report; this module only assembles their input.

A new capability that lands in the host record adds, here, what its role keeps on each node (a
list beside ``results`` in gather) and, in capability/registry.py, how it is judged. The GPU trial
(issue 25) comes as one fact, gpu_trial_run (the gpu_trial role's report tasks gather it in the
same play): it is judged across the run, every GPU against its peers and its own last passing run,
before the records are built (gpu_trial_run.attach); a run of the GPU trial alone (`--tags
gpu_health`/`gpu_trial`) reaches no bench role and still stores a record per host. The quick node
check (issue 26, ``bench.yml --tags quick``) is a run of its own: gather_quick takes what
node_check kept on each node (__node_check_run_id, __node_check_result) and the store writes it
under results/quick/ (kind quick), where neither a baseline nor the launch gate looks.
"""

from __future__ import annotations

import dataclasses
from typing import TypedDict

from ..capability import drift, node_check
from ..core import cyclegc, shape
from ..judge import ddp_step
from ..probe.health import finding
from ..record import gate, gpu_trial_run, host_record
from ..store import query
from .bench import NO_DATA, NodeData


class ReportRun(TypedDict):
    """gather's answer: kind (bench, or quick: gather_quick's; the store's folder), hosts (those
    that reached the bench role), lost (nodes lost before it), run_id, nodes ({host:
    bench.node_results' data}), torch_logs ({host: {kind: log path}}), multi_skipped (why the torch
    jobs across the group did not run, '' when they did)."""

    kind: str
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


@dataclasses.dataclass(frozen=True)
class Kept:
    """What the bench role kept on the hosts of the group, each a list with one entry per host in
    the group's order ('' / None / {} where a host has none): __bench_run_id, __bench_result,
    __bench_torch_logs, __bench_multi. A name the task misspells is a TypeError."""

    run_ids: list
    results: list
    torch_logs: list
    multi: list


def _trial_alone(trial):
    """The ReportRun of a run of the GPU trial alone: its run id, no bench data."""
    return {
        "kind": "bench",
        "hosts": [],
        "lost": [],
        "run_id": trial["run_id"],
        "nodes": {},
        "torch_logs": {},
        "multi_skipped": "",
    }


def gather(group, given, *, name, trial=None):
    """The run as the report play sees it (a ReportRun). group: the node group's hosts; given: Kept.
    A host that reached the role (it has the run id) but kept no result stopped midway: its data
    says so (bench.NO_DATA). trial: gpu_trial_run (gpu_trial.TrialRun), whose run id a run of the
    GPU trial alone takes. Raises ValueError when no host reached either role."""
    rows = zip(given.run_ids, given.results, given.torch_logs, given.multi, strict=True)
    kept = dict(zip(group, rows, strict=True))
    hosts = [h for h in group if kept[h][0]]
    if not hosts and (trial or {}).get("hosts"):
        return _trial_alone(trial)
    if not hosts:
        raise ValueError(
            f"No host of group {name} reached the bench or gpu_trial role (all failed or unreachable, or "
            "the run was limited to other hosts): nothing to report."
        )
    first = kept[hosts[0]][3] or {}
    return {
        "kind": "bench",
        "hosts": hosts,
        "lost": sorted(set(first.get("lost") or []) - set(hosts)),
        "run_id": kept[hosts[0]][0],
        "nodes": {h: kept[h][1] or dict(NO_DATA) for h in hosts},
        "torch_logs": {h: kept[h][2] or {} for h in hosts},
        "multi_skipped": first.get("skipped", ""),
    }


# A host that reached the quick check's play but kept no result (it failed on the way).
NO_CHECK = {
    "failed": True,
    "skipped": (
        "no quick-check result: the host failed or became unreachable during the check (see the play output)"
    ),
}


def gather_quick(group, *, name, run_ids, results, reached, slurm=None):
    """A quick check's run as the report play sees it (a ReportRun of kind quick). group: the
    node group's hosts; run_ids, results, reached: per host of group, in its order, what node_check
    kept there (__node_check_run_id, __node_check_result; '' / {} where it has none) and whether
    preflight reached it in this run (wireup_node set). A host preflight reached that never got
    the run id was lost before the check. slurm: the quick check's answer through Slurm
    (node_check_slurm.SlurmQuick, issue 39) when it ran so: each host's result is its, not the
    host's own fact (the hosts ran no task). Raises ValueError when no host reached the check."""
    if slurm:
        results = [slurm["results"].get(h) or {} for h in group]
    kept = dict(zip(group, zip(run_ids, results, reached, strict=True), strict=True))
    hosts = [h for h in group if kept[h][0]]
    if not hosts:
        raise ValueError(
            f"No host of group {name} reached the quick check (all failed or unreachable, or the run was "
            "limited to other hosts): nothing to report."
        )
    return {
        "kind": node_check.KIND,
        "hosts": hosts,
        "lost": [h for h in group if kept[h][2] and not kept[h][0]],
        "run_id": kept[hosts[0]][0],
        "nodes": {h: {"node_check": kept[h][1]} if kept[h][1] else dict(NO_CHECK) for h in hosts},
        "torch_logs": {},
        "multi_skipped": "",
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
    for host, texts in ddp_step.spread_logs(steps).items():
        if texts:
            nodes[host]["stepcost"] = texts


def _node_data(node, typed, run_wide):
    """One node's data as the store judges it: what it kept, checked against its one typed
    definition (bench.NodeData, or node_check.QuickNode in a quick run) and cut to the keys that
    definition has (a node cannot send the store's own: unreachable, damaged, gpu_trial, ...),
    with the run-wide settings. A node whose data is not of that shape is DAMAGED (``damaged``:
    why, in one line): the store records it so, alone (host_record.damaged_record)."""
    problem = shape.node_problem(node, typed)
    if problem:
        what = "quick check" if typed is node_check.QuickNode else "bench data"
        return dict(run_wide, damaged=f"its {what}: {problem}")
    return dict({k: v for k, v in node.items() if k in shape.keys(typed)}, **run_wide)


def _drift(nodes, node_facts):
    """The run's drift (capability/drift.py) over the hosts that sent data and whose wireup_node
    came (node_facts: {host: wireup_node}), each host's part in its node data; as they were
    when no facts came (a quick run, a store without them)."""
    judged = {h: f for h, f in node_facts.items() if h in nodes and "unreachable" not in nodes[h]}
    return drift.attach(nodes, judged) if judged else nodes


def store_nodes(params, read):
    """{host: node data} as host_record.store_run judges them, from wireup_bench_store's arguments:
    each node with the run-wide settings (thresholds, efficiency, secret_env: the report play's
    own, not the hosts' facts), the cross-node skip as a finding, lost nodes (unreachable with
    Ansible's reason, else no data), the torch and DDP step logs read back with ``read(path)``,
    and the GPU trial (params' gpu_trial) judged across the run against each GPU's last passing
    run in results_dir (gpu_trial_run.attach). A node whose data is not of its typed shape is marked
    DAMAGED (``damaged``) instead of stopping the run: host_record.store_run records it so, alone."""
    run_wide = {
        "thresholds": params["thresholds"],
        "efficiency": params.get("efficiency") or {},
        "secret_env": params.get("secret_env") or [],
    }
    typed = node_check.QuickNode if params.get("kind") == node_check.KIND else NodeData
    nodes = {host: _node_data(node, typed, run_wide) for host, node in params["nodes"].items()}
    skipped = params.get("multi_node_skipped")
    for node in nodes.values() if skipped else ():
        node["findings"] = [*node.get("findings", []), _multi_node_skipped(skipped)]
    for host, reason in sorted((params.get("lost") or {}).items()):
        no_data = NO_CHECK if params.get("kind") == node_check.KIND else NO_DATA
        nodes[host] = {"unreachable": str(reason)} if reason else dict(no_data, **run_wide)
    torch_logs = params.get("torch_logs") or {}
    _torch_texts(nodes, torch_logs, read)
    _stepcost_texts(nodes, torch_logs, read)
    nodes = _drift(nodes, params.get("node_facts") or {})
    trial = params.get("gpu_trial") or {}
    if not trial.get("nodes"):
        return nodes  # the GPU trial did not run (`--tags bench`), or bench_report runs without it
    return gpu_trial_run.attach(params["results_dir"], params["run_id"], nodes, trial, run_wide=run_wide)


def store(params, read):
    """wireup_bench_store's run stored: (run_id, run_dir, {host: record}) of store_nodes' node data
    judged and written (host_record.store_run) and entered in the store's index (gate.index_run),
    each earlier record read once (query.reading_once: the GPU trial's baselines and each host's
    baseline read the same newest records), with the cyclic garbage collector paused (cyclegc: it
    makes no cycles, and each collection it triggered walked every record read and every node's
    data: 28 % of the step's CPU at 256 nodes)."""
    with cyclegc.paused():
        with query.reading_once():
            nodes = store_nodes(params, read)
            kind = params.get("kind") or "bench"
            run_id, run_dir, records = host_record.store_run(
                params["results_dir"], params["run_id"], nodes, kind
            )
        gate.index_run(params["results_dir"], kind, run_id, records)
    return run_id, run_dir, records
