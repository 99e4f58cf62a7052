"""Expected bus bandwidth from a node's GPU topology, and the PASS/WARN/FAIL verdict.

The model (documented in roles/bench/README.md):

1. Every pair of GPUs in the set has a link class from ``nvidia-smi topo -m``. Its raw speed,
   unidirectional GB/s as nccl-tests' busbw counts it:
   - ``NV#``: # bonded NVLinks x the per-link speed that ``nvidia-smi nvlink -s`` prints (the
     slower GPU of the pair). H200: NV18 x 26.562 = 478 GB/s.
   - ``PIX``/``PXB`` (through PCIe switches only) -> kind ``pcie``; ``PHB``/``NODE``/``SYS``
     (through the CPU's host bridge or between sockets) -> kind ``host``: the PCIe link of the
     slower GPU, lanes x per-lane rate of its generation, at its MAX gen and width (a link that
     trained lower is exactly what the benchmark must catch, so the expectation does not follow it).
2. The bottleneck is the slowest link of the set (NCCL's rings/trees cross every GPU); among links
   of equal speed, the one whose kind has the lowest efficiency for the collective.
3. expected busbw = bottleneck x an efficiency factor per link kind and collective
   (:data:`EFFICIENCY`): what NCCL reaches on a healthy link at large sizes.

Verdict at the largest measured size >= 1 GiB (best busbw of the halves nccl-tests validates):
PASS when measured >= pass_ratio x expected, WARN when >= warn_ratio x expected, FAIL below, and
FAIL whenever nccl-tests itself failed the run (exit code, a FAILED footer, failure lines, a
table cut off, wrong elements; see bench_output.assess), whatever the sizes reached. Without an
expectation (one GPU, or unknown links) or without a size >= 1 GiB the verdict is ``N/A``.
"""

import dataclasses
import math
import re

from ..core import checks
from ..probe import bench_output
from . import bench_settings

# PCIe usable rate per lane and direction in GB/s, after line encoding (8b/10b up to Gen2,
# 128b/130b Gen3-5, FLIT Gen6). x16 Gen4 = 31.5, x16 Gen5 = 63.0.
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}

# Fraction of the bottleneck link that NCCL's bus bandwidth reaches on healthy hardware at
# >= 1 GiB, judged on the halves nccl-tests validates (never alltoall's or sendrecv's in-place
# half). Where each factor comes from (roles/bench/README.md repeats this table):
# - nvlink all_reduce 0.72, all_gather 0.63, reduce_scatter 0.61: measured on 2x H200 NV18
#   (478 GB/s), nccl-tests 2.19.6 / NCCL 2.28.9: 345-348, 301-331, 293-298 GB/s at 4-8 GiB
#   (tests/fixtures/h200x2, docs/example-h200x2/healthy).
# - nvlink alltoall 0.70: the same machine's OUT-OF-PLACE alltoall, 335.6-338.4 GB/s at 2-8 GiB
#   (docs/example-h200x2/healthy/localhost.json; 0.708 of 478), and 4x H100 NV18 out-of-place
#   334.9 GB/s at 500 MB (github.com/NVIDIA/nccl/issues/2169; 0.70). The earlier 0.74 came from
#   the in-place half (365 GB/s), which nccl-tests neither supports nor checks for alltoall.
# - nvlink broadcast 0.70: NCCL's maintainers give ~370 GB/s as the effective NVLink4 busbw of
#   non-allreduce collectives on H100 (github.com/NVIDIA/nccl-tests/issues/212, 0.77 of 478) and
#   8x H100 broadcast reaches 310 GB/s (github.com/NVIDIA/nccl/issues/1678, 0.65). 0.70 passes
#   both (expected 335: 310 is 93%) and no longer passes a run 20% below them (296 is 88%: WARN;
#   the old 0.60 made it 103%: PASS). Not yet measured on wireup's own 2x H200.
# - nvlink reduce/sendrecv 0.60, and every pcie and host factor: conservative estimates from
#   published nccl-tests results on PCIe and multi-socket hosts, not measured here.
# Override them per cluster with bench_efficiency when a healthy run shows better.
EFFICIENCY = {
    "nvlink": {
        "all_reduce": 0.72,
        "all_gather": 0.63,
        "reduce_scatter": 0.61,
        "alltoall": 0.70,
        "broadcast": 0.70,
        "reduce": 0.60,
        "sendrecv": 0.60,
    },
    "pcie": {
        "all_reduce": 0.70,
        "all_gather": 0.70,
        "reduce_scatter": 0.70,
        "alltoall": 0.60,
        "broadcast": 0.70,
        "reduce": 0.70,
        "sendrecv": 0.70,
    },
    "host": {
        "all_reduce": 0.50,
        "all_gather": 0.50,
        "reduce_scatter": 0.50,
        "alltoall": 0.45,
        "broadcast": 0.50,
        "reduce": 0.50,
        "sendrecv": 0.50,
    },
}

