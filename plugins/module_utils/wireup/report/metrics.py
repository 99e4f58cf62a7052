"""wireup's figures and verdicts in Prometheus' text exposition format, for node_exporter's textfile
collector (pure Python, stdlib only; issue 26).

Format (Prometheus "Exposition formats", text format 0.0.4): ``# HELP name text`` (backslash and
newline escaped), ``# TYPE name gauge``, then ``name{label="value",...} number``; label values
escape backslash, double quote and newline; metric names match ``[a-zA-Z_:][a-zA-Z0-9_:]*``, label
names ``[a-zA-Z_][a-zA-Z0-9_]*`` and never start with ``__`` (reserved). Every family is written
once, its samples together; a label set appears once per family (node_exporter refuses a file
that breaks either rule).

Names and units follow Prometheus' naming conventions: base units (bytes per second, seconds),
``_ratio`` for fractions, ``_info`` with value 1 for text that is not a number, ``_timestamp_seconds``
for a time (Unix seconds), and a verdict as one series per state (``wireup_*_verdict{verdict=
"FAIL"} 1``, every other state 0), so PromQL selects a state by its name. nccl-tests' and torch's
GB/s are 10^9 bytes per second.

The families (README "Prometheus"): wireup_bench_* (each node's latest bench.yml record),
wireup_fabric_* (the latest fabric run's verdict for the node and its pairs), wireup_check_* (the
quick check, written by wireup-check on the node at every run).
"""

from __future__ import annotations

import calendar
import re
import time

from ..capability import fabric
from ..core import checks
from ..judge.quick import CheckRun
from ..probe import bench_output
from ..probe.health import GpuFinding
from ..record import history, host_record
from ..render.prom import (  # the exposition format (render/prom.py); metrics.family and co. stay
    family,
    render,
)
from ..store import query
from ..store import results as store

# Files node_exporter's textfile collector reads (*.prom); wireup's are wireup_<what>.prom.
TEXTFILE_NAME = re.compile(r"wireup_[a-z0-9_]{1,40}\.prom")
RUN_ID = re.compile(r"(\d{8}T\d{6}Z)(?:-\d+)?")
GB = 1e9  # nccl-tests' and torch's GB/s: 10^9 bytes per second
# The states a verdict gauge lists (one series each, 1 for the state the node is in).
BENCH_VERDICTS = ("PASS", "WARN", "FAIL", "N/A", "UNREACHABLE", "DAMAGED")
FABRIC_VERDICTS = ("PASS", "FAIL", "N/A", "UNREACHABLE", "DAMAGED")
CHECK_VERDICTS = ("PASS", "FAIL", "ERROR", "NO_BASELINE")
SEVERITIES = ("critical", "warning", "info")


def verdict_samples(labels, verdict, states):
    """One sample per state: 1 for ``verdict``, 0 for the others; a verdict not in ``states``
    (a newer state this code does not know) is added with 1."""
    names = list(states) + ([str(verdict)] if verdict is not None and str(verdict) not in states else [])
    return [({**labels, "verdict": state}, 1 if state == str(verdict) else 0) for state in names]


def run_time(run_id):
    """A run id's UTC time (20261129T164455Z, -N suffixes too) as Unix seconds; None when the id
    is not one."""
    m = RUN_ID.fullmatch(str(run_id or ""))
    if not m:
        return None
    return float(calendar.timegm(time.strptime(m.group(1), "%Y%m%dT%H%M%SZ")))


def _bytes_per_second(gbs):
    return gbs * GB if checks.is_finite_number(gbs) else None


# ------------------------------------------------------------------------------ bench records
def _bench_collectives(host, record):
    measured, expected, verdicts = [], [], []
    for name, entry in sorted((record.get("collectives") or {}).items()):
        judged = entry.get("verdict") or {}
        labels = {"host": host, "collective": name}
        if judged.get("size"):
            measured.append(
                ({**labels, "size_bytes": judged["size"]}, _bytes_per_second(judged.get("measured_busbw")))
            )
        expected.append((labels, _bytes_per_second((entry.get("expected") or {}).get("expected_busbw"))))
        if judged.get("verdict"):
            verdicts += verdict_samples(labels, judged["verdict"], BENCH_VERDICTS[:4])
    return [
        family(
            "wireup_bench_busbw_bytes_per_second",
            "nccl-tests bus bandwidth of the latest bench.yml run at the size its verdict was taken at",
            measured,
        ),
        family(
            "wireup_bench_expected_busbw_bytes_per_second",
            "Bus bandwidth the node's slowest GPU-GPU link should give (bandwidth.expected_busbw)",
            expected,
        ),
        family(
            "wireup_bench_collective_verdict", "Verdict per nccl-tests collective (1: this state)", verdicts
        ),
    ]


