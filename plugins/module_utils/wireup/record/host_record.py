"""Host records (layer record/): their assembly from a node's data through the capabilities'
sections (build_record, SECTIONS), their problem check (record_problem), the comparison with the
last passing run (compare, baseline_of), their redaction (redact_record) and storing a run
(store_run). The store itself (run ids, paths, strict JSON, the run order) is store/results.py;
a record is read through load_record here, which adds record_problem to the store's read.
"""

from __future__ import annotations

import dataclasses
import os

from ..capability import context, links
from ..capability import registry as capability_registry
from ..capability.registry import CAPABILITIES
from ..core import redact, shape
from ..judge import bandwidth, benchenv
from ..probe.health import finding
from ..store import query
from ..store.results import (
    DAMAGED,
    HOST_RE,
    KINDS,
    RECORD_SCHEMA,
    DamagedRecord,
    baseline_part,
    bench_dir,
    host_path,
    is_gpu_less,
    read_record,
    record_bytes,
    reserve_run,
    write_record,
)


def load_record(path):
    """The host record stored at ``path``, checked (results.read_record with record_problem):
    FileNotFoundError when there is none, DamagedRecord naming the file and what is wrong."""
    return read_record(path, record_problem)


def read_host(results_dir, run_id, host, kind="bench"):
    """One host's record of one run of this kind (load_record: FileNotFoundError, DamagedRecord;
    ValueError for a run id, host name or kind that cannot be a path in the store)."""
    return load_record(host_path(results_dir, run_id, host, kind))


def read_run(results_dir, run_id):
    """{host: record} of one run."""
    folder = os.path.join(bench_dir(results_dir), run_id)
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            out[name[:-5]] = load_record(os.path.join(folder, name))
    return out


def baseline_of(results_dir, host, before_run_id=None):
    """((run_id, record) of the newest run before `before_run_id` where `host` PASSed, or None;
    [findings]): a damaged record on the way is never a baseline, and each one is a warning
    naming its file and what is wrong (the run goes on)."""
    damaged = []
    for _kind, run_id, _host, found in query.records(
        results_dir, record_problem, host=host, before=before_run_id
    ):
        if isinstance(found, ValueError):
            damaged.append(_damaged_finding(found))
        elif found.get("verdict") == "PASS":
            return (run_id, found), damaged
    return None, damaged


def last_passing(results_dir, host, before_run_id=None):
    """(run_id, record) of the newest run before `before_run_id` where `host` PASSed, or None."""
    return baseline_of(results_dir, host, before_run_id)[0]


def _damaged_finding(err):
    return _finding(
        "warning",
        "baseline_record_damaged",
        f"earlier record {err}; not used as a baseline (move it away or delete it)",
    )


_RECORD_VERDICTS = ("PASS", "WARN", "FAIL", "N/A", "UNREACHABLE", DAMAGED)


# The host's parts of a record that later runs read (the baseline comparison, the gate), by type;
# each capability's part (capability/registry.py) is an object too.
_HOST_PARTS = {
    "topology": dict,
    "baseline": dict,
    "env": dict,
    "versions": dict,
    "findings": list,
}


def _record_parts(registry):
    return {**_HOST_PARTS, **dict.fromkeys(capability_registry.record_parts(registry), dict)}


def _shape_problem(record, registry):
    """A part of the wrong type, or a list part that does not hold objects ('' when none)."""
    for key, kind in _record_parts(registry).items():
        if record.get(key) is not None and not isinstance(record[key], kind):
            return f"{key} is {context.type_name(record[key])}, not {context.type_name(kind())}"
    if problem := _topology_shape_problem(record.get("topology") or {}):
        return problem
    if not all(isinstance(f, dict) for f in record.get("findings") or []):
        return "findings is not a list of objects"
    return ""


def _topology_shape_problem(topology):
    """topology.gpus or topology.links that is not a list of objects ('' when both are)."""
    for key in ("gpus", "links"):
        items = topology.get(key)
        if items is not None and (not isinstance(items, list) or not all(isinstance(i, dict) for i in items)):
            return f"topology.{key} is not a list of objects"
    return ""


