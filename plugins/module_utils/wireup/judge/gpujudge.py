"""Judge every GPU of a bench run (pure Python, on the controller): health, spec, peers, baseline.

judge_run(nodes, baselines, settings) takes, per host, what the gpu_trial role gathered (the
health read after the fingerprint, the fingerprint's JSON document, DCGM's findings) and returns
per host the record's "gpus" section and GPU verdict:

* Spec: each figure's median against the GPU model's peak x its efficiency (gpuspec): PASS at >=
  spec_pass_ratio x expected, WARN at >= spec_warn_ratio x, FAIL below; the raw ratio (measured /
  peak) shown beside it. An unknown model gets no spec verdict and says so. A figure above
  gpuspec.PLAUSIBLE_FACTOR x its peak is a measurement error: FAIL, never a baseline.
* Peers: the same model on the node and across the cluster, against a reference computed once per
  model and figure (peer_reference: the median, with the MAD as the spread, of PEER_MEDIAN_MIN
  GPUs or more; the better of two): linear in the GPUs. A GPU slower than the reference by more
  than warn_tolerance is WARN, by more than fail_tolerance FAIL, naming the GPU and the reference.
  When every GPU of a node is slower than the cluster's reference node (the median of the nodes'
  medians) the node is named instead (node-wide causes: power, cooling, PCIe, BIOS); GPUs slower
  than their own node's median are still named.
* Baseline: each GPU against its own last passing run, found by UUID (gpuhealth.gpu_key; never
  by serial: boards with two GPUs share one, some cards print 0) wherever it was
  (gpu_trial.baselines): a GPU moved to another slot or node is still itself. A drop beyond
  warn_tolerance is WARN, beyond fail_tolerance FAIL.
* Health: gpuhealth.gpu_findings on the read after the fingerprint, with the baseline's health as
  `before`; the read's node findings (gpuhealth.node_findings: a GPU lost or fallen off the bus,
  on the node's findings); DCGM's findings (dcgm.findings); throttling during the windows
  (THROTTLE_*).
A GPU's verdict is the worst of its figures' verdicts and its findings (critical -> FAIL, warning
-> WARN); the node's is the worst of its GPUs' and its node findings'.
"""

import dataclasses
import statistics

from ..core import checks, cyclegc
from ..probe import gpuhealth, health
from . import bandwidth, gpuspec

DEFAULT_SETTINGS = {
    "spec_pass_ratio": 0.9,
    "spec_warn_ratio": 0.75,
    "warn_tolerance": 0.10,
    "fail_tolerance": 0.20,
    "efficiency": {},
}
# Reasons that mean the GPU could not hold its clocks (not a policy the user set or idling).
THROTTLE_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
# Throttled time that is a finding: at least this many seconds AND this fraction of the windows.
THROTTLE_MIN_S = 0.5
THROTTLE_MIN_FRACTION = 0.01
_SEVERITY_VERDICT = {"critical": "FAIL", "warning": "WARN"}
_VERDICT_SEVERITY = {"FAIL": "critical", "WARN": "warning"}
# The peers' reference is their median from this many GPUs (or nodes) on, the best one below it.
PEER_MEDIAN_MIN = 3
_CONCURRENT = {"h2d_concurrent_bytes_per_second": "h2d", "d2h_concurrent_bytes_per_second": "d2h"}


def settings_errors(settings):
    """What is wrong with the run's GPU thresholds (preflight's rule), each naming the variable."""
    s = {**DEFAULT_SETTINGS, **(settings or {})}
    errors = []
    for key in ("spec_pass_ratio", "spec_warn_ratio", "warn_tolerance", "fail_tolerance"):
        value = s[key]
        if not checks.is_number(value) or not 0 < value < 1:
            errors.append(f"gpu_trial_{key} must be a fraction in (0, 1), got {value!r}")
    if not errors and s["spec_warn_ratio"] > s["spec_pass_ratio"]:
        errors.append(
            f"gpu_trial_spec_warn_ratio ({s['spec_warn_ratio']}) must not exceed gpu_trial_spec_pass_ratio "
            f"({s['spec_pass_ratio']}): lower the first or raise the second"
        )
    if not errors and s["warn_tolerance"] > s["fail_tolerance"]:
        errors.append(
            f"gpu_trial_warn_tolerance ({s['warn_tolerance']}) must not exceed gpu_trial_fail_tolerance "
            f"({s['fail_tolerance']})"
        )
    return errors + gpuspec.efficiency_errors(s["efficiency"])


