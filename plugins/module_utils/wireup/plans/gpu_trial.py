"""The gpu_trial role's plan (on each node), its node fact, and the run the report play gathers (on
the controller): every decision of roles/gpu_trial in one tested place; the tasks execute it.

plan(node, settings, host): which parts run on this node (the health read needs nvidia-smi; the
fingerprint needs NVIDIA GPUs and runs in the venv's python; DCGM's diagnostic runs at
gpu_trial_dcgm_diag's level where dcgmi exists), their commands and time limits, the capability
the run measures (gpu_health: the health read alone; gpu_trial: health and fingerprint), and the
one line a node that skips a part prints. settings: TrialSettings, each role variable by name.

node_data(...): the node's registered results -> the public fact gpu_trial_node (a TrialNode), the
only thing the controller reads (gpu_trial.node_inputs judges it). cost_line(...): the
fingerprint's cost for the play output. run_data(group, nodes, thresholds): every host's
gpu_trial_node and the run's thresholds (a TrialRun), which bench_report hands to the store.

The TypedDicts are what the role's YAML may read (tests/unit/test_plan_types.py checks them).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import TypedDict

from ..capability.gpu_trial import TrialNode
from ..judge.gpu_trial_settings import number, numbers
from ..probe import dcgm

FINGERPRINT_SCRIPT = "gpu_fingerprint.py"
# Seconds the fingerprint may take beyond its windows (CUDA start on every GPU, buffers, warm-up)
# before the role stops it: the whole default run is 3 x 25 s of windows and about 10 s of setup.
SETUP_ALLOWANCE_S = 60
_DELTA_RE = re.compile(r"^(\d+):(\d{2}):(\d{2}(?:\.\d+)?)$")


CAPABILITIES = ("gpu_health", "gpu_trial")


@dataclasses.dataclass(frozen=True)
class TrialSettings:
    """The role's variables the plan reads (each named after its variable without ``gpu_trial_``),
    plus wireup_venv_path and health_only (`--tags gpu_health` alone). Every field is required: a
    variable the task forgets, or a misspelt one, is a TypeError. Numbers may arrive as strings
    (`-e gpu_trial_seconds=10`): the plan reads them with number()."""

    health: bool
    fingerprint: bool
    seconds: float | str
    sets: list
    gemm_dtypes: list
    gemm_size: int | str
    copy_bytes: int | str
    pcie_bytes: int | str
    python: str
    dir: str
    dcgm_diag: int | str
    dcgm_timeout: int | str
    venv_path: str
    health_only: bool


@dataclasses.dataclass(frozen=True)
class JudgeSettings:
    """The run's GPU thresholds (gpu_trial_spec_pass_ratio, ..._spec_warn_ratio, ..._warn_tolerance,
    ..._fail_tolerance, ..._efficiency by name without ``gpu_trial_``), as the report play gives them."""

    spec_pass_ratio: float | str
    spec_warn_ratio: float | str
    warn_tolerance: float | str
    fail_tolerance: float | str
    efficiency: dict


class TrialPlan(TypedDict):
    """plan's answer (kept as __gpu_trial_plan)."""

    capability: str
    health: bool
    nvidia_smi: str
    notes: list[str]
    fingerprint: bool
    argv: list[str]
    timeout: int
    dir: str
    script: str
    dcgm_level: int
    dcgm_argv: list[str]
    dcgm_timeout: int


def _fingerprint_argv(s, python, script):
    seconds = number(s.seconds)
    limit = int(len(s.sets) * seconds + SETUP_ALLOWANCE_S)
    return [
        *["timeout", "-k", "10", str(limit), python, script],
        *["--seconds", f"{seconds:g}", "--sets", ",".join(s.sets)],
        *["--gemm-dtypes", ",".join(s.gemm_dtypes), "--gemm-size", str(s.gemm_size)],
        *["--copy-bytes", str(s.copy_bytes), "--pcie-bytes", str(s.pcie_bytes)],
    ], limit


def _skip_notes(host, smi, wanted, present):
    notes = [f"gpu_trial {host}: no nvidia-smi (no NVIDIA driver): GPU health not read"] if not smi else []
    if wanted and not present:
        notes.append(
            f"gpu_trial {host}: the GPU fingerprint needs GPUs: skipped (no NVIDIA GPU that nvidia-smi lists)"
        )
    return notes


def _dcgm_plan(s, health, health_only):
    level = int(number(s.dcgm_diag) or 0)
    timeout = int(number(s.dcgm_timeout) or 0) or dcgm.LEVEL_TIMEOUT.get(level, 0)
    return {
        "dcgm_level": level if health and not health_only else 0,
        "dcgm_argv": ["timeout", "-k", "10", str(timeout), "dcgmi", "diag", "-r", str(level), "-j"],
        "dcgm_timeout": timeout,
    }


def plan(node, s, host):
    """Every decision of the gpu_trial role on one node (a TrialPlan).

    node: wireup_node; s: TrialSettings (health_only: `--tags gpu_health` alone reads the health only)."""
    gpu = (node or {}).get("gpu") or {}
    smi = str(gpu.get("nvidia_smi") or "")
    wanted = bool(s.fingerprint) and not s.health_only
    present = bool(gpu.get("present")) and int(gpu.get("count") or 0) > 0
    health = bool(s.health) and bool(smi)
    script = f"{str(s.dir).rstrip('/')}/{FINGERPRINT_SCRIPT}"
    python = s.python or f"{str(s.venv_path).rstrip('/')}/bin/python"
    argv, timeout = _fingerprint_argv(s, python, script)
    return {
        "capability": "gpu_health" if s.health_only else "gpu_trial",
        "health": health,
        "nvidia_smi": smi,
        "notes": _skip_notes(host, smi, wanted, present),
        "fingerprint": wanted and present,
        "argv": argv,
        "timeout": timeout,
        "dir": str(s.dir),
        "script": script,
        **_dcgm_plan(s, health, s.health_only),
    }