def _kind_problem(record):
    """Not an object, or no known verdict ('' when neither)."""
    if not isinstance(record, dict):
        return f"is {context.type_name(record)}, not a host record (an object)"
    if record.get("verdict") not in _RECORD_VERDICTS:
        return f"verdict is {record.get('verdict')!r}, not one of {', '.join(_RECORD_VERDICTS)}"
    if record["verdict"] == DAMAGED and not isinstance(record.get("damaged"), str):
        return "a DAMAGED record without its reason (damaged is not a string)"
    return ""


def record_problem(record, *, registry=CAPABILITIES):
    """What makes a stored host record unusable ('' when nothing): not an object, no known
    verdict, a part of the wrong type, then each capability's problem check in the registry's
    order (a figure that is not a finite number or above what its link can carry, a GPU figure
    that cannot be real, ...)."""
    return _kind_problem(record) or _shape_problem(record, registry) or _capability_problem(record, registry)


def _capability_problem(record, registry):
    for cap in registry:
        found = cap.problem(record) if cap.problem else ""
        if found:
            return found
    return ""


def _finding(severity, code, message, gpus=()):
    """A finding of the comparison with the last passing run (source baseline)."""
    return finding(severity, code, message, gpus, source="baseline")


def _gpu_key(gpu):
    return gpu.get("uuid") or f"index {gpu.get('index')}"


def _drop(label, cur, base, *, size, tolerance, base_run):
    if cur is None or not base:
        return None
    drop = 1.0 - cur / base
    if drop <= tolerance:
        return None
    message = (
        f"{label}: busbw {cur:.1f} GB/s at {bandwidth.human_bytes(size)} is {drop * 100:.0f}% below "
        f"{base:.1f} GB/s of the last passing run {base_run} (tolerance {tolerance * 100:.0f}%)"
    )
    return _finding("critical", "baseline_busbw_drop", message)


def compare(current, baseline, tolerance=bandwidth.DEFAULT_THRESHOLDS["tolerance"]):
    """Findings of `current` against `baseline` (both host records); [] when nothing changed."""
    if not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 1:
        raise ValueError(f"bench_baseline_tolerance must be a fraction in [0, 1), got {tolerance!r}")
    base_run = baseline.get("run_id", "?")
    cur_topo, base_topo = current.get("topology") or {}, baseline.get("topology") or {}
    return [
        *_gpu_findings(cur_topo, base_topo, base_run),
        *_link_findings(cur_topo, base_topo, base_run),
        *_figure_drops(current, baseline, tolerance, base_run),
    ]


def _gpu_findings(cur_topo, base_topo, base_run):
    """baseline_gpu_missing: each GPU of the last passing run that is gone, or the count."""
    cur_gpus = {_gpu_key(g): g for g in cur_topo.get("gpus") or []}
    base_gpus = {_gpu_key(g): g for g in base_topo.get("gpus") or []}
    gone = [
        _finding(
            "critical",
            "baseline_gpu_missing",
            f"GPU {gpu.get('index')} ({gpu.get('name') or '?'}, {key}) of the last passing run "
            f"{base_run} is gone: {len(cur_gpus)} GPUs now, {len(base_gpus)} then",
            [gpu.get("index")] if gpu.get("index") is not None else (),
        )
        for key, gpu in base_gpus.items()
        if key not in cur_gpus
    ]
    if len(cur_gpus) < len(base_gpus) and not gone:
        gone.append(
            _finding(
                "critical",
                "baseline_gpu_missing",
                f"{len(cur_gpus)} GPUs now, {len(base_gpus)} in the last passing run {base_run}",
            )
        )
    return gone


def _links(topo):
    return {tuple(sorted((lk.get("a"), lk.get("b")))): lk.get("class") for lk in topo.get("links") or []}


def _link_findings(cur_topo, base_topo, base_run):
    """baseline_link_changed: a GPU pair of both runs whose link class changed (a pair with a GPU
    gone is _gpu_findings' business)."""
    cur_links = _links(cur_topo)
    out = []
    for pair, cls in sorted(_links(base_topo).items()):
        now = cur_links.get(pair)
        if now is None or now == cls:
            continue
        gpus = [int(g[3:]) for g in pair if str(g).startswith("GPU") and g[3:].isdigit()]
        out.append(
            _finding(
                "critical",
                "baseline_link_changed",
                f"{pair[0]}-{pair[1]} link changed from {cls} to {now} since the last passing run {base_run}",
                gpus,
            )
        )
    return out


