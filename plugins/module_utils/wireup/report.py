"""Benchmark report of one run: Markdown, a self-contained HTML page, and PNG plots.

write_report(run_dir, run_id, records) writes, into run_dir:
  report.md     summary table, per-host collectives vs expectation, torch benchmarks, findings
  report.html   the same, standalone: CSS inline, plots embedded as base64 PNG (no external URL)
  busbw_<host>.png     per collective: bus bandwidth vs message size (the expectation and the raw
                       link speed dashed) over time per operation on log-log axes (small-message
                       latency, which a linear busbw axis hides below ~64 KiB)
  topology_<host>.png  the GPU link matrix as a heatmap (NV# best ... SYS worst)
  torch.png            torch.distributed all-reduce busbw vs size, single node and multi-node, the
                       expectation dashed (so a drop cannot hide behind a rescaled axis)
Plots use matplotlib's Agg backend; without matplotlib the report still gets written and says
that the plots were skipped. records is {host: record} as results.build_record makes them.
"""

import base64
import html
import io
import os
import re

from . import atomicfile, bandwidth, benchenv, gpureport, nccltests, stepcost

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
                f"{_fmt(v.get('expected_busbw'))} GB/s{_link_note(coll.get('of_link'))}"
            )
        elif v.get("verdict", "N/A") == "N/A" and v.get("reason"):
            parts.append(f"{name} N/A ({v['reason']})")
        else:
            parts.append(f"{name} {v.get('verdict', 'N/A')} {_fmt(v.get('measured_busbw'))} GB/s")
    for name, item in sorted((record.get("torch") or {}).items()):
        size, busbw = _largest(item.get("rows") or [])
        if size is not None:
            like = item.get("vs_nccl_tests") or {}
            parts.append(
                f"torch {name} ({item.get('world_size')} ranks, {item.get('backend')}) "
                f"{_fmt(busbw, 3)} GB/s at {human_bytes(size)}"
                + (f" = {_pct(like.get('ratio'))} of nccl-tests" if like.get("ratio") is not None else "")
            )
    parts += stepcost.summary(record)
    parts += gpureport.summary(record)  # issue 25: the GPU trial
    modes = sorted({(f.get("env") or {}).get("mode") for f in _figures(record)} - {None})
    if modes:
        parts.append("NCCL " + "+".join(modes))
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


def _pct(ratio):
    return "-" if ratio is None else f"{ratio * 100:.0f}%"


def _link_note(of_link):
    """' (73% of the 478 GB/s NV18 link)' or ''."""
    of_link = of_link or {}
    if of_link.get("ratio") is None:
        return ""
    link = f"{of_link['link_gbps']:.0f} GB/s {of_link.get('link_class') or ''}".strip()
    return f" ({_pct(of_link['ratio'])} of the {link} link)"


def _figures(record):
    """Every figure of a record (collectives, torch runs) as dicts carrying their "env"."""
    return list((record.get("collectives") or {}).values()) + list((record.get("torch") or {}).values())


