"""Benchmark report of one run: Markdown, a self-contained HTML page, and PNG plots.

write_report(run_dir, run_id, records) writes, into run_dir:
  report.md     summary table, per-host collectives vs expectation, torch benchmarks, findings
  report.html   the same, standalone: CSS inline, plots embedded as base64 PNG (no external URL)
  busbw_<host>.png     bus bandwidth vs message size per collective, the expectation dashed
  topology_<host>.png  the GPU link matrix as a heatmap (NV# best ... SYS worst)
  torch.png            torch.distributed all-reduce busbw vs size, single node and multi-node
Plots use matplotlib's Agg backend; without matplotlib the report still gets written and says
that the plots were skipped. records is {host: record} as results.build_record makes them.
"""

import base64
import html
import os
import re

from . import bandwidth

SEVERITY_ORDER = ("critical", "warning", "info")
_NV = re.compile(r"^NV(\d+)$")
# Heatmap scale: higher is a better link. NV# maps above every PCIe class, by its bond width.
_CLASS_SCORE = {"SYS": 1, "SOC": 1, "NODE": 2, "PHB": 3, "PXB": 4, "PIX": 5}


def _safe(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(name))


def human_bytes(size):
    return bandwidth.human_bytes(size, short=True)


def _fmt(value, digits=1):
    return "-" if value is None else f"{value:.{digits}f}"


def _best(row):
    values = [
        row[k]["busbw"]
        for k in ("out_of_place", "in_place")
        if row.get(k) and row[k].get("busbw") is not None
    ]
    return max(values) if values else None


def _count(findings):
    counts = dict.fromkeys(SEVERITY_ORDER, 0)
    for item in findings or []:
        counts[item.get("severity", "info")] = counts.get(item.get("severity", "info"), 0) + 1
    return counts


def _baseline_change(base):
    """' (torch multi_node 0.52 vs 0.55 GB/s at 16M, -5%)': what a GPU-less node was compared on."""
    parts = [
        f"torch {name} {_fmt(c['busbw'], 3)} vs {_fmt(c['baseline_busbw'], 3)} GB/s at "
        f"{human_bytes(c['size'])}, {c['change'] * 100:+.0f}%"
        for name, c in sorted((base.get("torch") or {}).items())
    ]
    return f" ({'; '.join(parts)})" if parts else ""


def summary_line(record):
    """One line per host for the end of the play."""
    host = record.get("host", "?")
    parts = [record["skipped"]] if record.get("skipped") else []
    for name, coll in sorted((record.get("collectives") or {}).items()):
        v = coll.get("verdict") or {}
        if v.get("expected_busbw"):
            parts.append(
                f"{name} {v.get('verdict')} {_fmt(v.get('measured_busbw'))}/"
                f"{_fmt(v.get('expected_busbw'))} GB/s"
            )
        else:
            parts.append(f"{name} {v.get('verdict', 'N/A')} {_fmt(v.get('measured_busbw'))} GB/s")
    for name, item in sorted((record.get("torch") or {}).items()):
        rows = item.get("rows") or []
        if rows:
            last = max(rows, key=lambda r: r.get("size") or 0)
            parts.append(
                f"torch {name} ({item.get('world_size')} ranks, {item.get('backend')}) "
                f"{_fmt(_best(last), 3)} GB/s at {human_bytes(last.get('size'))}"
            )
    if record.get("skipped") and len(parts) == 1:
        return f"{host}: {record.get('verdict', 'N/A')} - {record['skipped']}"
    counts = _count(record.get("findings"))
    base = record.get("baseline") or {}
    baseline = f"baseline {base['run_id']}" if base.get("run_id") else "no passing baseline"
    baseline += _baseline_change(base)
    return (
        f"{host}: {record.get('verdict', 'N/A')} - "
        + ("; ".join(parts) or "nothing measured")
        + f"; findings {counts['critical']} critical/{counts['warning']} warning; {baseline}"
    )