def _bench_torch(host, record):
    """Each torch run's figure at its largest size (bench_output.figure: the verdict's rule)."""
    samples = []
    for run, entry in sorted((record.get("torch") or {}).items()):
        rows = entry.get("rows") or []
        sizes = bench_output.figure_sizes(rows, "all_reduce")
        if not sizes:
            continue
        labels = {"host": host, "run": run, "backend": entry.get("backend") or "", "size_bytes": sizes[-1]}
        samples.append((labels, _bytes_per_second(bench_output.figure(rows, sizes[-1], "all_reduce"))))
    return [
        family(
            "wireup_bench_torch_busbw_bytes_per_second",
            "torch.distributed all-reduce bus bandwidth at the largest size of the latest bench.yml run",
            samples,
        )
    ]


def _bench_stepcost(host, record):
    step, share = [], []
    for run, figures in sorted((record.get("stepcost") or {}).items()):
        for fig in figures or []:
            if not isinstance(fig, dict):
                continue
            base = {"host": host, "run": run, "params": fig.get("params", "")}
            ms = fig.get("compute_ms")
            step.append(
                ({**base, "hook": "compute_only"}, ms / 1000.0 if isinstance(ms, (int, float)) else None)
            )
            for hook, entry in sorted((fig.get("hooks") or {}).items()):
                ms = (entry or {}).get("step_ms")
                step.append(({**base, "hook": hook}, ms / 1000.0 if isinstance(ms, (int, float)) else None))
            share.append((base, fig.get("share")))
    return [
        family("wireup_bench_ddp_step_seconds", "Median DDP training step time per comm hook", step),
        family(
            "wireup_bench_ddp_comm_exposed_ratio",
            "Share of the DDP step spent in communication backward did not hide (no hook)",
            share,
        ),
    ]


def _compared(record):
    """1 when the record's verdict was compared with an earlier run (results.read_baseline), else 0."""
    return 1 if store.read_baseline(record)["state"] == "compared" else 0


def bench_families(host, record, verdict=None):
    """The families of one node's latest bench record (host_record.build_record's shape). ``verdict``
    overrides the record's (DAMAGED: the record could not be read, ``record`` is then {})."""
    record = record or {}
    labels = {"host": host}
    run_id = record.get("run_id", "")
    versions = record.get("versions") or {}
    info = {
        **labels,
        "run_id": run_id,
        "driver": versions.get("driver") or "",
        "nccl": versions.get("nccl") or "",
        "nccl_tests": versions.get("nccl_tests") or "",
        "gpus": (record.get("topology") or {}).get("gpu_count") or 0,
    }
    counts = {s: 0 for s in SEVERITIES}
    for f in record.get("findings") or []:
        if f.get("severity") in counts:
            counts[f["severity"]] += 1
    return [
        family("wireup_bench_info", "The latest bench.yml run of the node (run id, versions)", [(info, 1)]),
        family(
            "wireup_bench_verdict",
            "The node's verdict in its latest bench.yml run (1: this state)",
            verdict_samples(labels, verdict or record.get("verdict"), BENCH_VERDICTS),
        ),
        family(
            "wireup_bench_baseline_compared",
            "Whether the latest bench.yml verdict was compared with an earlier passing run (1) or "
            "nothing was compared (0: a first passing run records the baseline)",
            [(labels, _compared(record))],
        ),
        family(
            "wireup_bench_timestamp_seconds",
            "When the node's latest bench.yml run started (Unix time, from its run id)",
            [(labels, run_time(run_id))],
        ),
        family(
            "wireup_bench_findings",
            "Findings of the latest bench.yml run by severity",
            [({**labels, "severity": s}, n) for s, n in counts.items()],
        ),
        *_bench_collectives(host, record),
        *_bench_torch(host, record),
        *_bench_stepcost(host, record),
    ]


