"""The controller's benchmark results store, and the comparison with the last passing run.

Layout: ``<results_dir>/bench/<run id>/<host>.json``, one folder per run, one JSON per host (a
quick check's run, ``bench.yml --tags quick``: ``<results_dir>/quick/<run id>/<host>.json``, kind
"quick" in each record; nothing here reads them as bench records: no baseline, no gate; the
store's index of each host's records, a cache the gate keeps: ``<results_dir>/index/<host>.json``,
store/index.py);
files are created exclusively, atomically (atomicfile) and never overwritten; strict JSON. Runs
are ordered by their own time, the id's (``20261129T164455Z``, then ``-2``, ``-3`` ... when two runs
start in the same second), the same order everywhere (run_sort_key); a run dated later than the
controller's clock allows (CLOCK_SKEW_S) orders before every other and its records are damaged:
a run stored while the clock was wrong never outranks the real runs after it. A record is read
only where it says it is: its host and run id are its file's and its folder's (load_record).

One node's answer never stops a run from being stored: a node whose data is not of its typed
shape (bench_report.store_nodes, gpu_trial.attach: core/shape.py) or whose judgement fails gets a
record of its own with the verdict DAMAGED saying why (damaged_record), and the others are stored
and judged as always; the launch gate refuses a DAMAGED node (gate.host_failures).

A host record (what the bench role writes; see roles/bench/README.md) is a dict with at least:
  host, run_id, verdict ("PASS"|"WARN"|"FAIL"|"N/A"), topology ({gpus: [{index, uuid, name}],
  links: [{a, b, class}]}), collectives ({name: {rows, verdict: {verdict, measured_busbw, size}}}),
  torch ({single_node|multi_node: {rows, world_size}}), gpu_trial (the GPU trial, issue 25:
  {capability, scope, verdict, gpus: [...]}; gpurecord says each field), node_check (the quick
  check, issue 26: node_check.CheckResult), findings ([{severity, code, gpus, message, source}],
  the shape of gpu_topology's health findings).

compare(current, baseline, tolerance) returns findings for: a GPU that is gone, any GPU-GPU link
whose class changed, and a bus bandwidth drop larger than the tolerance at the size the verdict
was taken at (nccl-tests collectives; else the largest size both runs measured) or the largest
common size (torch benchmarks).
"""

from __future__ import annotations

import calendar
import datetime
import functools
import json
import os
import re
import time
from typing import TypedDict

from ..core import atomicfile, shape

# The controller's results (host records, reports, plots, fabric records) are the user's and
# group's only: the modules that write them run under this umask (files 0640, folders 0750).
RESULTS_UMASK = 0o027
# The host record's layout version (every record wireup writes, the unreachable one too).
RECORD_SCHEMA = 2
# Anchored at both ends of the string (\Z: no trailing newline) and used with fullmatch; ASCII
# digits only (issue 35).
RUN_ID_RE = re.compile(r"\A[0-9]{8}T[0-9]{6}Z(?:-[0-9]+)?\Z")
# The kinds of run stored as host records, each in its own folder: bench.yml's, and the quick
# check's (bench.yml --tags quick), which no baseline and no gate reads.
KINDS = ("bench", "quick")  # "quick": capability/node_check.KIND (a unit test holds them equal)
# The kinds of run folders: the host records' (KINDS) and the fabric's (one fabric.json a run).
RUN_KINDS = (*KINDS, "fabric")
HOST_RE = re.compile(r"[A-Za-z0-9_.@:-]+")
# How far a run id's time may be ahead of the controller's clock (a store shared by controllers
# whose clocks differ a little): a run dated later is from the future, and its time is not trusted.
CLOCK_SKEW_S = 300
# A record's verdict when its node could not be judged (damaged_record); the verdicts that fail a
# run (the module's failed_hosts).
DAMAGED = "DAMAGED"
FAILING = ("FAIL", DAMAGED)


def new_run_id(now=None):
    """A run id from UTC time (seconds since the epoch, default now)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))


@functools.lru_cache(maxsize=4096)
def run_time(run_id):
    """A run id's time in seconds since the epoch (UTC); None when it is no time (20261399T...).
    Cached: every reader of the store sorts the same ids again."""
    base = str(run_id).partition("-")[0]
    if not RUN_ID_RE.fullmatch(base):
        return None
    try:
        when = datetime.datetime(
            int(base[:4]), int(base[4:6]), int(base[6:8]), int(base[9:11]), int(base[11:13]), int(base[13:15])
        )
    except ValueError:
        return None
    return calendar.timegm(when.timetuple())


def untrusted_time(run_id, now=None):
    """Why a run id's time cannot be trusted ('' when it can): it is no time, or it is later than
    the controller's clock (``now``, default the time now) plus CLOCK_SKEW_S."""
    when = run_time(run_id)
    if when is None:
        return f"run id {run_id} is not a time"
    ahead = when - (time.time() if now is None else now)
    if ahead <= CLOCK_SKEW_S:
        return ""
    return (
        f"run {run_id} is dated {ahead / 86400:.1f} days after the controller's clock (more than the "
        f"{CLOCK_SKEW_S} s allowed for clock skew): stored while a clock was wrong, or put there by hand"
    )


