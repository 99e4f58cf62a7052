"""Slurm job state for torchrun_launch's Slurm path: hostlists, sbatch and sacct output, verdict.

Pure Python (stdlib only, no Ansible imports), called through plugins/filter/wireup_slurm.py.
The verdict has the shape of ``wait.job_verdict`` (over, ok, first_failure, timed_out, running,
reason) plus per-node states in the shape of ``wireup-jobctl status`` (state running|exited|lost|
stopped|missing, rc, ended), built from sacct's steps: job.sbatch starts one step per node
(JOBID.0, JOBID.1, ...), so each node's exit code is its step's.

sacct is read as ``sacct --parsable2 --noheader -j ID --format=JobID,State,ExitCode,NodeList,End``.
"""

from __future__ import annotations

import re
import shlex

# timezone.utc, not datetime.UTC (3.11+): wireup-check imports this module on the nodes, where
# Ubuntu 22.04's python3 is 3.10 (issue 26).
from datetime import datetime, timezone
from typing import TypedDict

from ..core import checks
from . import blast

SACCT_FORMAT = "JobID,State,ExitCode,NodeList,End"
_COLUMNS = {
    "jobid": "jobid",
    "jobidraw": "jobid",
    "state": "state",
    "exitcode": "exit_code",
    "nodelist": "nodelist",
    "end": "end",
}
# sacct's JobID (sacct(1), JOBID): the job (digits), an array task (_TASK, or _[RANGES] for tasks
# not yet started, with %MAX), a heterogeneous job's component (+OFFSET), then a step: a number,
# batch, extern, interactive (salloc's, Slurm 20.11+) or TBD (not yet started), with a het step's
# component (+OFFSET). ASCII digits only: str.isdigit() takes '²', which int() refuses.
_STEP = r"(?:[0-9]+|batch|extern|interactive|TBD)(?:\+[0-9]+)?"
_JOBID = re.compile(r"([0-9]+)(?:_([0-9]+|\[[0-9,%:-]+\]))?(?:\+([0-9]+))?(?:\.(" + _STEP + r"))?")
_EXIT = re.compile(r"([0-9]+):([0-9]+)")
_NUMBER = re.compile(r"[0-9]+")
# How many names one host list may expand to when the job's own size is not known (a look at a
# job's state): larger than any cluster's node count, small enough to expand at once.
HOSTLIST_MAX = 65536
# Job and step states (sacct's long names) that mean: not over yet.
ACTIVE = frozenset(
    {
        "PENDING",
        "RUNNING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "SUSPENDED",
        "CONFIGURING",
        "COMPLETING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "RESV_DEL_HOLD",
        "SPECIAL_EXIT",
        "REVOKED",
    }
)
# A step in one of these states was ended from outside: scancel, the time limit, preemption.
_STOPPED = frozenset({"CANCELLED", "TIMEOUT", "PREEMPTED", "DEADLINE"})
# The node (not the program) failed.
_LOST = frozenset({"NODE_FAIL", "BOOT_FAIL"})


def expand_hostlist(text: str, limit: int = HOSTLIST_MAX) -> list[str]:
    """Slurm's compressed host list -> names: 'node[1-3,7],gpu[01-02]-ib' -> node1, node2, ...

    Zero padding is kept (gpu[08-10] -> gpu08, gpu09, gpu10). 'None assigned', '(null)' and ''
    are no hosts. Several bracket groups in one name (rack[1-2]-n[1-2]) expand as a product. A
    bracket group that is no list of plain ranges (letters, superscript digits, numbers of more
    than 18 digits) is no range: the name is kept as it is printed. ValueError, naming the list and
    ``limit``, when it names more than ``limit`` hosts: counted first, never expanded
    ('n[0-9999999]' is 10 M names)."""
    text = (text or "").strip()
    if not text or text in ("None assigned", "(null)", "None"):
        return []
    parts = [part.strip() for part in _split_top(text, ",")]
    count = sum(_count_one(part) for part in parts)
    if count > limit:
        raise ValueError(f"host list {text[:60]!r} names {count} hosts, more than {limit}")
    names: list[str] = []
    for part in parts:
        names.extend(_expand_one(part))
    return [n for n in names if n]


def _split_top(text: str, sep: str) -> list[str]:
    """Split on sep outside brackets."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [p for p in out if p]


_GROUP = re.compile(r"\[([^\]]*)\]")
_BOUND = re.compile(r"[0-9]{1,18}")


def _ranges(group: str) -> list[tuple[int, int, int]] | None:
    """A bracket group's ranges as (low, high, zero-padded width); None when it is no host range."""
    out = []
    for item in group.split(","):
        low, dash, high = item.strip().partition("-")
        high = high if dash else low
        if not (_BOUND.fullmatch(low) and _BOUND.fullmatch(high)):
            return None
        out.append((int(low), int(high), len(low) if low.startswith("0") else 0))
    return out


def _count_one(name: str) -> int:
    """How many names _expand_one makes of ``name``, without making them."""
    count = 1
    for group in _GROUP.finditer(name):
        ranges = _ranges(group.group(1))
        if ranges is None:
            break  # kept as text from here on
        count *= sum(max(0, high - low + 1) for low, high, _width in ranges)
    return count


def _expand_one(name: str) -> list[str]:
    m = _GROUP.search(name)
    if not m:
        return [name]
    ranges = _ranges(m.group(1))
    if ranges is None:
        return [name]  # not a host range: keep the text as it is
    head, tail = name[: m.start()], name[m.end() :]
    out = []
    for low, high, width in ranges:
        for i in range(low, high + 1):
            out.extend(_expand_one(head + str(i).zfill(width) + tail))
    return out


