"""The torch capability (torch.distributed all-reduce, single node and multi-node): the record's
``torch`` section (section: each run's rows, its verdict against the expectation and its ratio to
nccl-tests' all_reduce, read from the links section before it) and its problem check (problem)."""

from __future__ import annotations

from ..judge import bandwidth, benchenv
from ..probe import bench_output
from ..probe.health import finding
from . import links


def _torch_vs_nccl_tests(torch_rows, coll, goal):
    """torch busbw / nccl-tests all_reduce busbw at the same size: the nccl-tests verdict's size when
    torch measured it, else the largest size both measured. None without a common size."""
    if not coll or not coll.get("rows"):
        return None
    size = links.compare_size(torch_rows, coll["rows"], (coll.get("verdict") or {}).get("size"))
    if size is None:
        return None
    mine, theirs = links.row_busbw(torch_rows, size), links.row_busbw(coll["rows"], size)
    ratio = bandwidth.ratio(mine, theirs)
    return {"size": size, "torch_busbw": mine, "nccl_tests_busbw": theirs, "ratio": ratio, "goal": goal}


def _env_mismatch(name, seen, tuned_used):
    """bench_env_mismatch: the launch script sourced a tuned env although the run asked for default
    NCCL, or the other way round (the figure would be labelled with the wrong environment)."""
    if not seen or bool(seen["tuned_env"]) == bool(tuned_used):
        return []
    return [
        finding("warning", "bench_env_mismatch", _env_mismatch_message(name, seen, tuned_used), source="env")
    ]


def _env_mismatch_message(name, seen, tuned_used):
    if seen["tuned_env"]:
        return (
            f"torch {name} ran with the tuned NCCL env {seen['tuned_env']} although this run measures "
            "default NCCL (bench_use_tuned_env=false)"
        )
    return (
        f"torch {name} sourced no tuned NCCL env although this run measures with "
        f"{(tuned_used or {}).get('path')} (bench_use_tuned_env=true)"
    )


def _judge_single_node_torch(entry, rows, record, ctx):
    """A GPU node's own torch all-reduce: its verdict against the expectation and its ratio to
    nccl-tests' all_reduce; (findings, verdicts)."""
    goal = ctx.limits.torch_goal
    expected = bandwidth.expected_busbw(ctx.topology, "all_reduce", ctx.efficiency)
    entry["expected"] = expected
    entry["verdict"] = bandwidth.verdict(rows, expected, **links.verdict_limits(ctx.limits))
    entry["of_link"] = links.link_ratio(entry["verdict"].get("measured_busbw"), expected)
    like = entry["vs_nccl_tests"] = _torch_vs_nccl_tests(rows, record["collectives"].get("all_reduce"), goal)
    findings = []
    if like and like["ratio"] is not None and like["ratio"] < goal:
        findings.append(
            finding(
                "warning",
                "bench_torch_below_nccl_tests",
                f"torch all_reduce {like['torch_busbw']:.1f} GB/s at {bandwidth.human_bytes(like['size'])} "
                f"is {like['ratio'] * 100:.0f}% of nccl-tests' {like['nccl_tests_busbw']:.1f} GB/s "
                f"(goal >= {goal * 100:.0f}%)",
                source="torch",
            )
        )
    findings += [f for f in [links.verdict_finding(entry["verdict"], "torch all_reduce")] if f]
    return findings, [entry["verdict"]["verdict"]]


def _implausible_rows(rows, expected=None):
    """The first busbw of a torch run's rows that cannot be real (bandwidth.implausible), at its size;
    '' when none. A GPU-less node's gloo run has no link to bound it: only non-finite figures."""
    for row in rows or []:
        for half in ("out_of_place", "in_place"):
            why = bandwidth.implausible((row.get(half) or {}).get("busbw"), expected)
            if why:
                return f"{why} at {bandwidth.human_bytes(row.get('size'))}"
    return ""


def _torch_data_findings(name, entry, rows):
    """bench_implausible (a figure no link can carry, unless the verdict said so already) and
    bench_wrong_results: each FAILs the host."""
    findings = []
    odd = _implausible_rows(rows, entry.get("expected"))
    if odd and not (entry.get("verdict") or {}).get("reason", "").startswith("FAIL (implausible"):
        findings.append(
            finding(
                "critical", "bench_implausible", f"torch {name}: FAIL (implausible: {odd})", source="torch"
            )
        )
    wrong = sum(int((r.get("in_place") or {}).get("wrong") or 0) for r in rows)
    if wrong:
        findings.append(
            finding(
                "critical", "bench_wrong_results", f"torch {name}: {wrong} wrong elements", source="torch"
            )
        )
    return findings, ["FAIL"] * len(findings)


def _torch_entry(name, text, record, ctx):
    """(entry, findings, verdicts) of one torch benchmark log; entry None when it printed no result."""
    try:
        parsed = bench_output.parse_torch(text or "")
    except ValueError:
        message = f"torch {name} benchmark printed no result line"
        return None, [finding("warning", "bench_torch_no_results", message, source="torch")], []
    config = parsed["config"]
    entry = {
        "rows": parsed["rows"],
        "world_size": config.get("world_size"),
        "backend": config.get("backend"),
        "nnodes": config.get("nnodes"),
        "torch_version": parsed.get("torch_version", ""),
        "nccl_version": parsed["nccl_version"],
    }
    seen = benchenv.torch_log_env(text)
    entry["env"] = benchenv.figure_env(ctx.torch_env, ctx.tuned_used, seen["vars"] if seen else None)
    findings, verdicts = _env_mismatch(name, seen, ctx.tuned_used), []
    if name == "single_node" and entry["backend"] == "nccl":
        found, judged = _judge_single_node_torch(entry, parsed["rows"], record, ctx)
        findings, verdicts = findings + found, verdicts + judged
    found, judged = _torch_data_findings(name, entry, parsed["rows"])
    return entry, findings + found, verdicts + judged


def section(node, record, ctx):
    """The record's torch: each torch.distributed all-reduce run (single_node, multi_node)."""
    part, findings, verdicts = {}, [], []
    for name, text in sorted((node.get("torch") or {}).items()):
        entry, found, judged = _torch_entry(name, text, record, ctx)
        findings += found
        verdicts += judged
        if entry is not None:
            part[name] = entry
    return part, findings, verdicts


def problem(record):
    """What makes the record's torch runs unusable ('' when nothing): links.figures_problem's."""
    return links.figures_problem(record, "torch")
