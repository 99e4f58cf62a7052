"""The one registry of capabilities (issue 36): each capability declared once, with its record
section, its problem check, its report part and plots, its gate rule, its preflight rule and its
variable prefix. The lists that used to name every capability are reads of CAPABILITIES:

* record/host_record.py: build_record's sections (``sections``), record_problem (``problems``,
  ``record_parts``);
* report/assemble.py: the report's parts between the hosts and the findings (``report``) and the
  plots (``plots``);
* record/gate.py: what a record measured (``measured``), the parts' own verdicts (``verdict``),
  the gate's capability names (``names``);
* plans/preflight.py: host_errors' capability rules (``preflight``) and variable_prefixes
  (``prefix``), which filter/wireup_validate.py reads.

Each consumer takes the registry as a keyword argument defaulting to CAPABILITIES, so a test can
hand it a copy with one more entry (tests/unit/test_registry.py). docs/DEVELOPING.md, "Adding a
capability", says how one joins.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..judge.bench_settings import bench_errors
from ..judge.gpu_trial_settings import settings_errors as gpu_trial_errors
from . import (
    drift,
    gpu_trial,
    gpu_trial_report,
    links,
    node_check,
    stepcost,
    stepcost_report,
    torch,
    torch_report,
)

# What a record part's own verdict may be (a GPU trial's; N/A is no verdict of the gate's).
PART_VERDICTS = ("PASS", "WARN", "FAIL", "N/A")


@dataclasses.dataclass(frozen=True)
class Capability:
    """One capability. ``name`` is the gate's; ``part`` the host record's key it writes ('' for a
    capability judged inside another's part, as gpu_health inside gpu_trial's). Every callable is
    optional (None: the capability has none of it):

    section(node, record, ctx: context.Judging) -> (part, findings, verdicts): its record section,
        run in the registry's order (a later one may read an earlier one's part);
    problem(record) -> str: what makes a stored record's part unusable ('' when nothing);
    report(records, plots) -> [section]: its part of the report (('h', (level, text)), ('p', text),
        ('table', (header, rows)), ('img', (file, alt)));
    plots(plt, records, run_dir) -> {key: PNG file name}: the plots its report part shows;
    measured(record, kind) -> bool: the gate's rule, whether a record of this kind measured it;
    verdict(record) -> str | None: the verdict its part gives itself (None: the record's counts);
    preflight(values) -> [error]: its role's settings rule, given the variables with ``prefix``;
    prefix: its role's variable prefix ('bench_': the bench role's, whose rule links holds);
    keep_empty: whether a record keeps the part when its section made none ({}); False for a part
        that only some runs judge (drift), so the records of the others stay as they were.
    """

    name: str
    part: str = ""
    section: Callable | None = None
    problem: Callable | None = None
    report: Callable | None = None
    plots: Callable | None = None
    measured: Callable | None = None
    verdict: Callable | None = None
    preflight: Callable | None = None
    prefix: str = ""
    keep_empty: bool = True


def _bench_part(part):
    """The gate's rule of a bench capability: a bench record whose part is not empty measured it."""

    def measured(record, kind):
        return kind != node_check.KIND and bool(record.get(part))

    return measured


def _gpu_health_measured(record, kind):
    """A gpu_trial part of either capability: the trial reads the GPUs' health too."""
    return kind != node_check.KIND and bool(record.get("gpu_trial"))


def _gpu_trial_measured(record, kind):
    """A gpu_trial part whose capability is gpu_trial (a --tags gpu_health run's is gpu_health)."""
    trial = record.get("gpu_trial") or {}
    return _gpu_health_measured(record, kind) and (trial.get("capability") or "gpu_trial") == "gpu_trial"


def _node_check_measured(record, kind):
    """A quick record; and a bench record that measured the links, after which bench.yml's
    node_check after_bench takes the quick-check baseline anew."""
    return kind == node_check.KIND or _bench_part("collectives")(record, kind)


def _trial_verdict(record):
    """The GPU trial's own verdict (both GPU capabilities), None when it gives none."""
    verdict = (record.get("gpu_trial") or {}).get("verdict")
    return verdict if verdict in PART_VERDICTS else None


def _node_check_verdict(record):
    """node_check.check_verdict of the record's quick check, None without one."""
    check = record.get("node_check") or {}
    return node_check.check_verdict(check) if check else None


def _node_check_report(records, plots):
    return node_check.report_sections(records)


# The registry, in the order the record's sections are judged and the gate names capabilities.
CAPABILITIES = (
    Capability(
        name="links",
        part="collectives",
        section=links.section,
        problem=links.problem,
        measured=_bench_part("collectives"),
        preflight=bench_errors,  # the bench role's rule: links, torch, stepcost and fabric
        prefix="bench_",
    ),
    Capability(
        name="torch",
        part="torch",
        section=torch.section,
        problem=torch.problem,
        report=torch_report.sections,
        plots=torch_report.plots,
        measured=_bench_part("torch"),
        prefix="bench_",
    ),
    Capability(
        name="stepcost",
        part="stepcost",
        section=stepcost.section,
        problem=stepcost.problem,
        report=stepcost_report.sections,
        plots=stepcost_report.plots,
        measured=_bench_part("stepcost"),
        prefix="bench_",
    ),
    Capability(name="gpu_health", measured=_gpu_health_measured, verdict=_trial_verdict, prefix="gpu_trial_"),
    Capability(
        name="gpu_trial",
        part="gpu_trial",
        section=gpu_trial.section,
        problem=gpu_trial.section_problem,
        report=gpu_trial_report.sections,
        plots=gpu_trial_report.plots,
        measured=_gpu_trial_measured,
        verdict=_trial_verdict,
        preflight=gpu_trial_errors,
        prefix="gpu_trial_",
    ),
    Capability(
        name="node_check",
        part="node_check",
        section=node_check.section,
        problem=node_check.part_problem,
        report=_node_check_report,
        measured=_node_check_measured,
        verdict=_node_check_verdict,
        # Its settings' rule (core/watchsettings.errors) is the continuous checks' of two roles
        # (node_check_*, slurm_health_check_*): preflight runs it after launch's blast radius rule.
        prefix="node_check_",
    ),
    # Drift across the run's nodes (issue 37 item 5): judged across the nodes before the records
    # are built (drift.attach puts each host's part in its node data), it warns per outlier and
    # gives no verdict; launch.yml refuses the fields that hang NCCL (drift.launch_refusals;
    # wireup_launch_accept_drift, in preflight's argument_specs). Written only where a run judged it.
    Capability(
        name="drift",
        part="drift",
        section=drift.section,
        problem=drift.part_problem,
        report=drift.report_sections,
        keep_empty=False,
    ),
)


def names(registry=CAPABILITIES) -> tuple[str, ...]:
    """The gate's capabilities' names (those with a gate rule, ``measured``), in the registry's
    order; drift, which the gate does not judge, is not one."""
    return tuple(cap.name for cap in registry if cap.measured)


def sections(registry=CAPABILITIES) -> tuple[tuple[str, Callable], ...]:
    """(record part, section) of each capability with a section, in the order they are judged."""
    return tuple((cap.part, cap.section) for cap in registry if cap.section)


def empty_dropped(registry=CAPABILITIES) -> frozenset[str]:
    """The record parts left out of a record when their section made none (keep_empty False)."""
    return frozenset(cap.part for cap in registry if cap.part and not cap.keep_empty)


def record_parts(registry=CAPABILITIES) -> tuple[str, ...]:
    """The record parts the capabilities write (each an object)."""
    return tuple(cap.part for cap in registry if cap.part)
