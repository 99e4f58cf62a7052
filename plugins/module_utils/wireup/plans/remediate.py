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

import json
import re
import shlex
from dataclasses import dataclass
from typing import TypedDict

from ..core import checks
from ..launch import blast, slurm

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


# --- repair.yml -e repair_act=true (issue 37 item 2): doing it ---------------------------------------
_UUID = re.compile(r"GPU-[0-9a-fA-F-]{8,64}")
_SERIAL = re.compile(r"[0-9A-Za-z-]{1,40}")


def _on(grammar, value):
    """``value`` when it is a string on ``grammar``, else None."""
    return value if isinstance(value, str) and grammar.fullmatch(value) else None


def _gpu_of(given) -> dict:
    """A finding's GPU identity from the node, each field kept only when on its grammar."""
    gpu = given if isinstance(given, dict) else {}
    index = gpu.get("index")
    whole = isinstance(index, int) and not isinstance(index, bool) and 0 <= index < 1024
    return {
        "index": index if whole else None,
        "bus_id": _on(_BUS_ID, gpu.get("bus_id")),
        "uuid": _on(_UUID, gpu.get("uuid")),
        "serial": _on(_SERIAL, gpu.get("serial")),
    }


def _text(value, size=300) -> str:
    return " ".join("".join(c if c.isprintable() else " " for c in str(value or "")).split())[:size]


def findings_of(stdout) -> list[dict]:
    """The GPU findings of ``wireup-check --json`` (check/run.py's ``gpu_findings``: gpuhealth's
    findings) whose remediation is a class of CLASSES, rebuilt field by field (code, severity,
    message one printable line; the GPU's identity each on its grammar). An answer that is not
    wireup-check's JSON has none: the node's recheck already says ERROR, and nothing acts on it."""
    try:
        doc = json.loads(stdout or "")
    except ValueError:
        return []
    given = doc.get("gpu_findings") if isinstance(doc, dict) else None
    out = []
    for f in given if isinstance(given, list) else []:
        if not isinstance(f, dict) or f.get("remediation") not in CLASSES:
            continue
        out.append(
            {
                "code": _text(f.get("code"), 80),
                "severity": _text(f.get("severity"), 20),
                "message": _text(f.get("message")),
                "remediation": f["remediation"],
                "gpu": _gpu_of(f.get("gpu")),
            }
        )
    return out


class Candidate(TypedDict):
    host: str
    node: str  # the Slurm node name
    cls: str
    findings: list[dict]  # findings_of's, of the node's worst class
    why: str  # the first of them, for the blast radius' common finding and the events


class RemedyPlan(TypedDict):
    """``__repair_remedy``: what repair.yml does about the drained nodes whose recheck failed."""

    nodes: dict[str, Candidate]  # host -> its remedy (only hosts with a class)
    act: list[str]  # the hosts the remediation play acts on, in batch order ([] in a dry run)
    batches: list[list[str]]
    refused: list[str]  # the blast radius' lines: nothing is done, the play stops
    show: list[str]


def _candidates(repair: dict, returned: dict, runs: dict) -> dict:
    """{host: Candidate} for each node the recheck kept drained whose findings name a class."""
    out = {}
    for host, said in sorted((returned.get("nodes") or {}).items()):
        if said.get("action") != "kept":
            continue
        found = findings_of(((runs or {}).get(host) or {}).get("stdout"))
        worst = min((ORDER.index(f["remediation"]) for f in found), default=None)
        if worst is None:
            continue
        chosen = [f for f in found if f["remediation"] == ORDER[worst]]
        node = repair["nodes"][host]["node"]
        out[host] = {
            "host": host,
            "node": node,
            "cls": ORDER[worst],
            "findings": chosen,
            "why": chosen[0]["message"],
        }
    return out


def batches_of(hosts, size: int) -> list[list[str]]:
    """``hosts`` in batches of ``size`` (at least 1), in order: the remediation play's ``serial``."""
    size = max(1, int(size))
    hosts = list(hosts)
    return [hosts[i : i + size] for i in range(0, len(hosts), size)]


@dataclass(frozen=True)
class ActSettings:
    """repair.yml's settings of the remediation, by name (the filter's keyword arguments)."""

    act: bool  # repair_act: do it (false: the dry run)
    batch: int  # repair_batch: nodes acted on at once
    max_share: int  # wireup_drain_max_share
    max_nodes: int  # wireup_drain_max_nodes


def _verb(chosen: bool, act: bool, allowed: bool) -> str:
    if chosen:
        return "acts on it"
    if not allowed:
        return "not acted on: above the blast radius (below)"
    return "would act on it (dry run: -e repair_act=true does it)"


