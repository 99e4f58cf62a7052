"""The wait for a run: what one look says, and the line it prints.

Pure Python (stdlib only). plugins/action/wireup_wait.py runs the look on a node once per
interval, and stops, prints or fails as the judge decides: :func:`look` for ``wireup-jobctl
status`` (a run under wireup-jobctl), :func:`look_sacct` for sacct (a job under Slurm, read on the
node that submitted it). The role's verdict (job_verdict below, slurm.job_verdict) then reads the
last look's stdout, as it read the command module's before. Nothing a node answers is trusted: a
state outside jobctl's words or an elapsed time that is no number fails the wait, naming the node
(an unknown state read as "not running" would pass for a run that ended well); a failing sacct
(no slurmdbd: "accounting storage is disabled") fails it too.
"""

from __future__ import annotations

import json
import math
from typing import TypedDict

from . import slurm

# wireup-jobctl status's states; every one but "running" ends the wait.
STATES = ("running", "exited", "stopped", "lost", "missing")


class WaitResult(TypedDict, total=False):
    """What the wireup_wait action returns (registered as ``__torchrun_launch_status``): the last
    look's answer in the command module's shape, how many looks it took and the command; ``failed``
    and ``msg`` when :func:`look` said the wait fails."""

    changed: bool
    rc: int
    stdout: str
    stderr: str
    looks: int
    cmd: str
    failed: bool
    msg: str


def _seconds(value) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) and out >= 0 else None


def _printable(text: str, limit: int = 300) -> str:
    text = "".join(c if c.isprintable() else " " for c in str(text or ""))
    return text[:limit]


def look(answer: dict, *, host: str, job: str = "", timeout: float = 0, waited: float = 0) -> dict:
    """One look at a run on ``host``: ``{"over", "error", "status", "line"}``.

    ``answer``: the rc, stdout and stderr of ``wireup-jobctl status JOB RUN WAIT``; ``job``: its
    name, for the line;
    ``timeout``: torchrun_launch_timeout (0: none); ``waited``: the controller's own seconds
    since the wait began (it began after the run started, so on an honest node clock it never
    runs ahead of the run's elapsed time; it ends the wait when a node's clock lags).
    ``error`` (the wait fails with it) is set when jobctl failed or said nothing usable;
    ``over`` when the run ended there or its time ran out; ``line`` is the progress line.
    """
    rc, stdout, stderr = answer.get("rc"), answer.get("stdout") or "", answer.get("stderr") or ""
    status = parse_status(stdout or "")
    out = {"over": True, "error": "", "status": status, "line": ""}
    if rc != 0:
        said = _printable(" ".join((stderr or stdout or "").split()))
        out["error"] = f"{host}: wireup-jobctl status failed (rc {rc}): {said or 'no output'}"
        return out
    state, elapsed = status.get("state"), _seconds(status.get("elapsed"))
    if state not in STATES or elapsed is None:
        first = _printable((stdout or "").strip().splitlines()[0] if (stdout or "").strip() else "")
        out["error"] = (
            f"{host}: wireup-jobctl status gave no usable status line "
            f"(a state of {', '.join(STATES)} and a number of seconds): {first or 'empty answer'}"
        )
        return out
    timeout = float(timeout or 0)
    out["over"] = state != "running" or (timeout > 0 and max(elapsed, float(waited)) >= timeout)
    out["line"] = progress_line(host, job, status, elapsed, timeout)
    return out


def progress_line(host: str, job: str, status: dict, elapsed: float, timeout: float = 0) -> str:
    """``[node1] waiting for job example2: running, 12.0 s elapsed (timeout 1800 s)``, or how the
    run ended there. Each line says what it is on its own: Ansible's default output prints a task's
    banner only with its first result (display_skipped_hosts off), after the wait's lines."""
    what = f"job {job}" if job else "the run"
    if status.get("state") == "running":
        limit = f"timeout {timeout:g} s" if timeout > 0 else "no timeout"
        return f"[{host}] waiting for {what}: running, {elapsed:.1f} s elapsed ({limit})"
    return f"[{host}] {what}: {how_it_ended(status)} after {elapsed:.1f} s"


def pause(interval: float, took: float, floor: float = 0.5) -> float:
    """Seconds to sleep after a look that found the run running: a look blocks up to
    ``interval`` s on the node, but one that came back at once (the run just starting) must not
    turn the wait into a busy loop; with an interval of 0 it never sleeps."""
    return max(0.0, min(float(interval), floor) - float(took))


def shows(now: float, last_shown: float | None, every: float = 1.0) -> bool:
    """Whether a progress line is due: each look's (one per interval), but at most one a second
    (an interval of 0 looks many times a second)."""
    return last_shown is None or now - last_shown >= every


def look_sacct(
    answer: dict, *, host: str, job: str = "", timeout: float = 0, waited: float = 0, slurm_job=""
) -> dict:
    """One look of ``sacct -j ID`` (slurm.sacct_argv) at Slurm job ``slurm_job``, from ``host``: the
    shape of :func:`look`. Over when the job row has a final state (slurm.job_verdict: no row yet is
    PENDING) or ``timeout`` (torchrun_launch_timeout, 0: none) has passed by the controller's own
    clock (``waited``: sacct says no elapsed time of the run); ``error`` when sacct failed, or
    printed a row that is not that job's (slurm.job_rows: another job's, or a host list of more
    names than slurm.HOSTLIST_MAX)."""
    rc, stdout, stderr = answer.get("rc"), answer.get("stdout") or "", answer.get("stderr") or ""
    out = {"over": True, "error": "", "status": {}, "line": ""}
    if rc != 0:
        said = _printable(" ".join((stderr or stdout or "").split()))
        out["error"] = f"{host}: sacct failed (rc {rc}): {said or 'no output'}"
        return out
    try:
        slurm.job_rows(stdout, slurm_job)
    except ValueError as exc:
        out["error"] = f"{host}: {_printable(str(exc))}"
        return out
    verdict = slurm.job_verdict(stdout, [], job_id=slurm_job)
    timeout, waited = float(timeout or 0), float(waited)
    out["status"] = {"state": verdict["job_state"], "job_id": verdict["job_id"]}
    out["over"] = verdict["over"] or (timeout > 0 and waited >= timeout)
    out["line"] = sacct_line(host, job, verdict, waited, timeout)
    return out