def _figure_drops(current, baseline, tolerance, base_run):
    """baseline_busbw_drop of each nccl-tests collective (at the size its verdict was taken, else
    the largest common one) and each torch run of the same world size (the largest common size)."""
    out = []
    for part, label in (("collectives", "{}"), ("torch", "torch {}")):
        base_part = baseline.get(part) or {}
        for name, cur in sorted((current.get(part) or {}).items()):
            base = base_part.get(name)
            if not base or not cur or (part == "torch" and base.get("world_size") != cur.get("world_size")):
                continue
            collective = name if part == "collectives" else "all_reduce"
            preferred = (base.get("verdict") or {}).get("size") if part == "collectives" else None
            size = links.compare_size(cur.get("rows"), base.get("rows"), preferred, collective)
            if size is None:
                continue
            found = _drop(
                label.format(name),
                links.row_busbw(cur.get("rows"), size, collective),
                links.row_busbw(base.get("rows"), size, collective),
                size=size,
                tolerance=tolerance,
                base_run=base_run,
            )
            out += [found] if found else []
    return out


def _topology_for_record(topology):
    """The gpu_topology fact without its findings (merged into the record's) and raw command texts."""
    return {k: v for k, v in (topology or {}).items() if k not in ("findings", "findings_count", "raw")}


def _figure_envs(node):
    """(nccl-tests env, torch env given, tuned state of the file the figures used or None)."""
    given = node.get("figure_env") or {}
    used = _tuned_used_state(node, given) if given.get("tuned_used") else None
    return given.get("nccl_tests") or node.get("env") or {}, given.get("torch") or node.get("env") or {}, used


def _tuned_used_state(node, given):
    """The tuned env file's state as the figures used it (the text they sourced)."""
    tuned = node.get("tuned_env") or {}
    return benchenv.tuned_env_state(
        tuned.get("path", ""),
        given.get("tuned_text") or "",
        versions=node.get("versions"),
        changes=_changes(tuned),
        used=True,
    )


def _changes(tuned):
    return benchenv.last_changes(benchenv.change_probes(tuned.get("package_lists"), tuned.get("files")))


# A host record's sections, one per capability, in the order they are judged (a later one reads
# an earlier one's part: torch's ratio to nccl-tests, stepcost's reference all-reduce): the
# registry's (capability/registry.py). Each takes (the host's node data, the record so far,
# context.Judging) and returns (its part, findings, verdicts).
SECTIONS = capability_registry.sections()


def _judging(node, limits, baseline):
    nccl_env, torch_env, tuned_used = _figure_envs(node)
    return context.Judging(
        limits=limits,
        efficiency=node.get("efficiency") or {},
        topology=node.get("topology") or {},
        baseline=baseline[1] if baseline else None,
        nccl_env=nccl_env,
        torch_env=torch_env,
        tuned_used=tuned_used,
    )


def _limits(given):
    """The run's Thresholds from the report play's values (numbers as Ansible passes them)."""
    limits = _thresholds({**bandwidth.DEFAULT_THRESHOLDS, **(given or {})})
    bandwidth.check_thresholds(limits.pass_ratio, limits.warn_ratio)
    return limits


def _thresholds(values):
    return bandwidth.Thresholds(
        pass_ratio=float(values["pass_ratio"]),
        warn_ratio=float(values["warn_ratio"]),
        min_bytes=int(values["min_bytes"]),
        tolerance=float(values["tolerance"]),
        torch_goal=float(values["torch_goal"]),
    )


def _record_head(host, run_id, node, *, baseline, limits, tuned_used):
    """The record before its sections: who, what ran there, the thresholds, the tuned env file's
    state and the findings the node brought (gpu_topology's, the run's notes)."""
    topology = node.get("topology") or {}
    changes = _changes(node.get("tuned_env") or {})
    return {
        "schema": RECORD_SCHEMA,
        "host": host,
        "run_id": run_id,
        "skipped": node.get("skipped") or "",
        "topology": _topology_for_record(topology),
        "env": node.get("env") or {},
        "versions": node.get("versions") or {},
        "thresholds": dataclasses.asdict(limits),
        # The tuned env file on the node after the run (used or not), and when the driver and
        # NCCL last changed there; every figure's own environment is in its "env".
        "tuned_env": _tuned_state(node, changes, tuned_used),
        "last_changes": changes,
        "collectives": {},
        "torch": {},
        "tuning": node.get("tuning") or {},
        "findings": [dict(f, source=f.get("source", "topology")) for f in topology.get("findings") or []]
        + [dict(f) for f in node.get("findings") or []],
        "baseline": {},  # baseline_part's, once the verdict is known
    }


