"""The gpu_trial role's settings (issue 25): their rule (settings_errors, preflight's, its only
copy, as judge/bench_settings.py is the bench role's), the numbers they arrive as (number) and the
GPU judgement's thresholds they give (thresholds). Below plans/ so that capability/registry.py can
name the rule as the gpu_trial capability's preflight rule."""

from __future__ import annotations

import math

from . import gpujudge

SETS = ("gemm", "hbm", "pcie")

GEMM_DTYPES = ("bf16", "fp16", "tf32", "fp8")


def number(value):
    """A setting as a float (`-e name=10` arrives as the string '10'); None when it is no number."""
    if isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _number_error(name, value, low, high, what):
    given = number(value)
    if given is None or not low < given <= high:
        return [f"{name} must be {what}, got {value!r}"]
    return []


def _list_error(name, value, allowed):
    if not isinstance(value, list) or not value or any(v not in allowed for v in value):
        return [f"{name} must be a non-empty list of {', '.join(allowed)}, got {value!r}"]
    return []


def _count_error(name, value):
    given = number(value)
    if given is None or given <= 0 or given != int(given):
        return [f"{name} must be a positive whole number, got {value!r}"]
    return []


def settings_errors(s):
    """What is wrong with the gpu_trial_* settings present in s (preflight's rule, its only copy),
    each error naming the variable and what it takes. Values still templates are passed over."""
    s = {k: v for k, v in s.items() if not (isinstance(v, str) and "{{" in v)}
    errors = []
    if "gpu_trial_seconds" in s:
        errors += _number_error("gpu_trial_seconds", s["gpu_trial_seconds"], 0, 3600, "seconds in (0, 3600]")
    for key, allowed in (("gpu_trial_sets", SETS), ("gpu_trial_gemm_dtypes", GEMM_DTYPES)):
        if key in s:
            errors += _list_error(key, s[key], allowed)
    if "gpu_trial_dcgm_diag" in s and number(s["gpu_trial_dcgm_diag"]) not in (0, 1, 2, 3):
        errors.append(f"gpu_trial_dcgm_diag must be 0 (off), 1, 2 or 3, got {s['gpu_trial_dcgm_diag']!r}")
    for key in ("gpu_trial_gemm_size", "gpu_trial_copy_bytes", "gpu_trial_pcie_bytes"):
        if key in s:
            errors += _count_error(key, s[key])
    if "gpu_trial_dcgm_timeout" in s:
        errors += _number_error(
            "gpu_trial_dcgm_timeout",
            s["gpu_trial_dcgm_timeout"],
            -1,
            86400,
            "0 (the level's default) or seconds up to 86400",
        )
    judged = {k: v for k, v in thresholds(s).items() if f"gpu_trial_{k}" in s}
    return errors + gpujudge.settings_errors(judged)


def numbers(values):
    """Threshold values with numbers given as strings (`-e gpu_trial_warn_tolerance=0.15`) as numbers."""
    return {k: v if k == "efficiency" or number(v) is None else number(v) for k, v in values.items()}


def thresholds(s):
    """gpujudge's settings from the gpu_trial_* variables (gpujudge's defaults where absent)."""
    return numbers(
        {key: s.get(f"gpu_trial_{key}", default) for key, default in gpujudge.DEFAULT_SETTINGS.items()}
    )