# ---------------------------------------------------------------- plots
def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _plot_busbw(plt, record, path):
    colls = record.get("collectives") or {}
    if not any(c.get("rows") for c in colls.values()):
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, coll) in enumerate(sorted(colls.items())):
        points = [
            (r["size"], _best(r)) for r in coll.get("rows") or [] if r.get("size") and _best(r) is not None
        ]
        if not points:
            continue
        color = colors[i % len(colors)]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", color=color, label=name)
        exp = (coll.get("expected") or {}).get("expected_busbw")
        if exp:
            ax.axhline(exp, color=color, linestyle="--", linewidth=1, label=f"{name} expected {exp:.0f}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"{record.get('host')}: nccl-tests busbw, run {record.get('run_id')}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return True


def _class_score(cls):
    if cls == "X":
        return None
    match = _NV.match(cls or "")
    if match:
        return 6 + int(match.group(1))
    return _CLASS_SCORE.get(cls, 0)


def _plot_topology(plt, record, path):
    matrix = (record.get("topology") or {}).get("matrix") or {}
    gpus = sorted(
        (k for k in matrix if k.startswith("GPU")), key=lambda g: int(g[3:]) if g[3:].isdigit() else 0
    )
    if not gpus:
        return False
    cols = gpus + sorted(k for k in next(iter(matrix.values())) if not k.startswith("GPU"))
    scores = [[_class_score(matrix[r].get(c, "")) for c in cols] for r in gpus]
    flat = [s for row in scores for s in row if s is not None]
    vmax = max([*flat, 7])
    fig, ax = plt.subplots(figsize=(1.2 + 0.7 * len(cols), 1.0 + 0.6 * len(gpus)), dpi=100)
    data = [[(s if s is not None else float("nan")) for s in row] for row in scores]
    ax.imshow(data, cmap="RdYlGn", vmin=0, vmax=vmax, aspect="auto")
    for i, r in enumerate(gpus):
        for j, c in enumerate(cols):
            ax.text(j, i, matrix[r].get(c, ""), ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(cols)), cols, fontsize=8)
    ax.set_yticks(range(len(gpus)), gpus, fontsize=8)
    ax.set_title(f"{record.get('host')}: nvidia-smi topo -m", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return True


def _plot_torch(plt, records, path):
    series = []
    for host, record in sorted(records.items()):
        for name, item in sorted((record.get("torch") or {}).items()):
            if name == "multi_node" and item.get("reported_by") not in (None, host):
                continue
            points = [
                (r["size"], _best(r))
                for r in item.get("rows") or []
                if r.get("size") and _best(r) is not None
            ]
            if points:
                label = (
                    f"{name} ({item.get('world_size')} ranks, {item.get('backend')})"
                    if name == "multi_node"
                    else f"{host} {name} ({item.get('world_size')} ranks, {item.get('backend')})"
                )
                series.append((label, points))
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    for label, points in series:
        ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title("torch.distributed all_reduce")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return True


# ---------------------------------------------------------------- text
def _md_table(header, rows):
    def cell(value):
        return str(value).replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out


def _sections(run_id, records, plots, plot_note):
    """The report as a list of (kind, payload): ('h', (level, text)), ('p', text),
    ('table', (header, rows)), ('img', (file, alt))."""
    out = [("h", (1, f"wireup bench report: run {run_id}"))]
    counts = {}
    for record in records.values():
        counts[record.get("verdict", "N/A")] = counts.get(record.get("verdict", "N/A"), 0) + 1
    out.append(
        (
            "p",
            f"{len(records)} host(s): "
            + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
            + ". Verdicts are taken at the largest message size >= 1 GiB against the expected bus "
            "bandwidth of the node's slowest GPU-GPU link (roles/bench/README.md).",
        )
    )
    if plot_note:
        out.append(("p", plot_note))
    rows = []
    for host, record in sorted(records.items()):
        topo = record.get("topology") or {}
        c = _count(record.get("findings"))
        rows.append(
            [
                host,
                record.get("verdict", "N/A"),
                topo.get("gpu_count", len(topo.get("gpus") or [])),
                "/".join(topo.get("link_classes") or []) or "-",
                f"{c['critical']}/{c['warning']}/{c['info']}",
                (record.get("baseline") or {}).get("run_id") or "-",
                record.get("skipped") or "",
            ]
        )
    out.append(("h", (2, "Summary")))
    out.append(
        (
            "table",
            (
                [
                    "host",
                    "verdict",
                    "GPUs",
                    "links",
                    "findings (crit/warn/info)",
                    "baseline (last PASS)",
                    "note",
                ],
                rows,
            ),
        )
    )

    for host, record in sorted(records.items()):
        out.append(("h", (2, f"{host}: {record.get('verdict', 'N/A')}")))
        versions = record.get("versions") or {}
        if versions:
            out.append(("p", "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()) if v)))
        env = record.get("env") or {}
        if env:
            out.append(("p", "Environment: " + " ".join(f"{k}={v}" for k, v in sorted(env.items()))))
        if record.get("skipped"):
            out.append(("p", record["skipped"]))
        colls = record.get("collectives") or {}
        if colls:
            rows = []
            for name, coll in sorted(colls.items()):
                v = coll.get("verdict") or {}
                e = coll.get("expected") or {}
                rows.append(
                    [
                        name,
                        v.get("verdict", "N/A"),
                        human_bytes(v.get("size")) if v.get("size") else "-",
                        _fmt(v.get("measured_busbw")),
                        _fmt(e.get("expected_busbw")),
                        "-" if v.get("ratio") is None else f"{v['ratio'] * 100:.0f}%",
                        _fmt(coll.get("avg_busbw"), 2),
                        v.get("reason", ""),
                    ]
                )
            out.append(
                (
                    "table",
                    (
                        [
                            "collective",
                            "verdict",
                            "size",
                            "busbw GB/s",
                            "expected GB/s",
                            "ratio",
                            "avg busbw",
                            "reason",
                        ],
                        rows,
                    ),
                )
            )
            basis = {(c.get("expected") or {}).get("basis") for c in colls.values()} - {None, ""}
            if basis:
                out.append(("p", "Expectation: " + "; ".join(sorted(basis))))
        if plots.get(("busbw", host)):
            out.append(("img", (plots[("busbw", host)], f"busbw vs size on {host}")))
        if plots.get(("topology", host)):
            out.append(("img", (plots[("topology", host)], f"topology of {host}")))
        tuning = record.get("tuning") or {}
        if tuning.get("best"):
            out.append(
                (
                    "p",
                    f"NCCL tuning: best {tuning['best']} ({_fmt(tuning.get('best_busbw'))} GB/s vs "
                    f"{_fmt(tuning.get('default_busbw'))} GB/s default) written to "
                    f"{tuning.get('path', '')}",
                )
            )

    torch_rows = []
    for host, record in sorted(records.items()):
        for name, item in sorted((record.get("torch") or {}).items()):
            for row in item.get("rows") or []:
                sec = row.get("in_place") or {}
                torch_rows.append(
                    [
                        host,
                        name,
                        item.get("world_size"),
                        item.get("backend"),
                        human_bytes(row.get("size")),
                        _fmt(sec.get("time_us"), 1),
                        _fmt(sec.get("algbw"), 3),
                        _fmt(sec.get("busbw"), 3),
                        sec.get("wrong"),
                    ]
                )
    if torch_rows:
        out.append(("h", (2, "torch.distributed all_reduce")))
        out.append(
            (
                "table",
                (
                    [
                        "host",
                        "run",
                        "ranks",
                        "backend",
                        "size",
                        "time us",
                        "algbw GB/s",
                        "busbw GB/s",
                        "wrong",
                    ],
                    torch_rows,
                ),
            )
        )
        if plots.get(("torch", None)):
            out.append(("img", (plots[("torch", None)], "torch.distributed all_reduce busbw")))

    finding_rows = []
    for host, record in sorted(records.items()):
        for item in sorted(
            record.get("findings") or [],
            key=lambda f: (
                SEVERITY_ORDER.index(f.get("severity", "info"))
                if f.get("severity", "info") in SEVERITY_ORDER
                else 9
            ),
        ):
            finding_rows.append(
                [
                    host,
                    item.get("severity", ""),
                    item.get("source", "topology"),
                    item.get("code", ""),
                    item.get("message", ""),
                ]
            )
    out.append(("h", (2, "Findings")))
    if finding_rows:
        out.append(("table", (["host", "severity", "source", "code", "finding"], finding_rows)))
    else:
        out.append(("p", "None."))
    return out


def _render_md(sections):
    lines = []
    for kind, payload in sections:
        if kind == "h":
            lines += ["#" * payload[0] + " " + payload[1], ""]
        elif kind == "p":
            lines += [payload, ""]
        elif kind == "table":
            lines += [*_md_table(*payload), ""]
        elif kind == "img":
            lines += [f"![{payload[1]}]({payload[0]})", ""]
    return "\n".join(lines).rstrip() + "\n"


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:0.9em}th,td{border:1px solid #ccc;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f2f2f2}img{max-width:100%;display:block;margin:1em 0}
.PASS{background:#d8f5d0}.WARN{background:#fff2c2}.FAIL,.critical{background:#f8d0d0}.warning{background:#fff2c2}"""


def _render_html(sections, run_dir):
    esc = html.escape
    body = []
    classes = {"PASS", "WARN", "FAIL", "critical", "warning"}
    for kind, payload in sections:
        if kind == "h":
            body.append(f"<h{payload[0]}>{esc(payload[1])}</h{payload[0]}>")
        elif kind == "p":
            body.append(f"<p>{esc(payload)}</p>")
        elif kind == "table":
            header, rows = payload
            body.append("<table><tr>" + "".join(f"<th>{esc(str(h))}</th>" for h in header) + "</tr>")
            for row in rows:
                cells = []
                for value in row:
                    text = "" if value is None else str(value)
                    cls = f' class="{text}"' if text in classes else ""
                    cells.append(f"<td{cls}>{esc(text)}</td>")
                body.append("<tr>" + "".join(cells) + "</tr>")
            body.append("</table>")
        elif kind == "img":
            with open(os.path.join(run_dir, payload[0]), "rb") as handle:
                data = base64.b64encode(handle.read()).decode("ascii")
            body.append(f'<img alt="{esc(payload[1])}" src="data:image/png;base64,{data}">')
    title = esc(sections[0][1][1])
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def write_report(run_dir, run_id, records):
    """Write report.md, report.html and the PNGs into run_dir; return {md, html, pngs, plots}."""
    plt = _pyplot()
    plots = {}
    note = ""
    if plt is None:
        note = "Plots skipped: matplotlib is not installed in the controller's Python."
    else:
        for host, record in sorted(records.items()):
            name = f"busbw_{_safe(host)}.png"
            if _plot_busbw(plt, record, os.path.join(run_dir, name)):
                plots[("busbw", host)] = name
            name = f"topology_{_safe(host)}.png"
            if _plot_topology(plt, record, os.path.join(run_dir, name)):
                plots[("topology", host)] = name
        if _plot_torch(plt, records, os.path.join(run_dir, "torch.png")):
            plots[("torch", None)] = "torch.png"
    sections = _sections(run_id, records, plots, note)
    md_path = os.path.join(run_dir, "report.md")
    html_path = os.path.join(run_dir, "report.html")
    with open(md_path, "w", encoding="utf-8") as handle:
        handle.write(_render_md(sections))
    with open(html_path, "w", encoding="utf-8") as handle:
        handle.write(_render_html(sections, run_dir))
    return {
        "md": md_path,
        "html": html_path,
        "pngs": sorted(os.path.join(run_dir, p) for p in plots.values()),
        "plots": bool(plots),
    }