def _tuned_state(node, changes, tuned_used):
    tuned = node.get("tuned_env") or {}
    if not tuned:
        return {}
    return benchenv.tuned_env_state(
        tuned.get("path", ""),
        tuned.get("text"),
        mtime=tuned.get("mtime"),
        versions=node.get("versions"),
        changes=changes,
        used=bool(tuned_used),
    )


def _stale_tuned_env(record):
    state = record["tuned_env"]
    if not state.get("stale"):
        return []
    message = (
        f"tuned NCCL env {state['path']} is stale: {'; '.join(state['stale_reasons'])}; "
        "rerun bench.yml -e bench_nccl_tune=true"
    )
    return [finding("warning", "tuned_env_stale", message, source="env")]


def _host_verdicts(record, node, baseline):
    """What the whole host adds to its sections' verdicts: a GPU-less node's own judgement, a node
    that failed during the run, and FAIL for any critical finding."""
    verdicts = [judge_gpu_less(record, baseline[1] if baseline else None)] if is_gpu_less(record) else []
    if node.get("failed"):
        verdicts.append("FAIL")
    if any(f.get("severity") == "critical" for f in record["findings"]):
        verdicts.append("FAIL")
    return verdicts


def build_record(host, run_id, node, baseline=None, *, registry=CAPABILITIES):
    """One host's results record from what the bench role gathered on it.

    node: {skipped: reason|"", topology: gpu_topology fact, nccl_tests: {collective: {output, rc, json}},
           torch: {single_node|multi_node: log text}, stepcost: {single_node|multi_node: log text},
           env: {}, versions: {},
           figure_env: {nccl_tests: {given env}, torch: {given env}, tuned_used: bool, tuned_text},
           tuned_env: {path, text|None, mtime, package_lists, files} (see wireup/plans/bench.py node_results),
           findings: [] (added as they are, e.g. the cross-node run skipped),
           thresholds: {pass_ratio, warn_ratio, min_bytes, tolerance, torch_goal}, efficiency: {}, tuning: {},
           secret_env: wireup_secret_env's names (every env mapping kept goes through redact_record),
           gpu_trial: the GPU trial judged across the run (gpu_trial_run.attach; absent when it did not run)}
    baseline: (run_id, record) of the host's last passing run, or None.
    registry: the capabilities whose sections make the record (capability/registry.py).
    The record's sections are the registry's; then the baseline comparison and the host's verdict.
    """
    limits = _limits(node.get("thresholds"))
    ctx = _judging(node, limits, baseline)
    record = _record_head(host, run_id, node, baseline=baseline, limits=limits, tuned_used=ctx.tuned_used)
    verdicts = []
    dropped = capability_registry.empty_dropped(registry)
    for key, section in capability_registry.sections(registry):
        record[key], found, judged = section(node, record, ctx)
        if not record[key] and key in dropped:
            del record[key]
        record["findings"] += found
        verdicts += judged
    record["findings"] += _stale_tuned_env(record)
    if baseline:
        record["findings"] += compare(record, baseline[1], limits.tolerance)
    verdicts += _host_verdicts(record, node, baseline)
    record["verdict"] = bandwidth.worst_verdict(verdicts)
    record["baseline"] = baseline_part(record, baseline)
    return redact_record(record, node.get("secret_env"))


def _redact_figure(env, secret):
    """A figure's env record (benchenv.figure_env) with its secrets redacted."""
    if not isinstance(env, dict):
        return env
    out = dict(env, vars=redact.redact_env(env.get("vars"), secret))
    if env.get("seen") is not None:
        out["seen"] = redact.redact_env(env["seen"], secret)
    if env.get("tuned_file"):
        out["tuned_file"] = _redact_values(env["tuned_file"], secret)
    return out


def _redact_values(tuned, secret):
    """A tuned env file's state with its values redacted."""
    return dict(tuned, values=redact.redact_env(tuned.get("values"), secret))