def run_plan(
    repair: dict, returned: dict, runs: dict, state, group: str, *, settings: ActSettings
) -> RemedyPlan:
    """Which kept nodes are acted on, in which batch. ``repair``/``returned``: repair.plan's and
    repair.returns' answers; ``runs``: {host: the recheck's registered wireup-check run};
    ``state``: the registered ``scontrol show node -o``; ``group``: the node group's name (its
    members: the repair plan's nodes).
    ``settings``: ActSettings.

    The run's actions count against the blast radius (launch/blast.py) of the node group and of
    every partition of those nodes: the nodes are drained already, so what is limited is how many
    this run reboots, reinstalls, resets or isolates. Above it nothing is done and ``refused``
    carries the shared-cause line, in a dry run too (it says what a real run would refuse)."""
    found = _candidates(repair, returned, runs)
    wanted = {c["node"]: c["why"] for c in found.values()}
    parsed = slurm.parse_show_node((state if isinstance(state, dict) else {}).get("stdout", ""))
    groups = dict(blast.groups_of(parsed, wanted))
    groups[f"the node group {group or '?'}"] = [e["node"] for e in repair["nodes"].values()]
    verdict = blast.verdict(groups, [], wanted, max_share=settings.max_share, max_nodes=settings.max_nodes)
    chosen = sorted(found) if settings.act and verdict["allowed"] else []
    out: RemedyPlan = {
        "nodes": found,
        "act": chosen,
        "batches": batches_of(chosen, settings.batch),
        "refused": list(verdict["lines"]),
        "show": [],
    }
    for host, c in found.items():
        verb = _verb(host in chosen, settings.act, verdict["allowed"])
        out["show"].append(
            f"Remediate: {host} ({c['node']}): {c['cls']} ({CLASSES[c['cls']]}): {verb}: {c['why']}"
        )
    out["show"] += [f"Remediate: batch {i + 1}: {', '.join(b)}" for i, b in enumerate(out["batches"])]
    return out


# What the remediation play does itself per class: a command on the node, the reboot module, or
# nothing (reinstall_driver runs a playbook on the controller: shown, for an operator to run).
ON_NODE = ("reset", "restart_fabric_manager", "isolate")
MAX_BATCH = 1000


class NodeStep(TypedDict):
    """``__repair_step``: one node's remediation in its batch."""

    host: str
    node: str
    cls: str
    commands: list[list[str]]  # argvs run on the node (ON_NODE classes)
    reboot: list[str]  # [the reboot command] for a reboot, else []
    tickets: list[dict]  # {path, ticket} of an isolated node's GPUs (written on the controller)
    recheck: bool  # the recheck follows (not for an isolated, refused or shown-only node)
    blocked: str
    show: list[str]


def _read(result, what: str) -> tuple[str, str]:
    """(stdout, why it cannot be read or "") of a registered read: a failed one cannot clear a node."""
    result = result if isinstance(result, dict) else {}
    if result.get("rc") != 0:
        said = _text(result.get("stderr") or result.get("msg") or result.get("stdout"), 120)
        return "", f"cannot tell whether it is idle ({what} failed: exit code {result.get('rc')}: {said})"
    return str(result.get("stdout") or ""), ""


def busy_reads(jobs_result, apps_result) -> str:
    """busy()'s answer from the registered ``squeue -h -w NODE -o %i`` and
    ``nvidia-smi --query-compute-apps`` (COMPUTE_APPS_ARGV) runs; either failing is busy."""
    jobs, why = _read(jobs_result, "squeue")
    apps, why_apps = _read(apps_result, "nvidia-smi --query-compute-apps")
    return why or why_apps or busy(jobs, apps)


@dataclass(frozen=True)
class StepSettings:
    """One node's step's settings, by name (the filter's keyword arguments)."""

    act: bool  # repair_act and not check mode
    driver: str  # the node's driver version (the ticket's)
    run_id: str  # YYYYMMDDTHHMMSSZ (the ticket's name)
    results_dir: str  # wireup_results_dir (where the ticket goes)


