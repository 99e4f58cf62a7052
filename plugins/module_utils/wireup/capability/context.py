"""What a capability's record section is judged with (Judging), what the report reads beyond
the run's records (Reporting) and the type words its problem check speaks (type_name,
number_problem): shared by the capability modules (capability/links.py, torch.py, stepcost.py,
...), record/host_record.py, which builds the Judging of each host, and report/assemble.py, whose
write_report takes the Reporting once."""

from __future__ import annotations

import dataclasses

from ..core import checks
from ..judge import bandwidth


def type_name(value):
    """How a problem names a value's type: 'an object', 'a list', 'a string', 'null', else its type."""
    return {dict: "an object", list: "a list", str: "a string", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def number_problem(value, where):
    """'' for None or a finite number, else what is wrong with value at where."""
    if value is None:
        return ""
    if not checks.is_number(value):
        return f"{where} is {type_name(value)}, not a number"
    if not checks.is_finite_number(value):
        return f"{where} is {value}, not a finite number"
    return ""


@dataclasses.dataclass(frozen=True)
class Judging:
    """What every section of one host's record is judged with: the run's thresholds and
    efficiency factors, the host's last passing record (None: none), the environments its figures
    ran with (nccl_env, torch_env) and the tuned env file they used (None: default NCCL)."""

    limits: bandwidth.Thresholds
    efficiency: dict
    topology: dict
    baseline: dict | None
    nccl_env: dict
    torch_env: dict
    tuned_used: dict | None


@dataclasses.dataclass(frozen=True)
class Reporting:
    """What the report reads beyond the run's records, handed to report/assemble.write_report once
    (the one place the results folder reaches the report's parts): the controller's results folder,
    whose history the History section shows (record/history.report_sections), and the time the
    report is written (Unix seconds), which "out of service for how long" is counted to."""

    results_dir: str
    now: float