def sbatch_job_id(stdout: str) -> str:
    """The job id from `sbatch --parsable` ('123' or '123;cluster'); '' when there is none."""
    for line in (stdout or "").splitlines():
        first = line.strip().split(";", 1)[0]
        if first.isascii() and first.isdigit():
            return first
    return ""


def _end_time(text: str):
    """sacct's End ('2026-12-01T01:00:12', 'Unknown' while running) as epoch seconds, or None."""
    try:
        when = datetime.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S")
        return when.replace(tzinfo=timezone.utc).timestamp()  # noqa: UP017  # python3.10 on nodes (issue 26)
    except ValueError:
        return None


def parse_sacct(text: str, fmt: str = SACCT_FORMAT, *, max_nodes: int = HOSTLIST_MAX) -> list[dict]:
    """Rows of `sacct --parsable2 --noheader --format=FMT` (by default SACCT_FORMAT; fmt names the
    columns in their order, of JobID, State, ExitCode, NodeList, End; a header line is skipped).

    Each row: jobid (as printed), job (the numeric job id), step ('' for the job, 'batch',
    'extern', '0', '1', ...), state (first word: 'CANCELLED by 0' -> CANCELLED), rc and signal
    (from ExitCode 'rc:signal'; None when unreadable), nodes (expanded NodeList), end (epoch or None),
    line (the row as printed, cleaned). Lines with too few fields, or a JobID that is not a Slurm job
    id (_JOBID), are skipped (truncated output). ValueError, naming the line, for a NodeList of more
    than ``max_nodes`` names (expand_hostlist)."""
    columns = [_COLUMNS.get(c.strip().lower(), "") for c in fmt.split(",")]
    rows = []
    for raw in (text or "").splitlines():
        line = raw.strip().strip("\x00")
        if not line:
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < len(columns):
            continue  # a truncated line
        fields = {"jobid": "", "state": "", "exit_code": "", "nodelist": "", "end": ""}
        fields.update((c, v) for c, v in zip(columns, parts, strict=False) if c)
        m = _JOBID.fullmatch(fields["jobid"])
        if not m or not fields["state"]:
            continue
        try:
            nodes = expand_hostlist(fields["nodelist"], max_nodes)
        except ValueError as exc:
            raise ValueError(f"sacct printed {_shown(line)}: its {exc}") from None
        rows.append(_row(fields, m, nodes, line))
    return rows


def _row(fields: dict, m, nodes: list[str], line: str) -> dict:
    code = _EXIT.fullmatch(fields["exit_code"])
    return {
        "jobid": fields["jobid"],
        "job": m.group(1),
        "step": m.group(4) or "",
        "state": fields["state"].split()[0].upper().rstrip("+"),
        "rc": int(code.group(1)) if code else None,
        "signal": int(code.group(2)) if code else None,
        "nodes": nodes,
        "end": _end_time(fields.get("end", "")),
        "line": line,
    }


def is_row_of(jobid, job_id) -> bool:
    """Whether sacct's JobID ``jobid`` is one of job ``job_id``'s rows: the job itself, a
    heterogeneous job's component (JOB+N), or a step of either (.batch, .extern, .interactive, .N,
    .N+M). An array task (JOB_N) is a job of its own: only its own id asks for it."""
    if not (is_job_id(job_id) and isinstance(jobid, str)):
        return False
    return re.fullmatch(re.escape(job_id) + r"(?:\+[0-9]+)?(?:\." + _STEP + r")?", jobid) is not None


def job_rows(text: str, job_id: str, max_nodes: int = HOSTLIST_MAX) -> list[dict]:
    """parse_sacct's rows of job ``job_id`` (is_row_of), each naming at most ``max_nodes`` nodes
    (the job's own count: job.sbatch asks --nodes=N); ValueError naming the first row that is not
    the job's, for it is not this job's answer."""
    if not is_job_id(job_id):
        raise ValueError(f"{str(job_id)[:40]!r} is not a Slurm job id")
    rows = parse_sacct(text, max_nodes=max_nodes)
    for row in rows:
        if not is_row_of(row["jobid"], job_id):
            raise ValueError(f"sacct printed {_shown(row['line'])}, not a row of Slurm job {job_id}")
    return rows


def _node_state(row: dict) -> dict:
    """One step row -> a wireup-jobctl-like state {state, rc, ended, slurm_state, step}."""
    st = row["state"]
    out = {"slurm_state": st, "step": row["jobid"], "rc": row["rc"], "ended": row["end"]}
    if st in ACTIVE:
        out.update(state="running", rc=None)
    elif st in _STOPPED:
        out["state"] = "stopped"
    elif st in _LOST or (row["signal"] or 0) != 0:
        out["state"] = "lost"
    elif st in ("COMPLETED", "FAILED", "OUT_OF_MEMORY"):  # the program's exit code
        out["state"] = "exited"
    else:  # a state this code does not know: never taken for success
        out["state"] = "lost"
    return out


_FIRST_FAILED = re.compile(r"wireup: first failed step: node rank (\d+) \((\S+)\) exited with code (\d+): .*")


def first_failed_step(batch_output: str) -> str:
    """The Slurm node name of the step that job.sbatch's batch script saw fail first ('' when its
    output does not say: an older bash, no failure, a cut-off or missing file). The batch script
    knows the order to the fraction of a second; sacct's End has whole seconds only."""
    for line in str(batch_output or "").splitlines():
        m = _FIRST_FAILED.fullmatch(line.strip())
        if m and checks.is_host_name(m.group(2)):
            return m.group(2)
    return ""


