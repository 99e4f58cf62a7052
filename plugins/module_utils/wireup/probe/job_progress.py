"""Whether a detached job's ranks still make progress (issue 37 item 6): pure parts.

The ``wireup_job_progress`` module takes one sample at each ``jobs.yml`` status look and keeps it
in the run's folder (``runs/RUN_ID/progress.json``, written whole); ``judge`` compares it with the
one kept before. No daemon: a run nobody looks at is not sampled, and a stall is seen from the
second look on. The signal:

- on a node with GPUs, every GPU the run uses doing no work (``nvidia-smi
  --query-gpu=index,utilization.gpu,power.draw,power.limit,utilization.memory
  --format=csv,noheader,nounits``): a power draw at ``GPU_POWER_IDLE_SHARE`` of its limit or less,
  and either utilisation at ``GPU_UTIL_IDLE`` % or less or memory utilisation at
  ``GPU_MEM_UTIL_IDLE`` % or less. Utilisation alone cannot say it: a rank blocked in an NCCL
  collective keeps a kernel spinning, so its GPU reads 100 % while it waits (measured on an H100
  80GB HBM3, driver 580, NCCL 2.28.9, tests/fixtures/h100/stall_capture_nvidia_smi.txt: idle 0 %,
  0 % memory, 71 W of 700; blocked in all_reduce 100 %, 0 % memory, 120 W, 17 %; a matmul 100 %,
  9 % memory, 515-695 W; an H200 idles at 81 W, 12 %). Nor CPU time: that blocked rank used two
  CPUs (4.05 CPU s in 2 s), NCCL's threads spin;
- on a node without, no rank's CPU time (utime + stime of /proc/PID/stat) advancing by more than
  CPU_IDLE_SHARE of the time between two looks: a rank that waits in a gloo collective sleeps in
  the kernel but for a wake-up now and then (seen on the testbed: 1 tick of 10 ms in 5 s, 0.2 % of
  a CPU), a training rank uses most of one.

A value that cannot be read (``[N/A]``, ``[Not Supported]``, a rank gone) never counts as idle: a
stop is only ever made on a reading that says so (fails closed).
"""

from __future__ import annotations

import json
import re
from typing import TypedDict

GPU_QUERY = [
    "--query-gpu=index,utilization.gpu,power.draw,power.limit,utilization.memory",
    "--format=csv,noheader,nounits",
]
GPU_UTIL_IDLE = 5  # %: a GPU with a kernel running shows far more
GPU_MEM_UTIL_IDLE = 1  # %: a kernel that spins in a collective reads no memory (0 %); a matmul 9 %
GPU_POWER_IDLE_SHARE = 0.25  # of the power limit: idle boards draw 10-15 %, a spinning wait 17 %
CPU_IDLE_SHARE = 0.02  # of one CPU between two looks: a waiting rank's wake-ups stay far below it
NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
STATE_MAX_BYTES = 65536
RANKS_MAX = 4096


class GpuLoad(TypedDict):
    """One GPU's row of GPU_QUERY; None where nvidia-smi could not say ([N/A], [Not Supported])."""

    index: int
    util: float | None
    power: float | None
    limit: float | None
    mem_util: float | None


class Sample(TypedDict):
    """One look at the run on this node, as kept in runs/RUN_ID/progress.json."""

    at: float  # the node's clock (time.time) at the look
    ranks: dict  # "PID:STARTTIME" -> CPU seconds (utime + stime) of each rank
    gpu_idle: bool | None  # every GPU idle (None: no GPU read, or one that could not be read)
    quiet_since: float | None  # since when no progress is seen (None: progress at this look)


class Progress(TypedDict):
    """``judge``'s answer: the state for people and the sample to keep."""

    state: str  # first (nothing to compare yet), progressing, quiet, stalled, no ranks
    since: float | None  # quiet or stalled: since when no progress is seen
    signal: str  # gpu or cpu
    keep: Sample


def _number(field: str) -> float | None:
    return float(field) if NUMBER.fullmatch(field) else None


def parse_gpu_load(text: str) -> list[GpuLoad]:
    """Rows of GPU_QUERY's output. A row with fewer or more than 5 fields, or whose index is not a
    whole number, is skipped; a value nvidia-smi could not read is None."""
    rows: list[GpuLoad] = []
    for line in (text or "").splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 5 or not fields[0].isdigit():
            continue
        util, power, limit, mem_util = (_number(f) for f in fields[1:])
        rows.append(
            {"index": int(fields[0]), "util": util, "power": power, "limit": limit, "mem_util": mem_util}
        )
    return rows


def gpu_idle(row: GpuLoad) -> bool | None:
    """Whether one GPU does no work: a draw at GPU_POWER_IDLE_SHARE of its limit or less (where the
    board reports its power), and utilisation at GPU_UTIL_IDLE % or less or, a kernel spinning in
    a collective, memory utilisation at GPU_MEM_UTIL_IDLE % or less. None: utilisation unread."""
    if row["util"] is None:
        return None
    if row["power"] is not None and row["limit"] and row["power"] > GPU_POWER_IDLE_SHARE * row["limit"]:
        return False
    if row["util"] <= GPU_UTIL_IDLE:
        return True  # boards without power readings (GB10: [N/A]) are judged by utilisation alone
    spinning = row["mem_util"] is not None and row["mem_util"] <= GPU_MEM_UTIL_IDLE
    return spinning and row["power"] is not None and bool(row["limit"])