# ------------------------------------------------------------------------------ fabric records
def fabric_families(host, record):
    """The families of the latest fabric record for one node: its verdict, the run's time and
    its pairs' bus bandwidth ({} or None: no fabric run, nothing written; a damaged record:
    verdict DAMAGED)."""
    if not record:
        return []
    labels = {"host": host}
    verdict = "DAMAGED" if record.get("damaged") else (record.get("verdicts") or {}).get(host)
    if verdict is None:
        return []  # the node took no part in the latest fabric run
    pairs = []
    for p in record.get("pairs") or []:
        members = [str(m) for m in p.get("pair") or []]
        if host not in members:
            continue
        key = {
            **labels,
            "peers": ",".join(m for m in members if m != host),
            "round": p.get("round") or 0,
            "kind": p.get("kind") or "pair",
        }
        pairs.append((key, _bytes_per_second(p.get("busbw"))))
    return [
        family(
            "wireup_fabric_verdict",
            "The node's verdict in the latest fabric run (1: this state)",
            verdict_samples(labels, verdict, FABRIC_VERDICTS),
        ),
        family(
            "wireup_fabric_timestamp_seconds",
            "When the latest fabric run started (Unix time, from its run id)",
            [(labels, run_time(record.get("run_id")))],
        ),
        family(
            "wireup_fabric_busbw_bytes_per_second",
            "Bus bandwidth of each pair (or whole-group) job the node took part in, latest fabric run",
            _dedupe(pairs),
        ),
    ]


def _dedupe(samples):
    """The last sample of each label set (a pair repeated in a round keeps its last figure)."""
    out = {}
    for labels, value in samples:
        out[tuple(sorted(labels.items()))] = (labels, value)
    return list(out.values())


def node_text(host, bench=None, fabric_record=None):
    """The text bench.yml writes on a node (wireup_bench.prom): its latest bench record's and the
    latest fabric run's families. ``bench``: {verdict, run_id, record} as latest_record gives it
    (None: the node has no bench record yet)."""
    families = []
    if bench:
        families += bench_families(host, bench.get("record") or {}, bench.get("verdict"))
    families += fabric_families(host, fabric_record)
    return render(families)


def latest_record(results_dir, host):
    """{verdict, run_id, record} of the host's newest bench record in the controller's store (a
    newest record that cannot be read is DAMAGED, never an older one); None when the host has none
    or its name cannot be a file name. The figures and the quick-check baseline follow it; the
    launch gate reads every capability's newest record instead (record/gate.py)."""
    for _kind, run_id, _host, record in query.records(results_dir, host_record.record_problem, host=host):
        if isinstance(record, store.DamagedRecord):
            return {"verdict": "DAMAGED", "run_id": run_id, "record": {"run_id": run_id}}
        if isinstance(record, ValueError):
            return None
        return {"verdict": record.get("verdict"), "run_id": run_id, "record": record}
    return None


def controller_text(results_dir, host, now=None):
    """node_text for ``host`` from the controller's store (its newest bench record, its part of
    the newest fabric record: fabric.latest_fabric_of), then its history's families (drains and
    returns, issue 37: history.families at ``now``); '' when there is none of them."""
    text = node_text(host, latest_record(results_dir, host), fabric.latest_fabric_of(results_dir, host))
    events = history.read(results_dir, host) if checks.is_host_name(str(host)) else []
    if not events:
        return text
    return text + render(history.families({host: events}, time.time() if now is None else now))


# ------------------------------------------------------------------------------ the quick check
def _check_hardware(labels, now):
    """The GPUs' and NICs' state as the check read it."""
    nvlink, width, gen, nic_up, nic_rate = [], [], [], [], []
    for gpu in now.get("gpus") or []:
        g = {**labels, "gpu": gpu.get("index"), "bus_id": gpu.get("bus_id") or ""}
        nvlink.append((g, (gpu.get("nvlink") or {}).get("active")))
        width.append((g, (gpu.get("pcie") or {}).get("width_current")))
        gen.append((g, (gpu.get("pcie") or {}).get("gen_max")))
    for port in now.get("ports") or []:
        p = {**labels, "port": port["name"]}
        nic_up.append((p, 1 if port.get("up") else 0))
        nic_rate.append((p, port["gbps"] * GB / 8 if isinstance(port.get("gbps"), (int, float)) else None))
    return [
        family("wireup_check_nvlink_active_links", "Active NVLinks per GPU", nvlink),
        family("wireup_check_pcie_link_width", "Current PCIe link width per GPU (lanes)", width),
        family("wireup_check_pcie_link_max_generation", "Maximum PCIe generation of the GPU's link", gen),
        family("wireup_check_nic_up", "NIC port or interface up (1) or not (0)", nic_up),
        family("wireup_check_nic_rate_bytes_per_second", "NIC port or interface rate", nic_rate),
    ]