class SlurmVerdict(TypedDict):
    """A Slurm job's verdict (``__torchrun_launch_verdict`` on the Slurm path): wait.Verdict's
    keys, Slurm's job, and each node's state in wireup-jobctl's shape (with its step and Slurm state)."""

    over: bool
    ok: bool
    first_failure: str
    timed_out: bool
    running: list[str]
    reason: str
    job_id: str
    job_state: str
    job_exit_code: str
    nodes: dict


_PENDING = {"state": "running", "rc": None, "ended": None, "slurm_state": "PENDING", "step": ""}
_UNJUDGED = {"state": "lost", "rc": None, "ended": None, "slurm_state": "", "step": ""}
_MISSING = {"state": "missing", "rc": None, "ended": None, "slurm_state": "", "step": ""}


def _node_states(hosts: list[str], names: dict, steps: list[dict], job) -> dict:
    """{host: its state}: its latest step's (a requeued job starts its steps again), pending while
    the job has none for it yet, missing once the job ended without one."""
    nodes = {}
    for host in hosts:
        mine = [r for r in steps if (names.get(host) or host) in r["nodes"]]
        if mine:
            nodes[host] = _node_state(max(mine, key=lambda r: int(r["step"])))  # steps: [0-9]+
        else:
            nodes[host] = dict(_PENDING if job is None or job["state"] in ACTIVE else _MISSING)
    return nodes


def _failures(nodes: dict, timed_out: bool) -> list[tuple]:
    """(end, stopped by Slurm, missing, host) of each failed node: earliest end first; at the same
    second, a node that failed by itself (exit code, lost) before one that Slurm stopped because
    of it. When wireup cancelled the job (timed_out), a node Slurm stopped then did not fail."""
    failed_states = ("lost", "missing") if timed_out else ("lost", "missing", "stopped")
    failures = []
    for host, st in nodes.items():
        if st["state"] in failed_states or (st["state"] == "exited" and st["rc"] != 0):
            end = st["ended"] if st["ended"] is not None else float("inf")
            failures.append((end, st["state"] == "stopped", st["state"] == "missing", host))
    return failures


def _first(failures: list[tuple], names: dict, first_failed: str, counted: bool) -> str:
    """The node that failed first: by sacct's End, unless the batch script saw one of the failed
    nodes fail first (``first_failed``: its Slurm name). None when ``counted`` is false (the job is
    not over, no step ran: the job's own state says why, or every node was stopped by Slurm:
    scancel from outside, the time limit)."""
    if not counted or not failures or all(f[1] for f in failures):
        return ""
    seen = [f[3] for f in failures if (names.get(f[3]) or f[3]) == first_failed and not f[1]]
    return seen[0] if first_failed and seen else min(failures)[3]


def _how(st: dict) -> str:
    if st["state"] == "lost":
        lost = st["slurm_state"] in _LOST
        return (
            f"was lost ({st['slurm_state']}, signal {st.get('rc')})"
            if lost
            else f"was killed ({st['slurm_state']})"
        )
    if st["state"] == "missing":
        return "never ran a step"
    if st["state"] == "stopped":
        return f"was stopped ({st['slurm_state']})"
    return f"exited with code {st['rc']}"


def _state_reason(job, where: str, facts: dict) -> str:
    """The sentence when no node is to blame: the job's own state says how it stands."""
    state = job["state"] if job else "PENDING"
    if facts["over"] and facts["failures"] and all(f[1] for f in facts["failures"]):
        return f"{where} was stopped by Slurm ({state}): scancel, its time limit or preemption"
    if facts["over"] and state != "COMPLETED":
        before = "" if facts["steps"] else " before any node ran its step"
        return f"{where} ended {state} with exit code {job['rc']}:{job['signal']}{before}"
    if facts["over"]:
        return f"{where} COMPLETED: every node exited with code 0"
    if job is None or state == "PENDING":
        return f"{where} is pending"
    return f"{where} is {state.lower()} on {', '.join(facts['running']) or 'no node yet'}"


def _reason(job, nodes: dict, facts: dict) -> str:
    """The verdict's sentence; ``facts``: over, timed_out, first, failures, running, steps."""
    where = f"Slurm job {job['job']}" if job else "the Slurm job"
    state = job["state"] if job else "PENDING"
    if facts["timed_out"] and facts["over"]:
        return f"{where} ran out of time (torchrun_launch_timeout) and was cancelled ({state})"
    if facts["timed_out"]:
        return f"{where} still {state.lower()} when torchrun_launch_timeout ran out"
    if facts["first"]:
        return f"{facts['first']} {_how(nodes[facts['first']])} in {where} ({state})"
    return _state_reason(job, where, facts)


def _unjudged(hosts: list[str], job_id, why: str, timed_out: bool) -> SlurmVerdict:
    """The verdict on an answer that is not this job's (job_rows' ValueError): over, never ok,
    every node lost to it, the reason saying why; nothing of the answer is believed."""
    return {
        "over": True, "ok": False, "first_failure": "", "timed_out": timed_out, "running": [],
        "reason": why, "job_id": str(job_id or "")[:40], "job_state": "", "job_exit_code": "",
        "nodes": {h: dict(_UNJUDGED) for h in hosts},
    }  # fmt: skip


