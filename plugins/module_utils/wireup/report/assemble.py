"""Benchmark report of one run: Markdown, a self-contained HTML page, and PNG plots.

write_report(run_dir, run_id, records) writes, into run_dir:
  report.md     summary table, per-host collectives vs expectation, torch benchmarks, findings,
                then the nodes' history (drains to returns: record/history.report_sections)
  report.html   the same, standalone: CSS inline, plots embedded as base64 PNG (no external URL)
  busbw_<host>.png     per collective: bus bandwidth vs message size (the expectation and the raw
                       link speed dashed) over time per operation on log-log axes (small-message
                       latency, which a linear busbw axis hides below ~64 KiB)
  topology_<host>.png  the GPU link matrix as a heatmap (NV# best ... SYS worst)
  torch.png            torch.distributed all-reduce busbw vs size, single node and multi-node, the
                       expectation dashed (so a drop cannot hide behind a rescaled axis)
Plots use matplotlib's Agg backend; without matplotlib the report still gets written and says
that the plots were skipped. records is {host: record} as host_record.build_record makes them.
"""

import base64
import collections
import html
import os
import re

from ..capability import gpu_trial_report, links, node_check
from ..capability.registry import CAPABILITIES
from ..core import atomicfile
from ..judge import bandwidth, benchenv, ddp_step
from ..record import history
from ..render import markdown
from ..render.markdown import fmt, human_bytes, md_table, md_text, pct, safe_name, save_figure, size_axis
from ..store import results
from ..store.results import is_gpu_less
from . import aggregate, triage

SEVERITY_ORDER = ("critical", "warning", "info")
_NV = re.compile(r"^NV(\d+)$")
# Heatmap scale: higher is a better link. NV# maps above every PCIe class, by its bond width.
_CLASS_SCORE = {"SYS": 1, "SOC": 1, "NODE": 2, "PHB": 3, "PXB": 4, "PIX": 5}


def _count(findings):
    counts = dict.fromkeys(SEVERITY_ORDER, 0)
    for item in findings or []:
        counts[item.get("severity", "info")] = counts.get(item.get("severity", "info"), 0) + 1
    return counts


def _baseline_change(base):
    """'; against run X: torch multi_node 0.52 vs 0.55 GB/s at 16M, -5%': what a GPU-less node was
    compared on ('' when nothing)."""
    parts = [
        f"torch {name} {fmt(c['busbw'], 3)} vs {fmt(c['baseline_busbw'], 3)} GB/s at "
        f"{human_bytes(c['size'])}, {c['change'] * 100:+.0f}%"
        for name, c in sorted((base.get("torch") or {}).items())
    ]
    return f"; against run {base['run_id']}: {'; '.join(parts)}" if parts else ""


def _collective_part(name, coll):
    v = coll.get("verdict") or {}
    if v.get("expected_busbw"):
        measured = f"{fmt(v.get('measured_busbw'))}/{fmt(v.get('expected_busbw'))} GB/s"
        return f"{name} {v.get('verdict')} {measured}{_link_note(coll.get('of_link'))}"
    if v.get("verdict", "N/A") == "N/A" and v.get("reason"):
        return f"{name} N/A ({v['reason']})"
    return f"{name} {v.get('verdict', 'N/A')} {fmt(v.get('measured_busbw'))} GB/s"


def _torch_run_part(name, item):
    """'torch NAME (W ranks, backend) X GB/s at SIZE[ = R% of nccl-tests]', or None without figures."""
    size, busbw = links.largest_figure(item.get("rows") or [])
    if size is None:
        return None
    like = item.get("vs_nccl_tests") or {}
    of = f" = {pct(like.get('ratio'))} of nccl-tests" if like.get("ratio") is not None else ""
    run = f"torch {name} ({item.get('world_size')} ranks, {item.get('backend')})"
    return f"{run} {fmt(busbw, 3)} GB/s at {human_bytes(size)}{of}"


