"""The gpu_trial role's plan (on each node), its node fact, and the run the report play gathers (on
the controller): every decision of roles/gpu_trial in one tested place; the tasks execute it.

plan(node, settings, host, tags): which parts run on this node (the health read needs nvidia-smi;
the fingerprint needs NVIDIA GPUs and runs in the venv's python; DCGM's diagnostic runs at
gpu_trial_dcgm_diag's level where dcgmi exists), their commands and time limits, and the one line
a node that skips a part prints.

node_data(...): the node's registered results -> the public fact gpu_trial_node, the only thing
the controller reads (gpurecord.node_inputs judges it). cost_line(...): the fingerprint's cost
for the play output. run_data(group, hostvars): every host's gpu_trial_node.
"""

import json
import math
import re

from . import gpujudge

FINGERPRINT_SCRIPT = "gpu_fingerprint.py"
SETS = ("gemm", "hbm", "pcie")
GEMM_DTYPES = ("bf16", "fp16", "tf32", "fp8")
# Seconds the fingerprint may take beyond its windows (CUDA start on every GPU, buffers, warm-up)
# before the role stops it: the whole default run is 3 x 25 s of windows and about 10 s of setup.
SETUP_ALLOWANCE_S = 60
_DELTA_RE = re.compile(r"^(\d+):(\d{2}):(\d{2}(?:\.\d+)?)$")


def number(value):
    """A setting as a float (`-e name=10` arrives as the string '10'); None when it is no number."""
    if isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _number_error(name, value, low, high, what):
    given = number(value)
    if given is None or not low < given <= high:
        return [f"{name} must be {what}, got {value!r}"]
    return []


def _list_error(name, value, allowed):
    if not isinstance(value, list) or not value or any(v not in allowed for v in value):
        return [f"{name} must be a non-empty list of {', '.join(allowed)}, got {value!r}"]
    return []


def _count_error(name, value):
    given = number(value)
    if given is None or given <= 0 or given != int(given):
        return [f"{name} must be a positive whole number, got {value!r}"]
    return []


def settings_errors(s):
    """What is wrong with the gpu_trial_* settings present in s (preflight's rule, its only copy),
    each error naming the variable and what it takes. Values still templates are passed over."""
    s = {k: v for k, v in s.items() if not (isinstance(v, str) and "{{" in v)}
    errors = []
    if "gpu_trial_seconds" in s:
        errors += _number_error("gpu_trial_seconds", s["gpu_trial_seconds"], 0, 3600, "seconds in (0, 3600]")
    for key, allowed in (("gpu_trial_sets", SETS), ("gpu_trial_gemm_dtypes", GEMM_DTYPES)):
        if key in s:
            errors += _list_error(key, s[key], allowed)
    if "gpu_trial_dcgm_diag" in s and number(s["gpu_trial_dcgm_diag"]) not in (0, 1, 2, 3):
        errors.append(f"gpu_trial_dcgm_diag must be 0 (off), 1, 2 or 3, got {s['gpu_trial_dcgm_diag']!r}")
    for key in ("gpu_trial_gemm_size", "gpu_trial_copy_bytes", "gpu_trial_pcie_bytes"):
        if key in s:
            errors += _count_error(key, s[key])
    if "gpu_trial_dcgm_timeout" in s:
        errors += _number_error(
            "gpu_trial_dcgm_timeout",
            s["gpu_trial_dcgm_timeout"],
            -1,
            86400,
            "0 (the level's default) or seconds up to 86400",
        )
    judged = {k: v for k, v in thresholds(s).items() if f"gpu_trial_{k}" in s}
    return errors + gpujudge.settings_errors(judged)


def thresholds(s):
    """gpujudge's settings from the gpu_trial_* variables (gpujudge's defaults where absent)."""
    out = {}
    for key, default in gpujudge.DEFAULT_SETTINGS.items():
        value = s.get(f"gpu_trial_{key}", default)
        # `-e gpu_trial_warn_tolerance=0.15` arrives as a string: a number is taken as one.
        out[key] = number(value) if key != "efficiency" and number(value) is not None else value
    return out