def job_verdict(
    sacct_text: str,
    hosts,
    *,
    job_id: str,
    max_nodes: int | None = None,
    timed_out: bool = False,
    first_failed: str = "",
) -> SlurmVerdict:
    """How Slurm job ``job_id`` of job.sbatch went, per node, from sacct's rows.

    ``hosts``: the job's inventory hosts, or {host: its Slurm node name} (node_names; a list: each
    host's own name). Over when the job has a final state (or sacct has no row: then it is 'pending'
    until the caller's time runs out). ``timed_out``: wireup stopped it because its time ran out.
    ``first_failed``: the Slurm node name whose step the batch script saw fail first
    (first_failed_step); it names the first failure when that node failed, else sacct's End decides.
    An answer with a row of another job, or a row naming more nodes than ``max_nodes`` (default: the
    job's hosts; job.sbatch asks for that many), is not this job's: over, not ok (_unjudged).
    """
    names = dict(hosts) if isinstance(hosts, dict) else {}
    hosts = list(hosts or [])
    try:
        rows = job_rows(sacct_text, job_id, max_nodes or len(hosts) or HOSTLIST_MAX)
    except ValueError as exc:
        return _unjudged(hosts, job_id, str(exc), timed_out)
    job = next((r for r in rows if r["step"] == ""), None)
    steps = [r for r in rows if _NUMBER.fullmatch(r["step"])]
    nodes = _node_states(hosts, names, steps, job)
    job_state = job["state"] if job else "PENDING"
    over = job is not None and job_state not in ACTIVE
    failures = _failures(nodes, timed_out)
    first = _first(failures, names, first_failed, over and bool(steps))
    running = sorted(h for h, st in nodes.items() if st["state"] == "running")
    facts = {"over": over, "timed_out": timed_out, "first": first, "failures": failures}
    facts.update(running=running, steps=steps)
    return {
        "over": over or timed_out,
        "ok": over and job_state == "COMPLETED" and not failures and not timed_out,
        "first_failure": first,
        "timed_out": timed_out,
        "running": running,
        "reason": _reason(job, nodes, facts),
        "job_id": job_id,
        "job_state": job_state,
        "job_exit_code": f"{job['rc']}:{job['signal']}" if job and job["rc"] is not None else "",
        "nodes": nodes,
    }


def node_name(host: str, facts=None) -> str:
    """A host's Slurm node name: its hostname, else the inventory name."""
    return str((facts or {}).get("hostname") or host)


def node_names(plan: dict) -> dict:
    """{inventory host: Slurm node name} for a launch plan (hostname, else the inventory name): the
    plan's own ``node_names`` when it has them (job_plan makes them once: a node's slice of the plan
    holds its own NodePlan only)."""
    names = plan.get("node_names")
    if isinstance(names, dict):
        return {h: str(names.get(h) or h) for h in plan.get("hosts", [])}
    nodes = plan.get("nodes", {})
    return {h: node_name(h, nodes.get(h)) for h in plan.get("hosts", [])}


DRAIN_REASON_MAX = 120
# Whose problem a drain is (issue 37), after the reason prefixes operators already sort drains by
# (Nebius soperator's "[node_problem]" and "[user_problem]"): the node's hardware, the node's
# software (driver, fabric manager, a check that could not read the node), or a job's (the node is
# fine; clearing it needs no hardware recheck). Then which check drained it, which repair.yml runs
# again: "quick" (wireup-check), "bench" (bench.yml's record, the launch gate), "job" (none).
OWNERS = {"hw": "[node_problem] hw", "sw": "[node_problem] sw", "job": "[user_problem] job"}
CHECKS = ("quick", "bench", "job")
_OWNED_REASON = re.compile(
    r"wireup: \[(?:node|user)_problem\] (?P<whose>hw|sw|job)/(?P<check>quick|bench|job): (?P<finding>.*)"
)


def drain_reason(finding: str, limit: int = DRAIN_REASON_MAX, *, whose: str = "", check: str = "") -> str:
    """The Reason= of a drain: "wireup: ", whose problem it is and the check that found it
    ("[node_problem] hw/quick: ", OWNERS, CHECKS; left out when ``whose`` is empty) and the finding
    on one line of printable ASCII, at most ``limit`` characters (cut with "..."). Control
    characters and whitespace runs become one space, other bytes '?', double quotes (scontrol
    strips a leading and a trailing one) single quotes, and '|' (the field separator of sinfo/sacct
    --parsable) '/'. It travels as one argv element, never through a shell."""
    if whose and (whose not in OWNERS or check not in CHECKS):
        raise ValueError(
            f"drain_reason: whose={whose!r} check={check!r}: not one of {sorted(OWNERS)}, {CHECKS}"
        )
    text = str(finding if finding is not None else "")
    out = []
    for ch in text:
        if ch.isspace() or ord(ch) < 32 or ord(ch) == 127:
            out.append(" ")
        elif ord(ch) > 126:
            out.append("?")
        else:
            out.append({'"': "'", "|": "/"}.get(ch, ch))
    body = " ".join("".join(out).split()) or "latest bench verdict FAIL"
    tag = f"{OWNERS[whose]}/{check}: " if whose else ""
    reason = f"wireup: {tag}{body}"
    return reason if len(reason) <= limit else reason[: limit - 3].rstrip() + "..."


def reason_owner(reason) -> dict:
    """Who drained a node and whose problem it is, from its Slurm reason (parse_show_node's
    "reason"): {"wireup" (wireup's mark: the reason starts "wireup: "), "whose" (hw, sw, job; "node"
    for a wireup drain from before the tags: the node's, which check unknown), "check" (CHECKS, or
    "" when unknown), "finding"}. A reason of a person or another tool is {"wireup": False, ...}."""
    text = str(reason or "")
    owned = _OWNED_REASON.fullmatch(text)
    if owned:
        return {"wireup": True, **owned.groupdict()}
    if text.startswith(WIREUP_REASON):
        return {"wireup": True, "whose": "node", "check": "", "finding": text[len(WIREUP_REASON) :]}
    return {"wireup": False, "whose": "", "check": "", "finding": text}


