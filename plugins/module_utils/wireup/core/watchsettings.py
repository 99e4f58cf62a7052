"""The continuous checks' settings (issue 26: node_check_*, slurm_health_check_* and
wireup_slurm_health_check), checked by preflight before any node changes (preflight.host_errors
calls errors()); argument_specs check their types and choices, this module what they cannot:
paths, sizes, ranges and Slurm's HealthCheckNodeState words. Pure Python, stdlib only.
"""

from __future__ import annotations

import re

from .checks import is_number, slurm_option_errors, validate_abs_paths

# slurm.conf(5), HealthCheckNodeState: any of these, comma-separated (CYCLE with one of the others;
# START_ONLY: only when slurmd starts, Slurm 23.02+), nothing else: the value is written into
# slurm.conf, where a newline would start a line of configuration. Matched whole (fullmatch).
HEALTH_CHECK_STATES = ("ALLOC", "ANY", "CYCLE", "IDLE", "MIXED", "NONDRAINED_IDLE", "START_ONLY")
_STATE = "(?:" + "|".join(HEALTH_CHECK_STATES) + ")"
NODE_STATE = re.compile(_STATE + "(?:," + _STATE + ")*")
SIZE = re.compile(r"([0-9]+)([KMG]?)")
WHOLE = re.compile(r"[0-9]+")  # ASCII digits: str.isdigit() takes '²', which int() refuses
PATHS = (
    "node_check_path",
    "node_check_python",
    "node_check_config",
    "node_check_baseline",
    "node_check_textfile_dir",
    "slurm_health_check_conf",
    "slurm_health_check_program",
)


def size_bytes(text) -> int:
    """A size in nccl-tests' syntax (bytes, or K/M/G: powers of 1024) as bytes; ValueError."""
    m = SIZE.fullmatch(str(text).strip())
    if not m or isinstance(text, bool):
        raise ValueError(f"{text!r} is not a size like 64M or 1G")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def node_state_errors(value, var="slurm_health_check_node_state") -> list[str]:
    """HealthCheckNodeState's words: one or more of HEALTH_CHECK_STATES, comma-separated, no
    spaces, matched whole (NODE_STATE)."""
    if isinstance(value, str) and NODE_STATE.fullmatch(value) and value != "CYCLE":
        return []
    return [
        f"{var}={str(value)[:80]!r} is not Slurm's HealthCheckNodeState: use one or more of "
        f"{', '.join(HEALTH_CHECK_STATES)}, comma-separated without spaces (CYCLE with another), "
        "e.g. ANY or IDLE,CYCLE"
    ]


BOOL_WORDS = ("true", "false", "yes", "no", "on", "off", "1", "0")
# The quick check's path (issue 39, plans/node_check_slurm.py) and srun's options there: the sbatch
# option grammar, less what srun does not take (requeue) or wireup sets itself (time).
VIA = ("auto", "ansible", "slurm")
NOT_SRUN = ("no-requeue", "requeue", "time")


def srun_option_errors(options, var="node_check_slurm_options") -> list[str]:
    """Errors of node_check_slurm_options: checks.slurm_option_errors, less NOT_SRUN."""
    errors = slurm_option_errors(options, var=var)
    for key in options if isinstance(options, dict) else ():
        if key in NOT_SRUN:
            errors.append(
                f"{var}: {key} is not passed to srun (time: wireup bounds the step from node_check_timeout; "
                "requeue: a job step is never requeued): remove it"
            )
    return errors


def _whole(values, name, low, errors):
    value = values[name]
    if isinstance(value, bool) or not WHOLE.fullmatch(str(value).strip()) or int(str(value).strip()) < low:
        errors.append(f"{name}={value!r} must be a whole number of at least {low}")


def _paths(values):
    return validate_abs_paths({k: values[k] for k in PATHS if k in values})


def _bench_errors(values):
    out = []
    if "node_check_bench_bytes" in values:
        try:
            size_bytes(values["node_check_bench_bytes"])
        except ValueError:
            out.append(
                f"node_check_bench_bytes={values['node_check_bench_bytes']!r} is not a size in nccl-tests' "
                "syntax: use bytes or K/M/G, like 256M or 1G"
            )
    if "node_check_bench_tolerance" in values:
        value = values["node_check_bench_tolerance"]
        if not is_number(value) or not 0 <= value < 1:
            out.append(f"node_check_bench_tolerance={value!r} must be a fraction from 0 to below 1, e.g. 0.2")
    return out


def _slurm_errors(values):
    out = []
    if "node_check_via" in values and values["node_check_via"] not in VIA:
        out.append(f"node_check_via={values['node_check_via']!r} must be one of {', '.join(VIA)}")
    if "node_check_slurm_options" in values:
        out += srun_option_errors(values["node_check_slurm_options"])
    if "wireup_slurm_health_check" in values:
        value = values["wireup_slurm_health_check"]
        if not isinstance(value, bool) and str(value).strip().lower() not in BOOL_WORDS:
            out.append(f"wireup_slurm_health_check={value!r} must be true or false")
    if "slurm_health_check_node_state" in values:
        out += node_state_errors(values["slurm_health_check_node_state"])
    return out


def errors(values: dict) -> list[str]:
    """Every error in the continuous checks' settings present in ``values`` (templates, the roles'
    own defaults, are passed over), each naming the variable and the fix."""
    values = {k: v for k, v in values.items() if not (isinstance(v, str) and "{{" in v)}
    out = _paths(values) + _bench_errors(values)
    for name in (
        "node_check_bench_iterations",
        "node_check_timeout",
        "slurm_health_check_interval",
        "node_check_slurm_wait",
    ):
        if name in values:
            _whole(values, name, 1, out)
    return out + _slurm_errors(values)