def redact_record(record, secret=()):
    """The record as it may be written and reported: every env mapping it keeps (the run's env,
    each figure's, the tuned file's values, the tuning's) through redact.redact_env, so a secret
    keeps its name with the value '<redacted>'. secret: wireup_secret_env's names."""
    record["env"] = redact.redact_env(record.get("env"), secret)
    if record.get("tuned_env"):
        record["tuned_env"] = _redact_values(record["tuned_env"], secret)
    for part in ("collectives", "torch"):
        for entry in (record.get(part) or {}).values():
            if "env" in entry:
                entry["env"] = _redact_figure(entry["env"], secret)
    record["tuning"] = _redact_tuning(dict(record.get("tuning") or {}), secret)
    return record


def _redact_tuning(tuning, secret):
    """The tuning part with its env, best and each candidate's env redacted."""
    for key in ("env", "best"):
        if isinstance(tuning.get(key), dict):
            tuning[key] = redact.redact_env(tuning[key], secret)
    if isinstance(tuning.get("candidates"), list):
        tuning["candidates"] = [
            dict(c, env=redact.redact_env(c["env"], secret)) if isinstance((c or {}).get("env"), dict) else c
            for c in tuning["candidates"]
        ]
    return tuning


def judge_gpu_less(record, baseline=None):
    """The verdict of a GPU-less node, from its gloo all-reduce against the node's own history.

    PASS: every value right and the busbw within bench_baseline_tolerance of the node's last
    passing run (the first run has none and sets it); WARN: the busbw dropped beyond it (the
    finding compare() made is turned into a warning: CPU and socket bandwidth on a shared machine
    varies too much for a FAIL); wrong values are a critical finding already (FAIL). Records
    baseline.torch: {name: {size, busbw, baseline_busbw, change}} so the summary shows the comparison.
    """
    dropped = False
    for found in record["findings"]:
        if found.get("code") == "baseline_busbw_drop" and found.get("message", "").startswith("torch "):
            found["severity"] = "warning"
            dropped = True
    if baseline:
        compared = {}
        for name, entry in sorted(record["torch"].items()):
            base = (baseline.get("torch") or {}).get(name)
            if not base or base.get("world_size") != entry.get("world_size"):
                continue
            size = links.compare_size(entry.get("rows"), base.get("rows"), None)
            cur, old = links.row_busbw(entry.get("rows"), size), links.row_busbw(base.get("rows"), size)
            if size is None or cur is None or not old:
                continue
            compared[name] = {"size": size, "busbw": cur, "baseline_busbw": old, "change": cur / old - 1.0}
        record["baseline"]["torch"] = compared
    return "WARN" if dropped else "PASS"


def store_run(results_dir, run_id, nodes, kind="bench"):
    """Write every host's record of one run; returns (run_id, run_dir, {host: record}).

    nodes is {host: node} as build_record takes them. The run folder is created fresh (a taken
    id gets a -N suffix) under results_dir/kind; in a bench run each host is compared with its own
    last passing run before this one. A quick check's run (kind quick) is compared with nothing
    here (wireup-check compared each node with its own baseline) and each record says its kind.
    What is wrong with the run (a host name, the thresholds) is a ValueError before anything is
    written; what is wrong with one node's data is that node's DAMAGED record (_stored).
    """
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    _check_run(nodes)
    run_id, run_dir = reserve_run(results_dir, run_id, kind=kind)
    records = {}
    try:
        for host in sorted(nodes):
            records[host], data = _stored(results_dir, run_id, host, nodes[host], kind)
            write_record(host_path(results_dir, run_id, host, kind), data)
    except BaseException:
        if not os.listdir(run_dir):
            os.rmdir(run_dir)  # no empty run folder left behind by a run that stored nothing
        raise
    return run_id, run_dir, records


def _check_run(nodes):
    """The run's own inputs, before anything is written: every host name can be a file name and
    the run-wide thresholds (each judged node carries them) are valid (ValueError)."""
    for host, node in nodes.items():
        if not HOST_RE.fullmatch(str(host)):
            raise ValueError(f"host name {host!r} cannot be a file name")
        if isinstance(node, dict) and not node.get("unreachable"):
            _limits(node.get("thresholds"))


