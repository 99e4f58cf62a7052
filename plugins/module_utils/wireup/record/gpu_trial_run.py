"""The GPU trial of a whole run (layer record/): each GPU's baseline from the store (``baselines``:
its own last passing entry, found by its UUID) and the run judged across its nodes (``attach``:
gpujudge.judge_run, peers span the cluster), put on each host's node data as ``gpu_trial`` before
host_record.build_record makes the records. The capability itself (a node's inputs, an entry's
problem check, the record's section) is capability/gpu_trial.py; this reads other runs' records,
which only the record layer can check whole (host_record.load_record).

Baselines follow the host records' rules (host_record.baseline_of): newest first, before this run,
a damaged record is a warning naming its file and never a baseline, and an entry whose figures are
not finite numbers or implausible (gpujudge/gpuspec) is never one either.
"""

from __future__ import annotations

import itertools

from ..capability.gpu_trial import BASELINE_RUNS, TrialNode, entry_problem, node_finding, node_inputs
from ..core import shape
from ..judge import gpujudge
from ..probe import gpuhealth
from ..store import query
from .host_record import record_problem


def baselines(results_dir, before_run_id, keys):
    """({key: (run_id, host, entry)}, [findings]): for each gpu_key (the GPU's UUID) in keys, the
    GPU's entry in the newest record before before_run_id (among the BASELINE_RUNS newest) where that
    GPU PASSed, whatever host or slot it was in. Damaged records are warnings naming the file, never
    baselines. Serials are never keys: two GPUs of one board share one, some cards print 0."""
    wanted, found, damaged = {k for k in keys if k}, {}, []
    newest = itertools.islice(query.runs(results_dir, before=before_run_id), BASELINE_RUNS)
    last_run = None
    for _kind, run_id, host, record in query.records(results_dir, record_problem, run_list=newest):
        if run_id != last_run and wanted <= set(found):
            break  # a run is read whole (its damaged records said) or not at all
        last_run = run_id
        if isinstance(record, ValueError):
            damaged.append(_damaged(record))
            continue
        _take(found, wanted, run_id, host, record)
    return found, damaged


def _take(found, wanted, run_id, host, record):
    for entry in (record.get("gpu_trial") or {}).get("gpus") or []:
        if entry.get("verdict") != "PASS" or entry_problem(entry):
            continue
        key = gpuhealth.gpu_key(entry)
        if key in wanted and key not in found:
            found[key] = (run_id, host, entry)


def _damaged(err):
    return node_finding(
        "warning",
        "baseline_record_damaged",
        f"earlier record {err}; not used as a GPU baseline (move it away or delete it)",
    )


# ---------------------------------------------------------------- the run, then each record
def _keys(inputs):
    """The gpu_key (UUID) of every GPU the run's health reads name (the baselines to look for)."""
    return [
        gpuhealth.gpu_key(gpu) for node in inputs.values() for gpu in (node["health"] or {}).get("gpus") or []
    ]


GPU_ONLY = "GPU trial only (bench.yml --tags gpu_health or gpu_trial): links not measured in this run"


def attach(results_dir, run_id, nodes, trial, *, run_wide=None):
    """nodes ({host: node} as host_record.store_run takes them) with each host's judged GPUs as
    node["gpu_trial"]. Hosts that ran only the GPU trial (no bench data) are added with scope
    gpu_only and the run-wide settings (run_wide: thresholds, efficiency, secret_env). trial: the
    gpu_trial_run the report play gathered (TrialRun: {nodes: {host: fact}, thresholds})."""
    facts = (trial or {}).get("nodes") or {}
    if not facts:
        return nodes
    settings = {**gpujudge.DEFAULT_SETTINGS, **(trial.get("thresholds") or {})}
    out = {host: dict(node) for host, node in nodes.items()}
    inputs, malformed = _read_nodes(out, facts)
    found, damaged = baselines(results_dir, run_id, _keys(inputs))
    judged_run, dropped = _judge_apart(inputs, found, settings)
    for host, why in sorted({**malformed, **dropped}.items()):
        node = out.setdefault(host, dict(run_wide or {}, skipped=GPU_ONLY, gpu_only=True))
        node["damaged"] = f"gpu_trial: {why}"
    for host, judged in judged_run.items():
        node = out.setdefault(host, dict(run_wide or {}, skipped=GPU_ONLY, gpu_only=True))
        judged["findings"] += damaged
        scope = "gpu_only" if node.get("gpu_only") else "full"
        node["gpu_trial"] = dict(judged, scope=scope, thresholds=settings, **_meta(inputs[host], facts[host]))
    return out


def _read_nodes(out, facts):
    """({host: node_inputs}, {host: why not}): each node's gpu_trial_node checked against
    TrialNode and read. A node whose fact is not of that shape, or cannot be read, is left
    out of the run's judgement (its GPUs are no one's peers) and judged DAMAGED alone; an
    unreachable node, or one whose bench data is DAMAGED already, is not read."""
    inputs, malformed = {}, {}
    for host, fact in sorted(facts.items()):
        if out.get(host, {}).get("unreachable") or out.get(host, {}).get("damaged"):
            continue
        try:
            inputs[host] = node_inputs(host, shape.check(fact, TrialNode))
        except Exception as err:  # one node's answer, whatever it is, never stops the others'
            malformed[host] = shape.failure(err)
    return inputs, malformed


def _judge_apart(inputs, found, settings):
    """(gpujudge.judge_run's sections, {host: why not}). The settings are the run's (an error in
    them is a ValueError for the run); should the run's judgement still fail, each node is judged
    alone, those that fail alone are left out (DAMAGED) and the others are judged together."""
    errors = gpujudge.settings_errors(settings)
    if errors:
        raise ValueError("; ".join(errors))
    try:
        return gpujudge.judge_run(inputs, found, settings), {}
    except Exception:  # a node's answer the shape check let through; found below, node by node
        dropped = {h: _alone(h, node, found, settings) for h, node in inputs.items()}
        dropped = {h: why for h, why in dropped.items() if why}
        if not dropped:
            raise
    rest = {h: node for h, node in inputs.items() if h not in dropped}
    return gpujudge.judge_run(rest, found, settings), dropped


def _alone(host, node, found, settings):
    """Why judging this node alone fails ('' when it does not)."""
    try:
        gpujudge.judge_run({host: node}, found, settings)
    except Exception as err:  # the error of this node's answer, in its record's words
        return shape.failure(err)
    return ""


_FINGERPRINT_KEPT = (
    "mode",
    "torch",
    "cuda",
    "nvml",
    "nvml_note",
    "seconds_per_set",
    "sets",
    "elapsed_s",
    "set_seconds",
)


def _meta(inputs, fact):
    """What the record keeps of the run beside the GPUs: the capability it measured and what ran
    (a per-capability reader of the records tells a health read alone from the whole trial)."""
    doc = inputs["fingerprint"] or {}
    parsed_dcgm = inputs["dcgm"]
    measured = [
        part
        for part, ran in (("health", inputs["health"]), ("fingerprint", doc), ("dcgm", parsed_dcgm))
        if ran
    ]
    return {
        "capability": fact.get("capability") or "gpu_trial",
        "measured": measured,
        "fingerprint": {k: doc.get(k) for k in _FINGERPRINT_KEPT} if doc else {},
        "dcgm": {"level": (fact.get("dcgm") or {}).get("level"), "tests": parsed_dcgm.get("tests", [])}
        if parsed_dcgm
        else {},
        "notes": inputs["notes"],
        "errors": list(doc.get("errors") or []),
    }