# ---------------------------------------------------------------- plots
def save_png(fig, path):
    """Save a matplotlib figure as PNG, atomically (atomicfile)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    atomicfile.write_bytes(path, buffer.getvalue())


def _points(rows, collective="all_reduce"):
    """[(size, busbw)] of a collective's figure at each size (nccltests.figure: the verdict's rule)."""
    return [
        (size, nccltests.figure(rows, size, collective)) for size in nccltests.figure_sizes(rows, collective)
    ]


def _largest(rows, collective="all_reduce"):
    """(size, busbw) of the figure at the largest size, or (None, None)."""
    points = _points(rows, collective)
    return points[-1] if points else (None, None)


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
    fig, (ax, lat) = plt.subplots(1, 2, figsize=(12, 4.5), dpi=100)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    links = set()
    for i, (name, coll) in enumerate(sorted(colls.items())):
        points = _points(coll.get("rows") or [], name)
        if not points:
            continue
        color = colors[i % len(colors)]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", color=color, label=name)
        exp = (coll.get("expected") or {}).get("expected_busbw")
        if exp:
            ax.axhline(exp, color=color, linestyle="--", linewidth=1, label=f"{name} expected {exp:.0f}")
        link = (coll.get("expected") or {}).get("link_gbps")
        if link:
            links.add(link)
        times = [(r["size"], _time(r)) for r in coll.get("rows") or [] if r.get("size") and _time(r)]
        if times:
            lat.plot([t[0] for t in times], [t[1] for t in times], marker=".", color=color, label=name)
    for link in sorted(links):
        ax.axhline(link, color="black", linestyle=":", linewidth=1, label=f"raw link {link:.0f}")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"{record.get('host')}: nccl-tests busbw, run {record.get('run_id')}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    lat.set_xscale("log", base=2)
    lat.set_yscale("log")
    lat.set_xlabel("message size (bytes)")
    lat.set_ylabel("time per operation (us, best of out-of-place/in-place)")
    lat.set_title("latency: small messages (tensor parallelism) live here", fontsize=9)
    lat.grid(True, which="both", alpha=0.3)
    lat.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    save_png(fig, path)
    plt.close(fig)
    return True


def _time(row):
    values = [
        row[k]["time_us"]
        for k in ("out_of_place", "in_place")
        if row.get(k) and row[k].get("time_us") is not None and row[k]["time_us"] > 0
    ]
    return min(values) if values else None


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
    save_png(fig, path)
    plt.close(fig)
    return True


def _plot_torch(plt, records, path):
    series = []
    for host, record in sorted(records.items()):
        for name, item in sorted((record.get("torch") or {}).items()):
            if name == "multi_node" and item.get("reported_by") not in (None, host):
                continue
            points = _points(item.get("rows") or [])
            if points:
                label = (
                    f"{name} ({item.get('world_size')} ranks, {item.get('backend')})"
                    if name == "multi_node"
                    else f"{host} {name} ({item.get('world_size')} ranks, {item.get('backend')})"
                )
                series.append((label, points, (item.get("expected") or {}).get("expected_busbw")))
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, points, exp) in enumerate(series):
        color = colors[i % len(colors)]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", color=color, label=label)
        if exp:
            ax.axhline(exp, color=color, linestyle="--", linewidth=1, label=f"expected {exp:.0f}")
    # From 0, so a 10x drop shows as one, not as a healthy curve on a rescaled axis.
    ax.set_ylim(bottom=0)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title("torch.distributed all_reduce")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_png(fig, path)
    plt.close(fig)
    return True


# ---------------------------------------------------------------- text
# ">" stays: without a "<" it opens no tag, and the reports' own ">=" stays readable as text.
_MD_ESCAPES = {"&": "&amp;", "<": "&lt;", "[": "\\[", "]": "\\]", "`": "\\`", "\\": "\\\\"}


def md_text(value):
    """Text for a Markdown report, whatever a node put in it: one line (a line break cannot start
    a block), no raw HTML (< and & are entities: a <script> is shown, never run), no links or
    images ([ and ] escaped) and no code spans (backticks escaped)."""
    text = " ".join(str("" if value is None else value).splitlines())
    return "".join(_MD_ESCAPES.get(ch, ch) for ch in text)


def _md_table(header, rows):
    def cell(value):
        return md_text(value).replace("|", "\\|")

    out = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out


def judged_on(records):
    """The sentence saying what this run's verdicts were judged on, for the nodes it has: GPU
    nodes against their slowest GPU-GPU link, GPU-less nodes (results.is_gpu_less) on their gloo
    all-reduce against their own last passing run."""
    from .results import is_gpu_less

    judged = [r for r in records.values() if r.get("verdict") != "UNREACHABLE"]
    cpu = sorted(r.get("host", "?") for r in judged if is_gpu_less(r))
    gpu = [r for r in judged if not is_gpu_less(r) and (r.get("collectives") or r.get("torch"))]
    min_bytes = min(
        [int((r.get("thresholds") or {}).get("min_bytes") or bandwidth.ONE_GIB) for r in gpu]
        or [bandwidth.ONE_GIB]
    )
    parts = []
    if gpu:
        who = "Verdicts" if not cpu else f"GPU nodes' verdicts ({len(gpu)})"
        parts.append(
            f"{who} are taken at the largest message size >= {bandwidth.human_bytes(min_bytes)} against the "
            "expected bus bandwidth of the node's slowest GPU-GPU link"
        )
    if cpu:
        who = "Verdicts" if not gpu else "GPU-less nodes' verdicts"
        parts.append(
            f"{who} ({', '.join(cpu)}: no GPU) are taken on the torch.distributed gloo all-reduce over the "
            "network, against the node's own last passing run (bench_baseline_tolerance), not against a "
            "GPU link"
        )
    if not parts:
        return "No node measured anything to judge (roles/bench/README.md)."
    return "; ".join(parts) + " (roles/bench/README.md)."


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
            + ". "
            + judged_on(records),
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
        if record.get("skipped"):
            out.append(("p", record["skipped"]))
        colls = record.get("collectives") or {}
        if colls:
            rows = []
            for name, coll in sorted(colls.items()):
                v = coll.get("verdict") or {}
                e = coll.get("expected") or {}
                link = coll.get("of_link") or {}
                rows.append(
                    [
                        name,
                        v.get("verdict", "N/A"),
                        human_bytes(v.get("size")) if v.get("size") else "-",
                        _fmt(v.get("measured_busbw")),
                        _fmt(e.get("expected_busbw")),
                        _pct(v.get("ratio")),
                        _fmt(link.get("link_gbps")),
                        _pct(link.get("ratio")),
                        (coll.get("env") or {}).get("mode", "-"),
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
                            "of expected",
                            "raw link GB/s",
                            "of raw link",
                            "NCCL env",
                            "reason",
                        ],
                        rows,
                    ),
                )
            )
            out.append(
                (
                    "p",
                    '"of expected" judges the verdict against factors calibrated on known-good hardware '
                    "(partly circular on the machine kind they were fitted on); "
                    '"of raw link" is the busbw against the bottleneck link\'s raw speed: '
                    "what the hardware could do (roles/bench/README.md).",
                )
            )
            basis = {(c.get("expected") or {}).get("basis") for c in colls.values()} - {None, ""}
            if basis:
                out.append(("p", "Expectation: " + "; ".join(sorted(basis))))
        out += _env_sections(record)
        if plots.get(("busbw", host)):
            out.append(("img", (plots[("busbw", host)], f"busbw and latency vs size on {host}")))
        if plots.get(("topology", host)):
            out.append(("img", (plots[("topology", host)], f"topology of {host}")))

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
        summary = _torch_summary(records)
        if summary:
            out.append(
                (
                    "p",
                    'Largest size of each run. "of nccl-tests": torch busbw / nccl-tests all_reduce busbw at '
                    "the same size and NCCL env (goal >= the threshold shown).",
                )
            )
            out.append(
                (
                    "table",
                    (
                        [
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
                        ],
                        summary,
                    ),
                )
            )
        if plots.get(("torch", None)):
            out.append(("img", (plots[("torch", None)], "torch.distributed all_reduce busbw")))

    out += stepcost_sections(records, plots)
    out += gpureport.sections(records, plots)  # issue 25: the GPU trial
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


def _env_sections(record):
    """The environment of every figure of a host, the tuned env file, default vs tuned."""
    out = []
    groups = {}
    for name, coll in sorted((record.get("collectives") or {}).items()):
        groups.setdefault(benchenv.describe_figure_env(coll.get("env")), []).append(f"nccl-tests {name}")
    for name, item in sorted((record.get("torch") or {}).items()):
        groups.setdefault(benchenv.describe_figure_env(item.get("env")), []).append(f"torch {name}")
    tuning = record.get("tuning") or {}
    if tuning.get("candidates"):
        groups.setdefault(
            benchenv.describe_figure_env({"mode": "default", "vars": tuning.get("env") or {}, "seen": None}),
            [],
        ).append("all_reduce default vs other settings (each adds its own)")
    if groups:
        out.append(
            (
                "table",
                (
                    ["figures", "environment they ran with (what the process saw, where it said)"],
                    [[", ".join(names), text] for text, names in sorted(groups.items(), key=lambda g: g[1])],
                ),
            )
        )
    elif record.get("env"):
        out.append(("p", "Environment: " + benchenv.format_env(record["env"])))
    tuned_line = benchenv.describe_tuned(record.get("tuned_env"))
    if tuned_line:
        out.append(("p", tuned_line))
    if tuning.get("candidates"):
        default = tuning.get("default_busbw")
        rows = []
        for cand in tuning["candidates"]:
            env = cand.get("env") or {}
            busbw = cand.get("busbw")
            label = "default NCCL" if not env else benchenv.format_env(env)
            if env and env == (record.get("tuned_env") or {}).get("values"):
                label += " (tuned env file)"
            rows.append(
                [
                    label,
                    _fmt(busbw),
                    "-"
                    if busbw is None or not default or not env
                    else f"{(busbw / default - 1) * 100:+.1f}%",
                ]
            )
        size = tuning.get("size", "")
        out.append(
            (
                "p",
                f"all_reduce at {size}, default and tuned NCCL side by side"
                + (
                    f" (sweep: a setting must gain > {tuning.get('min_gain', 0.02) * 100:.0f}% to be stored)"
                    if tuning.get("mode", "sweep") == "sweep"
                    else ""
                )
                + ":",
            )
        )
        out.append(("table", (["NCCL settings", "busbw GB/s", "vs default"], rows)))
        if tuning.get("best") and tuning.get("mode", "sweep") == "sweep":
            out.append(
                (
                    "p",
                    f"NCCL tuning: best {benchenv.format_env(tuning['best'])} "
                    f"({_fmt(tuning.get('best_busbw'))} GB/s vs {_fmt(tuning.get('default_busbw'))} GB/s "
                    f"default) written to {tuning.get('path', '')}",
                )
            )
    return out


def _like_text(like):
    if like.get("ratio") is None:
        return "-"
    return f"{_pct(like['ratio'])} at {human_bytes(like['size'])} (>= {_pct(like.get('goal'))})"


def _torch_summary(records):
    rows = []
    for host, record in sorted(records.items()):
        for name, item in sorted((record.get("torch") or {}).items()):
            size, busbw = _largest(item.get("rows") or [])
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
                    _fmt(busbw, 3),
                    v.get("verdict", "not judged"),
                    _pct(v.get("ratio")),
                    _pct((item.get("of_link") or {}).get("ratio")),
                    _fmt(like.get("nccl_tests_busbw")),
                    _like_text(like),
                    benchenv.describe_figure_env(item.get("env")),
                ]
            )
    return rows


def _render_md(sections):
    lines = []
    for kind, payload in sections:
        if kind == "h":
            lines += ["#" * payload[0] + " " + md_text(payload[1]), ""]
        elif kind == "p":
            lines += [md_text(payload), ""]
        elif kind == "table":
            lines += [*_md_table(*payload), ""]
        elif kind == "img":
            lines += [f"![{md_text(payload[1])}]({_safe(payload[0])})", ""]
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
        plots.update(stepcost_plots(plt, records, run_dir))
        plots.update(gpureport.plots(plt, records, run_dir))  # issue 25: the GPU trial
    sections = _sections(run_id, records, plots, note)
    md_path = os.path.join(run_dir, "report.md")
    html_path = os.path.join(run_dir, "report.html")
    atomicfile.write_text(md_path, _render_md(sections))
    atomicfile.write_text(html_path, _render_html(sections, run_dir))
    return {
        "md": md_path,
        "html": html_path,
        "pngs": sorted(os.path.join(run_dir, p) for p in plots.values()),
        "plots": bool(plots),
    }


# ---------------------------------------------------------------- DDP step cost (issue 16)
def stepcost_groups(records):
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


def stepcost_plots(plt, records, run_dir):
    """One bar chart per host and one for the group: per model size and hook, compute-only and
    exposed communication stacked ({("stepcost", key): file})."""
    plots = {}
    for key, title, figs in stepcost_groups(records):
        bars = []
        for fig in figs:
            size = stepcost.human_count(fig.get("params"))
            for hook, entry in (fig.get("hooks") or {}).items():
                if entry.get("step_ms") is None:
                    continue
                comm = entry.get("exposed_ms") or 0.0
                bars.append((f"{size}\n{hook}", entry["step_ms"] - comm, comm))
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
        fig_.tight_layout()
        name = f"stepcost_{_safe(key)}.png"
        save_png(fig_, os.path.join(run_dir, name))
        plt.close(fig_)
        plots[("stepcost", key)] = name
    return plots


def stepcost_sections(records, plots):
    """The report's DDP step section: per host and for the group, a table per model size and hook,
    the sentence, the effective all-reduce bandwidth against the reference, the chart."""
    groups = stepcost_groups(records)
    if not groups:
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
    for key, title, figs in groups:
        out.append(("h", (3, f"DDP step on {title}")))
        rows = []
        for fig in figs:
            for hook, entry in (fig.get("hooks") or {}).items():
                spread = entry.get("spread_ms") or [None, None]
                rows.append(
                    [
                        stepcost.human_count(fig.get("params")),
                        fig.get("backend"),
                        fig.get("precision"),
                        entry.get("label") or hook,
                        _fmt(fig.get("compute_ms"), 2),
                        _fmt(entry.get("step_ms"), 2),
                        "-" if spread[0] is None else f"{spread[0]:.2f}-{spread[1]:.2f}",
                        _fmt(entry.get("exposed_ms"), 2),
                        _pct(entry.get("share")),
                        "-" if entry.get("vs_none") is None else f"{entry['vs_none'] * 100:+.0f}%",
                        entry.get("skipped") or ("inconsistent" if entry.get("inconsistent") else ""),
                    ]
                )
        out.append(
            (
                "table",
                (
                    [
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
                    ],
                    rows,
                ),
            )
        )
        for fig in figs:
            eff = fig.get("effective") or {}
            ref = eff.get("reference") or {}
            line = f"{stepcost.human_count(fig.get('params'))} params: {fig.get('sentence', '')}"
            if eff.get("busbw") is not None:
                line += (
                    " Gradient all-reduce as the step saw it: "
                    f"{(fig.get('grad_bytes') or 0) / 1e9:.3g} GB of gradients in "
                    f"{_fmt((fig.get('hooks') or {}).get('none', {}).get('exposed_ms'), 2)} ms exposed = "
                    f"{_fmt(eff['busbw'])} GB/s busbw"
                )
                if ref:
                    line += (
                        f", {_pct(eff.get('ratio'))} of the {_fmt(ref.get('busbw'))} GB/s "
                        f"{ref.get('source')} at {human_bytes(ref.get('size'))} (run {ref.get('run_id')})"
                    )
                line += "."
            base = fig.get("baseline") or {}
            if base.get("run_id"):
                line += (
                    f" Against the last passing run {base['run_id']}: "
                    f"{_fmt(base.get('baseline_step_ms'), 2)} ms, "
                    f"{base.get('change', 0) * 100:+.0f}% ({fig.get('verdict')})."
                )
            out.append(("p", line))
        if plots.get(("stepcost", key)):
            out.append(("img", (plots[("stepcost", key)], f"DDP step cost on {title}")))
    return out
