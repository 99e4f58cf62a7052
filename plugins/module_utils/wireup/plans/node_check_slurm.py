"""The quick check through Slurm (issue 39, "the fleet's own engine"): one ``srun`` from the
group's Slurm submit host runs wireup-check once on every node (one task per node) instead of one
Ansible fork per node, and its output comes back as one line per node, checked here. Pure Python,
stdlib only, on the controller.

- route: which path ``bench.yml --tags quick`` takes (node_check_via: auto, ansible, slurm) from
  ``scontrol show node -o`` read on the submit host: slurm only when Slurm knows every node of the
  play by its Slurm name (slurm.node_name: its hostname) and none is drained or down (a job step
  cannot start there; the Ansible path still reaches it).
- srun_argv: the one job step: ``--nodelist`` of the play's nodes, one task per node, bounded by
  ``--immediate`` (the wait for the nodes) and ``--time``, the user's options through the sbatch
  option grammar (watchsettings.srun_option_errors); each task runs ``TASK_SCRIPT``, which prints LINE's
  grammar: ``wireup-quick NODE RC BASE64(stdout) BASE64(last bytes of stderr)``.
- parse: srun's stdout -> each play host's node_check.CheckResult (the same checked answer the
  Ansible path keeps: node_check.result), the lines refused and why. Nothing a node prints is
  trusted: a line off the grammar, from a node not in the play, twice from one node, with bad
  base64 or more than MAX_STDOUT bytes is refused; a host with no accepted line is ERROR, never PASS.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from typing import TypedDict

from ..capability import node_check
from ..core.watchsettings import VIA, srun_option_errors
from ..launch import slurm

HEAD = "wireup-quick"
# wireup-check --json on an 8-GPU node is about 2-6 KB; 256 KiB leaves room for every finding and
# caps what the controller decodes per node.
MAX_STDOUT = 256 * 1024
MAX_STDERR = 600  # bytes of stderr a task sends (the Ansible path keeps its last line only)
_B64 = r"[A-Za-z0-9+/]*={0,2}"
LINE = re.compile(
    HEAD
    + r" (?P<node>[A-Za-z0-9][A-Za-z0-9.-]{0,252}) (?P<rc>[0-9]{1,3}) (?P<out>"
    + _B64
    + r") (?P<err>"
    + _B64
    + r")"
)
# Each task: wireup-check's stdout and the end of its stderr, base64 on one line with the node's
# Slurm name (srun sets SLURMD_NODENAME). "$@" is the check's argv, never parsed by a shell.
TASK_SCRIPT = (
    'err=$(mktemp) || exit 1; out=$("$@" 2>"$err"); rc=$?; '
    f'printf \'{HEAD} %s %s %s %s\\n\' "$SLURMD_NODENAME" "$rc" '
    '"$(printf %s "$out" | base64 -w0)" "$(tail -c ' + str(MAX_STDERR) + ' "$err" | base64 -w0)"; '
    'rm -f "$err"'
)


class Route(TypedDict):
    """route's answer: via (ansible or slurm), why (one line), names ({host: Slurm node name} of
    the play's hosts), errors (node_check_via: slurm where it cannot be: the run stops)."""

    via: str
    tasks: str  # node_check's task file that runs it: quick.yml (a task per node) or quick_slurm.yml
    why: str
    names: dict[str, str]
    errors: list[str]


class SlurmQuick(TypedDict):
    """parse's answer: results ({host: node_check.CheckResult}, every host of names), refused (a
    line per refused line of srun's output: what and why), said (one line: how many answered)."""

    results: dict[str, node_check.CheckResult]
    refused: list[str]
    said: str


class Srun(TypedDict, total=False):
    """srun as wireup_quick_slurm ran it on the submit host: parse's input."""

    argv: list[str]
    rc: int | None
    stdout: str
    stderr: str


class SlurmRun(TypedDict):
    """wireup_quick_slurm's answer (node_check's __node_check_slurm_run): the route, and on the
    Slurm path srun's output as it is ({} on the Ansible path), which the controller parses."""

    route: Route
    srun: Srun


