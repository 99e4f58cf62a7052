"""The node_check role's plan (issue 26) and the quick check as a capability of the host record
and the report. Pure Python, stdlib only (wireup-check, judge/quick.py and check/run.py, runs this
package on the nodes; this module runs on the controller).

- plan: what the role does on one node: wireup-check's settings file (check.json) and the
  command lines it runs (the quick check, the baseline after a bench, the bench's textfile).
- read_store: what the controller's store gives a node after a bench: the bench part of its
  baseline (only when its newest bench record PASSed) and its figures for node_exporter;
  baseline_line: what became of the baseline, in one line.
- result: what a node's ``wireup-check --json`` printed, as the controller keeps it (nothing a
  node printed is trusted: verdicts it does not know are ERROR, text is cut to one line).
- section, summary_line and report_sections (node_check's entry in capability/registry.py): a quick run
  (``bench.yml --tags quick``) is stored and reported like a bench run, by bench_report, under
  ``results/quick/<run id>/`` (kind quick), never under ``results/bench/``. The launch gate
  (record/gate.py, per capability) reads it as the capability node_check only: a quick FAIL newer than
  the node's last bench that measured its links refuses the node, and a quick PASS never hides a
  bench FAIL (it says nothing of the links, torch, stepcost or the GPU trial).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TypedDict

from ..capability.node_check import one_line
from ..core.watchsettings import size_bytes
from ..judge import quick
from ..launch.slurm import node_name
from ..report import metrics


@dataclasses.dataclass(frozen=True)
class CheckSettings:
    """The node_check_* settings the plan reads, by name without the prefix (a misspelt or
    missing one is a TypeError)."""

    path: str
    config: str
    baseline: str
    textfile_dir: str
    textfile: str
    nvidia_smi: str
    require_baseline: bool
    timeout: int
    bench: bool
    bench_bytes: str
    bench_tolerance: float
    bench_iterations: int
    drain_max_share: int  # wireup_drain_max_share (the blast radius, issue 37)
    drain_max_nodes: int  # wireup_drain_max_nodes


class BenchConfig(TypedDict):
    run: bool
    size: int
    tolerance: float
    iterations: int


class CheckConfig(TypedDict):
    """check.json (run.DEFAULTS' keys)."""

    host: str
    baseline: str
    textfile_dir: str
    textfile: str
    nvidia_smi: str
    require_baseline: bool
    timeout: int
    slurm_node: str
    drain_max_share: int
    drain_max_nodes: int
    bench: BenchConfig


class NodeCheckPlan(TypedDict):
    """plan's answer: config (check.json's content), quick_argv (``bench.yml --tags quick``),
    baseline_argv (after a passing bench, the bench part on stdin), textfile_argv (the bench's
    figures on stdin)."""

    config: CheckConfig
    quick_argv: list[str]
    baseline_argv: list[str]
    textfile_argv: list[str]


class StoreRead(TypedDict):
    """read_store's answer: bench_part (quick.BenchPart; {} when the newest bench record did
    not PASS or there is none), textfile (wireup_bench.prom's text, '' when the store has nothing
    for the node), textfiles (the texts to write, the list the write loops over: [textfile], or []
    when it is '' or node_check_textfile is never), note (why no baseline is written, '' when one
    is)."""

    bench_part: quick.BenchPart
    textfile: str
    textfiles: list[str]
    note: str


def plan(host, node, settings, *, check_mode=False) -> NodeCheckPlan:
    """Every decision of the role on one node. node: wireup_node (its hostname is the node's
    Slurm name: slurm.node_name, the drain's rule; nvidia-smi where preflight found it);
    settings: CheckSettings. In check mode the quick check writes no textfile."""

    facts = node or {}
    config = {
        "host": str(host),
        "baseline": settings.baseline,
        "textfile_dir": settings.textfile_dir,
        "textfile": settings.textfile,
        "nvidia_smi": settings.nvidia_smi or str((facts.get("gpu") or {}).get("nvidia_smi") or ""),
        "require_baseline": bool(settings.require_baseline),
        "timeout": int(settings.timeout),
        "slurm_node": node_name(str(host), facts),
        "drain_max_share": int(settings.drain_max_share),
        "drain_max_nodes": int(settings.drain_max_nodes),
        "bench": {
            "run": False,
            "size": size_bytes(settings.bench_bytes),
            "tolerance": float(settings.bench_tolerance),
            "iterations": int(settings.bench_iterations),
        },
    }
    head = [settings.path, "--config", settings.config]
    return {
        "config": config,
        "quick_argv": [
            *head,
            "--json",
            *(["--bench"] if settings.bench else []),
            *(["--textfile", "never"] if check_mode else []),
        ],
        "baseline_argv": [*head, "--write-baseline", "--json"],
        "textfile_argv": [*head, "--write-textfile", "wireup_bench.prom", "--json"],
    }


def read_store(results_dir, host, *, build=None, size="1G", textfile="auto") -> StoreRead:
    """The baseline's bench part from the host's newest bench record when it PASSed (the baseline
    of the last passing bench stays otherwise) and wireup_bench.prom's text, from the store;
    textfile: node_check_textfile (never: no text to write)."""
    latest = metrics.latest_record(str(results_dir), str(host))
    part, note = {}, ""
    if not latest:
        note = "no bench record of it in the store"
    elif latest["verdict"] != "PASS":
        note = f"its latest bench record ({latest['run_id']}) is {latest['verdict']}, not PASS"
    else:
        part = quick.bench_part(latest["record"], dict(build or {}), size_bytes(size))
    text = metrics.controller_text(str(results_dir), str(host))
    return {
        "bench_part": part,
        "textfile": text,
        "textfiles": [text] if text and textfile != "never" else [],
        "note": note,
    }


def baseline_line(read: StoreRead, written, host, *, check_mode=False) -> str:
    """The line after the baseline step: wireup-check's own line where it ran (written: the step's
    registered result, its stdout wireup-check's JSON), else why the baseline was not written: check
    mode (the step would have run) or read_store's note (it kept the old one)."""
    stdout = str((written or {}).get("stdout") or "")
    if stdout:
        return (
            _said_line(stdout)
            or f"wireup-check: baseline of {host}: no line in its answer: {one_line(stdout)[:200]}"
        )
    if check_mode and read.get("bench_part"):
        return f"wireup-check: baseline of {host} not written (check mode)"
    return f"wireup-check: baseline of {host} kept: {read.get('note', '')}"


def _said_line(stdout: str) -> str:
    """The line of wireup-check's JSON answer, as one line of text ('' when there is none): the
    node printed it, so it is not trusted to be JSON, a mapping or one line."""
    try:
        said = json.loads(stdout)
    except ValueError:
        return ""
    return one_line(said.get("line")) if isinstance(said, dict) and said.get("line") else ""