def worst(verdicts):
    return bandwidth.worst_verdict([v for v in verdicts if v])


def short_name(host, gpu):
    return f"{host} {gpuhealth.label(gpu)}"


def _figure_unit(figure):
    return ("TFLOPS", 1e12) if figure.endswith("_flops") else ("GB/s", 1e9)


def human(figure, value):
    """'747.1 TFLOPS' / '53.2 GB/s' of a base-unit figure."""
    unit, scale = _figure_unit(figure)
    return "-" if value is None else f"{value / scale:,.1f} {unit}"


def figure_label(figure):
    """'gemm_bf16_flops' -> 'gemm bf16'; 'h2d_concurrent_bytes_per_second' -> 'h2d concurrent'."""
    return figure.removesuffix("_flops").removesuffix("_bytes_per_second").replace("_", " ")


# ---------------------------------------------------------------- joining health and figures
def _norm_uuid(uuid):
    return str(uuid or "").lower().removeprefix("gpu-").replace("-", "") or None


def _match(fp_gpus, gpu):
    """The fingerprint entry of a health GPU: by UUID, else bus id, else index."""
    keys = (
        ("uuid", _norm_uuid(gpu.get("uuid")), _norm_uuid),
        ("bus_id", str(gpu.get("bus_id") or "").lower() or None, lambda v: str(v or "").lower() or None),
    )
    for field, want, norm in keys:
        if want:
            hit = [g for g in fp_gpus if norm(g.get(field)) == want]
            if hit:
                return hit[0]
    hit = [g for g in fp_gpus if g.get("index") == gpu.get("index")]
    return hit[0] if hit else {}


def join(health_doc, fingerprint):
    """One entry per GPU: the health read's identity and fields, the fingerprint's figures. GPUs
    the fingerprint measured but the health read lacks keep the fingerprint's identity."""
    fp_gpus = [g for g in (fingerprint or {}).get("gpus") or [] if isinstance(g, dict)]
    out, used = [], set()
    for gpu in (health_doc or {}).get("gpus") or []:
        fp = _match(fp_gpus, gpu)
        used.add(id(fp))
        out.append(_entry(gpu, fp))
    return out + [_fingerprint_only(fp) for fp in fp_gpus if id(fp) not in used]


def _fingerprint_only(fp):
    """The entry of a GPU the health read lacks: the fingerprint's identity and figures."""
    return _entry({k: fp.get(k) for k in ("index", "bus_id", "uuid", "name")}, fp)


def _entry(gpu, fp):
    ident = gpuhealth.identity(gpu)
    name = gpu.get("name") or fp.get("name")
    figures = {k: dict(v) for k, v in (fp.get("figures") or {}).items() if isinstance(v, dict)}
    return {
        **ident,
        "name": name,
        "model": gpuspec.model_of(name),
        "health": gpu if "ecc" in gpu else None,
        "figures": figures,
        "skipped": dict(fp.get("skipped") or {}),
        "errors": dict(fp.get("errors") or {}),
        "pci_path": fp.get("pci_path"),
        "throttle_sampled": fp.get("throttle") or {},
        "findings": [],
        "verdicts": {},
    }


# ---------------------------------------------------------------- spec
def _peak(gpu, figure):
    """(peak in base units, what it is) or (None, why not)."""
    which = gpuspec.PEAK_OF.get(figure)
    if which == "pcie":
        pcie = (gpu.get("health") or {}).get("pcie") or {}
        gbps = bandwidth.pcie_gbps(pcie.get("gen_max"), pcie.get("width_max"))
        if not gbps:
            return None, "PCIe generation/width not reported"
        return gbps * 1e9, f"PCIe Gen{pcie['gen_max']} x{pcie['width_max']} = {gbps:.1f} GB/s"
    if which is None:
        return None, "judged against peers and its baseline (a shared link divides it: wiring)"
    if not gpu.get("model"):
        return None, f"unknown model {gpu.get('name')!r}: no spec to judge against"
    peak = gpuspec.peaks(gpu["model"])[which]
    if peak is None:
        return None, f"{gpu['model']} has no {which} tensor cores"
    unit, scale = _figure_unit(figure)
    return peak, f"{gpu['model']} {which} {peak / scale:,.1f} {unit} dense"


