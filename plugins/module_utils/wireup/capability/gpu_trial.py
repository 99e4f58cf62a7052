"""The GPU trial in the host records (issue 25): what the nodes gathered, judged across the run, and
each GPU's own last passing run, found by its UUID (gpuhealth.gpu_key; pure Python, stdlib only).

On the controller, bench_report.store_nodes calls ``attach(results_dir, run_id, nodes, trial)``
before the records are built: it reads each node's gpu_trial_node (``node_inputs``), finds each
GPU's baseline (``baselines``), judges the whole run (gpujudge.judge_run: peers span the cluster)
and puts each host's judged GPUs on its node data as ``gpu_trial``. host_record.build_record's
section ``gpu_trial`` (``section``, its entry in capability/registry.py) then makes the record's part

  "gpu_trial": {capability ("gpu_health": the health read alone, `--tags gpu_health`; "gpu_trial":
                health and fingerprint), measured (what ran: health, fingerprint, dcgm), scope
                ("full": with the bench's figures; "gpu_only": a run of the GPU trial alone),
                verdict, thresholds, sharing, fingerprint (mode, seconds, versions, cost), dcgm,
                notes, errors,
                gpus: [{index, bus_id, uuid, serial, name, model, health, findings, figures:
                        {figure: {median, min, max, mean, stdev, samples, spec, peer, baseline}},
                        throttle, verdicts, verdict}]},

and every GPU and node finding of the trial in the record's "findings". The GPU verdict joins the
host's verdict; a run that only read health or ran only the GPU trial (``--tags
gpu_health``/``gpu_trial``, scope gpu_only) gives the host no PASS from it (the record is no
bandwidth baseline then), only WARN or FAIL.

Baselines follow the host records' rules (host_record.baseline_of): newest first, before this run,
a damaged record is a warning naming its file and never a baseline, and an entry whose figures are
not finite numbers or implausible (gpujudge/gpuspec) is never one either.
"""

from __future__ import annotations

import json
from typing import TypedDict

from ..core import checks, shape
from ..judge import gpuspec
from ..probe import dcgm, gpuhealth, health

SCOPES = ("full", "gpu_only")
# How far back a GPU's baseline is looked for: the newest runs only, so a GPU that never passed
# (new, or always failing) does not make every run read the whole store.
BASELINE_RUNS = 100


# ---------------------------------------------------------------- what a node gathered
def _fingerprint(data, host):
    """(document or None, node findings) of the fingerprint's registered result."""
    if not data or data.get("skipped"):
        return None, []
    rc, text = data.get("rc"), (data.get("stdout") or "").strip()
    why = ""
    doc = None
    try:
        doc = json.loads(text.splitlines()[-1]) if text else None
    except ValueError as err:
        why = f"its output is not JSON ({err})"
    if doc is not None and (not isinstance(doc, dict) or doc.get("wireup_gpu_fingerprint") != 1):
        doc, why = None, "its output is not a wireup fingerprint document"
    if doc is None and not why:
        why = "it printed nothing"
    if doc is not None and doc.get("mode") != "cuda":
        said = f"{host}: the fingerprint ran in {doc.get('mode')!r} mode: CPU figures, not judged"
        return None, [node_finding("warning", "gpu_fingerprint_test_mode", said)]
    if doc is None or rc not in (0, None):
        tail = " ".join((data.get("stderr") or "").split())[-300:]
        said = f"{host}: the GPU fingerprint failed (rc {rc}): {why or 'see its output'}; {tail}"
        return doc, [node_finding("critical", "gpu_fingerprint_failed", said)]
    return doc, []


def node_finding(severity, code, message, remediation="monitor"):
    return dict(health.finding(severity, code, message), source="gpu_trial", remediation=remediation, gpu={})


def _health(read, host, when):
    """(parsed health or None, node findings) of one health read (wireup_gpu_health_info's result)."""
    if not read or read.get("skipped"):
        return None, []
    if read.get("error"):
        said = f"{host}: GPU health {when} could not be read: {read['error']}"
        return None, [node_finding("critical", "gpu_health_unreadable", said, "reboot")]
    return read.get("health"), []


def _dcgm(data, host, health_doc):
    if not data or data.get("skipped"):
        return None, []
    level = data.get("level")
    if data.get("rc") == 124:
        said = f"{host}: dcgmi diag -r {level} did not finish in its time limit"
        return None, [node_finding("critical", "gpu_dcgm_timeout", said, "isolate")]
    try:
        parsed = dcgm.parse(data.get("stdout") or "")
    except ValueError as err:
        tail = " ".join((data.get("stderr") or "").split())[-200:]
        said = f"{host}: dcgmi diag -r {level} (rc {data.get('rc')}): {err}; {tail}"
        return None, [node_finding("critical", "gpu_dcgm_unreadable", said, "isolate")]
    return parsed, dcgm.findings(parsed, (health_doc or {}).get("gpus"), level)


def node_inputs(host, trial):
    """gpujudge's input for one node from its gpu_trial_node fact (gpu_trial.node_data). A
    fingerprint document of the wrong shape is shape.Malformed; a DCGM or fingerprint answer the
    parsers choke on (nested too deeply: RecursionError) raises too: attach records the node
    DAMAGED, alone."""
    trial = trial or {}
    before, f1 = _health(trial.get("health_before"), host, "before the fingerprint")
    after, f2 = _health(trial.get("health_after"), host, "after the fingerprint")
    doc, f3 = _fingerprint(trial.get("fingerprint"), host)
    if doc is not None:
        shape.check(doc, FingerprintDoc, "fingerprint")  # a wireup document, not of its shape
    current = after or before
    parsed_dcgm, f4 = _dcgm(trial.get("dcgm"), host, current)
    return {
        "health": current,
        "health_before": before if after else None,
        "fingerprint": doc,
        "dcgm": parsed_dcgm,
        "findings": f1 + f2 + f3 + f4,
        "notes": list(trial.get("notes") or []),
    }