def _gpu_finding_labels(labels, found: GpuFinding):
    """A GPU finding's labels: its GPU's index (gpu, as the hardware families name it), bus_id
    and uuid ('' for a finding about no one GPU), its code and remediation."""
    gpu = found.get("gpu") or {}
    if not isinstance(gpu, dict):
        raise ValueError(f"a GPU finding names its GPU by {gpu!r}, not by health.GpuIdentity")
    return {
        **labels,
        **{name: "" if gpu.get(key) is None else gpu[key] for name, key in _GPU_LABELS},
        "code": found.get("code", ""),
        "remediation": found.get("remediation", ""),
    }


_GPU_LABELS = (("gpu", "index"), ("bus_id", "bus_id"), ("uuid", "uuid"))


def _check_findings(labels, result: CheckRun):
    """Problems per part, the one-size benchmark, GPU health findings."""
    counted = {}
    for p in result.get("problems") or []:
        counted[p["part"]] = counted.get(p["part"], 0) + 1
    bench = result.get("bench") or {}
    busbw = []
    if bench.get("busbw") is not None:
        key = {**labels, "collective": bench.get("collective", ""), "size_bytes": bench.get("size", "")}
        busbw.append((key, _bytes_per_second(bench["busbw"])))
    health = [(_gpu_finding_labels(labels, f), 1) for f in result.get("gpu_findings") or []]
    return [
        family(
            "wireup_check_problem",
            "Problems the quick check found per part (worse than its baseline)",
            [({**labels, "part": part}, n) for part, n in counted.items()],
        ),
        family("wireup_check_busbw_bytes_per_second", "The quick check's nccl-tests bus bandwidth", busbw),
        family(
            "wireup_check_gpu_finding",
            "A GPU health finding of the quick check (wireup.probe.gpuhealth), with its remediation class",
            _dedupe(health),
        ),
    ]


def _check_head(labels, result: CheckRun):
    """The verdict and when it was given: what every wireup_check.prom holds."""
    return [
        family(
            "wireup_check_verdict",
            "The quick node check's verdict (1: this state)",
            verdict_samples(labels, result.get("verdict"), CHECK_VERDICTS),
        ),
        family(
            "wireup_check_timestamp_seconds",
            "When the quick check last ran (Unix time)",
            [(labels, result.get("time"))],
        ),
    ]


def check_families(result: CheckRun):
    """The families wireup-check writes on the node (wireup_check.prom) from its result
    (quick.result's CheckRun)."""
    labels = {"host": result.get("host") or ""}
    return [
        *_check_head(labels, result),
        family(
            "wireup_check_duration_seconds",
            "How long the quick check took",
            [(labels, result.get("seconds"))],
        ),
        family(
            "wireup_check_baseline_timestamp_seconds",
            "When the baseline the check compares with was taken (the node's last passing bench)",
            [(labels, result.get("baseline_time"))],
        ),
        *_check_findings(labels, result),
        *_check_hardware(labels, result.get("now") or {}),
    ]


def check_text(result: CheckRun):
    """wireup_check.prom's text for one result of wireup-check."""
    return render(check_families(result))


def check_verdict_text(result: CheckRun):
    """wireup_check.prom's text when check_text could not be made: the verdict and when, and
    wireup_check_metrics_incomplete 1, so no older file (a PASS) stands for a run that failed."""
    labels = {"host": result.get("host") or ""}
    return render(
        [
            *_check_head(labels, result),
            family(
                "wireup_check_metrics_incomplete",
                "1: the quick check's other metrics could not be written (its line says why)",
                [(labels, 1)],
            ),
        ]
    )