def judge_spec(gpu, figure, settings):
    """The spec judgement of one figure: {peak, basis, efficiency, expected, ratio, raw_ratio, verdict}."""
    median = (gpu["figures"].get(figure) or {}).get("median")
    peak, basis = _peak(gpu, figure)
    if peak is None or median is None:
        return {"verdict": "N/A", "basis": basis}
    eff = gpuspec.efficiency(figure, settings["efficiency"])
    expected = peak * eff
    out = {"peak": peak, "basis": basis, "efficiency": eff, "expected": expected}
    out.update(ratio=round(median / expected, 4), raw_ratio=round(median / peak, 4))
    if median > peak * gpuspec.PLAUSIBLE_FACTOR:
        return dict(out, verdict="FAIL", implausible=True)
    if out["ratio"] >= settings["spec_pass_ratio"]:
        return dict(out, verdict="PASS")
    return dict(out, verdict="WARN" if out["ratio"] >= settings["spec_warn_ratio"] else "FAIL")


def _spec_findings(host, gpu, figure, spec):
    median = gpu["figures"][figure]["median"]
    name = short_name(host, gpu)
    if spec.get("implausible"):
        return [
            gpuhealth.gpu_finding(
                gpu,
                "gpu_figure_implausible",
                f"{name}: {figure_label(figure)} {human(figure, median)} is above "
                f"{gpuspec.PLAUSIBLE_FACTOR:g} x the {spec['basis']} peak: a measurement error, not a result",
                source="gpu_spec",
                remediation="monitor",
                severity="critical",
            )
        ]
    if spec["verdict"] not in ("WARN", "FAIL"):
        return []
    return [
        gpuhealth.gpu_finding(
            gpu,
            "gpu_below_spec",
            f"{name}: {figure_label(figure)} {human(figure, median)} is {spec['ratio'] * 100:.0f}% of the "
            f"expected {human(figure, spec['expected'])} ({spec['raw_ratio'] * 100:.0f}% of the "
            f"{spec['basis']} peak): {spec['verdict']}",
            source="gpu_spec",
            remediation="isolate" if spec["verdict"] == "FAIL" else "monitor",
            severity=_VERDICT_SEVERITY[spec["verdict"]],
        )
    ]


# ---------------------------------------------------------------- peers
def _by_model(nodes):
    """{model key: [(host, gpu)]}: GPUs of the same model (or the same unknown name)."""
    groups = {}
    for host, section in sorted(nodes.items()):
        for gpu in section["gpus"]:
            key = gpu.get("model") or gpu.get("name")
            if key:
                groups.setdefault(key, []).append((host, gpu))
    return groups


def _tolerance_verdict(deficit, settings):
    if deficit > settings["fail_tolerance"]:
        return "FAIL"
    return "WARN" if deficit > settings["warn_tolerance"] else "PASS"


@dataclasses.dataclass(frozen=True)
class PeerReference:
    """What a GPU (or a node) is judged against, computed once per model and figure: its name in
    the record and the findings, its value, and the group's median, MAD and size."""

    name: str
    value: float
    median: float
    mad: float
    count: int
    is_median: bool


def _median_of_sorted(values):
    """statistics.median of a list already in order (the same value), without its sort and copy."""
    n = len(values)
    if n == 0:
        raise statistics.StatisticsError("no median for empty data")
    i = n // 2
    return values[i] if n % 2 else (values[i - 1] + values[i]) / 2


def _median_and_mad(values):
    """(median, median absolute deviation) of a list in any order: one sort of the values and one of
    the deviations (each sorted once: at fleet size each extra sort and copy of 8,192 values showed
    in the step's growth, issue 39)."""
    ordered = sorted(values)
    median = _median_of_sorted(ordered)
    deviations = [abs(v - median) for v in ordered]
    deviations.sort()
    return median, _median_of_sorted(deviations)


def peer_reference(named, median_name):
    """PeerReference of [(name, value)]: the median (``median_name``) of PEER_MEDIAN_MIN values or
    more, else the best (two GPUs or nodes: the median cannot tell which one is off)."""
    best_name = median_name if len(named) >= PEER_MEDIAN_MIN else max(named, key=lambda nv: nv[1])[0]
    return _values_reference([v for _n, v in named], median_name, best_name)


