"""The links capability (nccl-tests collectives, issue 1): the record's ``collectives`` section
(section: each collective judged against the expectation of the node's links), its problem check
(problem), and the figure rules the other capabilities share (row_busbw, compare_size,
link_ratio, verdict_finding, verdict_limits, figures_problem)."""

from __future__ import annotations

from ..core import checks
from ..judge import bandwidth, benchenv
from ..probe import bench_output
from ..probe.health import finding
from . import context

# ---------------------------------------------------------------- one host's record
_VERDICT_SEVERITY = {"FAIL": "critical", "WARN": "warning"}


def row_busbw(rows, size, collective="all_reduce"):
    # The one rule for a collective's figure at a size (the verdict's): bench_output.figure.
    return bench_output.figure(rows, size, collective)


def compare_size(cur_rows, base_rows, preferred, collective="all_reduce"):
    """The size the verdict was taken at when both runs have it, else the largest common size."""
    common = set(bench_output.figure_sizes(cur_rows, collective)) & set(
        bench_output.figure_sizes(base_rows, collective)
    )
    if preferred in common:
        return preferred
    return max(common) if common else None


def link_ratio(measured, expected):
    """Measured busbw against the raw bottleneck link speed (not the calibrated expectation):
    {link_gbps, link_class, ratio}; ratio None when either is unknown."""
    link = (expected or {}).get("link_gbps")
    ratio = bandwidth.ratio(measured, link)
    return {"link_gbps": link, "link_class": (expected or {}).get("link_class"), "ratio": ratio}


def verdict_finding(judged, label):
    """The finding of a FAIL or WARN verdict against the expectation (None for PASS and N/A)."""
    severity = _VERDICT_SEVERITY.get(judged["verdict"])
    if not severity:
        return None
    return finding(severity, _verdict_code(judged), f"{label}: {judged['reason']}", source="expectation")


def _verdict_code(judged):
    return (
        "bench_implausible"
        if judged.get("reason", "").startswith("FAIL (implausible")
        else "bench_below_expected"
    )


def _nccl_tests_entry(name, item, ctx):
    """One collective's record entry: its rows, nccl-tests' own problems, the verdict."""
    expected = bandwidth.expected_busbw(ctx.topology, name, ctx.efficiency)
    # -J JSON has full precision (a cut-off JSON falls back to the text); the exit code, the
    # footer and failure lines say whether nccl-tests itself trusted the run. The text output is
    # kept for audits and re-judging (the -J JSON carries the whole process environment, so it is
    # parsed but not stored).
    run = bench_output.assess(item.get("output") or "", item.get("rc"), item.get("json") or "")
    parsed = run["parsed"]
    rows = parsed["rows"] if parsed else []
    entry = {
        "expected": expected,
        "rc": item.get("rc"),
        "output": item.get("output") or "",
        "env": benchenv.figure_env(ctx.nccl_env, ctx.tuned_used, benchenv.nccl_json_env(item.get("json"))),
        "rows": rows,
        "problems": run["problems"],
        "verdict": bandwidth.verdict(
            rows, expected, problems=run["problems"], collective=name, **verdict_limits(ctx.limits)
        ),
    }
    if parsed:
        entry.update(
            format=parsed["format"],
            # nccl-tests' "Avg bus bandwidth": the mean over ALL sizes, 8 B included, not a result.
            avg_busbw_all_sizes=parsed["avg_busbw"],
            nccl_version=parsed["nccl_version"],
            nccl_tests_version=parsed["version"],
            ngpus=parsed["config"].get("ngpus"),
        )
    entry["of_link"] = link_ratio(entry["verdict"].get("measured_busbw"), expected)
    return entry


def verdict_limits(limits):
    return {"pass_ratio": limits.pass_ratio, "warn_ratio": limits.warn_ratio, "min_bytes": limits.min_bytes}


def section(node, record, ctx):
    """The record's collectives: each nccl-tests collective judged against the expectation."""
    part, findings, verdicts = {}, [], []
    for name, item in sorted((node.get("nccl_tests") or {}).items()):
        entry = _nccl_tests_entry(name, item, ctx)
        part[name] = entry
        verdicts.append(entry["verdict"]["verdict"])
        findings += [f for f in [verdict_finding(entry["verdict"], name)] if f]
    return part, findings, verdicts


def _rows_problem(rows, where):
    if not isinstance(rows, list):
        return f"{where}.rows is {context.type_name(rows)}, not a list"
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            return f"{where}.rows[{i}] is {context.type_name(row)}, not an object"
        if row.get("size") is not None and (
            isinstance(row["size"], bool) or not isinstance(row["size"], int)
        ):
            return f"{where}.rows[{i}].size is {context.type_name(row['size'])}, not a whole number"
        for half in ("out_of_place", "in_place"):
            part = row.get(half)
            if part is None:
                continue
            if not isinstance(part, dict):
                return f"{where}.rows[{i}].{half} is {context.type_name(part)}, not an object"
            for key in ("busbw", "algbw", "time_us"):
                value = part.get(key)
                if value is not None and not checks.is_finite_number(value):  # where: only then
                    return context.number_problem(value, f"{where}.rows[{i}].{half}.{key}")
    return ""


def figures_problem(record, part):
    """What makes the record's figures of this part (collectives, torch) unusable ('' when nothing):
    an entry that is not an object, rows of the wrong shape, a busbw that is not a finite number or
    above what its link can carry (bandwidth.implausible)."""
    for name, entry in sorted((record.get(part) or {}).items()):
        where = f"{part}.{name}"
        if not isinstance(entry, dict):
            return f"{where} is {context.type_name(entry)}, not an object"
        found = _rows_problem(entry.get("rows") or [], where)
        if found:
            return found
        for key in ("verdict", "expected"):
            if entry.get(key) is not None and not isinstance(entry[key], dict):
                return f"{where}.{key} is {context.type_name(entry[key])}, not an object"
        judged = entry.get("verdict") or {}
        found = context.number_problem(judged.get("measured_busbw"), f"{where}.verdict.measured_busbw")
        if found:
            return found
        ceiling = bandwidth.implausible(judged.get("measured_busbw"), entry.get("expected"))
        if ceiling:
            return f"{where}: {ceiling}"
    return ""


def problem(record):
    """What makes the record's collectives unusable ('' when nothing): figures_problem's."""
    return figures_problem(record, "collectives")


def figure_points(rows, collective="all_reduce"):
    """[(size, busbw)] of a collective's figure at each size (bench_output.figure: the verdict's rule)."""
    return [
        (size, bench_output.figure(rows, size, collective))
        for size in bench_output.figure_sizes(rows, collective)
    ]


def largest_figure(rows, collective="all_reduce"):
    """(size, busbw) of the figure at the largest size, or (None, None)."""
    points = figure_points(rows, collective)
    return points[-1] if points else (None, None)
