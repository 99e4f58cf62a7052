"""A detached run's stall in jobs.yml status (issue 37 item 6): which nodes look, what they saw.

Each node of a run wireup-jobctl started looks at its ranks with ``wireup_job_progress`` (the
sampling and its judgement: probe/job_progress.py); ``stall`` reads every node's look: the run is
stalled when one node's ranks are (a rank that makes no progress holds every other rank at the
next collective), since the earliest of those nodes' times, and with ``torchrun_launch_stop_stalled``
it is stopped on every node of the run, the reason naming the nodes and the time.
"""

from __future__ import annotations

import datetime
import re
from typing import TypedDict

from ..core import checks
from ..probe import job_progress


class LookAnswer(TypedDict, total=False):
    """One wireup_job_progress answer as Ansible registers it (besides changed, failed, ...)."""

    progress: job_progress.Look


class LookLoop(TypedDict, total=False):
    """``__torchrun_launch_progress``: a host's registered loop over progress_calls (none or one)."""

    results: list[LookAnswer]
    skipped: bool


class StallPlan(TypedDict):
    """``__torchrun_launch_stall``: the run's stall over its nodes' looks."""

    stalled: dict  # host -> since (the node's clock) for each stalled node
    lines: dict  # host -> its look for people ('' where none was made)
    line: str  # the run's stall line ('' when no node is stalled)
    stops: dict  # host -> [the wireup-jobctl stop argv] (only when asked, not in check mode)


def stall_after_errors(value) -> list[str]:
    """torchrun_launch_stall_after: whole seconds, 0 or more (an int, or its digits from -e)."""
    # isinstance, not type(): ansible-core 2.19 passes a variable's int as a subclass (tagged).
    if (isinstance(value, int) and not isinstance(value, bool) and value >= 0) or (
        isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value)
    ):
        return []
    return [f"torchrun_launch_stall_after={value!r}: whole seconds, 0 or more (0: never call a run stalled)"]


def progress_calls(jobs: dict, host: str, gpu=None, stall_after=0) -> list[dict]:
    """``host``'s wireup_job_progress arguments (none or one): on status, for a node of a run
    wireup-jobctl started (a Slurm run's ranks are Slurm's), nvidia-smi where the node has GPUs.
    Raises ValueError for a bad ``stall_after``."""
    errors = stall_after_errors(stall_after)
    if errors:
        raise ValueError(errors[0])
    slurm = (jobs.get("slurm") or {}).get("job_id")
    if jobs.get("action") != "status" or jobs.get("errors") or slurm or host not in (jobs.get("hosts") or []):
        return []
    argv = jobs.get("argv") or []
    gpu = dict(gpu or {})
    smi = (gpu.get("nvidia_smi") or "nvidia-smi") if gpu.get("present") else ""
    return [
        {"job_dir": argv[2], "run_id": jobs["run_id"], "stall_after": int(stall_after), "nvidia_smi": smi}
    ]


def look_of(result: LookLoop) -> job_progress.Look | None:
    """A host's registered loop over progress_calls: its look, or None (no look made, or an
    answer not of the Look shape: never believed)."""
    answers = list((result or {}).get("results") or [])
    look = (answers[0] if answers else {}).get("progress")
    if not isinstance(look, dict) or look.get("state") not in job_progress.STATES:
        return None
    since, at = look.get("since"), look.get("at")
    if not _time(at) or not (since is None or _time(since)):
        return None
    return look  # type: ignore[return-value]


def _time(value) -> bool:
    """A finite time (int or float, a tagged subclass of ansible-core 2.19's too; never a bool)."""
    return checks.is_number(value) and 0 <= value < 1e11


def _utc(stamp: float) -> str:
    return f"{datetime.datetime.fromtimestamp(float(stamp), datetime.UTC):%Y-%m-%d %H:%M:%S} UTC"


def look_line(host: str, look: job_progress.Look | None) -> str:
    """One node's look for people, e.g. "node2: stalled since 2026-12-07 10:20:01 UTC (75 s
    without progress: the ranks' CPU time, 2 rank(s))"."""
    if look is None:
        return ""
    what = "every GPU idle" if look["signal"] == "gpu" else "the ranks' CPU time"
    state, since = look["state"], look["since"]
    if state in ("quiet", "stalled") and since is not None:
        quiet = max(0.0, look["at"] - since)
        how = f"{quiet:.0f} s without progress: {what}, {look['ranks']} rank(s)"
        return f"{host}: {state} since {_utc(since)} ({how})"
    if state == "first":
        return f"{host}: progress: first look at {look['ranks']} rank(s); the next status compares with it"
    return f"{host}: progress: {state} ({what}, {look['ranks']} rank(s))"


def stall(jobs: dict, results: dict, *, stop=False, grace=15, check_mode=False) -> StallPlan:
    """The run's stall from each host's registered look (``results``: host -> result); with
    ``stop`` (torchrun_launch_stop_stalled), the stop of the run on every host of it."""
    looks = {h: look_of(r) for h, r in sorted((results or {}).items())}
    stalled = {h: look["since"] for h, look in looks.items() if look and look["state"] == "stalled"}
    line, stops = "", {}
    if stalled:
        first = min(stalled.values())
        line = (
            f"job {jobs.get('job')} run {jobs.get('run_id')}: stalled on {', '.join(stalled)} "
            f"since {_utc(first)}"
        )
        argv = list(jobs.get("argv") or [])
        if stop and not check_mode and len(argv) >= 4:
            reason = f"stalled: no progress on {', '.join(stalled)} since {_utc(first)}"
            stop_argv = [argv[0], "stop", argv[2], argv[3], str(int(grace)), reason]
            stops = {h: [stop_argv] for h in jobs.get("hosts") or [] if checks.is_inventory_host(h)}
            line += "; stopping it on every node (torchrun_launch_stop_stalled)"
        else:
            line += "; stop it with -e torchrun_launch_action=stop or -e torchrun_launch_stop_stalled=true"
    return {
        "stalled": stalled,
        "lines": {h: look_line(h, look) for h, look in looks.items()},
        "line": line,
        "stops": stops,
    }