def _summary_parts(record):
    parts = [record["skipped"]] if record.get("skipped") else []
    parts += [_collective_part(n, c) for n, c in sorted((record.get("collectives") or {}).items())]
    parts += [p for n, i in sorted((record.get("torch") or {}).items()) if (p := _torch_run_part(n, i))]
    parts += ddp_step.summary(record)
    parts += gpu_trial_report.summary(record)
    modes = sorted({(f.get("env") or {}).get("mode") for f in _figures(record)} - {None})
    return parts + (["NCCL " + "+".join(modes)] if modes else [])


def summary_line(record):
    """One line per host for the end of the play (a quick check's record: node_check's line)."""
    said = results.verdict_said(record)
    if record.get("kind") == node_check.KIND:
        return node_check.summary_line(record, said)
    host = record.get("host", "?")
    parts = _summary_parts(record)
    if record.get("skipped") and len(parts) == 1:
        return f"{host}: {said} - {record['skipped']}"
    return f"{host}: {said} - " + _measured_note(record, parts)


def _measured_note(record, parts):
    """What a host measured, its findings' counts and what it was compared on."""
    counts = _count(record.get("findings"))
    return (
        ("; ".join(parts) or "nothing measured")
        + f"; findings {counts['critical']} critical/{counts['warning']} warning"
        + _baseline_change(results.read_baseline(record))
    )


def _link_note(of_link):
    """' (73% of the 478 GB/s NV18 link)' or ''."""
    of_link = of_link or {}
    if of_link.get("ratio") is None:
        return ""
    link = f"{of_link['link_gbps']:.0f} GB/s {of_link.get('link_class') or ''}".strip()
    return f" ({pct(of_link['ratio'])} of the {link} link)"


def _figures(record):
    """Every figure of a record (collectives, torch runs) as dicts carrying their "env"."""
    return list((record.get("collectives") or {}).values()) + list((record.get("torch") or {}).values())


def _draw_collective(ax, lat, name, coll, color):
    """One collective's busbw (and its expectation dashed) and time per operation; its raw link
    speed (None when unknown)."""
    points = links.figure_points(coll.get("rows") or [], name)
    if not points:
        return None
    ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", color=color, label=name)
    exp = (coll.get("expected") or {}).get("expected_busbw")
    if exp:
        ax.axhline(exp, color=color, linestyle="--", linewidth=1, label=f"{name} expected {exp:.0f}")
    _draw_times(lat, name, coll, color)
    return (coll.get("expected") or {}).get("link_gbps")


def _draw_times(lat, name, coll, color):
    """A collective's time per operation against size (nothing when no row has one)."""
    times = [(r["size"], _time(r)) for r in coll.get("rows") or [] if r.get("size") and _time(r)]
    if times:
        lat.plot([t[0] for t in times], [t[1] for t in times], marker=".", color=color, label=name)