ONE_GIB = 1 << 30
VERDICTS = ("PASS", "WARN", "FAIL", "N/A")
_NV = re.compile(r"^NV(\d+)$")
_PCIE_KIND = {"PIX": "pcie", "PXB": "pcie", "PHB": "host", "NODE": "host", "SYS": "host", "SOC": "host"}


def pcie_gbps(gen, width):
    """Unidirectional GB/s of a PCIe link; None when gen or width is unknown."""
    try:
        gen = int(gen)
        width = int(width)
    except (TypeError, ValueError):
        return None
    if gen not in PCIE_LANE_GBPS or width <= 0:
        return None
    return round(PCIE_LANE_GBPS[gen] * width, 3)


def _gpu_pcie_gbps(gpu):
    pcie = (gpu or {}).get("pcie") or {}
    gen = pcie.get("gen_max") if pcie.get("gen_max") is not None else pcie.get("gen_current")
    width = pcie.get("width_max") if pcie.get("width_max") is not None else pcie.get("width_current")
    return pcie_gbps(gen, width), gen, width


def link_speed(cls, gpu_a, gpu_b):
    """Raw speed of one GPU-GPU link: {class, kind, gbps, detail}; gbps None when unknown."""
    match = _NV.match(cls or "")
    if match:
        return _nvlink_speed(cls, int(match.group(1)), (gpu_a, gpu_b))
    kind = _PCIE_KIND.get(cls)
    if kind is None:
        return {"class": cls, "kind": "unknown", "gbps": None, "detail": f"unknown link class {cls!r}"}
    found = [f for f in (_gpu_pcie_gbps(g) for g in (gpu_a, gpu_b)) if f[0] is not None]
    if not found:
        return {
            "class": cls,
            "kind": kind,
            "gbps": None,
            "detail": f"{cls} but the GPUs' PCIe gen/width are unknown",
        }
    gbps, gen, width = min(found, key=lambda f: f[0])
    return {
        "class": cls,
        "kind": kind,
        "gbps": gbps,
        "detail": f"{cls}: PCIe Gen{gen} x{width} = {gbps:.1f} GB/s",
    }


def _nvlink_speed(cls, count, gpus):
    """An NV# link: count links at the slower GPU's per-link speed (nvlink -s)."""
    speeds = [s for s in (((g or {}).get("nvlink") or {}).get("speed_gbps") for g in gpus) if s]
    if not speeds:
        detail = f"{cls} but `nvidia-smi nvlink -s` gave no per-link speed"
        return {"class": cls, "kind": "nvlink", "gbps": None, "detail": detail}
    per_link = min(speeds)
    detail = f"{cls} x {per_link:.3f} GB/s per link"
    return {"class": cls, "kind": "nvlink", "gbps": round(count * per_link, 3), "detail": detail}


def bottleneck(topology, collective=None, overrides=None):
    """The slowest GPU-GPU link of a gpu_topology structure (see roles/gpu_topology/README.md).

    Uses topology["links"] ([{a: "GPU0", b: "GPU1", class: "NV18"}]) and topology["gpus"]
    ([{index, pcie: {gen_max, width_max, ...}, nvlink: {speed_gbps}}]). Returns
    {class, kind, gbps, detail, pair: [a, b], gpus: N} or None for fewer than 2 GPUs.

    Links of equal speed are told apart by their kind's efficiency for `collective`: the worst
    class is the bottleneck. On a dual-socket PCIe box every pair runs at the same PCIe speed, but
    the ring crosses SYS (x0.50), so PIX (x0.70) must not be picked just for coming first.
    """
    gpus = {
        f"GPU{int(g['index'])}": g for g in (topology or {}).get("gpus") or [] if g.get("index") is not None
    }
    links = (topology or {}).get("links") or []
    if len(gpus) < 2 or not links:
        return None

    factors = {}  # kind -> factor: each kind's looked up once, not once per comparison

    def factor(kind):
        if kind not in factors:
            value = efficiency_for(kind, collective, overrides) if collective else None
            factors[kind] = 1.0 if value is None else value
        return factors[kind]

    speeds = [_link_of(link, gpus) for link in links]
    unknown = next((speed for speed in speeds if speed["gbps"] is None), None)
    if unknown is not None:
        return dict(unknown, gpus=len(gpus))  # an unknown link makes the whole set unknown
    worst = speeds[0]
    for speed in speeds[1:]:
        if _rank(speed, factor) < _rank(worst, factor):
            worst = speed
    return dict(worst, gpus=len(gpus))