def dcgm_note(the_plan, read, host):
    """The line a node prints when DCGM's diagnostic was asked for but dcgmi is missing ('' else)."""
    if the_plan.get("dcgm_level") and not (read or {}).get("dcgmi"):
        return (
            f"gpu_trial {host}: gpu_trial_dcgm_diag={the_plan['dcgm_level']} but dcgmi is not installed: "
            "DCGM diagnostic skipped (roles/gpu_trial/README.md says how to install DCGM)"
        )
    return ""


def seconds_of(delta):
    """The command module's delta ('0:01:24.123456') -> seconds; None when unreadable."""
    m = _DELTA_RE.match(str(delta or ""))
    if not m:
        return None
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))


def _registered(result, keep_stdout=True):
    """The parts of a registered command result the controller reads; {skipped: true} for a
    task that did not run."""
    if not result or result.get("skipped") or "rc" not in result:
        return {"skipped": True}
    return {
        "rc": result.get("rc"),
        "stdout": (result.get("stdout") or "") if keep_stdout else "",
        "stderr": (result.get("stderr") or "")[-2000:],
        "seconds": seconds_of(result.get("delta")),
    }


def _health_read(result):
    if not result or result.get("skipped") or "health" not in result:
        return {"skipped": True}
    return {
        "health": result.get("health"),
        "error": result.get("error") or "",
        "dcgmi": result.get("dcgmi") or "",
    }


def node_data(the_plan, run_id, host, *, reads=(), fingerprint=None, dcgm_run=None) -> TrialNode:
    """The fact gpu_trial_node: reads = (health before, health after) as wireup_gpu_health_info
    returned them (None where not run); fingerprint / dcgm_run: the registered command results."""
    before, after = [*list(reads or []), None, None][:2]
    note = dcgm_note(the_plan, before, host)
    return {
        "run_id": str(run_id or ""),
        "capability": the_plan.get("capability") or "gpu_trial",
        "notes": list(the_plan.get("notes") or []) + ([note] if note else []),
        "health_before": _health_read(before),
        "health_after": _health_read(after),
        "fingerprint": _registered(fingerprint),
        "dcgm": dict(_registered(dcgm_run), level=the_plan.get("dcgm_level")),
    }


def cost_line(host, fingerprint):
    """'gpu_trial node1: fingerprint of 8 GPU(s) took 84 s (rc 0; windows 3 x 25 s; gemm 25.4 s, ...)'."""
    data = _registered(fingerprint)
    if data.get("skipped"):
        return ""
    doc = _last_json(data.get("stdout"))
    took = f"{data['seconds']:.0f} s" if data.get("seconds") is not None else "an unknown time"
    sets = "; ".join(f"{k} {v:.1f} s" for k, v in (doc.get("set_seconds") or {}).items())
    windows = (
        f"; windows {len(doc.get('sets') or [])} x {doc['seconds_per_set']:g} s"
        if doc.get("seconds_per_set")
        else ""
    )
    return (
        f"gpu_trial {host}: fingerprint of {len(doc.get('gpus') or [])} GPU(s) took {took} (rc {data['rc']}"
        f"{windows}{'; ' + sets if sets else ''})"
    )


def health_lines(host, reads):
    """The line a node shows of its GPUs' health, a list the task loops over: the newest read's
    first summary line (the read after the fingerprint, else the one before it); [] when no read
    ran (gpu_trial_health off, or no nvidia-smi). reads: the registered reads, None where absent."""
    ran = [r for r in reads or () if r and r.get("summary")]
    return [f"gpu_trial {host}: {ran[-1]['summary'][0]}"] if ran else []


def _last_json(text):
    lines = [line for line in str(text or "").splitlines() if line.strip().startswith("{")]
    try:
        doc = json.loads(lines[-1]) if lines else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def judge_settings(given):
    """gpujudge's settings from the report play's thresholds (a JudgeSettings). Read field by
    field, not with dataclasses.asdict: its deep copy would rebuild Ansible's lazy containers by
    their type, which ansible-core 2.19 refuses ("Direct construction of lazy containers")."""
    values = {f.name: getattr(given, f.name) for f in dataclasses.fields(given)}
    return numbers(dict(values, efficiency=dict(values["efficiency"] or {})))


def run_data(group, nodes, thresholds):
    """What the report play hands the store (a TrialRun). group: the node group's hosts; nodes: per
    host of group, in its order, its gpu_trial_node (None where the role kept none); thresholds: a
    JudgeSettings. The run id is the earliest the nodes took."""
    kept = {h: n for h, n in zip(group, nodes, strict=True) if n}
    run_ids = sorted({n.get("run_id") for n in kept.values() if n.get("run_id")})
    return {
        "run_id": run_ids[0] if run_ids else "",
        "hosts": sorted(kept),
        "nodes": kept,
        "thresholds": judge_settings(thresholds),
    }