def _plot_busbw(plt, record, path):
    colls = record.get("collectives") or {}
    if not any(c.get("rows") for c in colls.values()):
        return False
    fig, (ax, lat) = plt.subplots(1, 2, figsize=(12, 4.5), dpi=100)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    links = {
        _draw_collective(ax, lat, name, coll, colors[i % len(colors)])
        for i, (name, coll) in enumerate(sorted(colls.items()))
    }
    for link in sorted(links - {None, 0}):
        ax.axhline(link, color="black", linestyle=":", linewidth=1, label=f"raw link {link:.0f}")
    size_axis(ax, "bus bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{record.get('host')}: nccl-tests busbw, run {record.get('run_id')}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    size_axis(lat, "time per operation (us, best of out-of-place/in-place)")
    lat.set_yscale("log")
    lat.set_title("latency: small messages (tensor parallelism) live here", fontsize=9)
    lat.legend(fontsize=7, loc="upper left")
    save_figure(plt, fig, path)
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
    save_figure(plt, fig, path)
    return True


def judged_on(records):
    """The sentence saying what this run's verdicts were judged on, for the nodes it has: GPU
    nodes against their slowest GPU-GPU link, GPU-less nodes (results.is_gpu_less) on their gloo
    all-reduce against their own last passing run."""
    if records and all(r.get("kind") == node_check.KIND for r in records.values()):
        return (
            "Verdicts are the quick node check's: wireup-check compared each node with the baseline "
            "its last passing bench left on it (roles/node_check/README.md)."
        )
    judged = [r for r in records.values() if r.get("verdict") != "UNREACHABLE"]
    cpu = sorted(r.get("host", "?") for r in judged if is_gpu_less(r))
    gpu = [r for r in judged if not is_gpu_less(r) and (r.get("collectives") or r.get("torch"))]
    parts = [_gpu_judged_on(gpu, cpu)] if gpu else []
    if cpu:
        who = "Verdicts" if not gpu else "GPU-less nodes' verdicts"
        parts.append(
            f"{who} ({triage.names(cpu)}: no GPU) are taken on the torch.distributed gloo all-reduce over "
            "the network, against the node's own last passing run (bench_baseline_tolerance), not against a "
            "GPU link"
        )
    if not parts:
        return "No node measured anything to judge (roles/bench/README.md)."
    return "; ".join(parts) + " (roles/bench/README.md)."


def _gpu_judged_on(gpu, cpu):
    sizes = [int((r.get("thresholds") or {}).get("min_bytes") or bandwidth.ONE_GIB) for r in gpu]
    who = "Verdicts" if not cpu else f"GPU nodes' verdicts ({len(gpu)})"
    return (
        f"{who} are taken at the largest message size >= {bandwidth.human_bytes(min(sizes))} against the "
        "expected bus bandwidth of the node's slowest GPU-GPU link"
    )


def _severity_rank(item):
    severity = item.get("severity", "info")
    return SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else 9


def _summary_row(host, record):
    topo = record.get("topology") or {}
    c = _count(record.get("findings"))
    return [
        host,
        record.get("verdict", "N/A"),
        topo.get("gpu_count", len(topo.get("gpus") or [])),
        "/".join(topo.get("link_classes") or []) or "-",
        f"{c['critical']}/{c['warning']}/{c['info']}",
        results.baseline_said(results.read_baseline(record)),
        record.get("skipped") or "",
    ]


def baseline_sentence(records):
    """'Baseline: node1, node2: baseline recorded (first passing run: nothing compared).': what
    each host's verdict was compared with, on the report's first screen beside the counts."""
    hosts = collections.defaultdict(list)
    for host, record in sorted(records.items()):
        hosts[results.baseline_said(results.read_baseline(record))].append(host)
    return "Baseline: " + "; ".join(f"{triage.names(names)}: {said}" for said, names in hosts.items()) + "."


def _opening_part(run_id, records, plot_note):
    """The title, the run's counts and what verdicts were judged on, then what failed (the first
    screen at any fleet size: report/triage.py)."""
    out = [("h", (1, _title(run_id, records)))]
    counts = f"{len(records)} host(s): {_verdict_counts(records)}. {baseline_sentence(records)} "
    out.append(("p", counts + judged_on(records)))
    out += triage.failed_sections(records)
    return out + ([("p", plot_note)] if plot_note else [])


def _summary_part(records):
    """Every host's line."""
    rows = [_summary_row(host, record) for host, record in sorted(records.items())]
    header = ["host", "verdict", "GPUs", "links", "findings (crit/warn/info)", "baseline", "note"]
    return [("h", (2, "Summary")), ("table", (header, rows))]


def _title(run_id, records):
    quick = records and all(r.get("kind") == node_check.KIND for r in records.values())
    return f"wireup {'quick check' if quick else 'bench'} report: run {run_id}"


def _verdict_counts(records):
    """'2 PASS, 1 WARN': how many hosts got each verdict."""
    counts = collections.Counter(record.get("verdict", "N/A") for record in records.values())
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))


_COLLECTIVE_HEADER = [
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
]