def drain_argv(node: str, finding: str, *, whose: str = "", check: str = "") -> list[str]:
    """scontrol's argv draining one node with the finding as its reason (torchrun_launch.health_plan)."""
    reason = drain_reason(finding, whose=whose, check=check)
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]


def resume_argv(node: str) -> list[str]:
    """scontrol's argv returning one node to service (repair.yml, only for a wireup drain)."""
    return ["scontrol", "update", f"NodeName={node}", "State=RESUME"]


def node_name_errors(host: str, node: str) -> list[str]:
    """A Slurm node name that sbatch or scontrol could take for something else (empty, '=',
    spaces, a newline): it must be an RFC 1123 host name (checks.is_host_name)."""
    if checks.is_host_name(node or ""):
        return []
    return [
        f"{host}'s Slurm node name {str(node)[:80]!r} (its hostname) is not a plain host name: "
        "it cannot go into job.sbatch (--nodelist, --exclude) or be drained; fix the node's hostname"
    ]


def nodelist(plan: dict) -> str:
    """The Slurm node names of a launch plan's hosts, comma-separated (sbatch --nodelist).
    ValueError for a name that is not a host name (it would add lines to job.sbatch)."""
    names = node_names(plan)
    errors = [e for host, name in names.items() for e in node_name_errors(host, name)]
    if errors:
        raise ValueError("; ".join(errors))
    return ",".join(names.values())


def sbatch_options(options) -> list[str]:
    """The #SBATCH words of torchrun_launch_slurm_options, sorted by key: '--KEY=VALUE', '--KEY'
    for a value of true. ValueError naming the variable for anything checks.slurm_option_errors
    refuses (a key off SBATCH_OPTIONS, a value with whitespace, control characters or quotes)."""
    errors = checks.slurm_option_errors(options)
    if errors:
        raise ValueError("; ".join(errors))
    return [
        f"--{key}" if value is True else f"--{key}={value}" for key, value in sorted((options or {}).items())
    ]


class SlurmRun(TypedDict):
    """``__slurm`` (slurm.yml combines it into ``__plan``): the Slurm path's decisions once sbatch
    answered."""

    job_id: str
    run_id: str  # slurm-JOBID
    results: str  # the controller's folder of the run
    sacct_argv: list[str]
    cancel_looks: int  # sacct looks, 2 s apart, after a scancel (torchrun_launch_timeout ran out)
    record: dict  # the run's record (torchrun_launch.run_record's, with its run id, Slurm job id and logs)
    record_argv: list[str]  # wireup-jobctl record: run.json, slurm_job and started on every node
    errors: list[str]


def run_plan(sbatch_stdout: str, plan: dict, *, stop_grace=15) -> SlurmRun:
    """The Slurm path's decisions once sbatch answered: the job id, the run id and results folder
    (JOB-slurm-ID), the run's record and the wireup-jobctl call that keeps it on every node (so
    jobs.yml finds the run: ``torchrun_launch.jobs_plan``), sacct's argv (slurm_wait.yml's wireup_wait looks
    with it until the job ends or torchrun_launch_timeout runs out) and how many looks follow a
    scancel; errors when sbatch printed no job id."""
    job_id = sbatch_job_id(sbatch_stdout or "")
    run_id = f"slurm-{job_id}"
    job_dir = str(plan.get("job_dir") or "")
    logs = {"node": f"{job_dir}/logs/{run_id}.log", "batch": f"{job_dir}/logs/{run_id}.out"}
    return {
        "job_id": job_id,
        "run_id": run_id,
        "results": checks.results_path(plan.get("results_root"), f"{plan.get('job')}-{run_id}")
        if job_id
        else "",
        "sacct_argv": sacct_argv(job_id),
        "cancel_looks": (int(stop_grace) + 30) // 2,
        "record": dict(plan.get("record") or {}, run_id=run_id, slurm_job_id=job_id, logs=logs),
        "record_argv": [str(plan.get("jobctl") or ""), "record", job_dir, run_id, job_id],
        "errors": [] if job_id else [f"sbatch printed no job id: {(sbatch_stdout or '').strip()!r}"],
    }


# --- the Slurm state of the nodes torchrun_launch_drain_failed drains ---------------------------
# `scontrol show node -o NODES` (SLURM_TIME_FORMAT=standard: ISO times): one line per node, its
# fields "Key=value" separated by spaces (values may hold spaces: OS=, Reason=). Without -o the same
# fields span several indented lines per node, records separated by a blank line. State is the
# base state and its flags joined by '+' (IDLE+DRAIN, MIXED+DRAIN, ALLOCATED+DRAIN, DOWN+DRAIN,
# IDLE+DRAIN+NOT_RESPONDING; older scontrol and sinfo's long form: DRAINED, DRAINING, with '*'
# and other one-character suffixes). Reason= comes after the power line, its first line followed by
# " [USER@TIME]" (who set it, when); then only Comment=, Extra=, InstanceId=, InstanceType= and
# ReservationName= may follow (src/api/node_info.c, slurm_sprint_node_table).
NODE_STATE_ARGV = ["scontrol", "show", "node", "-o"]
WIREUP_REASON = "wireup: "
_RECORD_START = re.compile(r"(?m)^[ \t]*(?=NodeName=)")
_STATE_FIELD = re.compile(r"(?:^|\s)State=(\S+)")
_NAME_FIELD = re.compile(r"^\s*NodeName=(\S+)")
_PARTITIONS_FIELD = re.compile(r"(?:^|\s)Partitions=(\S+)")
_PARTITION = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_REASON_FIELD = re.compile(r"(?:^|\s)Reason=(.*)$", re.M)
_REASON_BY = re.compile(r" \[([^\s\[\]@]+)@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\]")
_AFTER_REASON = re.compile(r" (?:Comment|Extra|InstanceId|InstanceType|ReservationName)=")
_DRAIN_WORDS = frozenset({"DRAIN", "DRAINED", "DRAINING"})
_BUSY = frozenset({"ALLOCATED", "MIXED", "COMPLETING", "DRAINING"})


