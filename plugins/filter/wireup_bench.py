"""Filters exposing plugins/module_utils/wireup/nccltests.py, bandwidth.py and benchenv.py to the
nccl_tests and bench roles (nccl-tests output parsing, NVCC_GENCODE, verdict helpers, the tuned
NCCL env file).

Thin wrappers: a ValueError becomes an AnsibleFilterError carrying the same message.
"""

from __future__ import annotations

DOCUMENTATION = """
name: wireup_bench
short_description: nccl-tests parsing and build helpers for the nccl_tests and bench roles
description:
  - wireup_nvcc_gencode (compute capabilities -> {flags, arch}), wireup_nccltests_json_ok (tag -> bool),
    wireup_nccltests_parse (output text or -J JSON -> dict), wireup_nccltests_busbw_max (output -> busbw at
    the largest size), wireup_bench_tune_pick (tuning sweep results -> best env), wireup_human_bytes,
    wireup_tuned_env_file (best env, origin -> the tuned env file's text), wireup_tuned_env_parse (that
    text -> values and origin), wireup_bench_env_text (a mapping -> "K=V K=V").
"""

import pathlib
import sys

_UTILS = str(pathlib.Path(__file__).resolve().parents[1] / "module_utils")
if _UTILS not in sys.path:
    sys.path.insert(0, _UTILS)

from wireup_plugin import wrap as _wrap

from wireup import bandwidth, benchenv, nccltests


def busbw_max(text):
    """Best busbw (GB/s) at the largest size of one nccl-tests output; None without rows."""
    rows = nccltests.parse(text)["rows"]
    row = max(rows, key=lambda r: r.get("size") or 0)
    return nccltests.best_busbw(row)


def tune_pick(results, min_gain=0.02):
    """Registered results of the tuning loop (item = env) -> bandwidth.pick_tuning's answer."""
    measured = []
    for run in results or []:
        busbw = None
        if run.get("rc") == 0:
            try:
                busbw = busbw_max(run.get("stdout") or "")
            except ValueError:
                busbw = None
        measured.append({"env": run.get("item") or {}, "busbw": busbw})
    return bandwidth.pick_tuning(measured, min_gain)


class FilterModule:
    def filters(self):
        return {
            "wireup_nvcc_gencode": _wrap(nccltests.gencode),
            "wireup_nccltests_json_ok": _wrap(nccltests.supports_json),
            "wireup_nccltests_parse": _wrap(nccltests.parse),
            "wireup_nccltests_busbw_max": _wrap(busbw_max),
            "wireup_human_bytes": _wrap(bandwidth.human_bytes),
            "wireup_bench_tune_pick": _wrap(tune_pick),
            "wireup_tuned_env_file": _wrap(benchenv.tuned_env_file),
            "wireup_tuned_env_parse": _wrap(benchenv.parse_tuned_env),
            "wireup_bench_env_text": _wrap(benchenv.format_env),
        }