def _values_reference(values, median_name, best_name):
    """peer_reference of plain values whose best is named best_name: no (name, value) pairs built."""
    median, mad = _median_and_mad(values)
    if len(values) >= PEER_MEDIAN_MIN:
        return PeerReference(median_name, median, median, mad, len(values), True)
    return PeerReference(best_name, max(values), median, mad, len(values), False)


def _per_host(have, figure):
    """{host: [(gpu, median)]} of the GPUs that measured the figure, in one pass."""
    out = {}
    for host, gpu in have:
        out.setdefault(host, []).append((gpu, gpu["figures"][figure]["median"]))
    return out


def _slow_nodes(per_host, model, settings):
    """{host: (deficit, PeerReference, node median)} of nodes whose every GPU and median are beyond
    warn_tolerance below the cluster's reference node (the median of the nodes' medians, the best
    node of two; needs two nodes or more)."""
    if len(per_host) < 2:
        return {}
    medians = {host: statistics.median(v for _g, v in gpus) for host, gpus in per_host.items()}
    ref = peer_reference(list(medians.items()), f"median of {len(medians)} {model} nodes")
    out = {}
    for host, gpus in per_host.items():
        if ref.value and all(1 - v / ref.value > settings["warn_tolerance"] for _g, v in gpus):
            out[host] = (1 - medians[host] / ref.value, ref, medians[host])
    return out


def judge_peers(nodes, settings):
    """Per figure and model, every GPU against its model's reference (PeerReference: computed once,
    each GPU judged against it: linear in the GPUs); slow nodes named once, their GPUs against their
    own node's reference. Returns the node-level findings {host: [finding]}; GPU findings and
    verdicts go onto the GPUs. The cyclic collector is paused meanwhile (cyclegc.paused: it makes
    a dict per GPU and figure and no cycle, but each collection walked every object of the fleet's
    records: 7x the CPU for 4x the nodes at 1,024, 3.9x paused, tests/perf/fleet_peers.py)."""
    with cyclegc.paused():
        return _judge_peers(nodes, settings)


def _judge_peers(nodes, settings):
    node_findings = {}
    for model, members in _by_model(nodes).items():
        figures = sorted({f for _h, g in members for f in g["figures"]})
        for figure in figures:
            have = [(h, g) for h, g in members if (g["figures"].get(figure) or {}).get("median") is not None]
            if len(have) < 2:
                for _h, g in have:
                    g["figures"][figure]["peer"] = {
                        "verdict": "N/A",
                        "why": f"no other {model} GPU measured it",
                    }
                continue
            per_host = _per_host(have, figure)
            slow = _slow_nodes(per_host, model, settings)
            for host, info in slow.items():
                node_findings.setdefault(host, []).append(
                    _slow_node_finding(host, model, figure, info, settings)
                )
            _judge_figure_peers((model, figure), per_host, slow, settings)
    return node_findings


def _references(model, per_host, slow):
    """{host: PeerReference}: the cluster's for every host, a slow node's own for it. Only the
    best GPU is named (short_name reads its UUID: once, not once per GPU of the fleet, issue 39)."""
    values = [v for gpus in per_host.values() for _g, v in gpus]
    best = max(range(len(values)), key=values.__getitem__)
    best_name = _name_at(per_host, best)
    cluster = _values_reference(values, f"median of {len(values)} {model} GPUs", best_name)
    out = dict.fromkeys(per_host, cluster)
    for host in slow:
        own = [(short_name(host, g), v) for g, v in per_host[host]]
        out[host] = peer_reference(own, f"median of {host}'s {len(own)} GPUs")
    return out, (best_name, values[best])


def _name_at(per_host, index):
    """short_name of the index-th GPU of per_host, counted in its order."""
    for host, gpus in per_host.items():
        if index < len(gpus):
            return short_name(host, gpus[index][0])
        index -= len(gpus)
    raise IndexError(index)


