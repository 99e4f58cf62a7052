"""The stepcost capability (the DDP step benchmark, issue 16): the record's ``stepcost`` section
(section: judge/ddp_step.judge_host against the last passing run) and its problem check (problem)."""

from __future__ import annotations

from ..judge import ddp_step


def section(node, record, ctx):
    """The record's stepcost: the DDP step benchmark (issue 16) against the last passing run."""
    return ddp_step.judge_host(node.get("stepcost"), record, ctx.baseline, ctx.limits.tolerance)


def problem(record):
    """A stepcost scope that is not a list of objects, or hooks that are not an object ('' when none)."""
    for scope, figures in sorted((record.get("stepcost") or {}).items()):
        if not isinstance(figures, list) or not all(isinstance(f, dict) for f in figures):
            return f"stepcost.{scope} is not a list of objects"
        if not all(isinstance(f.get("hooks", {}), dict) for f in figures):
            return f"stepcost.{scope}[].hooks is not an object"
    return ""