def _collective_row(name, coll):
    v = coll.get("verdict") or {}
    e = coll.get("expected") or {}
    link = coll.get("of_link") or {}
    return [
        name,
        v.get("verdict", "N/A"),
        human_bytes(v.get("size")) if v.get("size") else "-",
        fmt(v.get("measured_busbw")),
        fmt(e.get("expected_busbw")),
        pct(v.get("ratio")),
        fmt(link.get("link_gbps")),
        pct(link.get("ratio")),
        (coll.get("env") or {}).get("mode", "-"),
        v.get("reason", ""),
    ]


def _collectives_sections(record):
    """A host's nccl-tests table, what "of expected" and "of raw link" mean, the expectation's basis."""
    colls = record.get("collectives") or {}
    if not colls:
        return []
    out = [
        (
            "table",
            (_COLLECTIVE_HEADER, [_collective_row(name, coll) for name, coll in sorted(colls.items())]),
        ),
        (
            "p",
            '"of expected" judges the verdict against factors calibrated on known-good hardware '
            "(partly circular on the machine kind they were fitted on); "
            '"of raw link" is the busbw against the bottleneck link\'s raw speed: '
            "what the hardware could do (roles/bench/README.md).",
        ),
    ]
    basis = {(c.get("expected") or {}).get("basis") for c in colls.values()} - {None, ""}
    if basis:
        out.append(("p", "Expectation: " + "; ".join(sorted(basis))))
    return out


def _host_sections(host, record, plots):
    """One host's part: versions, its skip note, nccl-tests, environments, its plots."""
    out = [("h", (2, f"{host}: {record.get('verdict', 'N/A')}")), *_versions_sections(record)]
    if record.get("skipped"):
        out.append(("p", record["skipped"]))
    out += _collectives_sections(record)
    out += _env_sections(record)
    return out + _host_plot_sections(host, plots)