def _judge_figure_peers(model_figure, per_host, slow, settings):
    model, figure = model_figure
    references, (best_name, best) = _references(model, per_host, slow)
    for host, gpus in per_host.items():
        # A GPU of a slow node is compared with its own node's reference (the node is named once);
        # the others with the cluster's.
        ref = references[host]
        for gpu, value in gpus:
            deficit = 1 - value / ref.value if ref.value else 0.0
            verdict = _tolerance_verdict(deficit, settings)
            gpu["figures"][figure]["peer"] = {
                "best": best,
                "best_gpu": best_name,
                "ratio": round(value / best, 4) if best else None,
                "reference": ref.name,
                "median": ref.median,
                "spread": round(ref.mad / ref.median, 4) if ref.median else None,
                "deficit": round(deficit, 4),
                "verdict": verdict,
            }
            if verdict != "PASS":
                gpu["findings"].append(
                    _peer_finding(host, gpu, figure, ref, deficit=deficit, verdict=verdict)
                )


def _peer_finding(host, gpu, figure, ref, *, deficit, verdict):
    value = gpu["figures"][figure]["median"]
    against = f"the {ref.name}" if ref.is_median else f"its best peer {ref.name}"
    return gpuhealth.gpu_finding(
        gpu,
        "gpu_slower_than_peers",
        f"{short_name(host, gpu)}: {figure_label(figure)} {human(figure, value)} is {deficit * 100:.0f}% "
        f"below {against} ({human(figure, ref.value)}): {verdict}",
        source="gpu_peers",
        remediation="isolate" if verdict == "FAIL" else "monitor",
        severity=_VERDICT_SEVERITY[verdict],
    )


def _slow_node_finding(host, model, figure, info, settings):
    deficit, ref, median = info
    verdict = _tolerance_verdict(deficit, settings)
    against = (
        f"the {ref.name} ({human(figure, ref.value)})"
        if ref.is_median
        else f"{ref.name}'s {human(figure, ref.value)}"
    )
    out = health.finding(
        _VERDICT_SEVERITY.get(verdict, "warning"),
        "gpu_node_slower_than_cluster",
        f"{host}: every {model} GPU is slow on {figure_label(figure)}: node median "
        f"{human(figure, median)} is {deficit * 100:.0f}% below {against} "
        f"(a node-wide cause: power, cooling, PCIe or BIOS settings): {verdict}",
    )
    return dict(out, source="gpu_peers", remediation="isolate" if verdict == "FAIL" else "monitor", gpu={})


# ---------------------------------------------------------------- baseline
def judge_baseline(host, gpu, baseline, settings):
    """Each figure against the GPU's own last passing run; GPU findings for drops."""
    if not baseline:
        for figure in gpu["figures"].values():
            figure["baseline"] = {"verdict": "N/A", "why": "no passing run of this GPU yet"}
        return
    run_id, base_host, entry = baseline
    moved = base_host != host or (entry.get("bus_id") or "") != (gpu.get("bus_id") or "")
    where = {"run_id": run_id, "host": base_host, "bus_id": entry.get("bus_id"), "index": entry.get("index")}
    for name, figure in gpu["figures"].items():
        old = ((entry.get("figures") or {}).get(name) or {}).get("median")
        if old is None or figure.get("median") is None or not old:
            figure["baseline"] = dict(where, verdict="N/A", why="not measured in the baseline run")
            continue
        change = figure["median"] / old - 1
        verdict = _tolerance_verdict(-change, settings)
        figure["baseline"] = dict(where, median=old, change=round(change, 4), moved=moved, verdict=verdict)
        if verdict != "PASS":
            gpu["findings"].append(_baseline_finding(host, gpu, name, figure, verdict))


def _baseline_finding(host, gpu, name, figure, verdict):
    base = figure["baseline"]
    moved = f", then {base['host']} GPU{base['index']} ({base['bus_id']})" if base["moved"] else ""
    return gpuhealth.gpu_finding(
        gpu,
        "gpu_baseline_drop",
        f"{short_name(host, gpu)}: {figure_label(name)} {human(name, figure['median'])} is "
        f"{-base['change'] * 100:.0f}% below its last passing run {base['run_id']}{moved} "
        f"({human(name, base['median'])}): {verdict}",
        source="gpu_baseline",
        remediation="isolate" if verdict == "FAIL" else "monitor",
        severity=_VERDICT_SEVERITY[verdict],
    )