# ---------------------------------------------------------------- baselines by UUID
def entry_problem(entry):
    """What makes a stored GPU entry unusable as a baseline ('' when nothing)."""
    if not isinstance(entry, dict):
        return "a gpus entry is not an object"
    figures = entry.get("figures")
    if figures is not None and not isinstance(figures, dict):
        return "figures is not an object"
    for name, figure in sorted((figures or {}).items()):
        median = (figure or {}).get("median") if isinstance(figure, dict) else "?"
        if median is None:
            continue
        if not checks.is_finite_number(median):
            return f"figures.{name}.median is {median!r}, not a finite number"
        if median < 0 or ((figure.get("spec") or {}).get("implausible")):
            return f"figures.{name}.median {median!r} is implausible"
        peak = (figure.get("spec") or {}).get("peak")
        if isinstance(peak, (int, float)) and peak > 0 and median > peak * gpuspec.PLAUSIBLE_FACTOR:
            return f"figures.{name}.median {median!r} is above {gpuspec.PLAUSIBLE_FACTOR:g} x its peak"
    return ""


def section_problem(record):
    """What makes a record's GPU trial part unusable ('' when nothing): host_record.record_problem's
    check of the part (its entry's problem in capability/registry.py; record_problem checks first
    that the part is an object)."""
    gpus = (record.get("gpu_trial") or {}).get("gpus")
    if gpus is None:
        return ""
    if not isinstance(gpus, list):
        return "gpu_trial.gpus is not a list"
    for i, entry in enumerate(gpus):
        problem = entry_problem(entry)
        if problem:
            return f"gpu_trial.gpus[{i}]: {problem}"
    return ""


def section(node, record, ctx):
    """The record's gpu_trial (its section in capability/registry.py): the judged GPUs attach put
    on the node data, every GPU and node finding of the trial (most severe first), and the verdict
    the host takes from it
    (none from a PASS of a GPU-only run: such a record is no bandwidth baseline). record and ctx
    (capability/context.Judging) are not read: the trial was judged across the run before."""
    judged = node.get("gpu_trial")
    if not judged:
        return {}, [], []
    part = {k: v for k, v in judged.items() if k != "findings"}
    found = [f for g in judged["gpus"] for f in g["findings"]] + judged["findings"]
    ordered = sorted(found, key=lambda f: health.SEVERITIES.index(f["severity"]))
    verdict = judged["verdict"]
    if verdict == "N/A" or (judged.get("scope") == "gpu_only" and verdict == "PASS"):
        return part, ordered, []
    return part, ordered, [verdict]


class Skipped(TypedDict):
    """A part of TrialNode whose task did not run."""

    skipped: bool


class HealthPart(TypedDict):
    """A health read as the fact keeps it (_health_read): wireup_gpu_health_info's answer."""

    health: gpuhealth.HealthDoc | None
    error: str
    dcgmi: str


class CommandPart(TypedDict):
    """A registered command as the fact keeps it (_registered): the fingerprint's, DCGM's."""

    rc: int | None
    stdout: str
    stderr: str
    seconds: float | None


class DcgmPart(CommandPart):
    level: int | None


class DcgmSkipped(Skipped):
    level: int | None


class TrialNode(TypedDict):
    """node_data's answer: the public fact gpu_trial_node (each part {skipped: true} where it did
    not run). The store checks each node's against it (gpu_trial_run.attach, core/shape.py)."""

    run_id: str
    capability: str
    notes: list[str]
    health_before: HealthPart | Skipped
    health_after: HealthPart | Skipped
    fingerprint: CommandPart | Skipped
    dcgm: DcgmPart | DcgmSkipped


class Figure(TypedDict):
    """One figure of the fingerprint over its batches (gpu_fingerprint.py's summarize)."""

    median: float
    min: float
    max: float
    mean: float
    stdev: float
    samples: int


class _FingerprintGpuId(TypedDict):
    index: int
    figures: dict[str, Figure | None]


class FingerprintGpu(_FingerprintGpuId, total=False):
    name: str | None
    uuid: str | None
    bus_id: str | None
    compute_capability: str | None
    pci_path: list[str] | None
    skipped: dict[str, str]
    errors: dict[str, str]
    throttle: dict[str, dict]


class _FingerprintMark(TypedDict):
    wireup_gpu_fingerprint: int
    mode: str
    gpus: list[FingerprintGpu]


class FingerprintDoc(_FingerprintMark, total=False):
    """The document roles/gpu_trial/files/gpu_fingerprint.py prints (its docstring says each key;
    the script runs on the node without this package, so tests/unit/test_gpu_fingerprint.py checks
    its real output against this): gpurecord checks a node's before judging its GPUs."""

    note: str
    torch: str | None
    cuda: str | None
    nvml: str | None
    nvml_note: str
    seconds_per_set: float
    sets: list[str]
    set_seconds: dict[str, float]
    elapsed_s: float
    errors: list[str]


class TrialRun(TypedDict):
    """run_data's answer (the fact gpu_trial_run): the run id the trial took (used when no host ran
    the bench role), the hosts that kept a gpu_trial_node, each one's, and the run's thresholds."""

    run_id: str
    hosts: list[str]
    nodes: dict[str, TrialNode]
    thresholds: dict