# ------------------------------------------------------------------------------ which path
def names_of(hosts, facts) -> dict[str, str]:
    """{host: Slurm node name} (slurm.node_name: the node's hostname, else its inventory name)."""
    return {str(h): slurm.node_name(str(h), f) for h, f in zip(hosts, facts, strict=True)}


def _slurm_gaps(names, show) -> list[str]:
    """Why a job step cannot run on every one of names' nodes ([] when it can)."""
    if not isinstance(show, dict) or show.get("rc") != 0:
        said = node_check.one_line((show or {}).get("stderr") or (show or {}).get("msg") or "no answer")
        return [f"scontrol show node on the Slurm submit host failed ({said[:200]})"]
    known = slurm.parse_show_node(str(show.get("stdout") or ""))
    gaps = []
    for host, name in sorted(names.items()):
        state = known.get(name)
        if state is None:
            gaps.append(f"Slurm does not know {host} (node name {name!r})")
        elif state["drain"] or {"DOWN", "FAIL", "FUTURE", "NOT_RESPONDING"} & set(state["words"]):
            gaps.append(f"{host} ({name}) is {state['state']} in Slurm: a job step cannot start there")
    return gaps


def _shared_names(names) -> list[str]:
    seen: dict[str, list[str]] = {}
    for host, name in sorted(names.items()):
        seen.setdefault(name, []).append(host)
    return [
        f"{', '.join(h)} share the Slurm node name {n!r}: one line cannot tell them apart"
        for n, h in seen.items()
        if len(h) > 1
    ]


def route(via, names, show=None) -> Route:
    """The path of the quick check. via: node_check_via; names: names_of's answer; show: the
    registered result of ``scontrol show node -o`` on the submit host (None when not read)."""
    errors = [e for host, name in sorted(names.items()) for e in slurm.node_name_errors(host, name)]
    errors += _shared_names(names)
    if via not in VIA:
        return _route("ansible", "", names, [f"node_check_via={via!r}: use one of {', '.join(VIA)}"])
    if via == "ansible":
        return _route("ansible", "node_check_via is ansible: one task per node", names)
    gaps = errors or _slurm_gaps(names, show)
    if not gaps:
        why = f"Slurm knows all {len(names)} node(s) and can start a job step on each (node_check_via {via})"
        return _route("slurm", f"one Slurm job step: {why}", names)
    said = "; ".join(gaps[:5]) + (f" (+{len(gaps) - 5} more)" if len(gaps) > 5 else "")
    if via == "auto":
        return _route("ansible", f"one task per node (node_check_via auto, not through Slurm: {said})", names)
    fix = "fix the nodes in Slurm or set node_check_via: auto or ansible"
    return _route("slurm", "", names, [f"node_check_via is slurm, but {said}: {fix}"])


def _route(via, why, names, errors=()) -> Route:
    tasks = "quick_slurm.yml" if via == "slurm" else "quick.yml"
    return {"via": via, "tasks": tasks, "why": why, "names": names, "errors": list(errors)}


# ------------------------------------------------------------------------------ the job step
def step_minutes(timeout, bench) -> int:
    """srun's --time in whole minutes: wireup-check's nvidia-smi reads run at the same time, each
    bounded by node_check_timeout (3x for the read, its retry and the rest), plus a minute with
    nccl-tests (node_check_bench: 30 s on 8 GPUs)."""
    seconds = 3 * int(timeout) + (60 if bench else 0)
    return max(1, math.ceil(seconds / 60))