# ---------------------------------------------------------------- throttling
def throttle(gpu, counters_before=None, counters_after=None):
    """Throttled time during the fingerprint: {window_s, reasons_s: {reason: s}, source}. The
    driver's own counters (nvidia-smi's clocks_event_reasons_counters, read before and after) when
    both reads have them, else the sampler's time per reason summed over the figures."""
    sampled = gpu.get("throttle_sampled") or {}
    window = round(sum(float(p.get("window_s") or 0) for p in sampled.values()), 3)
    before, after = counters_before or {}, counters_after or {}
    counted = {
        k: (after[k] - before[k]) / 1e6
        for k in after
        if isinstance(after.get(k), int) and isinstance(before.get(k), int) and after[k] >= before[k]
    }
    if counted:
        return {
            "window_s": window,
            "reasons_s": {k: round(v, 3) for k, v in counted.items()},
            "source": "counters",
        }
    reasons = {}
    for phase in sampled.values():
        for reason, seconds in (phase.get("reasons_s") or {}).items():
            reasons[reason] = reasons.get(reason, 0.0) + float(seconds)
    source = "sampled" if sampled else "not sampled (no NVML and no driver counters)"
    return {"window_s": window, "reasons_s": {k: round(v, 3) for k, v in reasons.items()}, "source": source}


def _throttle_findings(host, gpu):
    data = gpu["throttle"]
    held = {r: s for r, s in data["reasons_s"].items() if r in THROTTLE_REASONS and s > 0}
    total = max(held.values(), default=0.0)
    window = data["window_s"] or 0.0
    if total < THROTTLE_MIN_S or (window and total < THROTTLE_MIN_FRACTION * window):
        return []
    why = ", ".join(f"{r} {s:.1f} s" for r, s in sorted(held.items(), key=lambda kv: -kv[1]))
    of = f" of the {window:.0f} s of windows" if window else ""
    return [
        gpuhealth.gpu_finding(
            gpu,
            "gpu_throttled",
            f"{short_name(host, gpu)}: clocks held down during the fingerprint{of} ({data['source']}): "
            f"{why}: check cooling, airflow and the power supply",
            source="gpu_throttle",
        )
    ]


# ---------------------------------------------------------------- a node, the run
def _health_by_key(baselines, gpu):
    """The GPU's baseline (gpu_trial.baselines) by its UUID; None without one."""
    key = gpuhealth.gpu_key(gpu)
    return baselines.get(key) if key else None


def _gpu_verdict(gpu):
    verdicts = []
    for figure in gpu["figures"].values():
        for part in ("spec", "peer", "baseline"):
            verdicts.append((figure.get(part) or {}).get("verdict"))
    verdicts += [_SEVERITY_VERDICT.get(f["severity"]) for f in gpu["findings"]]
    judged = [v for v in verdicts if v and v != "N/A"]
    gpu["verdicts"] = _part_verdicts(gpu)
    return worst(judged) if judged else ("PASS" if gpu.get("health") else "N/A")


def _part_verdicts(gpu):
    """{spec, peer, baseline, health: the worst verdict of that part of the GPU's judgement}."""
    verdicts = {
        part: worst([(f.get(part) or {}).get("verdict") for f in gpu["figures"].values()])
        for part in ("spec", "peer", "baseline")
    }
    verdicts["health"] = worst([_SEVERITY_VERDICT.get(f["severity"], "PASS") for f in gpu["findings"]])
    return verdicts


def prepare_node(host, node, baselines, settings):
    """One node's GPUs joined, judged on spec, baseline, health, throttling and DCGM (peers come
    after, across the nodes). node: gpu_trial's data (gpu_trial.node_inputs)."""
    health_doc = node.get("health") or {}
    gpus = join(health_doc, node.get("fingerprint"))
    before = gpuhealth.previous_by_key(node.get("health_before"))
    for gpu in gpus:
        base = _health_by_key(baselines, gpu)
        _health_findings(gpu, base)
        _judge_specs(host, gpu, settings)
        judge_baseline(host, gpu, base, settings)
        gpu["throttle"] = throttle(
            gpu,
            ((before.get(gpuhealth.gpu_key(gpu)) or {}).get("clock_event_counters_us")),
            (gpu.get("health") or {}).get("clock_event_counters_us"),
        )
        gpu["findings"] += _throttle_findings(host, gpu)
        gpu["findings"] += [_figure_error(host, gpu, what, why) for what, why in gpu["errors"].items()]
    return {"gpus": gpus, "findings": list(node.get("findings") or []) + gpuhealth.node_findings(health_doc)}


