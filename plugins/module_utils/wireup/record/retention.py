"""The store's retention (issue 39): ``bench_keep_days`` removes host records older than that many
days from results/bench and results/quick, keeping every record a reader of the store still needs,
so the readers' answers stay what they were:

* per host and capability, its newest record that judged it (the launch gate, gate.host_failures);
* per host, its newest bench record that PASSed (the bandwidth baseline, host_record.baseline_of,
  the run every later bench run of the host is compared with);
* every record of the BASELINE_RUNS newest bench runs (the GPU baselines, gpu_trial_run.baselines,
  which look at those runs whatever host a GPU was in);
* every record that cannot be read or whose verdict is DAMAGED (the gate stops there and refuses
  the host until someone moves it away: retention never decides that for them).

``plan`` decides from the store's index (gate.summarizer: a record is read only where the index
does not hold it), nothing removed; ``apply`` removes each record (an unlink: atomic) and then a
run folder left empty. The run's report (report.md, report.html, the plots) and a node's history
(results/history, record/history.py: events, not records) are never touched. A run stored while
the plan was made is newer than every record it names and is not in it.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import TypedDict

from ..capability.gpu_trial import BASELINE_RUNS
from ..store import query
from ..store import results as store
from . import gate, host_record

DAY_S = 86400


class RetentionPlan(TypedDict):
    remove: list[str]  # the record files to remove, oldest run first
    kept: dict[str, int]  # {why: records kept older than the limit}


def _hosts(results_dir, runs) -> list[str]:
    """Every host with a record in ``runs`` (the names the store's files give, HOST_RE's)."""
    names = set()
    for kind, run_id in runs:
        try:
            listed = os.listdir(os.path.join(results_dir, kind, run_id))
        except OSError:
            continue
        names.update(n[:-5] for n in listed if n.endswith(".json") and store.HOST_RE.fullmatch(n[:-5]))
    return sorted(names)


def _why_kept(kind, found, open_caps, baseline_open) -> str:
    """Why an old record stays ('' when it may go); updates open_caps (the capabilities whose
    newest judging record the walk has not met yet)."""
    if isinstance(found, ValueError) or found["verdict"] == store.DAMAGED:
        return "damaged"
    settles = open_caps & set(found["caps"])
    open_caps -= settles
    if settles:
        return "gate"
    if baseline_open and kind == "bench" and found["verdict"] == "PASS":
        return "baseline"
    return ""


def _host_plan(results_dir, host, runs, young, kept) -> list[str]:
    """The old records of one host that no reader needs (paths), newest first."""
    remove, open_caps, baseline_open = [], set(gate.CAPABILITIES), True
    walk = query.summaries(results_dir, host_record.record_problem, gate.summarizer(), host, runs)
    for kind, run_id, found, _whole in walk:
        why = _why_kept(kind, found, open_caps, baseline_open)
        if kind == "bench" and not isinstance(found, ValueError) and found["verdict"] == "PASS":
            baseline_open = False
        if (kind, run_id) in young:
            continue
        if why:
            kept[why] = kept.get(why, 0) + 1
        else:
            remove.append(store.host_path(results_dir, run_id, host, kind))
    return remove


def plan(results_dir, keep_days, now=None) -> RetentionPlan:
    """What retention removes from the store with ``keep_days`` (0: nothing; ValueError for
    anything but a whole number >= 0, naming bench_keep_days)."""
    if isinstance(keep_days, bool) or not isinstance(keep_days, int) or keep_days < 0:
        raise ValueError(
            f"bench_keep_days={keep_days!r} must be a whole number of days >= 0 (0: keep every record)"
        )
    out: RetentionPlan = {"remove": [], "kept": {}}
    if keep_days == 0:
        return out
    now = time.time() if now is None else now
    runs = query.runs(results_dir, gate.GATE_KINDS, now=now)
    newest_bench = [r for r in runs if r[0] == "bench"][:BASELINE_RUNS]
    limit = now - keep_days * DAY_S
    young = {r for r in runs if (store.run_time(r[1]) or 0) >= limit} | set(newest_bench)
    for host in _hosts(results_dir, runs):
        out["remove"].extend(_host_plan(results_dir, host, runs, young, out["kept"]))
    out["remove"].sort(key=lambda p: store.run_sort_key(os.path.basename(os.path.dirname(p)), now))
    return out


def apply(results_dir, retention: RetentionPlan) -> int:
    """Remove the plan's records (each an atomic unlink; one gone already is skipped), then each
    run folder left empty; how many records were removed."""
    removed, folders = 0, set()
    for path in retention["remove"]:
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        removed += 1
        folders.add(os.path.dirname(path))
    for folder in sorted(folders):
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # only when nothing else is left in it (a report keeps it)
    return removed