def srun_argv(names, check_argv, *, options=None, wait=30, timeout=10, bench=False) -> list[str]:
    """The one srun over names' nodes (sorted), running check_argv once on each.
    ValueError for a node name or an option that the grammars refuse."""
    errors = [e for host, name in sorted(names.items()) for e in slurm.node_name_errors(host, name)]
    errors += _shared_names(names) + srun_option_errors(options)
    if errors:
        raise ValueError("; ".join(errors))
    nodes = sorted(set(names.values()))
    return [
        "srun",
        "--job-name=wireup-quick",
        f"--nodelist={','.join(nodes)}",
        f"--nodes={len(nodes)}",
        f"--ntasks={len(nodes)}",
        "--ntasks-per-node=1",
        f"--immediate={int(wait)}",
        f"--time={step_minutes(timeout, bench)}",
        "--kill-on-bad-exit=0",
        *slurm.sbatch_options(options),
        "/bin/sh",
        "-c",
        TASK_SCRIPT,
        HEAD,
        *[str(a) for a in check_argv],
    ]


# ------------------------------------------------------------------------------ the lines back
def encode_line(node, rc, stdout, stderr="") -> str:
    """TASK_SCRIPT's line in Python (what a task prints for wireup-check's output)."""
    out = base64.b64encode(stdout.encode()).decode()
    err = base64.b64encode(stderr.encode()[-MAX_STDERR:]).decode()
    return f"{HEAD} {node} {rc} {out} {err}"


def _decoded(text, limit):
    """base64 text -> str; ValueError for bad base64 or more than limit bytes (checked before decoding)."""
    if len(text) > (limit + 2) // 3 * 4:
        raise ValueError(f"more than {limit} bytes")
    try:
        raw = base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"not base64 ({exc})") from exc
    if len(raw) > limit:
        raise ValueError(f"more than {limit} bytes")
    return raw.decode("utf-8", "replace")


def _shown(line) -> str:
    return node_check.one_line(line)[:120]


def _read_line(line, by_name):
    """(host, fields) of one wireup-quick line, or (None, why it is refused)."""
    m = LINE.fullmatch(line)
    if not m:
        return None, f"refused a line off the {HEAD} grammar: {_shown(line)!r}"
    host = by_name.get(m["node"])
    if host is None:
        return None, f"refused a line from Slurm node {m['node']!r}, which is not one of the play's nodes"
    try:
        out = _decoded(m["out"], MAX_STDOUT)
        err = _decoded(m["err"], MAX_STDERR)
    except ValueError as exc:
        return None, f"refused {host}'s line (Slurm node {m['node']}): its wireup-check output is {exc}"
    return host, {"stdout": out, "stderr": err, "rc": int(m["rc"])}


def _missing(host, node, srun, twice):
    if twice:
        why = f"two lines from Slurm node {node} in one job step: neither is trusted"
    else:
        said = node_check.one_line((srun or {}).get("stderr") or (srun or {}).get("msg") or "")[-300:]
        rc = (srun or {}).get("rc")
        why = f"no line from Slurm node {node} in the job step (srun exit code {rc}): {said or 'no output'}"
    return node_check.result(host, stdout="", stderr=why, rc=None)


def parse(srun, names) -> SlurmQuick:
    """srun's registered result (stdout, stderr, rc) -> each host's checked answer. names: {host:
    Slurm node name}. Lines not starting with HEAD are srun's or a shell's, passed over."""
    by_name = {name: host for host, name in names.items()}
    got, refused, twice = {}, [], set()
    for line in str((srun or {}).get("stdout") or "").splitlines():
        if not line.startswith(HEAD):
            continue
        host, fields = _read_line(line, by_name)
        if host is None:
            refused.append(fields)
        elif host in got or host in twice:
            twice.add(host)
            refused.append(f"refused a second line from {host} (Slurm node {names[host]}): neither trusted")
        else:
            got[host] = fields
    for host in twice:
        got.pop(host, None)
    results = {
        host: node_check.result(host, **got[host])
        if host in got
        else _missing(host, names[host], srun, host in twice)
        for host in sorted(names)
    }
    said = f"{len(got)} of {len(names)} node(s) answered through Slurm" + (
        f"; {len(refused)} line(s) refused" if refused else ""
    )
    return {"results": results, "refused": refused, "said": said}