def node_state_argv(nodes) -> list[str]:
    """scontrol's argv reading the state of ``nodes`` (Slurm node names) in one call; of every
    node when ``nodes`` is None (the blast radius counts a partition's drains)."""
    return list(NODE_STATE_ARGV) if nodes is None else [*NODE_STATE_ARGV, ",".join(nodes)]


def parse_show_node(text: str) -> dict:
    """``scontrol show node [-o]`` output -> {node name: {"state" (as printed), "words" (its
    parts, suffixes such as '*' removed), "drain" (a drain is set: the node takes no new jobs),
    "draining" (drained but jobs still run), "reason" (the first line of Reason=, without who and
    when; None when there is none), "reason_user", "reason_time"}}.

    A record without NodeName= or State= is skipped (a cut-off read); a record cut inside Reason=
    keeps what it has (the reason is then not trusted as a wireup reason unless it starts so).
    CRLF, tabs and NUL bytes are tolerated."""
    text = (text or "").replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    nodes = {}
    for record in _RECORD_START.split(text):
        name = _NAME_FIELD.match(record)
        state = _STATE_FIELD.search(record)
        if not name or not state:
            continue
        raw = state.group(1)
        words = [w.strip().rstrip("*~#!%$@^-").upper() for w in raw.split("+")]
        words = [w for w in words if w]
        drain = any(w in _DRAIN_WORDS for w in words)
        reason = user = when = None
        found = _REASON_FIELD.search(record)
        if found:
            line = found.group(1).replace("\t", " ")
            by = _REASON_BY.search(line)
            if by:
                reason, user, when = line[: by.start()], by.group(1), by.group(2)
            else:
                after = _AFTER_REASON.search(line)
                reason = line[: after.start()] if after else line
            reason = reason.strip()
        nodes[name.group(1)] = {
            "state": raw,
            "words": words,
            "drain": drain,
            "draining": drain and (bool(_BUSY & set(words)) or "DRAINING" in words),
            "reason": reason,
            "reason_user": user,
            "reason_time": when,
            "partitions": _partitions(record),
        }
    return nodes


def _partitions(record: str) -> list[str]:
    """The node's partitions (Partitions=a,b); a name off the grammar is dropped, never trusted."""
    found = _PARTITIONS_FIELD.search(record)
    names = found.group(1).split(",") if found else []
    return [n for n in names if _PARTITION.fullmatch(n)]


class DrainPlan(TypedDict):
    """``__torchrun_launch_drain``: what the drain step does."""

    drain: list[dict]  # torchrun_launch.health_plan's items to drain now ({host, node, reason, argv})
    nodes: dict  # node -> {host, action (drain, drained_already, kept), state, slurm_reason, reason}
    show: list[str]  # a line per node


def drain_plan(drain, show_result=None, *, check_mode: bool = False) -> DrainPlan:
    """What torchrun_launch_drain_failed does with each node the launch plan would drain
    (``drain``: torchrun_launch.health_plan's [{host, node, reason, argv}]), given their Slurm state
    (``show_result``: the registered ``scontrol show node -o NODES``; its stdout, rc, stderr).

    - not drained (IDLE, ALLOCATED, DOWN, ...): drained (``drain``; reported changed);
    - drained or draining already for a wireup reason (Reason= starts with "wireup: "): left as
      it is, not changed (an earlier launch drained it);
    - drained or draining for another reason (an administrator's, Slurm's own): left as it is, its
      reason kept (the node takes no jobs anyway; wireup does not overwrite someone else's note);
    - state unknown (scontrol failed, the node is not in its answer): drained, as without the read.

    In check mode nothing is drained; the lines say what would be. Returns {"drain" (the items to
    drain), "nodes" {node: {host, action (drain, drained_already, kept), state, slurm_reason,
    reason}}, "show" (a line per node)}."""
    result = show_result or {}
    parsed = parse_show_node(result.get("stdout", "")) if isinstance(result, dict) else {}
    failed = isinstance(result, dict) and result.get("rc", 0) not in (0, None) and not parsed
    out = {"drain": [], "nodes": {}, "show": []}
    for item in drain or []:
        node = item["node"]
        st = parsed.get(node)
        cmd = shlex.join(item["argv"])
        entry = {
            "host": item.get("host"),
            "reason": item["reason"],
            "state": st["state"] if st else None,
            "slurm_reason": st["reason"] if st else None,
        }
        if st and st["drain"]:
            how = "draining" if st["draining"] else "drained"
            said = f"State={st['state']}, Reason={st['reason'] or '(none)'}"
            if st["reason_user"]:
                said += f" [{st['reason_user']}@{st['reason_time']}]"
            if (st["reason"] or "").startswith(WIREUP_REASON):
                entry["action"] = "drained_already"
                line = f"Slurm: {node} is {how} already for a wireup reason ({said}): not drained again"
            else:
                entry["action"] = "kept"
                line = (
                    f"Slurm: {node} is {how} already for another reason ({said}): left as it is, its "
                    "reason kept"
                )
        else:
            entry["action"] = "drain"
            if st:
                now = f"State={st['state']}"
            elif failed:
                why = str(result.get("stderr") or result.get("msg") or "").strip().splitlines()
                now = f"state unknown: scontrol failed ({why[0] if why else 'no output'})"
            else:
                now = "state unknown: not in scontrol's answer"
            if check_mode:
                line = f"Slurm: would drain {node} ({now}; check mode: nothing changes): {cmd}"
            else:
                line = f"Slurm: drain {node} ({now}): {cmd}"
                out["drain"].append(dict(item))
        out["nodes"][node] = entry
        out["show"].append(line)
    return out


