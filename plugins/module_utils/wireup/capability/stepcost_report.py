"""The stepcost capability's part of the run's report (report/assemble.py reads it through
capability/registry.py): per host and for the group, a table per model size and hook, the
sentence, the effective all-reduce bandwidth against its reference (sections) and a bar chart of
compute against exposed communication (plots)."""

from __future__ import annotations

import os

from ..judge import ddp_step
from ..render import markdown
from ..render.markdown import fmt, human_bytes, pct, safe_name


def groups(records):
    """[(key, title, figures)]: each host's single-node figures, then the group's multi-node ones
    once (every host that took part keeps the same figures; the first host's are shown)."""
    out = []
    for host, record in sorted(records.items()):
        figs = (record.get("stepcost") or {}).get("single_node")
        if figs:
            out.append((host, f"{host} (one node, {figs[0].get('world_size')} ranks)", figs))
    for _host, record in sorted(records.items()):
        figs = (record.get("stepcost") or {}).get("multi_node")
        if figs:
            out.append(
                (
                    "group",
                    f"the group ({figs[0].get('nnodes')} node{'' if figs[0].get('nnodes') == 1 else 's'}, "
                    f"{figs[0].get('world_size')} ranks)",
                    figs,
                )
            )
            break
    return out


def _stepcost_bars(figs):
    """[(label, compute ms, exposed communication ms)] per model size and timed hook."""
    bars = []
    for fig in figs:
        size = ddp_step.human_count(fig.get("params"))
        for hook, entry in (fig.get("hooks") or {}).items():
            if entry.get("step_ms") is not None:
                comm = entry.get("exposed_ms") or 0.0
                bars.append((f"{size}\n{hook}", entry["step_ms"] - comm, comm))
    return bars


def plots(plt, records, run_dir):
    """One bar chart per host and one for the group: per model size and hook, compute-only and
    exposed communication stacked ({("stepcost", key): file})."""
    plots = {}
    for key, title, figs in groups(records):
        bars = _stepcost_bars(figs)
        if not bars:
            continue
        fig_, ax = plt.subplots(figsize=(max(5.0, 0.8 * len(bars) + 2), 4.0), dpi=100)
        xs = range(len(bars))
        ax.bar(xs, [b[1] for b in bars], color="#7f9fbf", label="compute (no_sync step)")
        ax.bar(
            xs,
            [b[2] for b in bars],
            bottom=[b[1] for b in bars],
            color="#d9534f",
            label="exposed communication",
        )
        ax.set_xticks(list(xs), [b[0] for b in bars], fontsize=8)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("median step time (ms)")
        ax.set_title(f"DDP step on {title}:\ncompute vs exposed communication per comm hook", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7)
        name = f"stepcost_{safe_name(key)}.png"
        markdown.save_figure(plt, fig_, os.path.join(run_dir, name))
        plots[("stepcost", key)] = name
    return plots


_STEPCOST_HEADER = [
    "params",
    "backend",
    "precision",
    "hook",
    "compute ms",
    "step ms",
    "step p25-p75",
    "exposed comm ms",
    "comm share",
    "vs no hook",
    "note",
]


def _stepcost_rows(figs):
    rows = []
    for fig in figs:
        for hook, entry in (fig.get("hooks") or {}).items():
            spread = entry.get("spread_ms") or [None, None]
            rows.append(
                [
                    ddp_step.human_count(fig.get("params")),
                    fig.get("backend"),
                    fig.get("precision"),
                    entry.get("label") or hook,
                    fmt(fig.get("compute_ms"), 2),
                    fmt(entry.get("step_ms"), 2),
                    "-" if spread[0] is None else f"{spread[0]:.2f}-{spread[1]:.2f}",
                    fmt(entry.get("exposed_ms"), 2),
                    pct(entry.get("share")),
                    "-" if entry.get("vs_none") is None else f"{entry['vs_none'] * 100:+.0f}%",
                    entry.get("skipped") or ("inconsistent" if entry.get("inconsistent") else ""),
                ]
            )
    return rows


def _stepcost_line(fig):
    """One model size's sentence, its effective all-reduce bandwidth and its baseline."""
    eff = fig.get("effective") or {}
    ref = eff.get("reference") or {}
    line = f"{ddp_step.human_count(fig.get('params'))} params: {fig.get('sentence', '')}"
    if eff.get("busbw") is not None:
        line += (
            " Gradient all-reduce as the step saw it: "
            f"{(fig.get('grad_bytes') or 0) / 1e9:.3g} GB of gradients in "
            f"{fmt((fig.get('hooks') or {}).get('none', {}).get('exposed_ms'), 2)} ms exposed = "
            f"{fmt(eff['busbw'])} GB/s busbw"
        )
        if ref:
            line += (
                f", {pct(eff.get('ratio'))} of the {fmt(ref.get('busbw'))} GB/s "
                f"{ref.get('source')} at {human_bytes(ref.get('size'))} (run {ref.get('run_id')})"
            )
        line += "."
    base = fig.get("baseline") or {}
    if base.get("run_id"):
        line += (
            f" Against the last passing run {base['run_id']}: "
            f"{fmt(base.get('baseline_step_ms'), 2)} ms, "
            f"{base.get('change', 0) * 100:+.0f}% ({fig.get('verdict')})."
        )
    return line


def sections(records, plots):
    """The report's DDP step section: per host and for the group, a table per model size and hook,
    the sentence, the effective all-reduce bandwidth against the reference, the chart."""
    found = groups(records)
    if not found:
        return []
    out = [
        ("h", (2, "What communication costs a DDP step")),
        (
            "p",
            "files/bench/ddp_step.py: a synthetic model trained with DistributedDataParallel. Exposed "
            "communication = median full step - median compute-only step (no_sync); share = exposed / full "
            "step; a hook's change is its full step against the step without a hook (roles/bench/README.md).",
        ),
    ]
    for key, title, figs in found:
        out.append(("h", (3, f"DDP step on {title}")))
        out.append(("table", (_STEPCOST_HEADER, _stepcost_rows(figs))))
        out += [("p", _stepcost_line(fig)) for fig in figs]
        if plots.get(("stepcost", key)):
            out.append(("img", (plots[("stepcost", key)], f"DDP step cost on {title}")))
    return out
