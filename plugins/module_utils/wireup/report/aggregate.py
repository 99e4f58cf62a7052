"""The fleet in aggregate (issue 39): each figure's distribution across the cluster (min, p5,
median, p95, max), its outliers named, and one chart with a histogram per figure.

A figure is one number per node or per GPU that every node measures the same way: each
nccl-tests collective's bus bandwidth at its verdict size, each single-node torch run's busbw at
its largest size, each GPU trial figure as % of the model's spec. An outlier is a value more
than OUTLIER_BAND from the figure's median (either side: a node far above its peers measured
something else), the farthest first. report/assemble.py shows the table on every report and
draws the chart above triage.SMALL_FLEET nodes (below it every node's own plots are there).
"""

from __future__ import annotations

import math
import os

from ..capability import links
from ..judge import gpujudge
from ..render import markdown
from ..render.markdown import fmt

CHART = "fleet.png"
OUTLIER_BAND = 0.10
OUTLIERS_NAMED = 8
_COLUMNS = 3
BINS = 40


def _host_figures(host, record, out):
    for name, coll in sorted((record.get("collectives") or {}).items()):
        value = (coll.get("verdict") or {}).get("measured_busbw")
        if isinstance(value, (int, float)):
            out.setdefault(f"nccl-tests {name} busbw GB/s", []).append((host, float(value)))
    for name, item in sorted((record.get("torch") or {}).items()):
        if name == "multi_node":  # one run of the whole group: no node's own figure
            continue
        _size, busbw = links.largest_figure(item.get("rows") or [])
        if busbw is not None:
            out.setdefault(f"torch {name} busbw GB/s", []).append((host, float(busbw)))


def _gpu_figures(host, record, out, labels):
    for gpu in (record.get("gpu_trial") or {}).get("gpus") or []:
        for figure, entry in sorted((gpu.get("figures") or {}).items()):
            ratio = (entry.get("spec") or {}).get("ratio")
            if isinstance(ratio, (int, float)):
                if figure not in labels:
                    labels[figure] = f"GPU {gpujudge.figure_label(figure)} % of spec"
                out.setdefault(labels[figure], []).append((f"{host} GPU{gpu.get('index')}", ratio * 100))


def figures(records):
    """{figure label: [(node or GPU, value)]} over every record, in a stable order."""
    out, labels = {}, {}
    for host, record in sorted(records.items()):
        _host_figures(host, record, out)
        _gpu_figures(host, record, out, labels)
    return out


def percentile(ordered, q):
    """The q-th percentile (0-100) of sorted values, linearly interpolated between ranks."""
    if not ordered:
        return None
    at = (len(ordered) - 1) * q / 100
    low, high = math.floor(at), math.ceil(at)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def outliers(values, median):
    """[(name, value)] of the values more than OUTLIER_BAND from the median, farthest first."""
    if not median:
        return []
    far = [(n, v) for n, v in values if abs(v / median - 1) > OUTLIER_BAND]
    return sorted(far, key=lambda nv: (-abs(nv[1] / median - 1), nv[0]))


def _outlier_text(found, median):
    named = [f"{n} {fmt(v)} ({(v / median - 1) * 100:+.0f}%)" for n, v in found[:OUTLIERS_NAMED]]
    more = len(found) - OUTLIERS_NAMED
    return ", ".join(named) + (f" and {more} more" if more > 0 else "") if found else "none"


def rows(found):
    """One row per figure: count, min, p5, median, p95, max, the outliers named."""
    out = []
    for label, values in found.items():
        ordered = sorted(v for _n, v in values)
        median = percentile(ordered, 50)
        stats = [
            fmt(x) for x in (ordered[0], percentile(ordered, 5), median, percentile(ordered, 95), ordered[-1])
        ]
        out.append([label, len(ordered), *stats, _outlier_text(outliers(values, median), median)])
    return out


HEADER = [
    "figure",
    "n",
    "min",
    "p5",
    "median",
    "p95",
    "max",
    f"outliers (beyond +-{OUTLIER_BAND * 100:.0f}% of the median)",
]


def sections(records, plots):
    """The aggregate part: what a figure is, the table, the chart (when drawn); [] without figures."""
    found = figures(records)
    if not found:
        return []
    out = [
        ("h", (2, "The fleet in aggregate")),
        (
            "p",
            "Each figure across the cluster: nccl-tests busbw at the verdict size and torch busbw at the "
            "largest size per node, each GPU's trial figures as % of its model's spec. Outliers are named "
            "farthest first.",
        ),
        ("table", (HEADER, rows(found))),
    ]
    if plots.get(("fleet", None)):
        out.append(("img", (plots[("fleet", None)], "distribution of each figure across the fleet")))
    return out


def histogram(ordered, bins=BINS):
    """(counts, edges) of sorted values in ``bins`` equal bins from the first to the last (one bin
    around a single value)."""
    low, high = ordered[0], ordered[-1]
    if high <= low:
        low, high = low - 0.5, high + 0.5
    width = (high - low) / bins
    counts = [0] * bins
    for value in ordered:
        counts[min(int((value - low) / width), bins - 1)] += 1
    return counts, [low + i * width for i in range(bins + 1)]


def plots(plt, records, run_dir):
    """fleet.png, a histogram per figure with its median and outlier band ({("fleet", None): file});
    {} without figures. One step line per histogram and a fixed layout: 11 figures' bars and
    tight_layout took 2.5 s of CPU at 1,024 nodes."""
    found = figures(records)
    if not found:
        return {}
    count = len(found)
    lines = math.ceil(count / _COLUMNS)
    fig, axes = plt.subplots(lines, _COLUMNS, figsize=(4.0 * _COLUMNS, 2.4 * lines), dpi=80, squeeze=False)
    for ax, (label, values) in zip(axes.flat, found.items()):
        ordered = sorted(v for _n, v in values)
        median = percentile(ordered, 50)
        counts, edges = histogram(ordered)
        ax.stairs(counts, edges, fill=True, color="#7f9fbf")
        # One outlier among a thousand nodes is a bar too low to see: each is a red tick below.
        far = [v for _n, v in outliers(values, median)]
        ax.plot(far, [0] * len(far), "|", color="red", markersize=14, markeredgewidth=2)
        ax.axvspan(median * (1 - OUTLIER_BAND), median * (1 + OUTLIER_BAND), color="green", alpha=0.1)
        ax.axvline(median, color="black", linestyle="--", linewidth=1)
        ax.set_title(f"{label} (n={len(ordered)})", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[count:]:
        ax.set_visible(False)
    fig.subplots_adjust(
        left=0.05, right=0.98, top=1 - 0.35 / lines, bottom=0.25 / lines, hspace=0.6, wspace=0.25
    )
    markdown.save_png(fig, os.path.join(run_dir, CHART))
    plt.close(fig)
    return {("fleet", None): CHART}