def _health_findings(gpu, base):
    """The GPU's health read judged (gpuhealth.gpu_findings) against its baseline run's read."""
    previous = base[2].get("health") if base else None
    if gpu.get("health"):
        gpu["findings"] += gpuhealth.gpu_findings(
            gpu["health"], previous if isinstance(previous, dict) else None
        )


def _judge_specs(host, gpu, settings):
    """Each figure against the GPU model's spec, with a finding for each shortfall."""
    for figure in gpu["figures"]:
        gpu["figures"][figure]["spec"] = judge_spec(gpu, figure, settings)
        gpu["findings"] += _spec_findings(host, gpu, figure, gpu["figures"][figure]["spec"])


def _figure_error(host, gpu, what, why):
    """gpu_figure_error: a fingerprint measurement that failed."""
    return gpuhealth.gpu_finding(
        gpu,
        "gpu_figure_error",
        f"{short_name(host, gpu)}: {what} failed: {why}",
        source="gpu_fingerprint",
        remediation="monitor",
        severity="warning",
    )


def finish_node(section):
    for gpu in section["gpus"]:
        gpu["findings"].sort(key=lambda f: (health.SEVERITIES.index(f["severity"]), f["code"]))
        gpu["verdict"] = _gpu_verdict(gpu)
    section["verdict"] = _node_verdict(section)
    section["sharing"] = pcie_sharing(section["gpus"])
    return section


def _node_verdict(section):
    """The worst of the node's GPUs' verdicts and its own findings'; N/A with neither."""
    if not (section["gpus"] or section["findings"]):
        return "N/A"
    node_verdicts = [_SEVERITY_VERDICT.get(f["severity"]) for f in section["findings"]]
    return worst([g["verdict"] for g in section["gpus"]] + node_verdicts)


def judge_run(nodes, baselines=None, settings=None):
    """{host: section} for every host of the run (see the module docstring).

    nodes: {host: {health, health_before, fingerprint, findings (node-level, e.g. a failed read or
    DCGM's)}}; baselines: {gpu_key (the UUID): (run_id, host, gpu entry)} (gpu_trial.baselines)."""
    s = {**DEFAULT_SETTINGS, **(settings or {})}
    errors = settings_errors(s)
    if errors:
        raise ValueError("; ".join(errors))
    sections = {host: prepare_node(host, node, baselines or {}, s) for host, node in sorted(nodes.items())}
    for host, found in judge_peers(sections, s).items():
        sections[host]["findings"] += found
    return {host: finish_node(section) for host, section in sections.items()}


# ---------------------------------------------------------------- PCIe sharing
def pcie_sharing(gpus):
    """Groups of GPUs behind one root port (sysfs' PCI path, from the fingerprint): they share its
    link, so their concurrent host copies divide it. [{"port", "switch", "gpus": [index]}] for
    groups of two or more; the concurrent figures of a GPU are annotated with its group."""
    groups = {}
    for gpu in gpus:
        path = gpu.get("pci_path") or []
        if len(path) >= 3:  # root complex, root port, ..., the GPU
            groups.setdefault(path[1], []).append(gpu)
    out = []
    for port, members in sorted(groups.items()):
        if len(members) < 2:
            continue
        common = _common_prefix([g["pci_path"] for g in members])
        out.append(
            {
                "port": port,
                "switch": common[-1] if len(common) > 2 else None,
                "gpus": [g["index"] for g in members],
            }
        )
    for gpu in gpus:
        for figure, direction in _CONCURRENT.items():
            entry = gpu["figures"].get(figure)
            alone = (gpu["figures"].get(f"{direction}_bytes_per_second") or {}).get("median")
            if entry is None:
                continue
            shared = [g for g in out if gpu["index"] in g["gpus"]]
            entry["shared_with"] = [i for g in shared for i in g["gpus"] if i != gpu["index"]]
            entry["of_alone"] = round(entry["median"] / alone, 4) if alone and entry.get("median") else None
    return out


def _common_prefix(paths):
    out = []
    for parts in zip(*paths):
        if len(set(parts)) != 1:
            break
        out.append(parts[0])
    return out