class LimitedDrain(DrainPlan):
    """``__torchrun_launch_drain``: drain_plan's answer within the blast radius (limit_drains)."""

    refused: list[str]  # one line per group over its limit (nothing is drained, the play stops)
    budgets: list[dict]  # blast.Budget per group


def limit_drains(
    decided: DrainPlan, show_result, group: dict, *, max_share: int, max_nodes: int
) -> LimitedDrain:
    """drain_plan's answer within the blast radius (issue 37, blast.verdict): the nodes it would
    drain, plus those wireup holds drained already, stay within ``max_share`` % (and ``max_nodes``)
    of the node group (``group``: {"name", "nodes": its Slurm node names}) and of every Slurm
    partition of those nodes (``show_result``: ``scontrol show node -o`` of every node). Above it
    nothing is drained and ``refused`` says why, with the common finding (the play stops on it).
    Check mode judges the same: it says what a real run would refuse."""
    wanted = {
        n: reason_owner(e["reason"])["finding"] for n, e in decided["nodes"].items() if e["action"] == "drain"
    }
    result = show_result if isinstance(show_result, dict) else {}
    parsed = parse_show_node(result.get("stdout", ""))
    groups = dict(blast.groups_of(parsed, wanted))
    groups[f"the node group {group.get('name') or '?'}"] = list(group.get("nodes") or [])
    found = blast.verdict(
        groups, blast.held_out(parsed, reason_owner), wanted, max_share=max_share, max_nodes=max_nodes
    )
    out = dict(decided, refused=list(found["lines"]), budgets=found["budgets"])
    if found["lines"]:
        out["drain"] = []
        out["show"] = [*decided["show"], *found["lines"]]
    return out


# --- jobs.yml on a Slurm run (issue 26): squeue and sacct read strictly, fail closed -------------
# A Slurm run is one launch.yml submitted: its record (run.json on every node of the job, and
# slurm-job.json in its results folder on the controller) names the Slurm job id. jobs.yml's status
# asks squeue (is it queued, running, on which nodes) and sacct (the job and one step per node).
# Everything they print is untrusted: a line that does not fullmatch its grammar, or belongs to
# another job, makes the status "cannot tell", never a state wireup made up.
JOB_ID = re.compile(r"[0-9]+(?:_[0-9]+)?")
SQUEUE_FORMAT = "%i|%T|%N"
_SQUEUE_ROW = re.compile(
    r"(?P<job>[0-9]+(?:_[0-9]+)?)\|(?P<state>[A-Z][A-Z_]*)\|(?P<nodes>[A-Za-z0-9_.,\[\]-]*)"
)
# squeue's answer for a job that left the queue (22.05: stderr, exit code 1).
_SQUEUE_GONE = re.compile(r"slurm_load_jobs error: Invalid job id specified")
_SACCT_ROW = re.compile(
    r"(?P<jobid>" + _JOBID.pattern + ")"
    r"\|(?P<state>[A-Z][A-Z_]*(?: by [0-9]+)?\+?)"
    r"\|(?P<exit>[0-9]+:[0-9]+|)"
    r"\|(?P<nodes>[A-Za-z0-9_.,\[\]-]+|None assigned|\(null\)|)"
    r"\|(?P<end>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}|Unknown|None|)"
)


def is_job_id(value) -> bool:
    """A Slurm job id as wireup keeps and passes it: digits, or an array task ARRAY_TASK."""
    return isinstance(value, str) and bool(JOB_ID.fullmatch(value)) and len(value) <= 40


def squeue_argv(job_id: str) -> list[str]:
    return ["squeue", "--noheader", "--jobs", job_id, f"--format={SQUEUE_FORMAT}"]


def sacct_argv(job_id: str) -> list[str]:
    return ["sacct", "--parsable2", "--noheader", "-j", job_id, f"--format={SACCT_FORMAT}"]


def _shown(line: str) -> str:
    return repr(line[:80])


def read_squeue(result: dict, job_id: str, max_nodes: int = HOSTLIST_MAX) -> dict:
    """squeue's answer for one job (``result``: the registered command): {"known", "state" (its
    long state, '' once it left the queue), "nodes", "why"}. ``known`` is false (with ``why``) when
    squeue failed for another reason than the job having left the queue, or printed a line that is
    not one row of this job in SQUEUE_FORMAT, or one naming more than ``max_nodes`` nodes (the
    job's own count)."""
    result = dict(result or {})
    out = {"known": False, "state": "", "nodes": [], "why": ""}
    stdout, stderr = str(result.get("stdout") or ""), str(result.get("stderr") or "")
    if result.get("rc") != 0:
        if result.get("rc") == 1 and any(_SQUEUE_GONE.fullmatch(x.strip()) for x in stderr.splitlines()):
            out["known"] = True
            return out
        out["why"] = f"squeue failed (rc {result.get('rc')}): {(stderr or stdout).strip()[:200]!r}"
        return out
    rows = [line.strip() for line in stdout.splitlines() if line.strip()]
    matches = [_SQUEUE_ROW.fullmatch(line) for line in rows]
    bad = [line for line, m in zip(rows, matches, strict=True) if not m or m.group("job") != job_id]
    if bad or len(rows) > 1:
        out["why"] = f"squeue printed {_shown(bad[0] if bad else rows[1])}, not one row of job {job_id}"
        return out
    if matches:
        try:
            nodes = expand_hostlist(matches[0].group("nodes"), max_nodes)
        except ValueError as exc:
            out["why"] = f"squeue printed {_shown(rows[0])}, not a row of job {job_id}: its {exc}"
            return out
        out.update(state=matches[0].group("state"), nodes=nodes)
    out["known"] = True
    return out