def _link_of(link, gpus):
    """link_speed of one topology link, with its pair."""
    speed = link_speed(link.get("class"), gpus.get(link.get("a")), gpus.get(link.get("b")))
    speed["pair"] = [link.get("a"), link.get("b")]
    return speed


# Among PCIe paths of one speed and kind, the one crossing more of the host is named the bottleneck
# (NODE rather than PHB on a box whose NVLink pairs meet over PCIe), as nvidia-smi's legend orders them.
_PCIE_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")


def _rank(speed, factor):
    """Sort key of a link for the bottleneck: slower, then less efficient, then a longer PCIe path."""
    cls = speed.get("class")
    hops = _PCIE_ORDER.index(cls) if cls in _PCIE_ORDER else -1
    return (speed["gbps"], factor(speed["kind"]), -hops)


def efficiency_for(kind, collective, overrides=None):
    """Efficiency factor for a link kind and collective; overrides: {kind: {collective: f}}."""
    table = {k: dict(v) for k, v in EFFICIENCY.items()}
    for k, v in (overrides or {}).items():
        if not isinstance(v, dict):
            raise ValueError(f"bench_efficiency.{k} must be a mapping of collective -> factor, got {v!r}")
        table.setdefault(k, {}).update(v)
    factor = table.get(kind, {}).get(collective)
    if factor is None:
        return None
    factor = float(factor)
    if not 0 < factor <= 1:
        raise ValueError(f"bench_efficiency.{kind}.{collective} must be in (0, 1], got {factor!r}")
    return factor


def expected_busbw(topology, collective, overrides=None):
    """Expected nccl-tests busbw (GB/s) of `collective` on the node's whole GPU set.

    Returns {collective, expected_busbw, link_gbps, link_class, link_kind, efficiency, basis}
    where expected_busbw is None (and basis says why) when it cannot be told.
    """
    link = bottleneck(topology, collective, overrides)
    out = {
        "collective": collective,
        "expected_busbw": None,
        "link_gbps": None,
        "link_class": None,
        "link_kind": None,
        "efficiency": None,
        "basis": "",
    }
    if link is None:
        out["basis"] = "fewer than 2 GPUs: no GPU-GPU link to measure"
        return out
    out.update(link_gbps=link["gbps"], link_class=link["class"], link_kind=link["kind"])
    if link["gbps"] is None:
        out["basis"] = "bottleneck {}-{} unknown: {}".format(link["pair"][0], link["pair"][1], link["detail"])
        return out
    factor = efficiency_for(link["kind"], collective, overrides)
    if factor is None:
        kind = link["kind"]
        out["basis"] = (
            f"no efficiency factor for {collective} over {kind} (set bench_efficiency.{kind}.{collective})"
        )
        return out
    out["efficiency"] = factor
    out["expected_busbw"] = round(link["gbps"] * factor, 2)
    a, b = link["pair"]
    out["basis"] = (
        f"{link['gpus']} GPUs, bottleneck {a}-{b} {link['detail']}, x {factor:.2f} "
        f"({collective} over {link['kind']})"
    )
    return out


def check_thresholds(pass_ratio, warn_ratio):
    """Raise ValueError (naming the variable) unless the thresholds pass validate's one rule."""
    for name, value in (("bench_pass_ratio", pass_ratio), ("bench_warn_ratio", warn_ratio)):
        if not checks.is_number(value):
            raise ValueError(f"{name} must be a number in (0, 1.5], got {value!r}")
    errors = bench_settings.bench_threshold_errors(
        {"bench_pass_ratio": pass_ratio, "bench_warn_ratio": warn_ratio}
    )
    if errors:
        raise ValueError(errors[0])


def ratio(measured, reference):
    """measured / reference to 3 places; None when the measure or the reference is unknown (or 0)."""
    return round(measured / reference, 3) if measured is not None and reference else None


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """The run's verdict thresholds (the report play's bench_pass_ratio, bench_warn_ratio,
    bench_verdict_min_bytes, bench_baseline_tolerance, bench_torch_goal_ratio). The defaults are
    the role's, for callers outside a play (re-judging a record, tests): tests/unit/test_bench_plan.py
    keeps them equal to roles/bench_report/defaults/main.yml."""

    pass_ratio: float = 0.9
    warn_ratio: float = 0.75
    min_bytes: int = ONE_GIB
    tolerance: float = 0.10
    torch_goal: float = 0.97