def _stored(results_dir, run_id, host, node, kind):
    """(record, the bytes to write) of one host: _host_record's, or DAMAGED when its data cannot be
    judged or written as JSON. Whatever one node sent, the other nodes are stored."""
    try:
        record = _host_record(results_dir, run_id, host, node, kind)
        return record, record_bytes(record)
    except Exception as err:  # one node's data, whatever is wrong with it, is that node's DAMAGED
        record = _of_kind(damaged_record(host, run_id, shape.failure(err)), kind)
        return record, record_bytes(record)


def _of_kind(record, kind):
    return record if kind == "bench" else dict(record, kind=kind)


def _host_record(results_dir, run_id, host, node, kind):
    """One host's record of a run of this kind: unreachable, DAMAGED (its data was found not of its
    shape: ``damaged``), judged against its last passing bench (a bench run), or on its own (a
    quick run: the record says its kind)."""
    # An object, nothing more: how deep it is was checked with its typed definition (store_nodes'
    # node_problem, before the run's judgement); a node too deep for the judgement is DAMAGED by
    # _stored as RecursionError (shape.failure), and its data is never walked twice.
    if not isinstance(node, dict):
        raise shape.Malformed(shape.problem(node, dict, "its data"))
    if node.get("unreachable"):
        record = unreachable_record(host, run_id, node["unreachable"])
    elif node.get("damaged"):
        record = damaged_record(host, run_id, node["damaged"])
    elif kind == "bench":
        return _judged(results_dir, run_id, host, node)
    else:
        record = build_record(host, run_id, node)
    return _of_kind(record, kind)


def _judged(results_dir, run_id, host, node):
    """build_record against the host's last passing run, with a finding for each damaged record
    passed over. A baseline that passes record_problem but still breaks the comparison (a type
    deeper than it looks) is dropped and named too: an earlier record never stops a run."""
    baseline, damaged = baseline_of(results_dir, host, before_run_id=run_id)
    node = dict(node, findings=[*(node.get("findings") or []), *damaged])
    try:
        return build_record(host, run_id, node, baseline)
    except (AttributeError, TypeError, KeyError) as err:
        if baseline is None:
            raise
        path = host_path(results_dir, baseline[0], host)
        found = _damaged_finding(DamagedRecord(f"{path}: {type(err).__name__} in the comparison ({err})"))
        return build_record(host, run_id, dict(node, findings=[*node["findings"], found]), None)


def _empty_record(host, run_id, verdict, skipped, found):
    """A record without figures: who, the verdict, why nothing was judged, its one finding."""
    return {
        "schema": RECORD_SCHEMA,
        "host": host,
        "run_id": run_id,
        "verdict": verdict,
        "skipped": skipped,
        "topology": {},
        "env": {},
        "versions": {},
        "thresholds": {},
        "collectives": {},
        "torch": {},
        "tuning": {},
        "findings": [found],
        "baseline": {"state": "none", "run_id": ""},
    }


def unreachable_record(host, run_id, reason):
    """The record of a node of the group that Ansible could not reach during the run: named in the
    summary and the report with Ansible's reason, never a baseline (verdict UNREACHABLE)."""
    reason = " ".join(str(reason or "no reason given").split())
    found = finding(
        "critical", "bench_host_unreachable", f"{host} was unreachable: {reason}", source="ansible"
    )
    return _empty_record(host, run_id, "UNREACHABLE", f"unreachable, not benchmarked: {reason}", found)


# A DAMAGED record's reason is one line of at most this many characters.
DAMAGED_CHARS = 300


def damaged_record(host, run_id, reason):
    """The record of a node whose answer could not be judged (not of its typed shape, or its
    judgement failed): verdict DAMAGED, ``damaged`` saying why in one line (where its answer is
    wrong; no more of the node's text than a cut excerpt), no figure; never a baseline, and the
    launch gate refuses the node (gate.host_failures) until a later run judges it."""
    reason = " ".join(str(reason or "no reason given").split())[:DAMAGED_CHARS]
    message = f"{host} could not be judged: {reason}; rerun bench.yml on it"
    found = finding("critical", "node_data_damaged", message, source="store")
    return dict(_empty_record(host, run_id, DAMAGED, f"not judged: {reason}", found), damaged=reason)