def sacct_line(host: str, job: str, verdict: dict, waited: float, timeout: float = 0) -> str:
    """``[node1] waiting for Slurm job 4711 (job example2): RUNNING, 12.0 s waited (timeout 1800 s)``,
    or the state it ended in."""
    what = f"Slurm job {_printable(verdict.get('job_id'), 20) or '(no sacct row yet)'}"
    what += f" (job {job})" if job else ""
    state = _printable(verdict.get("job_state"), 40)
    if not verdict.get("over"):
        limit = f"timeout {timeout:g} s" if timeout > 0 else "no timeout"
        return f"[{host}] waiting for {what}: {state}, {waited:.1f} s waited ({limit})"
    return f"[{host}] {what}: {state} after {waited:.1f} s"


def pause_between(interval: float, took: float, floor: float = 1.0) -> float:
    """Seconds to sleep after a look that does not block on the node (sacct): the rest of the
    interval, at least ``floor`` s between looks (an interval of 0 must not hammer slurmdbd)."""
    return max(0.0, max(float(interval), floor) - float(took))


# The judges wireup_wait takes: (the look, the pause after one, whether the look takes the interval
# as its last word: wireup-jobctl status blocks up to it on the node).
JUDGES = {"jobctl": (look, pause, True), "sacct": (look_sacct, pause_between, False)}


def first_failure(states: dict) -> str:
    """The host whose job failed first: the earliest end among failed or lost ones, else ''.

    ``states`` maps host -> {"state": running|exited|lost|stopped|missing, "rc": int|None,
    "ended": float|None}. A host that is gone from the play (unreachable) counts as failed at
    the time it was last seen.
    """
    failed = []
    for host, st in states.items():
        state = st.get("state")
        if state in ("lost", "missing", "gone") or (state == "exited" and st.get("rc") not in (0, "0")):
            ended = st.get("ended")
            try:
                ended = float(ended)
            except (TypeError, ValueError):
                ended = float("inf")
            failed.append((ended, host))
    return min(failed)[1] if failed else ""


def how_it_ended(status: dict) -> str:
    """How a node's part of a run ended, in words: "exited with code 1", "was stopped", ..."""
    return {
        "gone": "became unreachable",
        "lost": "lost its processes without an exit code (killed)",
        "missing": "never started",
        "stopped": "was stopped",
    }.get(status.get("state"), f"exited with code {status.get('rc')}")


class Verdict(TypedDict):
    """A run's verdict (``__torchrun_launch_verdict``): over, how it went, who failed first."""

    over: bool
    ok: bool
    first_failure: str
    timed_out: bool
    running: list[str]
    reason: str


def job_verdict(states: dict, play_hosts=None, timeout: float = 0) -> Verdict:
    """Whether a running job is over, and how it went.

    ``states`` maps each job host to its last ``wireup-jobctl status`` (state, rc, ended,
    elapsed). A host missing from ``play_hosts`` (unreachable mid-run) counts as failed. The job is
    over when every node exited, when any node failed (exited non-zero, lost, stopped, missing,
    gone) or when ``timeout`` seconds (0: none) have passed on any node.
    """
    states = {h: dict(s or {}) for h, s in states.items()}
    if play_hosts is not None:
        play = set(play_hosts)
        for host in states:
            if host not in play:
                states[host]["state"] = "gone"
    failed = first_failure(states)
    running = sorted(h for h, s in states.items() if s.get("state") == "running")
    elapsed = [float(s.get("elapsed") or 0) for s in states.values()]
    timed_out = bool(timeout) and bool(running) and max(elapsed, default=0) >= float(timeout)
    if failed:
        reason = f"{failed} {how_it_ended(states[failed])}"
    elif timed_out:
        reason = f"still running after {float(timeout):g} s on {', '.join(running)}"
    elif running:
        reason = f"running on {', '.join(running)}"
    else:
        reason = "every node exited with code 0"
    return {
        "over": bool(failed) or timed_out or not running,
        "ok": not failed and not running,
        "first_failure": failed,
        "timed_out": timed_out and not failed,
        "running": running,
        "reason": reason,
    }


class RunStatus(TypedDict, total=False):
    """A node's run as ``wireup-jobctl status`` says it (and stop, which ends with it)."""

    state: str  # running, exited, lost, stopped, missing (gone: left the play; unknown: no answer)
    rc: int | None
    started: float
    ended: float | None
    elapsed: float
    log: str  # the node's log of the run
    reason: str
    said: list[str]  # lines before the status line
    tail: list[str]  # the log's last lines after it


def parse_status(stdout: str) -> RunStatus:
    """A ``wireup-jobctl`` answer: its first line that is a JSON object is the run's status
    (``stop`` prints what it did before it, ``status ... WAIT LINES`` the log's last lines after
    it, in ``tail``). ``{"state": "unknown"}`` when there is none."""
    lines = (stdout or "").splitlines()
    for index, line in enumerate(lines):
        try:
            status = json.loads(line)
        except ValueError:
            continue
        if isinstance(status, dict):
            return dict(status, said=lines[:index], tail=lines[index + 1 :])
    return {"state": "unknown", "said": lines, "tail": []}