def _whole(value):
    return str(int(number(value)))


def _fingerprint_argv(s, python, script):
    seconds = number(s["gpu_trial_seconds"])
    limit = int(len(s["gpu_trial_sets"]) * seconds + SETUP_ALLOWANCE_S)
    return [
        *["timeout", "-k", "10", str(limit), python, script],
        *["--seconds", f"{seconds:g}", "--sets", ",".join(s["gpu_trial_sets"])],
        *[
            "--gemm-dtypes",
            ",".join(s["gpu_trial_gemm_dtypes"]),
            "--gemm-size",
            str(s["gpu_trial_gemm_size"]),
        ],
        *["--copy-bytes", str(s["gpu_trial_copy_bytes"]), "--pcie-bytes", str(s["gpu_trial_pcie_bytes"])],
    ], limit


def plan(node, s, host, tags=()):
    """Every decision of the gpu_trial role on one node.

    node: wireup_node; s: the gpu_trial_* variables plus wireup_venv_path and gpu_trial_dir;
    tags: ansible_run_tags (gpu_health alone reads the health only)."""
    gpu = (node or {}).get("gpu") or {}
    smi = str(gpu.get("nvidia_smi") or "")
    health_only = set(tags or ()) == {"gpu_health"}
    out = {"health": bool(s.get("gpu_trial_health", True)) and bool(smi), "nvidia_smi": smi, "notes": []}
    if not smi:
        out["notes"].append(f"gpu_trial {host}: no nvidia-smi (no NVIDIA driver): GPU health not read")
    fingerprint = bool(s.get("gpu_trial_fingerprint", True)) and not health_only
    present = bool(gpu.get("present")) and int(gpu.get("count") or 0) > 0
    if fingerprint and not present:
        out["notes"].append(
            f"gpu_trial {host}: the GPU fingerprint needs GPUs: skipped (no NVIDIA GPU that nvidia-smi lists)"
        )
    out["fingerprint"] = fingerprint and present
    script = f"{str(s['gpu_trial_dir']).rstrip('/')}/{FINGERPRINT_SCRIPT}"
    python = s.get("gpu_trial_python") or f"{str(s['wireup_venv_path']).rstrip('/')}/bin/python"
    out["argv"], out["timeout"] = _fingerprint_argv(s, python, script)
    out["dir"], out["script"] = str(s["gpu_trial_dir"]), script
    level = int(number(s.get("gpu_trial_dcgm_diag")) or 0)
    out["dcgm_level"] = level if out["health"] and not health_only else 0
    timeout = int(number(s.get("gpu_trial_dcgm_timeout")) or 0) or {1: 120, 2: 600, 3: 2400}.get(level, 0)
    out["dcgm_argv"] = ["timeout", "-k", "10", str(timeout), "dcgmi", "diag", "-r", str(level), "-j"]
    out["dcgm_timeout"] = timeout
    return out


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


def node_data(the_plan, run_id, host, *, reads=(), fingerprint=None, dcgm_run=None):
    """The fact gpu_trial_node: reads = (health before, health after) as wireup_gpu_health_info
    returned them (None where not run); fingerprint / dcgm_run: the registered command results."""
    before, after = [*list(reads or []), None, None][:2]
    note = dcgm_note(the_plan, before, host)
    return {
        "run_id": str(run_id or ""),
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


def _last_json(text):
    lines = [line for line in str(text or "").splitlines() if line.strip().startswith("{")]
    try:
        doc = json.loads(lines[-1]) if lines else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def run_data(group, hostvars):
    """What the report play hands the store: {run_id, hosts, nodes: {host: gpu_trial_node}} of the
    hosts of the group that ran the gpu_trial role (read from their public fact only)."""
    nodes = {h: hostvars[h]["gpu_trial_node"] for h in group if (hostvars.get(h) or {}).get("gpu_trial_node")}
    run_ids = sorted({n.get("run_id") for n in nodes.values() if n.get("run_id")})
    return {"run_id": run_ids[0] if run_ids else "", "hosts": sorted(nodes), "nodes": nodes}