DEFAULT_THRESHOLDS = dataclasses.asdict(Thresholds())


def verdict(rows, expected, *, problems=None, collective=None, **thresholds):
    """Judge one collective's rows against its expectation (a dict from expected_busbw).

    problems: what nccl-tests itself reported against the run (bench_output.assess: exit code, a
    FAILED line, failure lines, a cut-off table); any makes the verdict FAIL, whatever the size
    reached, with every cause in the reason. Only the halves nccl-tests validates are judged
    (bench_output.checked_halves: never alltoall's in-place half); collective defaults to
    expected["collective"]. thresholds: Thresholds' fields by name (pass_ratio, warn_ratio,
    min_bytes; the defaults where not given).

    Returns {verdict, measured_busbw, size, expected_busbw, ratio, reason, halves}.
    """
    limits = Thresholds(**thresholds)
    check_thresholds(limits.pass_ratio, limits.warn_ratio)
    exp = (expected or {}).get("expected_busbw")
    collective = collective or (expected or {}).get("collective") or ""
    out = {"verdict": "N/A", "measured_busbw": None, "size": None, "expected_busbw": exp, "ratio": None}
    out.update(reason="", halves=bench_output.checked_halves(collective, rows))
    sizes = [s for s in bench_output.figure_sizes(rows, collective) if s >= limits.min_bytes]
    # With -d all / -o all nccl-tests prints one row per type and op at each size: judge the one of
    # its defaults (float, sum; "none" for collectives without an op), not whichever came first.
    row = bench_output.figure_row(rows, sizes[-1], collective) if sizes else None
    if row is not None:
        out["measured_busbw"] = bench_output.figure(rows, row["size"], collective)
        out["size"] = row["size"]
        out["row"] = {"type": row.get("type"), "redop": row.get("redop")}
    failed = _failure_reason(out["measured_busbw"], expected, rows, collective, problems)
    if failed:
        out.update(verdict="FAIL", reason=failed)
    elif row is None:
        largest = max([r["size"] for r in rows if r.get("size") is not None] or [0])
        out["reason"] = (
            f"no size >= {human_bytes(limits.min_bytes)} measured (largest {human_bytes(largest)}); "
            "raise bench_max_bytes"
        )
    elif not exp:
        out["reason"] = "no expectation: %s" % ((expected or {}).get("basis") or "unknown topology")
    else:
        out.update(_ratio_verdict(out["measured_busbw"], exp, row["size"], out["halves"], limits))
    return out


def _failure_reason(measured, expected, rows, collective, problems):
    """Why the run FAILs whatever its figure ('' when nothing says so): an implausible figure, or
    nccl-tests' own problems and wrong elements."""
    causes = list(problems or [])
    ceiling = implausible(measured, expected)
    if ceiling:
        return "; ".join([f"FAIL (implausible: {ceiling})", *causes])
    errors = bench_output.data_errors({"rows": rows, "collective": collective}, check_delta=False)
    wrong = sum(int(w.split()[0]) for _size, _half, w in errors)
    if wrong and not any("wrong elements" in c for c in causes):
        causes.append(f"{wrong} wrong elements: the collective returned corrupt data")
    if not causes:
        return ""
    return f"{collective + '_perf' if collective else 'nccl-tests'} failed: " + "; ".join(causes)


def _ratio_verdict(measured, exp, size, halves, limits):
    """{ratio, verdict, reason} of a figure against its expectation."""
    ratio = measured / exp
    if ratio >= limits.pass_ratio:
        judged = "PASS"
    elif ratio >= limits.warn_ratio:
        judged = "WARN"
    else:
        judged = "FAIL"
    which = "out-of-place" if halves == ["out_of_place"] else "/".join(h.replace("_", "-") for h in halves)
    reason = (
        f"{measured:.1f} GB/s ({which}) at {human_bytes(size)} = {ratio * 100:.0f}% "
        f"of expected {exp:.1f} GB/s (PASS >= {limits.pass_ratio * 100:.0f}%, "
        f"WARN >= {limits.warn_ratio * 100:.0f}%)"
    )
    return {"ratio": round(ratio, 3), "verdict": judged, "reason": reason}