def _versions_sections(record):
    versions = record.get("versions") or {}
    if not versions:
        return []
    return [("p", "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()) if v))]


def _host_plot_sections(host, plots):
    """A host's busbw and topology plots (those drawn)."""
    out = []
    if plots.get(("busbw", host)):
        out.append(("img", (plots[("busbw", host)], f"busbw and latency vs size on {host}")))
    if plots.get(("topology", host)):
        out.append(("img", (plots[("topology", host)], f"topology of {host}")))
    return out


def _hosts_part(records, plots):
    """Each host's figures (a quick check's record has none: its part is node_check's)."""
    return [
        section
        for host, record in sorted(records.items())
        if record.get("kind") != node_check.KIND
        for section in _host_sections(host, record, plots)
    ]


def _findings_part(records, shown):
    """Every finding of the hosts shown in detail, critical first; the others' by code."""
    rows = [
        _finding_row(host, item)
        for host in shown
        for item in sorted(records[host].get("findings") or [], key=_severity_rank)
    ]
    out = [("h", (2, "Findings"))]
    out.append(
        ("table", (["host", "severity", "source", "code", "finding"], rows)) if rows else ("p", "None.")
    )
    others = triage.findings_by_code(records, sorted(set(records) - set(shown)))
    if others:
        header = ["severity", "source", "code", "nodes", "which"]
        out += [("p", "The other nodes' findings, by code:"), ("table", (header, others))]
    return out


def _finding_row(host, item):
    return [
        host,
        item.get("severity", ""),
        item.get("source", "topology"),
        item.get("code", ""),
        item.get("message", ""),
    ]


def _capability_parts(registry, records, plots):
    """Each capability's part of the report (capability/registry.py), in the registry's order."""
    return [section for cap in registry if cap.report for section in cap.report(records, plots)]


def _sections(run_id, records, plots, plot_note, *, registry=CAPABILITIES, detail="auto"):
    """The report as a list of (kind, payload): ('h', (level, text)), ('p', text),
    ('table', (header, rows)), ('img', (file, alt))): the counts and what failed, the fleet in
    aggregate, the summary, the detail (triage.detail_hosts: each host's figures, each
    capability's part, the registry's), the findings (which list every capability's)."""
    shown = triage.detail_hosts(records, detail)
    note = triage.detail_note(records, detail, shown, triage.plotted_hosts(records, detail))
    detailed = {host: records[host] for host in shown}
    return [
        *_opening_part(run_id, records, plot_note),
        *aggregate.sections(records, plots),
        *_summary_part(records),
        *([("p", note)] if note else []),
        *_hosts_part(detailed, plots),
        *_capability_parts(registry, detailed, plots),
        *_findings_part(records, shown),
    ]


def _env_sections(record):
    """The environment of every figure of a host, the tuned env file, default vs tuned."""
    out = _figure_env_sections(record)
    tuned_line = benchenv.describe_tuned(record.get("tuned_env"))
    if tuned_line:
        out.append(("p", tuned_line))
    return out + _tuning_sections(record)


def _figure_env_sections(record):
    """One table of the environments the figures ran with (figures of one environment together)."""
    groups = {}
    for name, coll in sorted((record.get("collectives") or {}).items()):
        groups.setdefault(benchenv.describe_figure_env(coll.get("env")), []).append(f"nccl-tests {name}")
    for name, item in sorted((record.get("torch") or {}).items()):
        groups.setdefault(benchenv.describe_figure_env(item.get("env")), []).append(f"torch {name}")
    tuning = record.get("tuning") or {}
    if tuning.get("candidates"):
        default = {"mode": "default", "vars": tuning.get("env") or {}, "seen": None}
        groups.setdefault(benchenv.describe_figure_env(default), []).append(
            "all_reduce default vs other settings (each adds its own)"
        )
    if groups:
        header = ["figures", "environment they ran with (what the process saw, where it said)"]
        rows = [[", ".join(names), text] for text, names in sorted(groups.items(), key=lambda g: g[1])]
        return [("table", (header, rows))]
    if record.get("env"):
        return [("p", "Environment: " + benchenv.format_env(record["env"]))]
    return []


def _tuning_row(cand, default, tuned_values):
    env = cand.get("env") or {}
    busbw = cand.get("busbw")
    label = "default NCCL" if not env else benchenv.format_env(env)
    if env and env == tuned_values:
        label += " (tuned env file)"
    change = "-" if busbw is None or not default or not env else f"{(busbw / default - 1) * 100:+.1f}%"
    return [label, fmt(busbw), change]


def _tuning_sections(record):
    """all_reduce at the top size with default NCCL beside the other settings, and the stored winner."""
    tuning = record.get("tuning") or {}
    if not tuning.get("candidates"):
        return []
    tuned_values = (record.get("tuned_env") or {}).get("values")
    rows = [_tuning_row(c, tuning.get("default_busbw"), tuned_values) for c in tuning["candidates"]]
    sweep = tuning.get("mode", "sweep") == "sweep"
    rule = (
        f" (sweep: a setting must gain > {tuning.get('min_gain', 0.02) * 100:.0f}% to be stored)"
        if sweep
        else ""
    )
    out = [
        ("p", f"all_reduce at {tuning.get('size', '')}, default and tuned NCCL side by side{rule}:"),
        ("table", (["NCCL settings", "busbw GB/s", "vs default"], rows)),
    ]
    if tuning.get("best") and sweep:
        out.append(
            (
                "p",
                f"NCCL tuning: best {benchenv.format_env(tuning['best'])} "
                f"({fmt(tuning.get('best_busbw'))} GB/s vs {fmt(tuning.get('default_busbw'))} GB/s "
                f"default) written to {tuning.get('path', '')}",
            )
        )
    return out


def _render_md(sections):
    lines = [line for kind, payload in sections for line in _md_section(kind, payload)]
    return "\n".join(lines).rstrip() + "\n"


def _md_section(kind, payload):
    """A section's Markdown lines, each section followed by a blank line."""
    if kind == "h":
        return ["#" * payload[0] + " " + md_text(payload[1]), ""]
    if kind == "p":
        return [md_text(payload), ""]
    if kind == "table":
        return [*md_table(*payload), ""]
    if kind == "img":
        return [f"![{md_text(payload[1])}]({safe_name(payload[0])})", ""]
    return []


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:0.9em}th,td{border:1px solid #ccc;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f2f2f2}img{max-width:100%;display:block;margin:1em 0}
.PASS{background:#d8f5d0}.WARN{background:#fff2c2}.FAIL,.critical{background:#f8d0d0}.warning{background:#fff2c2}"""


_HTML_CLASSES = {"PASS", "WARN", "FAIL", "critical", "warning"}


def _html_cell(value):
    text = "" if value is None else str(value)
    cls = f' class="{text}"' if text in _HTML_CLASSES else ""
    return f"<td{cls}>{html.escape(text)}</td>"


def _html_table(header, rows):
    """A table, each verdict and severity cell carrying its colour class."""
    lines = ["<table><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr>"]
    lines += ["<tr>" + "".join(_html_cell(value) for value in row) + "</tr>" for row in rows]
    return "\n".join([*lines, "</table>"])


def _render_html(sections, run_dir):
    esc = html.escape
    body = [_html_section(kind, payload, run_dir) for kind, payload in sections]
    body = [text for text in body if text is not None]
    title = esc(sections[0][1][1])
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _html_section(kind, payload, run_dir):
    """A section as HTML (None for an unknown kind); an image is embedded from its PNG."""
    if kind == "h":
        return f"<h{payload[0]}>{html.escape(payload[1])}</h{payload[0]}>"
    if kind == "p":
        return f"<p>{html.escape(payload)}</p>"
    if kind == "table":
        return _html_table(*payload)
    if kind == "img":
        return _html_img(payload, run_dir)
    return None


def _html_img(payload, run_dir):
    with open(os.path.join(run_dir, payload[0]), "rb") as handle:
        data = base64.b64encode(handle.read()).decode("ascii")
    return f'<img alt="{html.escape(payload[1])}" src="data:image/png;base64,{data}">'


def _draw_plots(plt, records, run_dir, registry, detail):
    """{(kind, host or key): PNG file name} of every plot drawn into run_dir: the plotted hosts'
    own and the capabilities' (triage.plotted_hosts), the fleet's chart above a small fleet."""
    plotted = {host: records[host] for host in triage.plotted_hosts(records, detail)}
    usual = triage.usual_topology(records)
    plots = {}
    for host, record in plotted.items():
        plots.update(_draw_host_plots(plt, host, record, run_dir, triage.topology_drawn(record, usual)))
    for cap in registry:
        if cap.plots:
            plots.update(cap.plots(plt, plotted, run_dir))
    if len(records) > triage.SMALL_FLEET:
        plots.update(aggregate.plots(plt, records, run_dir))
    return plots


def _draw_host_plots(plt, host, record, run_dir, topology=True):
    """{(kind, host): PNG file name} of a host's busbw and (unless not ``topology``) topology
    plots that were drawn."""
    plots = {}
    for kind, draw in (("busbw", _plot_busbw), ("topology", _plot_topology)):
        name = f"{kind}_{safe_name(host)}.png"
        if (kind == "busbw" or topology) and draw(plt, record, os.path.join(run_dir, name)):
            plots[(kind, host)] = name
    return plots


def write_report(run_dir, run_id, records, *, registry=CAPABILITIES, detail="auto", context=None):
    """Write report.md, report.html and the PNGs into run_dir; return {md, html, pngs, plots}.
    registry: the capabilities whose parts and plots the report has (capability/registry.py);
    detail: bench_report_detail, the nodes shown in detail (report/triage.py; ValueError naming
    the variable for anything but judge/bench_settings.REPORT_DETAIL); context: what the report
    reads beyond the records (capability/context.Reporting: the results folder, whose history the
    History section shows, and the time; None: the section says the history was not read)."""
    triage.check_detail(detail)
    plt = markdown.pyplot()
    plots = _draw_plots(plt, records, run_dir, registry, detail) if plt is not None else {}
    note = "" if plt is not None else "Plots skipped: matplotlib is not installed in the controller's Python."
    sections = [
        *_sections(run_id, records, plots, note, registry=registry, detail=detail),
        *history.report_sections(context, sorted(records)),  # last: the fleet's, not this run's
    ]
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