def node_step(candidate: Candidate, jobs_result, apps_result, settings: StepSettings) -> NodeStep:
    """One node's step from run_plan's candidate and its two reads (busy_reads): a busy node is
    refused, saying why (``settings``: StepSettings)."""
    why_busy = busy_reads(jobs_result, apps_result)
    remedy = plan(candidate["node"], candidate["findings"], busy_now=why_busy, act=settings.act)
    cls, node = remedy["cls"], candidate["node"]
    out: NodeStep = {
        "host": candidate["host"],
        "node": node,
        "cls": cls,
        "commands": [],
        "reboot": [],
        "tickets": [],
        "recheck": False,
        "blocked": why_busy,
        "show": list(remedy["show"]),
    }
    if why_busy or not settings.act:
        return out
    if cls == "reinstall_driver":
        out["show"].append(
            f"Remediate: {node}: repair.yml does not reinstall the driver itself: run the command above"
        )
        return out
    out["commands"] = [s["argv"] for s in remedy["steps"]] if cls in ON_NODE else []
    out["reboot"] = [shlex.join(remedy["steps"][0]["argv"])] if cls == "reboot" else []
    out["recheck"] = cls != "isolate"
    if cls == "isolate":
        out["tickets"] = [
            {
                "path": ticket_path(settings.results_dir, node, f, settings.run_id),
                "ticket": ticket(node, f, driver=settings.driver, run_id=settings.run_id),
            }
            for f in candidate["findings"]
        ]
    return out


def _outcome(result) -> str:
    result = result if isinstance(result, dict) else {}
    if result.get("skipped"):
        return "skipped"
    if "rebooted" in result:
        return (
            "done (rebooted)"
            if result.get("rebooted") and not result.get("failed")
            else f"failed: {_text(result.get('msg'), 160)}"
        )
    if result.get("rc") == 0:
        return "done (exit code 0)"
    said = _text(result.get("stderr") or result.get("msg") or result.get("stdout"), 160)
    return f"failed (exit code {result.get('rc')}): {said}"


class Acted(TypedDict):
    """``__repair_acted``: what the node's step did, as history events and the recheck's go."""

    events: list[dict]  # {host, why}: history's action events
    recheck: bool  # every action succeeded and the class wants the recheck
    rechecks: list[str]  # node_check's task files to run for it: ["quick"] when recheck, else []
    show: list[str]


def acted(step: NodeStep, command_results, reboot_results) -> Acted:
    """The step's actions and their results (the registered loops' ``results``, in step order):
    one action event each (who acted is the controller's user: wireup_history), and whether the
    recheck follows (not after a failed action: the node stays drained, saying so)."""
    argvs = [shlex.join(a) for a in step["commands"]] + list(step["reboot"])
    results = list(command_results or []) + list(reboot_results or [])
    out: Acted = {"events": [], "recheck": step["recheck"], "rechecks": [], "show": []}
    for i, said in enumerate(argvs):
        outcome = _outcome(results[i] if i < len(results) else None)
        why = f"{step['cls']}: {said}: {outcome}"
        out["events"].append({"host": step["host"], "why": why})
        out["show"].append(f"Remediate: {step['node']}: {why}")
        out["recheck"] = out["recheck"] and outcome.startswith("done")
    paths = [t["path"] for t in step["tickets"]]
    if paths:
        out["events"].append(
            {
                "host": step["host"],
                "why": f"isolate: vendor ticket(s) {', '.join(paths)}; it stays drained",
            }
        )
    out["rechecks"] = ["quick"] if out["recheck"] else []
    if argvs and not out["recheck"] and step["cls"] != "isolate":
        out["show"].append(f"Remediate: {step['node']}: an action failed: no recheck, it stays drained")
    return out


def recheck_items(hosts, results) -> list[dict]:
    """history's recheck events ({host, why}) for the hosts rechecked after their action, from
    node_check.result's answers ({host: CheckResult})."""
    out = []
    for host in hosts or []:
        found = (results or {}).get(host) or {}
        verdict = found.get("verdict") or "no result"
        out.append(
            {
                "host": host,
                "why": f"recheck after the action: {verdict}: {found.get('line') or ''}",
            }
        )
    return out


def setting_errors(values: dict) -> list[str]:
    """preflight's check of repair.yml's remediation settings: repair_act a boolean, repair_batch a
    whole number from 1 to MAX_BATCH (the nodes acted on at once); each error names the variable
    and the fix."""
    errors = []
    if "repair_act" in values and not isinstance(values["repair_act"], bool):
        errors.append(f"repair_act={values['repair_act']!r} must be true or false (-e repair_act=true acts)")
    batch = values.get("repair_batch", 1)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        errors.append(
            f"repair_batch={batch!r} must be a whole number from 1 to {MAX_BATCH} (the nodes acted on at "
            f"once; the blast radius, wireup_drain_max_share and _nodes, bounds the run as well)"
        )
    return errors


def rechecked(acted_by_host: dict) -> list[str]:
    """The hosts of a batch whose actions all succeeded and whose class wants the recheck."""
    return sorted(h for h, a in (acted_by_host or {}).items() if isinstance(a, dict) and a.get("recheck"))