def run_sort_key(run_id, now=None):
    """The store's one order of runs (oldest first), everywhere a newest record is looked for: the
    run's own time (its id), then its -N serial; a run whose time cannot be trusted
    (untrusted_time) comes before every other, so it never outranks a real later run."""
    when = run_time(run_id)
    trusted = when is not None and when - (time.time() if now is None else now) <= CLOCK_SKEW_S
    return (trusted, when or 0, int(run_id.partition("-")[2] or 1))


def bench_dir(results_dir):
    return os.path.join(results_dir, "bench")


def reserve_run(results_dir, run_id=None, kind="bench"):
    """Create and return a fresh run folder under results_dir/kind (bench, fabric); a taken id
    gets a -N suffix (never reused)."""
    run_id = run_id or new_run_id()
    if not RUN_ID_RE.fullmatch(run_id) or run_time(run_id) is None:
        raise ValueError(f"run id {run_id!r} is not like 20261129T164455Z")
    root = os.path.join(results_dir, kind)
    os.makedirs(root, exist_ok=True)
    candidate, serial = run_id, 1
    while True:
        path = os.path.join(root, candidate)
        try:
            os.mkdir(path)
            return candidate, path
        except FileExistsError:
            serial += 1
            candidate = f"{run_id.split('-')[0]}-{serial}"


def host_path(results_dir, run_id, host, kind="bench"):
    if not RUN_ID_RE.fullmatch(str(run_id)):
        raise ValueError(f"run id {run_id!r} is not like 20261129T164455Z")
    if not HOST_RE.fullmatch(str(host)):
        raise ValueError(f"host name {host!r} cannot be a file name")
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    return os.path.join(results_dir, kind, run_id, f"{host}.json")


def write_host(results_dir, run_id, host, record, kind="bench"):
    """Write one host's record atomically, as strict JSON (NaN and infinities become null);
    raises FileExistsError rather than overwrite. Returns the path."""
    return write_record(host_path(results_dir, run_id, host, kind), record_bytes(record))


def record_bytes(record):
    """A record as the store writes it: strict JSON (NaN and infinities null), sorted keys, on one
    line with a final newline (json's own separators: ``"verdict": "PASS"`` as before), encoded
    once by json's C encoder: no indentation, which makes json use its pure-Python encoder, ten
    times slower (issue 39). People read one with ``python3 -m json.tool FILE``."""
    return (atomicfile.dumps(record, sort_keys=True, default=str) + "\n").encode("utf-8")


