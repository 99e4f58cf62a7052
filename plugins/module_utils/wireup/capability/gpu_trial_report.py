"""The GPU trial in the bench report (issue 25): the per-GPU tables, one chart, the summary line,
from each host record's gpu_trial part (gpurecord).

report/assemble.py calls sections(records, plots) for its part (its entry's report in
capability/registry.py: ('h', (level, text)), ('p', text), ('table', (header, rows)), ('img',
(file, alt))), plots(plt, records, run_dir) for the chart (gpus.png: every GPU on the x axis,
its % of spec per figure, the peer tolerance band) and summary(record) for the host's line at
the end of the play. Figures are shown in TFLOPS and GB/s; the records keep base units and every
spread.
"""

import os

from ..judge import gpujudge, gpuspec
from ..render import markdown

CHART = "gpus.png"


def _pct(value):
    return "-" if value is None else f"{value * 100:.0f}%"


def _gpu_name(host, gpu):
    return f"{host} GPU{gpu.get('index')}"


def _gpus(record):
    return (record.get("gpu_trial") or {}).get("gpus") or []


def _hosts(records):
    """[(host, its judged GPUs)] of the hosts whose record has any."""
    return [(h, _gpus(r)) for h, r in sorted(records.items()) if _gpus(r)]


def summary(record):
    """['GPUs PASS (8 PASS), fingerprint 84 s'] or [] when the record has no GPU section."""
    section = record.get("gpu_trial") or {}
    gpus = _gpus(record)
    if not gpus:
        return []
    counts = {}
    for gpu in gpus:
        counts[gpu.get("verdict", "N/A")] = counts.get(gpu.get("verdict", "N/A"), 0) + 1
    text = (
        f"GPUs {section.get('verdict', 'N/A')} ("
        + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        + ")"
    )
    fp = section.get("fingerprint") or {}
    if fp.get("elapsed_s") is not None:
        text += f", fingerprint {fp['elapsed_s']:.0f} s"
    first = next(
        (f for f in record.get("findings") or [] if f.get("remediation") and f["severity"] == "critical"),
        None,
    )
    if first:
        text += f", {first['remediation']}: {first['message'][:140]}"
    return [text]


def _throttle_text(gpu):
    data = gpu.get("throttle") or {}
    held = {r: s for r, s in (data.get("reasons_s") or {}).items() if r in gpujudge.THROTTLE_REASONS and s}
    cap = (data.get("reasons_s") or {}).get("sw_power_cap")
    parts = [f"{r} {s:.1f} s" for r, s in sorted(held.items())] or ["none"]
    if cap:
        parts.append(f"power cap {cap:.1f} s")
    return ", ".join(parts) + (f" of {data['window_s']:.0f} s" if data.get("window_s") else "")


def _health_text(gpu):
    found = [f for f in gpu.get("findings") or [] if f.get("source") in ("gpu_health", "dcgm")]
    bad = [f for f in found if f["severity"] in ("critical", "warning")]
    if not gpu.get("health"):
        return "not read"
    if not bad:
        return "ok" + (f" ({len(found)} note(s))" if found else "")
    return "; ".join(f"{f['code'].removeprefix('gpu_')} -> {f['remediation']}" for f in bad)


def gpu_rows(records):
    rows = []
    for host, gpus in _hosts(records):
        for gpu in gpus:
            rows.append(
                [
                    _gpu_name(host, gpu),
                    gpu.get("bus_id") or "-",
                    gpu.get("serial") or gpu.get("uuid") or "-",
                    gpu.get("model") or f"unknown ({gpu.get('name') or '?'})",
                    gpu.get("verdict", "N/A"),
                    _health_text(gpu),
                    _throttle_text(gpu),
                ]
            )
    return rows


def _spread(figure, entry):
    if entry.get("min") is None:
        return "-"
    low, high = gpujudge.human(figure, entry["min"]), gpujudge.human(figure, entry["max"])
    return f"{low} - {high}, n={entry.get('samples')}"


def _baseline_text(entry):
    base = entry.get("baseline") or {}
    if base.get("change") is None:
        return base.get("why") or "-"
    moved = f" (was {base.get('host')} GPU{base.get('index')})" if base.get("moved") else ""
    return f"{base['change'] * 100:+.1f}% vs {base.get('run_id')}{moved}"


def figure_rows(records):
    rows = []
    for host, gpus in _hosts(records):
        for gpu in gpus:
            for figure in gpuspec.FIGURES:
                entry = (gpu.get("figures") or {}).get(figure)
                if not entry:
                    continue
                spec, peer = entry.get("spec") or {}, entry.get("peer") or {}
                rows.append(
                    [
                        _gpu_name(host, gpu),
                        gpujudge.figure_label(figure),
                        gpujudge.human(figure, entry.get("median")),
                        _spread(figure, entry),
                        gpujudge.human(figure, spec.get("expected")) if spec.get("expected") else "-",
                        _pct(spec.get("ratio")),
                        _pct(spec.get("raw_ratio")),
                        _pct(peer.get("ratio")),
                        _baseline_text(entry),
                        _verdict(entry),
                    ]
                )
    return rows