def gpus_idle(rows: list[GpuLoad], indices=None) -> bool | None:
    """Whether every GPU of the run (``indices``; all rows when None) is idle; None when there is
    no such row or one of them cannot be read."""
    mine = [r for r in rows if indices is None or r["index"] in indices]
    looks = [gpu_idle(r) for r in mine]
    if not looks or None in looks:
        return None
    return all(looks)


def parse_stat(text: str) -> tuple[int, int] | None:
    """(utime + stime in clock ticks, start time in ticks) from one /proc/PID/stat line, or None.
    The command name (field 2) is in parentheses and may hold spaces and ')': the fields are read
    after its last ')' (proc(5))."""
    head, sep, rest = (text or "").rpartition(")")
    fields = rest.split()
    if not sep or not head or len(fields) < 20:
        return None
    # After the name: state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
    # utime(14) stime(15) cutime cstime priority nice num_threads itrealvalue starttime(22).
    utime, stime, start = fields[11], fields[12], fields[19]
    if not (utime.isdigit() and stime.isdigit() and start.isdigit()):
        return None
    return int(utime) + int(stime), int(start)


def read_kept(text) -> Sample | None:
    """The sample kept by the last look, checked whole; None when absent or not of its shape (a
    damaged or foreign file is never believed: the look starts over)."""
    try:
        kept = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(kept, dict) or set(kept) != set(Sample.__annotations__):
        return None
    ranks, at, since = kept["ranks"], kept["at"], kept["quiet_since"]
    numbers_ok = _is_time(at) and (since is None or _is_time(since))
    ranks_ok = (
        isinstance(ranks, dict)
        and len(ranks) <= RANKS_MAX
        and all(re.fullmatch(r"[0-9]+:[0-9]+", str(k)) and _is_time(v) for k, v in ranks.items())
    )
    if not (numbers_ok and ranks_ok and kept["gpu_idle"] in (True, False, None)):
        return None
    return kept  # type: ignore[return-value]


def _is_time(value) -> bool:
    return type(value) in (int, float) and 0 <= value < 1e11


def _cpu_quiet(previous: Sample, at: float, ranks: dict) -> bool:
    """No rank's CPU time advanced by more than CPU_IDLE_SHARE of the time since the last look, and
    the same ranks live (a restarted rank is progress of a kind: the look starts over)."""
    allowed = CPU_IDLE_SHARE * max(0.0, at - previous["at"])
    same = set(previous["ranks"]) == set(ranks)
    return same and all(ranks[k] - previous["ranks"][k] <= allowed for k in ranks)


def _quiet(previous: Sample | None, at: float, ranks: dict, gpu_idle_now: bool | None):
    """(state, quiet start) of this look before the stall time is applied: a state when it is one
    already (first, unknown, progressing), else None and since when no progress is seen."""
    if gpu_idle_now is not None or (previous is not None and previous["gpu_idle"] is not None):
        if gpu_idle_now is None:
            return "unknown", None  # the GPUs could not be read this time: no verdict
        if not gpu_idle_now:
            return "progressing", None
        return None, previous["quiet_since"] if previous and previous["quiet_since"] is not None else at
    if previous is None:
        return "first", None  # CPU time needs a look to compare with
    if not _cpu_quiet(previous, at, ranks):
        return "progressing", None
    return None, previous["quiet_since"] if previous["quiet_since"] is not None else previous["at"]


def judge(
    previous: Sample | None, at: float, ranks: dict, gpu_idle_now: bool | None, stall_after
) -> Progress:
    """This look (at ``at``: the ranks' CPU seconds, and on a node with GPUs whether they are all
    idle, None when they could not be read or there are none) judged against the ``previous``
    one (read_kept). On a GPU node the GPUs decide, elsewhere the ranks' CPU time. Quiet since the
    first look that saw no progress (for CPU time: the look before it); stalled once quiet for
    ``stall_after`` seconds or more (0: never stalled)."""
    gpu = gpu_idle_now is not None or (previous is not None and previous["gpu_idle"] is not None)
    keep: Sample = {"at": at, "ranks": dict(ranks), "gpu_idle": gpu_idle_now, "quiet_since": None}
    out: Progress = {"state": "no ranks", "since": None, "signal": "gpu" if gpu else "cpu", "keep": keep}
    if not ranks:
        return out
    state, since = _quiet(previous, at, ranks, gpu_idle_now)
    if state is not None:
        return {**out, "state": state}
    keep["quiet_since"] = since
    stalled = float(stall_after or 0) > 0 and at - since >= float(stall_after)
    return {**out, "state": "stalled" if stalled else "quiet", "since": since}


STATES = ("first", "progressing", "quiet", "stalled", "no ranks", "unknown")


class Look(TypedDict):
    """wireup_job_progress's answer (``progress``), as the controller reads it."""

    state: str  # one of STATES
    since: float | None
    signal: str  # gpu or cpu
    ranks: int
    at: float