def write_record(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return atomicfile.write_bytes(path, data, exclusive=True)


class DamagedRecord(ValueError):
    """A stored record that cannot be used: unreadable, not JSON, or not a record's shape. The
    message names the file and what is wrong with it."""


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def read_strict_json(path):
    """The strict JSON stored at ``path`` (any shape: the caller checks it); FileNotFoundError when
    there is none, DamagedRecord naming the file when it is unreadable, empty (cut off), or not
    strict JSON (NaN and infinities are not: atomicfile never writes them)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as err:
        raise DamagedRecord(f"{path}: unreadable ({err})") from err
    if not text.strip():
        raise DamagedRecord(f"{path}: empty (a write cut off, e.g. by a full disk)")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError as err:
        raise DamagedRecord(f"{path}: not valid JSON ({err}): cut off or edited") from err


def read_record(path, record_problem):
    """The host record stored at ``path`` (``<kind>/<run id>/<host>.json``); FileNotFoundError when
    there is none, DamagedRecord (naming the file and what is wrong) when it is unreadable, cut
    off, not strict JSON, not shaped like a record (record_problem: the record layer's check,
    record/host_record.py, which reads the capabilities' parts), not where it says it is or of a
    run whose time cannot be trusted (_place_problem)."""
    record = read_strict_json(path)
    problem = record_problem(record) or _place_problem(record, path)
    if problem:
        raise DamagedRecord(f"{path}: {problem}")
    return record


def _place_problem(record, path):
    """A record whose host is not its file's or whose run id is not its folder's (a record copied
    or moved: it would be read as another node's or run's), or of a run from the future."""
    host = os.path.basename(path).removesuffix(".json")
    run_id = os.path.basename(os.path.dirname(os.path.abspath(path)))
    if record.get("host") != host:
        said = shape.excerpt(repr(record.get("host")))
        return f"its host is {said}, not {host} (its file's name): another host's record"
    if record.get("run_id") != run_id:
        said = shape.excerpt(repr(record.get("run_id")))
        return f"its run id is {said}, not {run_id} (its folder's name): another run's record"
    return untrusted_time(run_id)


def list_runs(results_dir, kind="bench"):
    """Run ids of this kind (RUN_KINDS) in the store, oldest first (run_sort_key's order)."""
    if kind not in RUN_KINDS:
        raise ValueError(f"kind {kind!r} is not one of {', '.join(RUN_KINDS)}")
    root = os.path.join(results_dir, kind)
    if not os.path.isdir(root):
        return []
    runs = [d for d in os.listdir(root) if RUN_ID_RE.fullmatch(d) and os.path.isdir(os.path.join(root, d))]
    now = time.time()
    return sorted(runs, key=lambda run_id: run_sort_key(run_id, now))


# ------------------------------------------------------------------ what a record was compared with
# A host record's ``baseline`` part says whether and against which run it was compared (issue 38):
# "compared" with an earlier run (a bench record: the host's last passing run; a quick record: the
# bench run wireup-check compared the node with), "recorded" (nothing compared: the host's first
# PASS, which the next run is compared with) or "none" (nothing compared and no baseline either: a
# first run that did not PASS, an unreachable or damaged node, a quick check without a baseline).
# The verdict word (what the gate reads) does not change; this is said beside it everywhere.
BASELINE_STATES = ("recorded", "compared", "none")


class _BaselineComparison(TypedDict, total=False):
    torch: dict  # a GPU-less node's figures against its baseline's (judge_gpu_less)


class Baseline(_BaselineComparison):
    """A record's ``baseline`` part: made once per record by baseline_part, read by every consumer
    (report.assemble, node_check's table, report.runsummary, report.metrics) through read_baseline."""

    state: str  # one of BASELINE_STATES
    run_id: str  # the run compared with ("" unless compared)


def baseline_part(record, baseline) -> Baseline:
    """The record's baseline part once its verdict is known. baseline: (run_id, record) of the
    host's last passing run or None; a quick record names the bench run its check compared with."""
    check = record.get("node_check") or {}
    if baseline:
        state, run_id = "compared", baseline[0]
    elif check:
        base = check.get("baseline") or {}
        state, run_id = ("compared", _run_id_or_blank(base.get("run_id"))) if base else ("none", "")
    else:
        state, run_id = ("recorded" if record.get("verdict") == "PASS" else "none"), ""
    part = {"state": state, "run_id": run_id}
    if "torch" in (record.get("baseline") or {}):
        part["torch"] = record["baseline"]["torch"]
    return part


def _run_id_or_blank(value):
    return value if isinstance(value, str) and RUN_ID_RE.fullmatch(value) else ""


def read_baseline(record) -> Baseline:
    """A stored record's baseline part as a Baseline: a record from before issue 38 ({} or
    {run_id}) reads as none or compared; anything not of the shape reads as none (nothing is
    claimed compared that cannot be shown)."""
    part = record.get("baseline") if isinstance(record, dict) else None
    if not isinstance(part, dict):
        return {"state": "none", "run_id": ""}
    run_id = _run_id_or_blank(part.get("run_id"))
    state = part.get("state") if part.get("state") in BASELINE_STATES else ("compared" if run_id else "none")
    out = {"state": state, "run_id": run_id if state == "compared" else ""}
    if isinstance(part.get("torch"), dict):
        out["torch"] = part["torch"]
    return out


def baseline_said(base: Baseline) -> str:
    """What the baseline part says, in the words every consumer shows beside the verdict."""
    if base["state"] == "compared":
        return f"compared with run {base['run_id'] or '(unnamed)'}"
    if base["state"] == "recorded":
        return "baseline recorded (first passing run: nothing compared)"
    return "nothing compared (no passing run to compare with)"


def verdict_said(record) -> str:
    """'PASS, baseline recorded (first passing run: nothing compared)', 'WARN, compared with run X': the
    verdict and, beside it, what it was compared with."""
    verdict = record.get("verdict") if isinstance(record, dict) else None
    return f"{verdict or 'N/A'}, {baseline_said(read_baseline(record))}"


def is_gpu_less(record):
    """A node with torch.distributed results over gloo only and no nccl-tests: no GPU, so no
    bandwidth to expect from a topology."""
    torch = record.get("torch") or {}
    return (
        not record.get("collectives")
        and any(entry.get("rows") for entry in torch.values())
        and all(entry.get("backend") == "gloo" for entry in torch.values())
    )
