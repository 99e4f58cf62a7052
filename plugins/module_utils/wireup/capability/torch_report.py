"""The torch capability's part of the run's report (report/assemble.py reads it through
capability/registry.py): every torch.distributed run's rows, the largest size of each against
nccl-tests (sections) and the plot of every run's busbw against size (plots)."""

from __future__ import annotations

import os

from ..judge import benchenv
from ..render import markdown
from ..render.markdown import fmt, human_bytes, pct, size_axis
from ..store import results
from . import links

CHART = "torch.png"


def _torch_series(records):
    """[(label, points, expected busbw)] of every torch run with figures: each host's single-node
    run, the group's multi-node run once (every host that took part keeps the same run: drawn per
    host, it was one line under three identical legend entries)."""
    series = {}
    for host, record in sorted(records.items()):
        for name, item in sorted((record.get("torch") or {}).items()):
            points = links.figure_points(item.get("rows") or [])
            label = _torch_label(host, name, item)
            if points and label not in series:
                series[label] = (label, points, (item.get("expected") or {}).get("expected_busbw"))
    return list(series.values())


def _torch_label(host, name, item):
    """The run, its ranks and backend; a single-node run names its host."""
    what = f"{name} ({item.get('world_size')} ranks, {item.get('backend')})"
    return what if name == "multi_node" else f"{host} {what}"


def plot(plt, records, path):
    series = _torch_series(records)
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, points, exp) in enumerate(series):
        color = colors[i % len(colors)]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", color=color, label=label)
        if exp:
            ax.axhline(exp, color=color, linestyle="--", linewidth=1, label=f"{label} expected {exp:.0f}")
    # From 0, so a 10x drop shows as one, not as a healthy curve on a rescaled axis.
    ax.set_ylim(bottom=0)
    size_axis(ax, "bus bandwidth (GB/s)")
    ax.set_title("torch.distributed all_reduce")
    ax.legend(fontsize=7)
    markdown.save_figure(plt, fig, path)
    return True


_TORCH_ROWS_HEADER = [
    "host",
    "run",
    "ranks",
    "backend",
    "size",
    "time us",
    "algbw GB/s",
    "busbw GB/s",
    "wrong",
]


_TORCH_SUMMARY_HEADER = [
    "host",
    "run",
    "backend",
    "size",
    "busbw GB/s",
    "verdict",
    "of expected",
    "of raw link",
    "nccl-tests GB/s",
    "of nccl-tests (goal)",
    "environment",
]


def _torch_rows(records):
    rows = []
    for host, record in sorted(records.items()):
        for name, item in sorted((record.get("torch") or {}).items()):
            for row in item.get("rows") or []:
                sec = row.get("in_place") or {}
                rows.append(
                    [
                        host,
                        name,
                        item.get("world_size"),
                        item.get("backend"),
                        human_bytes(row.get("size")),
                        fmt(sec.get("time_us"), 1),
                        fmt(sec.get("algbw"), 3),
                        fmt(sec.get("busbw"), 3),
                        sec.get("wrong"),
                    ]
                )
    return rows


def sections(records, plots):
    """Every torch.distributed run's rows, the largest size of each against nccl-tests, the plot."""
    rows = _torch_rows(records)
    if not rows:
        return []
    out = [("h", (2, "torch.distributed all_reduce")), ("table", (_TORCH_ROWS_HEADER, rows))]
    summary = _torch_summary(records)
    if summary:
        out.append(
            (
                "p",
                'Largest size of each run. "of nccl-tests": torch busbw / nccl-tests all_reduce busbw at '
                "the same size and NCCL env (goal >= the threshold shown).",
            )
        )
        out.append(("table", (_TORCH_SUMMARY_HEADER, summary)))
    if plots.get(("torch", None)):
        out.append(("img", (plots[("torch", None)], "torch.distributed all_reduce busbw")))
    return out


def _like_text(like):
    if like.get("ratio") is None:
        return "-"
    return f"{pct(like['ratio'])} at {human_bytes(like['size'])} (>= {pct(like.get('goal'))})"


def _torch_verdict(record, item):
    """A torch run's verdict cell: its own verdict against the expectation; on a GPU-less node the
    host's, taken on its own history, with what it was compared with."""
    verdict = (item.get("verdict") or {}).get("verdict")
    if verdict:
        return verdict
    return results.verdict_said(record) if results.is_gpu_less(record) else "not judged"


def _torch_summary(records):
    rows = []
    for host, record in sorted(records.items()):
        for name, item in sorted((record.get("torch") or {}).items()):
            size, busbw = links.largest_figure(item.get("rows") or [])
            if size is None:
                continue
            v = item.get("verdict") or {}
            like = item.get("vs_nccl_tests") or {}
            rows.append(
                [
                    host,
                    name,
                    item.get("backend"),
                    human_bytes(size),
                    fmt(busbw, 3),
                    _torch_verdict(record, item),
                    pct(v.get("ratio")),
                    pct((item.get("of_link") or {}).get("ratio")),
                    fmt(like.get("nccl_tests_busbw")),
                    _like_text(like),
                    benchenv.describe_figure_env(item.get("env")),
                ]
            )
    return rows


def plots(plt, records, run_dir):
    """{("torch", None): CHART} when a run had figures to draw into run_dir, else {}."""
    return {("torch", None): CHART} if plot(plt, records, os.path.join(run_dir, CHART)) else {}