# The most any collective's busbw can get out of its bottleneck link, as a multiple of the link's
# raw speed. Above it a figure is a measurement error (a timer, a parse, a forged record), not
# bandwidth. 2: NVLink SHARP (NVLS) reduces inside the NVSwitch, so an all-reduce moves each byte
# once each way and its busbw (algbw x 2(n-1)/n) tends to 2 x the link as n grows; every other
# collective and algorithm moves at least as much over the link as its busbw says (<= 1 x).
PLAUSIBLE_LINK_FACTOR = 2.0


def implausible(measured, expected=None):
    """Why a measured busbw cannot be real ('' when it can): not a finite number, or above
    PLAUSIBLE_LINK_FACTOR x the raw speed of the bottleneck link (expected: expected_busbw's dict,
    its link_gbps, link_class and basis). Without a known link only non-finite figures are caught."""
    if measured is None:
        return ""
    if not checks.is_number(measured):
        return f"busbw {measured!r} is not a number"
    if not math.isfinite(measured):
        return f"busbw {measured} GB/s is not a finite number"
    link = (expected or {}).get("link_gbps")
    if not checks.is_finite_number(link) or not link:
        return ""
    limit = link * PLAUSIBLE_LINK_FACTOR
    if measured <= limit:
        return ""
    cls = (expected or {}).get("link_class") or "bottleneck"
    basis = (expected or {}).get("basis") or cls
    return (
        f"{measured:,.1f} GB/s is above {limit:,.1f} GB/s, {PLAUSIBLE_LINK_FACTOR:g} x the {link:,.1f} GB/s "
        f"the {cls} link can carry (raw link speed from the topology: {basis}; "
        f"{PLAUSIBLE_LINK_FACTOR:g} x: NVLink SHARP's in-switch all-reduce, the most any collective gets "
        "out of a link): a measurement error, not bandwidth"
    )


def worst_verdict(verdicts):
    """FAIL > WARN > PASS > N/A over a list of verdict strings ('N/A' when empty)."""
    for v in ("FAIL", "WARN", "PASS"):
        if v in verdicts:
            return v
    return "N/A"


def human_bytes(size, short=False):
    """8589934592 -> '8 GiB' (prose), or '8G' with short=True (tables, as nccl-tests' -e takes it)."""
    size = int(size or 0)
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size >= (1 << shift) and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}" if short else f"{size >> shift} {unit}iB"
    return f"{size}" if short else f"{size} B"


def pick_tuning(measured, min_gain=0.02):
    """Choose NCCL settings from a sweep: measured is [{env: {}, busbw: GB/s|None}], the empty env
    being the default. Returns {default_busbw, candidates, best (env, {} when none wins), best_busbw,
    gain}; a candidate wins only when it beats the default by more than min_gain (a fraction)."""
    if not 0 <= float(min_gain) < 1:
        raise ValueError(f"bench_nccl_tune_min_gain must be a fraction in [0, 1), got {min_gain!r}")
    # A figure that is not a finite number (an inf busbw) never wins the sweep.
    valid = [m for m in measured if m.get("busbw") is not None and not implausible(m["busbw"])]
    default = next((m["busbw"] for m in valid if not m.get("env")), None)
    tried = sorted((m for m in valid if m.get("env")), key=lambda m: m["busbw"], reverse=True)
    out = {"default_busbw": default, "candidates": measured, "best": {}, "best_busbw": None, "gain": None}
    if default and tried:
        gain = tried[0]["busbw"] / default - 1.0
        out["gain"] = round(gain, 4)
        if gain > float(min_gain):
            out["best"] = dict(tried[0]["env"])
            out["best_busbw"] = tried[0]["busbw"]
    return out


# --- Issue 26, item 5: benchmarks that cannot give a figure are not run ------------------------
MIN_GPUS_FOR_NCCL_TESTS = 2


def nccl_tests_skip(count, host=""):
    """Why a node with ``count`` GPUs runs no nccl-tests ('' when it runs them). With one GPU
    nccl-tests' collectives have no GPU pair to measure: all_reduce, all_gather, reduce_scatter
    and alltoall report a bus bandwidth of 0 (algbw x 2(n-1)/n or (n-1)/n) and no collective has an
    expectation (bandwidth.expected_busbw needs a link between two GPUs), so every verdict would
    be N/A: on the 1x H200 the four collectives to 8 GiB cost 123 s for four N/As. The same rule
    keeps the quick check (wireup-check) from running its one-size benchmark there."""
    if int(count or 0) >= MIN_GPUS_FOR_NCCL_TESTS:
        return ""
    return (
        f"nccl-tests skipped on {host}: {int(count or 0)} GPU, no GPU pair to give a bus bandwidth "
        "figure (every collective would be N/A)"
    )
