"""The bench role's settings that can be judged without a node (preflight's rule for the bench
capabilities: links, torch, stepcost, fabric), and the verdict thresholds' one rule, which
bandwidth.check_thresholds applies again on the controller. Pure Python, stdlib only."""

from __future__ import annotations

import re

from ..core.checks import is_digits, shell_name_errors

# ---------------------------------------------------------------- bench settings
_SIZE = re.compile(r"[0-9]+[KMG]?")


# bench_report_detail (issue 39): which nodes the report shows in detail (their tables and plots).
# auto: every node of a fleet of at most report/triage.SMALL_FLEET nodes, else the nodes that did
# not PASS; failed: only those, at any size; all: every node.
REPORT_DETAIL = ("auto", "failed", "all")

BENCH_SIZES = (
    "bench_min_bytes",
    "bench_max_bytes",
    "bench_torch_min_bytes",
    "bench_torch_max_bytes",
    "bench_torch_cpu_max_bytes",
)


def _number(values, name, errors):
    """values[name] as a float, or None (with an error) when it is not a number."""
    value = values.get(name)
    if isinstance(value, bool):
        value = None
    try:
        return float(value)
    except (TypeError, ValueError):
        errors.append(f"{name}={value!r} is not a number: fix it in group_vars/host_vars or -e")
        return None


def bench_threshold_errors(values: dict) -> list[str]:
    """The verdict thresholds' rule (the one place it is written): 0 < bench_warn_ratio <=
    bench_pass_ratio <= 1.5. Only the names present in ``values`` are checked."""
    errors: list[str] = []
    ratios = {}
    for name in ("bench_pass_ratio", "bench_warn_ratio"):
        if name in values:
            ratio = _number(values, name, errors)
            if ratio is not None and not 0 < ratio <= 1.5:
                errors.append(f"{name} must be a number in (0, 1.5], got {values[name]!r}")
            elif ratio is not None:
                ratios[name] = ratio
    if len(ratios) == 2 and ratios["bench_warn_ratio"] > ratios["bench_pass_ratio"]:
        errors.append(
            f"bench_warn_ratio ({values['bench_warn_ratio']}) must not exceed bench_pass_ratio "
            f"({values['bench_pass_ratio']}): lower bench_warn_ratio or raise bench_pass_ratio"
        )
    return errors


def _bench_number_errors(values: dict) -> list[str]:
    """The fractions, the torch goal and the whole numbers of the bench_* settings."""
    errors = []
    ranges = {
        "bench_baseline_tolerance": (0.0, 1.0, "a fraction from 0 to below 1, e.g. 0.10"),
        "bench_nccl_tune_min_gain": (0.0, 1.0, "a fraction from 0 to below 1, e.g. 0.02"),
    }
    for name, (low, high, what) in ranges.items():
        value = _number(values, name, errors) if name in values else None
        if value is not None and not low <= value < high:
            errors.append(f"{name}={values[name]!r} must be {what}")
    goal = _number(values, "bench_torch_goal_ratio", errors) if "bench_torch_goal_ratio" in values else None
    if goal is not None and goal <= 0:
        errors.append(
            f"bench_torch_goal_ratio={values['bench_torch_goal_ratio']!r} must be above 0, e.g. 0.97"
        )
    for name in ("bench_step_factor", "bench_torch_step_factor", "bench_iterations", "bench_timeout"):
        text = str(values.get(name, "")).strip()
        if name in values and (isinstance(values[name], bool) or not is_digits(text) or int(text) < 1):
            errors.append(f"{name}={values[name]!r} must be a whole number of at least 1")
    keep = values.get("bench_keep_days")
    if "bench_keep_days" in values and (isinstance(keep, bool) or not is_digits(str(keep).strip())):
        errors.append(f"bench_keep_days={keep!r} must be a whole number of days >= 0 (0: keep every record)")
    warmup = values.get("bench_warmup_iterations")
    if "bench_warmup_iterations" in values and (
        isinstance(warmup, bool) or not is_digits(str(warmup).strip())
    ):
        errors.append(f"bench_warmup_iterations={warmup!r} must be a whole number")
    return errors


def _bench_size_errors(values: dict) -> list[str]:
    """The message sizes (nccl-tests' syntax) and the step-cost parameter counts."""
    errors = [
        f"{name}={values[name]!r} is not a size in nccl-tests' syntax: use bytes or K/M/G, "
        "like 8, 64K, 1M or 8G"
        for name in BENCH_SIZES
        if name in values and not _SIZE.fullmatch(str(values[name]))
    ]
    for name in ("bench_stepcost_params", "bench_stepcost_cpu_params"):
        sizes = values.get(name)
        if name in values and (
            not isinstance(sizes, list) or not sizes or not all(_PARAMS.fullmatch(str(p)) for p in sizes)
        ):
            errors.append(f"{name}={sizes!r} must be a list of parameter counts like 2M, 125M or 1G")
    return errors


def bench_errors(values: dict) -> list[str]:
    """Every bench_* setting that can be judged without a node: thresholds, tolerance, factors,
    sizes in nccl-tests' syntax, bench_env names. Only names present in ``values`` are checked;
    values that are still templates ('{{ ... }}', the roles' own defaults) are passed over."""
    values = {k: v for k, v in values.items() if not (isinstance(v, str) and "{{" in v)}
    errors = bench_threshold_errors(values) + _bench_number_errors(values) + _bench_size_errors(values)
    if "bench_stepcost_hooks" in values and not values["bench_stepcost_hooks"]:
        errors.append("bench_stepcost_hooks must name at least one hook (none, fp16, bf16, powersgd)")
    for name in ("bench_env", "bench_fabric_env"):
        if name in values:
            errors.extend(shell_name_errors(name, values[name]))
    return errors + report_detail_errors(values)


def report_detail_errors(values: dict) -> list[str]:
    """bench_report_detail, when given: one of REPORT_DETAIL."""
    detail = values.get("bench_report_detail")
    if "bench_report_detail" not in values or (isinstance(detail, str) and detail in REPORT_DETAIL):
        return []
    return [
        f"bench_report_detail={detail!r} must be one of {', '.join(REPORT_DETAIL)} "
        "(auto: the nodes that did not PASS, every node of a small fleet)"
    ]


_PARAMS = re.compile(r"[0-9]+(\.[0-9]+)?[KMG]?")