def read_sacct(result: dict, job_id: str, max_nodes: int = HOSTLIST_MAX) -> dict:
    """sacct's answer for one job, checked line by line: {"known", "text" (the lines, each a
    fullmatch of SACCT_FORMAT's row grammar for this job), "why"}; unknown when sacct failed
    (no slurmdbd: "accounting storage is disabled") or printed any other line (another job's, one
    naming more than ``max_nodes`` nodes: job_rows)."""
    result = dict(result or {})
    if result.get("rc") != 0:
        why = str(result.get("stderr") or result.get("stdout") or result.get("msg") or "").strip()
        return {"known": False, "text": "", "why": f"sacct failed (rc {result.get('rc')}): {why[:200]!r}"}
    lines = [line.strip() for line in str(result.get("stdout") or "").splitlines() if line.strip()]
    for line in lines:
        m = _SACCT_ROW.fullmatch(line)
        if not m or not is_row_of(m.group("jobid"), job_id):
            return {
                "known": False,
                "text": "",
                "why": f"sacct printed {_shown(line)}, not a row of job {job_id}",
            }
    try:
        job_rows("\n".join(lines), job_id, max_nodes)
    except ValueError as exc:
        return {"known": False, "text": "", "why": str(exc)}
    return {"known": True, "text": "\n".join(lines), "why": ""}


class SlurmStatus(TypedDict):
    """``__torchrun_launch_slurm`` (jobs.yml on a Slurm run): how the job stands by squeue and sacct."""

    known: bool  # false: cannot tell (why says which read failed)
    why: str
    job_id: str
    job_state: str  # sacct's job state, else squeue's; '' when unknown
    queue_state: str  # squeue's ('' when the job left the queue)
    over: bool
    nodes: dict  # host -> {state, rc, ended, slurm_state, step} (SlurmVerdict's nodes)
    reason: str  # the job's sentence (job_verdict's reason)
    first_failure: str


def _argv_of(item_result: dict) -> list:
    """The argv a loop item ran: its loop variable's value (Ansible keeps it under the loop_var's
    name, ``ansible_loop_var``; ``item`` by default)."""
    return list(item_result.get(item_result.get("ansible_loop_var") or "item") or [])


def reads_of(result: dict) -> tuple[dict, dict]:
    """The sacct and squeue answers (in that order) of jobs.yml's registered loop over its plan's
    ``slurm.reads`` (each item the argv it ran: scancel, sacct, squeue), or of one sacct answer
    alone (the loop's ``until`` while a stop waits for the job's end: squeue counts as answered)."""
    result = dict(result or {})
    if "results" not in result:
        return result, {"rc": 0}
    by_command = {str((_argv_of(r) or [""])[0]): dict(r) for r in result["results"] or []}
    return by_command.get("sacct", {}), by_command.get("squeue", {})


def job_status(squeue_result: dict, sacct_result: dict, plan: dict, job_id: str) -> SlurmStatus:
    """How a Slurm run stands for jobs.yml, from squeue's and sacct's registered answers over a
    launch plan's hosts (``plan``: hosts, nodes; the run's hosts; nodes_max, the most nodes its
    allocation has, by default its hosts' count). Unknown (never ok) when the job id is not one,
    either read fails or prints a line that is not this job's (another job's, or naming more nodes
    than nodes_max), or neither knows the job. A job that sacct has no row of yet (just submitted)
    stands as squeue says."""
    out: SlurmStatus = {
        "known": False, "why": "", "job_id": str(job_id or ""), "job_state": "", "queue_state": "",
        "over": False, "nodes": {}, "reason": "", "first_failure": "",
    }  # fmt: skip
    if not is_job_id(job_id):
        out["why"] = f"{str(job_id)[:40]!r} is not a Slurm job id"
        return out
    most = int(plan.get("nodes_max") or len(plan.get("hosts") or []) or HOSTLIST_MAX)
    queue, acct = read_squeue(squeue_result, job_id, most), read_sacct(sacct_result, job_id, most)
    out["queue_state"] = queue["state"]
    if not (queue["known"] and acct["known"]):
        out["why"] = "; ".join(x["why"] for x in (queue, acct) if x["why"])
        return out
    verdict = job_verdict(acct["text"], node_names(plan), job_id=job_id, max_nodes=most)
    if not acct["text"] and not queue["state"]:
        out["why"] = f"neither squeue nor sacct knows Slurm job {job_id}"
        return out
    over = bool(acct["text"]) and verdict["over"]
    out.update(
        known=True, job_state=verdict["job_state"] if acct["text"] else queue["state"], over=over,
        nodes=verdict["nodes"], reason=verdict["reason"], first_failure=verdict["first_failure"],
    )  # fmt: skip
    return out


def node_line(host: str, status: dict) -> str:
    """One node's part of a Slurm run for people: "node2: RUNNING (step 12.1)",
    "node2: FAILED, exit code 1 (step 12.1)", "node3: no step yet (the job is PENDING)"."""
    st = (status.get("nodes") or {}).get(host)
    if not status.get("known") or st is None:
        return f"{host}: cannot tell ({status.get('why') or 'no state for it'})"
    if not st.get("step"):
        when = "ran" if status.get("over") else "yet"
        return f"{host}: no step {when} (the job is {status.get('job_state')})"
    code = f", exit code {st['rc']}" if st.get("rc") is not None and st.get("state") != "running" else ""
    return f"{host}: {st.get('slurm_state')}{code} (step {st.get('step')})"
