"""Remediation, dry-run first (issue 37 item 2): what wireup would do per finding class, and the
vendor ticket of an isolated GPU.

A GPU finding carries its ``remediation`` (gpuhealth.RULES: reset, reboot, isolate, monitor); the
classes here add what a node-level finding asks for (the driver reinstalled, the fabric manager
restarted). ``plan`` turns one node's findings into ordered steps, each an argv, and refuses to
act while a job holds the node (Slurm jobs on it, or processes on its GPUs:
``nvidia-smi --query-compute-apps``): a GPU reset needs idle GPUs, the others a node without jobs.
Shown by default; done only when asked, and every step is followed by the recheck (repair.yml's
quick check). Standard library only."""

from __future__ import annotations

import re
import shlex
from typing import TypedDict

from ..core import checks
from ..launch import slurm

# class -> (what it does, its severity order: the worst one on a node wins)
CLASSES = {
    "isolate": "drain the node for good and write the vendor ticket (RMA): nothing is reset or rebooted",
    "reboot": "reboot the node (a GPU off the bus or the driver asks for it)",
    "reinstall_driver": "reinstall the pinned NVIDIA driver (nvidia_driver role), then reboot",
    "restart_fabric_manager": "restart nvidia-fabricmanager (NVSwitch systems)",
    "reset": "reset the GPU (nvidia-smi -r): needs every GPU of the node idle",
}
ORDER = ("isolate", "reboot", "reinstall_driver", "restart_fabric_manager", "reset")
_BUS_ID = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")
_APP_ROW = re.compile(r"(?P<pid>[0-9]+), (?P<name>[^,]*), (?P<uuid>GPU-[0-9a-fA-F-]+)")
COMPUTE_APPS_ARGV = ["nvidia-smi", "--query-compute-apps=pid,process_name,gpu_uuid", "--format=csv,noheader"]


class Step(TypedDict):
    cls: str  # CLASSES
    argv: list[str]
    why: str  # the finding(s) it answers


class NodeRemedy(TypedDict):
    host: str
    cls: str  # the worst class of its findings, "" for none
    steps: list[Step]
    blocked: str  # why it cannot act now ("" when it can)
    show: list[str]


def busy(jobs_stdout: str, apps_stdout: str) -> str:
    """Why the node is busy ("" when idle): ``squeue -h -w NODE -o %i`` (job ids, one a line) and
    nvidia-smi --query-compute-apps (pid, name, GPU UUID a line). A line off its grammar counts as
    busy (fails closed: a read that cannot be understood never clears a reset)."""
    jobs = [line.strip() for line in (jobs_stdout or "").splitlines() if line.strip()]
    apps = [line.strip() for line in (apps_stdout or "").splitlines() if line.strip()]
    odd = [j for j in jobs if not re.fullmatch(r"[0-9]+(?:_[0-9]+)?", j)]
    odd += [a for a in apps if not _APP_ROW.fullmatch(a)]
    if odd:
        return f"cannot tell whether it is idle (unexpected output: {odd[0][:80]!r})"
    said = []
    if jobs:
        said.append(f"Slurm job(s) {', '.join(jobs[:5])} on it")
    if apps:
        said.append(f"{len(apps)} process(es) on its GPUs ({', '.join(a.split(', ')[1] for a in apps[:3])})")
    return "; ".join(said)


def _step(cls: str, finding: dict, host: str) -> Step:
    gpu = finding.get("gpu") or {}
    bus = str(gpu.get("bus_id") or "")
    why = str(finding.get("message") or finding.get("code") or cls)[:200]
    if cls == "reset":
        if not _BUS_ID.fullmatch(bus):
            raise ValueError(f"a reset needs the GPU's bus id: {bus[:40]!r} is none")
        return {"cls": cls, "argv": ["nvidia-smi", "--gpu-reset", "-i", bus], "why": why}
    argv = {
        "reboot": ["systemctl", "reboot"],
        "reinstall_driver": [checks.ANSIBLE_PLAYBOOK, "site.yml", "--tags", "nvidia_driver", "--limit", host],
        "restart_fabric_manager": ["systemctl", "restart", "nvidia-fabricmanager.service"],
        "isolate": slurm.drain_argv(host, why, whose="hw", check="quick"),
    }[cls]
    return {"cls": cls, "argv": argv, "why": why}


def plan(host: str, findings, *, busy_now: str, act: bool) -> NodeRemedy:
    """One node's remediation: the worst class among ``findings`` (each a gpuhealth finding or
    {"remediation": class, "message"}); reset steps per GPU, one step for the others; ``busy_now``
    (busy()'s answer) blocks any action; ``act`` false (the default) shows what would be done."""
    if not checks.is_host_name(str(host)):
        raise ValueError(f"{str(host)[:80]!r} is not a host name")
    wanted = [f for f in findings or [] if f.get("remediation") in CLASSES]
    worst = min((ORDER.index(f["remediation"]) for f in wanted), default=None)
    out: NodeRemedy = {"host": host, "cls": "", "steps": [], "blocked": "", "show": []}
    if worst is None:
        out["show"].append(f"Remediate: {host}: no finding asks for an action")
        return out
    cls = out["cls"] = ORDER[worst]
    chosen = [f for f in wanted if f["remediation"] == cls]
    out["steps"] = [_step(cls, f, host) for f in chosen] if cls == "reset" else [_step(cls, chosen[0], host)]
    out["blocked"] = busy_now
    head = f"Remediate: {host}: {cls} ({CLASSES[cls]})"
    if busy_now:
        out["show"].append(f"{head}: not now, the node is busy: {busy_now}")
        return out
    verb = "run" if act else "would run (dry run)"
    for step in out["steps"]:
        out["show"].append(f"{head}: {verb}: {shlex.join(step['argv'])}  # {step['why']}")
    out["show"].append(f"{head}: {_AFTER[cls == 'isolate']}")
    return out


_AFTER = {
    False: "then the recheck (repair.yml's quick check) before it returns",
    True: "then the vendor ticket (results/tickets/HOST/); it stays drained until the GPU is replaced",
}


def ticket(host: str, finding: dict, *, driver: str, run_id: str, figures=None) -> dict:
    """What a vendor RMA ticket needs about one isolated GPU: the host, the GPU's index, bus id,
    serial and UUID, the finding (code, message, remediation) and its figures, the driver."""
    gpu = finding.get("gpu") or {}
    return {
        "kind": "wireup_gpu_ticket",
        "host": str(host),
        "run_id": str(run_id),
        "gpu": {k: gpu.get(k) for k in ("index", "bus_id", "serial", "uuid")},
        "finding": {k: finding.get(k) for k in ("code", "severity", "message", "remediation")},
        "figures": dict(figures or {}),
        "driver": str(driver or ""),
    }


def ticket_path(results_dir: str, host: str, finding: dict, run_id: str) -> str:
    """results/tickets/HOST/RUN-gpuINDEX.json; ValueError for a host or run id off its grammar."""
    if not checks.is_host_name(str(host)) or not re.fullmatch(r"[0-9]{8}T[0-9]{6}Z", str(run_id)):
        raise ValueError(f"ticket: host {str(host)[:80]!r} or run id {str(run_id)[:40]!r} off its grammar")
    index = (finding.get("gpu") or {}).get("index")
    name = f"{run_id}-gpu{int(index)}.json" if isinstance(index, int) else f"{run_id}-gpu.json"
    return checks.results_path(results_dir, "tickets", str(host), name)