def _verdict(entry):
    return (
        gpujudge.worst([(entry.get(p) or {}).get("verdict") for p in ("spec", "peer", "baseline")]) or "N/A"
    )


def _notes(records):
    out = []
    for host, record in sorted(records.items()):
        section = record.get("gpu_trial") or {}
        fp = section.get("fingerprint") or {}
        if section.get("capability") == "gpu_health":
            out.append(f"{host}: the GPUs' health read alone (bench.yml --tags gpu_health): no fingerprint")
        if fp:
            sets = ", ".join(f"{k} {v:.1f} s" for k, v in (fp.get("set_seconds") or {}).items())
            out.append(
                f"{host}: fingerprint {fp.get('elapsed_s')} s ({sets}; windows of "
                f"{fp.get('seconds_per_set')} s), "
                f"torch {fp.get('torch')}, CUDA {fp.get('cuda')}, nvidia-ml-py {fp.get('nvml') or 'not used'}"
                + (f" ({fp['nvml_note']})" if fp.get("nvml_note") else "")
            )
        for group in section.get("sharing") or []:
            gpus = ", ".join(f"GPU{i}" for i in group["gpus"])
            behind = f"PCIe switch {group['switch']}" if group.get("switch") else f"root port {group['port']}"
            out.append(
                f"{host}: {gpus} share {behind}: their concurrent host copies divide its link (wiring)"
            )
        out += [f"{host}: {n}" for n in section.get("notes") or []]
        dcgm = section.get("dcgm") or {}
        if dcgm.get("tests"):
            line = ", ".join(f"{t['name']} {t['status']}" for t in dcgm["tests"])
            out.append(f"{host}: DCGM diag -r {dcgm.get('level')}: {line}")
    return out


def sections(records, plots):
    """The report's GPU section ([] when no record has GPUs)."""
    if not _hosts(records):
        return []
    out = [
        ("h", (2, "GPUs on trial: health, fingerprint, spec, peers, baseline")),
        (
            "p",
            "Each GPU's health (nvidia-smi -q -x, read after the fingerprint) and its figures, all GPUs of a "
            "node measured at once: dense matmul (FLOP/s), HBM copy (read + write), host copies over pinned "
            "memory alone and concurrent. % of spec: the median against the model's dense peak x an "
            "efficiency; % of raw: against the peak itself; % of best peer: against the fastest GPU of the "
            "same model in the run; the baseline is the GPU's own last passing run (by UUID). "
            "roles/gpu_trial/README.md",
        ),
        (
            "table",
            (["GPU", "bus id", "serial", "model", "verdict", "health", "throttled"], gpu_rows(records)),
        ),
        (
            "table",
            (
                [
                    "GPU",
                    "figure",
                    "median",
                    "spread",
                    "expected",
                    "% of spec",
                    "% of raw",
                    "% of best peer",
                    "baseline",
                    "verdict",
                ],
                figure_rows(records),
            ),
        ),
    ]
    out += [("p", line) for line in _notes(records)]
    if plots.get(("gpus", None)):
        out.append(
            ("img", (plots[("gpus", None)], "% of spec per figure for every GPU, peer tolerance band"))
        )
    return out


# ---------------------------------------------------------------- the chart
def _series(records):
    """{figure: [(x label, % of spec, best peer's % of spec)]} over every GPU of the run."""
    out = {}
    for host, gpus in _hosts(records):
        for gpu in gpus:
            for figure, entry in (gpu.get("figures") or {}).items():
                ratio = (entry.get("spec") or {}).get("ratio")
                peer = (entry.get("peer") or {}).get("ratio")
                if ratio is None:
                    continue
                best = ratio / peer if peer else ratio
                out.setdefault(figure, []).append((_gpu_name(host, gpu), ratio * 100, best * 100))
    return out


def plots(plt, records, run_dir):
    """gpus.png ({("gpus", None): file}); {} when no GPU has a spec ratio."""
    series = _series(records)
    if not series:
        return {}
    given = [
        ((r.get("gpu_trial") or {}).get("thresholds") or {}).get("warn_tolerance") for r in records.values()
    ]
    warn = next((t for t in given if t is not None), gpujudge.DEFAULT_SETTINGS["warn_tolerance"])
    labels = list(dict.fromkeys(x for points in series.values() for x, _r, _b in points))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(labels) + 3), 4.5), dpi=100)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (figure, points) in enumerate(sorted(series.items())):
        color = colors[i % len(colors)]
        xs = [labels.index(x) for x, _r, _b in points]
        best = max(b for _x, _r, b in points)
        ax.axhspan(best * (1 - warn), best, color=color, alpha=0.08)
        ax.plot(
            xs,
            [r for _x, r, _b in points],
            marker="o",
            linestyle="-",
            color=color,
            label=gpujudge.figure_label(figure),
        )
    ax.axhline(100, color="black", linestyle="--", linewidth=1, label="expected (spec x efficiency)")
    ax.set_ylim(bottom=0)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("% of spec")
    ax.set_title(
        f"every GPU: % of spec per figure; shaded: within {warn * 100:.0f}% of the best peer", fontsize=9
    )
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    markdown.save_png(fig, os.path.join(run_dir, CHART))
    plt.close(fig)
    return {("gpus", None): CHART}
