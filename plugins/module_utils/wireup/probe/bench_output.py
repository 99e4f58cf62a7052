"""Parse nccl-tests output (text table or ``-J`` JSON) and wireup's torch benchmark lines.

One entry point, :func:`parse`, takes the whole output of one test binary and returns one dict:

    {
      "format": "text" | "json" | "torch",
      "program": "all_reduce_perf", "collective": "all_reduce",
      "version": "2.19.6" | "",                 # nccl-tests version (text header only)
      "nccl_version": "2.28.9" | "",            # NCCL library the binary ran with
      "nccl_headers_version": "2.28.9" | "",    # NCCL headers it was built with
      "config": {"nthreads", "ngpus", "min_bytes", "max_bytes", "warmup_iters", "iters", ...},
      "devices": [{"rank", "group", "pid", "host", "device", "bus_id", "name"}],
      "rows": [{"size", "count", "type", "redop", "root",
                "out_of_place": {"time_us", "algbw", "busbw", "wrong", "error"} | None,
                "in_place": {...} | None}],
      "avg_busbw": float | None, "out_of_bounds": int | None,
      "wrong_total": int,                       # sum of #wrong over all rows (0 when unchecked)
      "avg_status": "OK" | "FAILED" | "",       # NCCL_TESTS_MIN_BW check on the average line
      "out_of_bounds_failed": bool,             # "Out of bounds values : N FAILED"
      "failures": [str],                        # "Test NCCL failure ..." and the like, as printed
      "complete": bool,                         # the footer (Out of bounds / Avg bus bandwidth) came
      "cut_line": str,                          # a result row cut off mid-print, "" when none
      "last_error": str,                        # NCCL's last WARN text, echoed after the footer
      "header_inferred": bool,                  # rows read by their shape: no header line in sight
      "runs": int, "other_runs": [{"program", "rows", "complete"}],  # a log of several binaries
    }

:func:`assess` judges one run (exit code, text, -J JSON) and never raises: it returns the parsed
result (or None) and every reason nccl-tests itself gives to distrust the run.

Formats handled, as nccl-tests prints them (src/util.cu, src/common.cu):
- current tables: ``size count type redop root time algbw busbw #wrong time algbw busbw #wrong``
  where ``#wrong`` is ``N/A`` without validation (-c 0); ``cputime`` instead of ``time`` (-C 1);
  per-iteration columns (``i_min i_max i_p99 i_cv%``) and a trailing timestamp;
- older tables (before 2.10 or so) with an ``error`` column (max delta, e.g. ``2e-07``) instead of
  ``#wrong``, without ``root`` or ``redop``, and the oldest ``bytes N type op ... res``;
- launcher line prefixes (Open MPI ``[1,0]<stdout>:``, Slurm ``srun --label`` ``0: ``, MPICH
  ``[0] ``), NCCL INFO/WARN lines and other noise in between (a row with other output printed into
  it is not read); settings and Rank lines without ``#`` or Pid (1.x), rccl-tests' spellings;
- the ``-J`` JSON file (nccl-tests 2.18 and later), ``nwrong`` null when unchecked;
- wireup's own torch.distributed benchmark (files/bench/torch_allreduce.py): one JSON object per line
  with ``"wireup_bench": "torch_allreduce"``.

- a text holding several runs (parse_runs gives each; parse the first and says how many), rows
  printed before any header line (a pasted tail: read only when their shape is exactly one
  layout's), NCCL's last-error echo after the footer (``# error: ...``, not a failure).

A plain result row (every cell where its header puts it, ASCII digits, a type nccl-tests names) is
read by one regular expression of its table's layout (_PlainRow, issue 39: a third of the bench
store's time at fleet size was this parser); every other line goes through _text_line's checks, and
both read a row the same (tests/unit/test_nccltests_same.py, on every capture and every cut of it).

Values that cannot be read (``N/A``) become None. Raises ValueError when no result row is found,
with the first lines of the output, so a failed run is never mistaken for an empty one.
"""

import functools
import json
import math
import re
from typing import TypedDict

from .node import parse_nccl_header

# Launcher prefixes: Open MPI's --tag-output (`[1,0]<stdout>:`, indented in pasted logs), Slurm's
# `srun --label` (`0: `, ` 0: ` with more than 10 tasks) and MPICH's -prepend-rank (`[0] `).
_MPI_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<(?:stdout|stderr)>:\s?|\d+: |\[\d+\] )")
# A table cell: a number (1e+00, -1, 0.00), N/A or nan. Anything else means other output was
# printed into the row (NCCL_DEBUG=INFO lines land in the middle of a row) and the row is not read.
_CELL = re.compile(r"^(?:-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|N/A|n/a|-?nan|-?inf)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809"; 2.20 builds put the git
# commit after the version: "# nccl-tests version 2.20.0 (b4d5bee) nccl-headers=23102 ...".
_VERSION_LINE = re.compile(
    r"^#\s*nccl-tests version\s+(?P<v>[^\s(]+)(?:\s+\((?P<build>[^)]*)\))?"
    r"(?:\s+nccl-headers=(?P<h>\d+))?(?:\s+nccl-library=(?P<l>\d+))?"
)
# The library version as NCCL itself logs it at init ("NCCL version 2.30.1+cuda13.0", bare with
# NCCL_DEBUG=VERSION/WARN, after "host:pid:tid [0] NCCL INFO " with INFO) and as rccl-tests prints
# it ("RCCL version : 2.22.3-HEAD:7d8d67c"): the fallback when no banner names the library.
_LIB_VERSION = re.compile(r"(?:^|\bNCCL INFO )(?:NCCL|RCCL) version\s*:?\s*(?P<v>\d+\.\d+\.\d+)")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(?P<p>\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(?P<p>\S+)")
# The run's settings line, in every spelling seen: "# nThread 1 nGpus 8 minBytes 8 maxBytes ...
# step: 2(factor) warmup iters: 5 iters: 20 ...", the same without "#" (nccl-tests 1.x, pasted copies),
# rccl-tests' "nThreads: 1 nGpus: 4 nRanks: 1 ... warmupIters: 5" and "nGpus(perProc) 8" builds.
_CONFIG_START = re.compile(
    r"^#?\s*(?:nThreads?:?\s+\d+\s+)?nGpus(?:\(perProc\))?:?\s+\d+\s+(?:nRanks:?\s+\d+\s+)?minBytes"
)
_CONFIG_FIELDS = {
    "nthreads": re.compile(r"\bnThreads?:?\s+(\d+)"),
    "ngpus": re.compile(r"\bnGpus(?:\(perProc\))?:?\s+(\d+)"),
    "min_bytes": re.compile(r"\bminBytes:?\s+(\d+)"),
    "max_bytes": re.compile(r"\bmaxBytes:?\s+(\d+)"),
    "warmup_iters": re.compile(r"\bwarmup(?: iters|Iters):\s*(\d+)"),
    "iters": re.compile(r"(?<![A-Za-z] )\biters:\s*(\d+)"),
}
_CONFIG_STEP = re.compile(r"\bstep:\s*(?P<step>[\d.]+)\((?P<step_kind>\w+)\)")
# "#  Rank  0 Group  0 Pid 1234 on host device  0 [0000:01:00] NAME"; nccl-tests 1.x printed no Group
# and no Pid ("#   Rank  0 on     node03 device  0 [0x00] Tesla P100-PCIE-16GB").
_DEVICE = re.compile(
    r"^#?\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?(?:Pid\s+(?P<pid>\d+)\s+)?"
    r"(?:on\s+(?P<host>\S+)\s+)?(?:uses\s+)?device\s+(?P<device>\d+)\s+\[(?P<bus_id>[0-9a-fA-Fx:.]+)\]\s+"
    r"(?P<name>.*?)\s*$"
)
_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(?P<v>[-+0-9.eE]+|-?nan|N/A)\s*(?P<s>OK|FAILED)?")
_OOB = re.compile(r"^#?\s*Out of bounds values\s*:\s*(?P<v>\d+)\s*(?P<s>OK|FAILED)?")
# What nccl-tests prints when a check fails (src/common.h: CUDACHECK, NCCLCHECK, TESTCHECK), and
# NCCL's own fatal lines; the hostname prefix is kept in the quote.
# nccl-tests 1.x printed "Cuda failure common.cu:891 'invalid device ordinal'" (no "Test"), and mpirun
# reports ranks that died.
# Newer builds also have CUCHECK ("Test CU failure"), the -T watchdog ("host: Test timeout (10s)
# common.cu:N") and the device-count check ("Invalid number of GPUs: 8 requested but only 4 were
# found.", then testNotImplemented).
_FAILURE = re.compile(
    r"Test (?:NCCL|CUDA|CU) failure|Test failure|Test timeout|NCCL failure|NCCL error|CUDA failure"
    r"|Cuda failure|Invalid number of GPUs|Segmentation fault|processes exited with non-zero status"
)
# nccl-tests' own lines (and the launcher's), never NCCL's last-error text (see _echo_lines).
_TESTS_OWN = re.compile(
    r"Test (?:NCCL|CUDA|CU) failure|Test failure|Test timeout|Invalid number of GPUs|Segmentation fault"
    r"|processes exited with non-zero status|\bsrun: error\b|^-{10,}"
)
# NCCL's own INFO and WARN lines are not failures by themselves: NCCL also logs errors it recovers
# from (a feature probe that fails, then a fallback). A run that stops quotes its last WARN instead
# (warn_lines); a run that completes is judged on nccl-tests' own lines and numbers.
_NCCL_LOG = re.compile(r"\bNCCL (?:INFO|WARN)\b")


def _is_failure(line):
    return bool(_FAILURE.search(line)) and not _NCCL_LOG.search(line)


_RUN_START = re.compile(r"^#?\s*(?:nccl-tests version\b|Collective test starting:)")
# What follows the footer before the last-error line: "#", the concluded line, -M's memory line.
_FOOTER_TAIL = re.compile(r"^#\s*(?:$|Collective test concluded:|GPU memory usage\s*:|Errors with asterisks)")
_ERROR_ECHO = re.compile(r"^#\s*error:\s*(?P<e>.*)$")


def _echo_lines(lines):
    """Indexes of the lines that echo NCCL's last error after a complete run, and their text.

    After the footer nccl-tests prints ncclGetLastError(): the text of NCCL's last WARN, saved even
    when NCCL_DEBUG hides it and even when NCCL recovered (a failed feature probe, then a fallback).
    2.13-2.17 print it bare after "#", 2.18 as "# TEXT" after the concluded line, 2.19 as
    "# error: TEXT" (and the -J file as "errors": ["TEXT"]). It is not a failure: the run finished
    and validated every size; a cleanup that fails prints nccl-tests' own "Test ... failure" line.
    """
    echoes = {}
    after_footer = False
    for idx, line in enumerate(lines):
        stripped = line.strip()
        if _AVG.match(stripped):
            after_footer = True
            continue
        if not after_footer or not stripped or _FOOTER_TAIL.match(stripped) or _NCCL_LOG.search(stripped):
            continue  # NCCL's own log lines (teardown INFO/WARN) may come in between
        after_footer = False
        if _TESTS_OWN.search(stripped) or _RUN_START.match(stripped):
            continue
        if _CONFIG_START.match(stripped) or stripped.lower().lstrip("# ").startswith("size "):
            continue
        match = _ERROR_ECHO.match(stripped)
        echoes[idx] = match.group("e").strip() if match else stripped.lstrip("#").strip()
    return echoes


# nccl-tests checks no in-place result for these (src/alltoall.cu, alltoallv.cu, sendrecv.cu set
# reportErrors = in_place ? 0 : 1 and print #wrong N/A; alltoall does not support in-place at all).
UNCHECKED_IN_PLACE = frozenset({"alltoall", "alltoallv", "sendrecv"})
HALVES = ("out_of_place", "in_place")

# Tolerance of the old `error` column (max delta), from nccl-tests before 2.13 (src/common.cu:
# DeltaMaxValue): a half counted as wrong when delta > DeltaMaxValue(type) * (nranks - 1).
# Integer types had 1e-200 there, i.e. any delta.
_DELTA_MAX = {
    "half": 1e-2,
    "float16": 1e-2,
    "bfloat16": 1e-2,
    "float": 1e-5,
    "float32": 1e-5,
    "double": 1e-12,
}
_INT_DELTA = 1e-200

# nccl-tests' exit codes (src/common.h testResult_t: main returns run()'s result) and the usual
# signals of a killed run. The enum grew: up to 2.19 testInvalidUsage = 6 and testNumResults = 7
# (wrong results or the NCCL_TESTS_MIN_BW check: our 2.19.6 captures exit 7); later builds insert
# testSkipped = 6 and testParameterizationError = 7, so testNumResults is 8; builds older than the
# testNumResults return called exit(EXIT_FAILURE), 1, for the same two checks (their output
# then shows the wrong counts or the FAILED line, which problems() quotes on their own).
EXIT_CODES = {
    1: "testInternalError",
    2: "testCudaError",
    3: "testNcclError",
    4: "testTimeout",
    5: "testNotImplemented",
    6: "testInvalidUsage",
    7: "testNumResults: wrong results or the NCCL_TESTS_MIN_BW average check failed",
    124: "stopped by `timeout` (bench_timeout)",
    137: "killed by SIGKILL (out of memory, or `timeout -s KILL`)",
    143: "terminated by SIGTERM",
}
# The codes whose meaning depends on the build, where the banner does not pin it (no banner, or a
# version after 2.19: which 2.2x build added testSkipped is not known here).
_EXIT_CODES_UNKNOWN = {
    6: "testInvalidUsage (nccl-tests up to 2.19) or testSkipped (newer builds)",
    7: "testNumResults, wrong results or the NCCL_TESTS_MIN_BW average check (nccl-tests up to 2.19), "
    "or testParameterizationError (newer builds)",
    8: "testNumResults, wrong results or the NCCL_TESTS_MIN_BW average check (builds newer than 2.19)",
}

# Column names of the leading (per-row) part of the table, by every name nccl-tests has used.
_LEAD_ALIASES = {
    "size": "size",
    "bytes": "size",
    "count": "count",
    "n": "count",
    "type": "type",
    "redop": "redop",
    "op": "redop",
    "root": "root",
}
# Column names inside the out-of-place and in-place sections.
_SECTION_ALIASES = {
    "time": "time_us",
    "cputime": "time_us",
    "algbw": "algbw",
    "busbw": "busbw",
    "#wrong": "wrong",
    "wrong": "wrong",
    "error": "error",
    "res": "error",
    "i_min": "i_min_us",
    "i_max": "i_max_us",
    "i_p99": "i_p99_us",
    "i_cv%": "i_cv_pct",
}


def nccl_version_string(code):
    """Turn NCCL_VERSION_CODE (22809, or 2406 before 2.9) into '2.28.9'; '' for 0/None."""
    if not code:
        return ""
    code = int(code)
    if code >= 10000:
        return f"{code // 10000}.{(code % 10000) // 100}.{code % 100}"
    return f"{code // 1000}.{(code % 1000) // 100}.{code % 100}"


def collective_of(program):
    """'all_reduce_perf' / './build/all_reduce_perf_mpi' -> 'all_reduce'."""
    name = program.rsplit("/", 1)[-1]
    match = re.match(r"^(?P<c>.+?)_perf(?:_\w+)?$", name)
    return match.group("c") if match else name


def _num(token):
    """A number from a table cell; None for N/A, nan or an empty cell."""
    if token is None:
        return None
    token = token.strip()
    if token in ("", "N/A", "n/a", "nan", "-nan", "null"):
        return None
    return _float(token)


def _float(token):
    """float(token); None when it is not a number or is NaN."""
    try:
        value = float(token)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _int(token):
    value = _num(token)
    return None if value is None else int(value)


def _clean_lines(text):
    for raw in text.splitlines():
        line = _MPI_PREFIX.sub("", _ANSI.sub("", raw) if "\x1b" in raw else raw).rstrip()
        yield line


@functools.lru_cache(maxsize=1)
def _read_lines(text):
    """The output's lines (launcher prefixes and colours removed, stripped) and NCCL's last-error
    echoes among them (_echo_lines): read once per text, as assess's parse and problems both need
    them (one text kept: the one being assessed)."""
    lines = tuple(line.strip() for line in _clean_lines(text))
    return lines, _echo_lines(lines)


def _empty_result(fmt):
    return {
        "format": fmt,
        "program": "",
        "collective": "",
        "version": "",
        "nccl_version": "",
        "nccl_headers_version": "",
        "config": {},
        "devices": [],
        "rows": [],
        "avg_busbw": None,
        "out_of_bounds": None,
        "wrong_total": 0,
        "avg_status": "",
        "out_of_bounds_failed": False,
        "failures": [],
        "complete": False,
        "cut_line": "",
        "last_error": "",
        "header_inferred": False,
        "runs": 1,
        "other_runs": [],
        # "cputime" under -C 1: the rows' time_us is then the CPU time per iteration (algbw and busbw
        # still come from the GPU time: src/common.cu), so it is no latency figure.
        "time_kind": "time",
    }


def failure_lines(text):
    """The lines of an output that say a check failed (nccl-tests' CUDACHECK/NCCLCHECK/TESTCHECK,
    NCCL errors), stripped, in order, without repeats. The last-error echo after a complete run's
    footer is not one (see _echo_lines)."""
    lines, echoes = _read_lines(text or "")
    return _unique(line for idx, line in enumerate(lines) if idx not in echoes and _is_failure(line))


def _unique(lines):
    """The lines in order, each once."""
    return list(dict.fromkeys(lines))


def warn_lines(text):
    """NCCL's WARN lines (stripped, in order, without repeats): not failures by themselves (a healthy
    run may warn that libibverbs is missing), but the best clue when a run stops without one."""
    lines, _echoes = _read_lines(text or "")
    return _unique(line for line in lines if " NCCL WARN " in f" {line} ")


def _repeated_ranks(devices):
    """(rank, group) pairs listed more than once: each process printed its own rank 0."""
    keys = [(d.get("rank"), d.get("group")) for d in devices or []]
    return sorted({k for k in keys if keys.count(k) > 1}, key=lambda k: (k[0] or 0, k[1] or 0))


def _finish(result, text):
    if not result["rows"]:
        _no_rows(text)
    if result["program"] and not result["collective"]:
        result["collective"] = collective_of(result["program"])
    result["wrong_total"] = _wrong_total(result["rows"])
    return result


def _no_rows(text):
    """Raise ValueError for an output without a result row, quoting its failure or first lines."""
    failures = failure_lines(text)
    if failures:
        raise ValueError("no nccl-tests result rows; the run failed: " + " | ".join(failures[:3]))
    head = "\n".join(text.strip().splitlines()[:8])
    raise ValueError(f"no nccl-tests result rows found in the output; it starts with:\n{head}")


def _wrong_total(rows):
    """The #wrong counts of every row's halves, added up."""
    halves = (row.get(key) for row in rows for key in ("out_of_place", "in_place"))
    return sum(int(half["wrong"]) for half in halves if half and half.get("wrong"))


def _row_shaped(tokens, lead):
    """A result row (or its cut-off start) has an integer size and count and a type name where the
    header puts them; a driver's hex dump (`00000000 02005104 09000ac5 0000bfd2`) does not."""
    for name, pattern in (("count", r"^\d+$"), ("type", r"^[A-Za-z][A-Za-z0-9_]*$")):
        pos = lead.index(name) if name in lead else len(tokens)
        if pos < len(tokens) and not re.match(pattern, tokens[pos]):
            return False
    return True


def _parse_header(tokens):
    """Column layout from the header line's tokens: (lead columns, section columns, sections start)."""
    lead = _lead_columns(tokens)
    idx = len(lead)
    section = []
    starts = []
    for pos in range(idx, len(tokens)):
        name = tokens[pos].lower()
        if name in ("time", "cputime"):
            starts.append(pos)
        if len(starts) == 1:
            section.append(_SECTION_ALIASES.get(name, name))
    return lead, section, len(starts)


def _lead_columns(tokens):
    """The header's names before its first time column, as row keys."""
    lead = []
    for token in tokens:
        if token.lower() in ("time", "cputime"):
            break
        lead.append(_LEAD_ALIASES.get(token.lower(), token.lower()))
    return lead


def _section(values, names):
    out = {"time_us": None, "algbw": None, "busbw": None, "wrong": None, "error": None}
    for name, token in zip(names, values):
        if name == "wrong":
            out["wrong"] = _int(token)
        elif name in out or name.startswith("i_"):
            out[name] = _num(token)
    return out


def _config(line):
    """The settings of the run from its nThread/nGpus line (keys missing from the line are None)."""
    cfg = {}
    for key, pattern in _CONFIG_FIELDS.items():
        match = pattern.search(line)
        cfg[key] = int(match.group(1)) if match else None
    match = _CONFIG_STEP.search(line)
    cfg["step"] = float(match.group("step")) if match else None
    cfg["step_kind"] = match.group("step_kind") if match else None
    return cfg


def _settings_line(stripped, result):
    """Record a settings or device line (with or without its "#"); False for any other line."""
    if _CONFIG_START.match(stripped):
        result["config"] = _config(stripped)
        return True
    match = _DEVICE.match(stripped)
    if match:
        result["devices"].append(_device(match))
        return True
    return False


def _device(match):
    """A device line's fields: rank, group, pid and device as numbers, host '' when absent."""
    dev = match.groupdict()
    for key in ("rank", "group", "pid", "device"):
        dev[key] = int(dev[key]) if dev[key] is not None else None
    dev["host"] = dev["host"] or ""
    return dev


# Names nccl-tests prints in the type and redop cells (src/common.cu test_typenames/test_opnames,
# 1.x and rccl-tests included), for reading a row whose header line is not in the output.
_TYPE_NAMES = frozenset((
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
    "f8e4m3", "f8e5m2", "char", "int",
))  # fmt: skip
_OP_NAMES = frozenset(("sum", "prod", "max", "min", "avg", "mulsum", "none"))
_INT_CELL = re.compile(r"^(?:-?\d+|N/A)$")
_DELTA_CELL = re.compile(r"^(?:-?\d+(?:\.\d+)?[eE][-+]\d+|N/A)$")


def _infer_layout(tokens):
    """(lead, section) of a result row seen before any header line (a pasted tail, a log cut at the
    top), or None unless the row has exactly the shape of one nccl-tests layout: size and count
    integers, a known type name, then two halves of time/algbw/busbw and #wrong (an integer or
    N/A, current layout, 13 cells) or the old error delta (%5.0le or N/A, 11 or 12 cells)."""
    count = len(tokens)
    if count not in (11, 12, 13) or not all(re.match(r"^\d+$", t) for t in tokens[:2]):
        return None
    if tokens[2].lower() not in _TYPE_NAMES:
        return None
    if count == 13 and tokens[3] in _OP_NAMES and re.match(r"^-?\d+$", tokens[4]):
        lead, last, names = ["size", "count", "type", "redop", "root"], _INT_CELL, "wrong"
    elif count == 12 and tokens[3] in _OP_NAMES:
        lead, last, names = ["size", "count", "type", "redop"], _DELTA_CELL, "error"
    elif count == 12 and re.match(r"^-?\d+$", tokens[3]):
        lead, last, names = ["size", "count", "type", "root"], _DELTA_CELL, "error"
    elif count == 11:
        lead, last, names = ["size", "count", "type"], _DELTA_CELL, "error"
    else:
        return None
    rest = tokens[len(lead) :]
    if len(rest) != 8 or not all(_CELL.match(t) for t in rest):
        return None
    if not (last.match(rest[3]) and last.match(rest[7])):
        return None
    return lead, ["time_us", "algbw", "busbw", names]


def _text_row(tokens, lead, section, result, stripped):
    """Append one table row to result (or record it as cut off); False when it is not a row."""
    if not tokens or not re.match(r"^\d+$", tokens[0]) or not _row_shaped(tokens, lead):
        return False  # NCCL INFO lines, warnings, hex dumps of a failed NIC and the like
    if "redop" in lead and len(tokens) == len(lead) + 2 * len(section) - 1:
        tokens.insert(lead.index("redop"), "")  # old alltoall printed an empty redop cell
    row_lead = dict(zip(lead, tokens[: len(lead)]))
    rest = tokens[len(lead) :]
    numeric = [t for k, t in zip(lead, tokens) if k in ("size", "count", "root")] + rest
    if not all(_CELL.match(t) for t in numeric[: len(numeric) - len(rest) + 2 * len(section)]):
        return False  # other output printed into the row: its values cannot be trusted
    if len(rest) < len(section):
        result["cut_line"] = stripped  # a row cut off mid-print (a crash or a kill)
        return True
    if len(rest) >= 2 * len(section):
        oop = _section(rest[: len(section)], section)
        inp = _section(rest[len(section) : 2 * len(section)], section)
    else:
        # Trace replay prints only the in-place half.
        oop = None
        inp = _section(rest[: len(section)], section)
    result["rows"].append(
        {
            "size": _int(row_lead.get("size")),
            "count": _int(row_lead.get("count")),
            "type": row_lead.get("type", ""),
            "redop": row_lead.get("redop", ""),
            "root": _int(row_lead.get("root")),
            "out_of_place": oop,
            "in_place": inp,
        }
    )
    return True


# A plain result row, read by one fullmatch with each cell converted once: every cell where the
# layout puts it and nothing else (no cut, no trailing timestamp, no text printed into the row),
# ASCII digits, a type nccl-tests names and a lower-case op. No other check of _text_line can claim
# such a line (it starts with a digit; its only words are a type name and an op, no failure's or
# version line's), and _text_row would read it the same (tests/unit/test_nccltests_same.py pins
# both on every capture and every cut of it). Any other line goes through _text_line's checks.
_PLAIN_LEAD = {
    "size": r"([0-9]{1,15})",  # up to 15 digits: int(float(cell)), as _int reads it, is exact
    "count": r"([0-9]{1,15})",
    "type": r"([a-z][a-z0-9]*)",
    "redop": r"([a-z]+)",
    "root": r"(-?[0-9]{1,15})",
}
_PLAIN_NUMBER = r"(-?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|N/A)"
_PLAIN_WHOLE = r"(-?[0-9]{1,15}|N/A)"
_PLAIN_SECTION = frozenset(
    ("time_us", "algbw", "busbw", "wrong", "error", "i_min_us", "i_max_us", "i_p99_us", "i_cv_pct")
)


class _PlainRow:
    """How to read a plain row of one table layout (lead columns, section columns)."""

    def __init__(self, lead, section):
        cells = [_PLAIN_LEAD[name] for name in lead]
        cells += [_PLAIN_WHOLE if name == "wrong" else _PLAIN_NUMBER for name in section * 2]
        self.pattern = re.compile("[ \t]+".join(cells))
        self.at = {name: lead.index(name) if name in lead else None for name in _PLAIN_LEAD}
        self.halves = (len(lead), len(lead) + len(section), len(lead) + 2 * len(section))
        self.convert = tuple((name, int if name == "wrong" else float) for name in section)

    @staticmethod
    @functools.lru_cache(maxsize=64)
    def of(lead, section):
        """The reader of a layout, or None when its columns are not all known (then _text_row reads)."""
        known = set(lead) <= set(_PLAIN_LEAD) and set(section) <= _PLAIN_SECTION
        unique = len(set(lead)) == len(lead) and len(set(section)) == len(section)
        if not (known and unique and section and lead and lead[0] == "size"):
            return None
        return _PlainRow(lead, section)

    def read(self, stripped, rows):
        """Append the row to rows when stripped is a plain row of this layout; False when not."""
        match = self.pattern.fullmatch(stripped)
        if match is None:
            return False
        cells = match.groups()
        at = self.at
        if at["type"] is not None and cells[at["type"]] not in _TYPE_NAMES:
            return False
        start, middle, end = self.halves
        rows.append(
            {
                "size": int(cells[0]),
                "count": _plain_int(cells, at["count"]),
                "type": "" if at["type"] is None else cells[at["type"]],
                "redop": "" if at["redop"] is None else cells[at["redop"]],
                "root": _plain_int(cells, at["root"]),
                "out_of_place": self._half(cells[start:middle]),
                "in_place": self._half(cells[middle:end]),
            }
        )
        return True

    def _half(self, cells):
        out = dict(_NO_HALF)
        for (name, convert), cell in zip(self.convert, cells):
            out[name] = None if cell == "N/A" else convert(cell)
        return out


_NO_HALF = {"time_us": None, "algbw": None, "busbw": None, "wrong": None, "error": None}


def _plain_int(cells, at):
    return None if at is None else int(cells[at])


def _footer_line(stripped, result):
    """Record an 'Avg bus bandwidth' or 'Out of bounds values' line (with or without "#")."""
    return _avg_line(stripped, result) or _oob_line(stripped, result)


def _avg_line(stripped, result):
    match = _AVG.match(stripped)
    if match:
        result["avg_busbw"] = _num(match.group("v"))
        result["avg_status"] = match.group("s") or ""
        result["complete"] = True
    return bool(match)


def _oob_line(stripped, result):
    match = _OOB.match(stripped)
    if match:
        result["out_of_bounds"] = int(match.group("v"))
        result["out_of_bounds_failed"] = match.group("s") == "FAILED" or int(match.group("v")) > 0
        result["complete"] = True
    return bool(match)


def _header_tokens(stripped):
    """The column names of a table header line (pasted copies may lose the leading "#"), or None."""
    tokens = stripped.lstrip("#").split()
    lowered = [t.lower() for t in tokens]
    if tokens and lowered[0] in ("size", "bytes") and "algbw" in lowered and "busbw" in lowered:
        return tokens
    return None


def _text_runs(text):
    """Every run in a text output, in order: a new one starts where a banner, a 'Collective test
    starting' or a settings line follows rows or a footer (a log holding several binaries' output)."""
    lines, echoes = _read_lines(text)
    # logged: per run, the library version NCCL logged (the fallback for a run's banner);
    # lead, section: the table layout of the current run (None until its header or first row).
    # plain: the current layout's _PlainRow (None until its header or first row, or for a layout it
    # does not read).
    st = {"runs": [_empty_result("text")], "logged": [""], "lead": None, "section": None, "plain": None}
    for idx, stripped in enumerate(lines):
        if stripped and idx in echoes:
            st["runs"][-1]["last_error"] = echoes[idx]
        elif stripped:
            _text_line(st, stripped)
    for result, version in zip(st["runs"], st["logged"]):
        result["nccl_version"] = result["nccl_version"] or version
    return st["runs"]


def _text_line(st, stripped):
    """Fold one non-empty line of a text output into the current run (or start the next run)."""
    result = st["runs"][-1]
    if st["plain"] is not None and st["plain"].read(stripped, result["rows"]):
        return  # a whole, plain result row: none of the checks below can claim it
    if (_RUN_START.match(stripped) or _CONFIG_START.match(stripped)) and (
        result["rows"] or result["complete"]
    ):
        result = _empty_result("text")
        st["runs"].append(result)
        st["logged"].append("")
        st["lead"] = st["section"] = st["plain"] = None
    if _settings_line(stripped, result):
        return
    tokens = _header_tokens(stripped)
    if tokens:
        st["lead"], st["section"], _start = _parse_header(tokens)
        st["plain"] = _PlainRow.of(tuple(st["lead"]), tuple(st["section"]))
        result["time_kind"] = "cputime" if "cputime" in (t.lower() for t in tokens) else "time"
    elif stripped.startswith("#"):
        _comment_line(stripped, result)
    elif _is_failure(stripped):
        if stripped not in result["failures"]:
            result["failures"].append(stripped)
    elif _footer_line(stripped, result):
        pass  # the oldest layouts print the footer without "#"
    elif _LIB_VERSION.search(stripped):
        st["logged"][-1] = st["logged"][-1] or _LIB_VERSION.search(stripped).group("v")
    else:
        _table_line(st, stripped, result)


def _comment_line(stripped, result):
    """A '#' line: the version banner, the program's start or end, or a footer."""
    match = _VERSION_LINE.match(stripped)
    if match:
        _banner(match, result)
        return
    match = _STARTING.match(stripped) or _CONCLUDED.match(stripped)
    if match:
        result["program"] = result["program"] or match.group("p")
        return
    _footer_line(stripped, result)


def _banner(match, result):
    """The versions of the nccl-tests banner line: its own, NCCL's headers' and library's."""
    result["version"] = match.group("v")
    result["nccl_headers_version"] = nccl_version_string(match.group("h"))
    result["nccl_version"] = nccl_version_string(match.group("l"))


def _table_line(st, stripped, result):
    """A row of the table; before any header, the first row-shaped line gives the layout."""
    tokens = stripped.split()
    if st["lead"] is None:
        inferred = _infer_layout(tokens)
        if inferred is None:
            return
        st["lead"], st["section"] = inferred
        st["plain"] = _PlainRow.of(tuple(st["lead"]), tuple(st["section"]))
        result["header_inferred"] = True
    _text_row(tokens, st["lead"], st["section"], result, stripped)


def parse_runs(text):
    """Every run in one text output (parse_text's result for each), in order; runs without a row
    are kept (a binary that failed before its table). Raises ValueError when no run has a row."""
    runs = _text_runs(text)
    if not any(r["rows"] for r in runs):
        _finish(runs[0], text)  # raises, quoting the failure or the first lines
    return [_finish(r, text) if r["rows"] else r for r in runs]


def parse_text(text):
    """Parse the text table printed by an nccl-tests binary.

    An output holding several runs (a log of several binaries) gives the first run with rows, and
    says so: runs (how many) and other_runs ({program, rows, complete} of each other run).
    """
    runs = parse_runs(text)
    first = next(r for r in runs if r["rows"])
    first["runs"] = len(runs)
    first["other_runs"] = _other_runs(runs, first)
    return first


def _other_runs(runs, first):
    """{program, rows (how many), complete} of each run but the first with rows."""
    return [
        {"program": r["program"], "rows": len(r["rows"]), "complete": r["complete"]}
        for r in runs
        if r is not first
    ]


def _json_section(data):
    if not data:
        return None
    return {
        "time_us": _num(str(data.get("time", data.get("cpu_time")))),
        "algbw": _num(str(data.get("alg_bw"))),
        "busbw": _num(str(data.get("bus_bw"))),
        "wrong": None if data.get("nwrong") is None else _int(str(data["nwrong"])),
        "error": None,
    }


def parse_json(text):
    """Parse the file nccl-tests writes with ``-J FILE``."""
    data = json.loads(text)
    if not isinstance(data, dict) or "results" not in data:
        raise ValueError("not an nccl-tests -J document: no 'results' key")
    result = _empty_result("json")
    args = data.get("args") or []
    if args:
        result["program"] = args[0].rsplit("/", 1)[-1]
    result["nccl_version"] = nccl_version_string(data.get("nccl_version"))
    cfg = data.get("config") or {}
    result["config"] = {key: cfg.get(name) for key, name in _JSON_CONFIG.items()}
    result["devices"] = [_json_device(dev) for dev in cfg.get("devices") or []]
    result["rows"] = [_json_row(row) for row in data.get("results") or []]
    _json_footer(data, result)
    # "errors" is ncclGetLastError() after a finished run, not a failure (see _echo_lines); a run
    # that fails writes no footer, so its file has neither the average nor "errors".
    result["last_error"] = next((str(e).strip() for e in data.get("errors") or [] if str(e).strip()), "")
    return _finish(result, text)


# parse_json's config keys and the -J document's names for them.
_JSON_CONFIG = {
    "nthreads": "nthreads",
    "ngpus": "ngpus",
    "min_bytes": "minimum_bytes",
    "max_bytes": "maximum_bytes",
    "step": "step_factor",
    "warmup_iters": "warmup_iters",
    "iters": "iterations",
}


def _json_device(dev):
    return {
        "rank": dev.get("rank"),
        "group": dev.get("group"),
        "pid": dev.get("pid"),
        "host": dev.get("hostname", ""),
        "device": dev.get("device"),
        "bus_id": dev.get("device_hex", ""),
        "name": dev.get("device_info", ""),
    }


def _json_row(row):
    return {
        "size": row.get("size"),
        "count": row.get("count"),
        "type": row.get("type", ""),
        "redop": row.get("redop", ""),
        "root": _int(str(row.get("root", ""))),
        "out_of_place": _json_section(row.get("out_of_place")),
        "in_place": _json_section(row.get("in_place")),
    }


def _json_footer(data, result):
    """The average bus bandwidth and its status, the out-of-bounds count, whether the run ended."""
    _json_average(data.get("average_bus_bandwidth") or {}, result)
    oob = data.get("out_of_bounds") or {}
    result["out_of_bounds"] = oob.get("count")
    result["out_of_bounds_failed"] = str(oob.get("okay", "true")).lower() == "false" or bool(oob.get("count"))
    result["complete"] = "average_bus_bandwidth" in data


def _json_average(avg, result):
    """The average bus bandwidth and its status ('' when unchecked)."""
    result["avg_busbw"] = _num(str(avg.get("bandwidth")))
    # "okay" is "unchecked" without NCCL_TESTS_MIN_BW, else a boolean (as a string in 2.19).
    okay = str(avg.get("okay", "")).lower()
    result["avg_status"] = {"false": "FAILED", "true": "OK"}.get(okay, "")


def parse_torch(text):
    """Parse the JSON lines of files/bench/torch_allreduce.py (noise lines in between are skipped)."""
    result = _empty_result("torch")
    for item in _torch_lines(text):
        _torch_run(item, result)
        result["rows"].append(_torch_row(item))
    return _finish(result, text)


def _torch_run(item, result):
    """The run's program, settings and versions from a result object (each object repeats them)."""
    result["program"] = item["wireup_bench"]
    result["collective"] = "all_reduce"
    result["config"] = _torch_config(item)
    result["nccl_version"] = item.get("nccl_version", "") or ""
    result["torch_version"] = item.get("torch_version", "")


def _torch_config(item):
    return {
        "world_size": item.get("world_size"),
        "backend": item.get("backend"),
        "warmup_iters": item.get("warmup"),
        "iters": item.get("iters"),
        "nnodes": item.get("nnodes"),
    }


def _torch_lines(text):
    """The benchmark's result objects in a log ("wireup_bench" lines, in order)."""
    for line in _clean_lines(text):
        item = _json_start(line.strip())
        if isinstance(item, dict) and "wireup_bench" in item:
            yield item


def _json_start(stripped):
    """The JSON object a line starts with, or None."""
    if not stripped.startswith("{"):
        return None
    try:
        # raw_decode: stderr may be glued to the end of the line when both go to one log.
        return json.JSONDecoder().raw_decode(stripped)[0]
    except ValueError:
        return None


def _torch_row(item):
    """A torch result as a table row: the in-place half only (the benchmark reduces in place)."""
    return {
        "size": item.get("size"),
        "count": item.get("count"),
        "type": item.get("dtype", ""),
        "redop": "sum",
        "root": None,
        "out_of_place": None,
        "in_place": {
            "time_us": item.get("time_us"),
            "algbw": item.get("algbw"),
            "busbw": item.get("busbw"),
            "wrong": item.get("wrong"),
            "error": None,
        },
    }


def tests_version(text):
    """The nccl-tests version from its banner line ('2.19.6'), '' when absent."""
    for line in _clean_lines(text or ""):
        match = _VERSION_LINE.match(line.strip())
        if match:
            return match.group("v")
    return ""


def parse(text):
    """Parse any of the supported outputs; the format is recognised from the content."""
    stripped = text.lstrip()
    if stripped.startswith("{") and '"results"' in stripped[:200000]:
        try:
            return parse_json(stripped)
        except ValueError:
            pass
    if '"wireup_bench"' in text:
        return parse_torch(text)
    return parse_text(text)


def checked_halves(collective, rows):
    """The halves (out_of_place, in_place) whose results nccl-tests validates for this collective.

    In-place is never validated for alltoall/alltoallv/sendrecv. When the output shows validation
    (a #wrong count or an error delta somewhere), a half that never carries one is dropped too; with
    validation off (-c 0) every supported half is kept, as nothing else can be judged.
    """
    halves = [h for h in HALVES if not (h == "in_place" and collective in UNCHECKED_IN_PLACE)]
    shown = [
        h
        for h in halves
        if any(
            (r.get(h) or {}).get("wrong") is not None or (r.get(h) or {}).get("error") is not None
            for r in rows
        )
    ]
    return shown or halves


def judged_busbw(row, halves):
    """The better busbw of the judged halves of one row (GB/s), or None."""
    best = None
    for half in halves:
        part = row.get(half)
        value = part.get("busbw") if part else None
        if value is not None and (best is None or value > best):
            best = value  # max() of the values in order: the first of equals, as max keeps it
    return best


def _default_kind(row):
    """Sort key: nccl-tests' default type and op (float, sum; "none" for collectives without an op)
    rank above the others -d all / -o all print at the same size."""
    return (row.get("type") in ("float", "", None), row.get("redop") in ("sum", "none", "", None))


def figure_row(rows, size, collective=""):
    """The row that stands for `collective` at `size`: of the rows at that size with a figure in
    the halves nccl-tests validates (checked_halves over all rows), the one of the default type and
    op. None when there is none. The verdict, the baseline comparison, the report and the tuning
    all read a collective's figure through this one rule (figure)."""
    return _figure_row(rows, size, checked_halves(collective, rows or []))


def _figure_row(rows, size, halves):
    at = [r for r in rows or [] if r.get("size") == size and judged_busbw(r, halves) is not None]
    return max(at, key=_default_kind) if at else None


def figure(rows, size, collective=""):
    """The busbw (GB/s) of `collective` at `size`: the validated halves of figure_row, or None."""
    halves = checked_halves(collective, rows or [])
    row = _figure_row(rows, size, halves)
    return None if row is None else judged_busbw(row, halves)


def figure_sizes(rows, collective=""):
    """The sizes at which `collective` has a figure, ascending."""
    halves = checked_halves(collective, rows or [])
    return sorted(
        {r["size"] for r in rows or [] if r.get("size") is not None and judged_busbw(r, halves) is not None}
    )


def _ranks(parsed):
    """Ranks of the run: its device lines, else nGpus x nThreads of one process; None if unknown."""
    cfg = parsed.get("config") or {}
    if parsed.get("devices"):
        return len(parsed["devices"])
    if cfg.get("ngpus"):
        return int(cfg["ngpus"]) * int(cfg.get("nthreads") or 1)
    return None


def data_errors(parsed, collective=None, check_delta=True):
    """Wrong results in the judged halves: [(row size, half, what)] for #wrong > 0 or, in the old
    `error` column, a delta above nccl-tests' tolerance for the type and rank count (only with
    check_delta: the tolerance needs the rank count, from the devices or config of `parsed`)."""
    collective = collective or parsed.get("collective") or ""
    rows = parsed.get("rows") or []
    halves = checked_halves(collective, rows)
    nranks = _ranks(parsed)
    check_delta = check_delta and nranks is not None  # without the rank count, trust the OOB line
    found = []
    for row in rows:
        for half in halves:
            section = row.get(half) or {}
            if section.get("wrong"):
                found.append((row.get("size"), half, f"{int(section['wrong'])} wrong elements"))
                continue
            delta = section.get("error")
            if delta is None or not check_delta:
                continue
            limit = _DELTA_MAX.get(str(row.get("type", "")).lower(), _INT_DELTA) * (nranks - 1)
            if delta > limit:
                found.append((row.get("size"), half, f"max error {delta:g} > {limit:g} allowed"))
    return found


def _version_tuple(version):
    """(major, minor) of an nccl-tests version ('v2.19.6', '2.17.1'), None when it is not one."""
    match = re.match(r"^v?(\d+)\.(\d+)", str(version or ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def _describe_rc(rc, version=""):
    """The meaning of an exit code; version: the nccl-tests banner's ('' when unknown)."""
    if rc < 0:
        return f"exit code {rc}: killed by signal {-rc}"
    meaning = _rc_meaning(rc, _version_tuple(version))
    return f"exit code {rc}" + (f": {meaning}" if meaning else "")


def _rc_meaning(rc, known):
    """What exit code rc means in nccl-tests `known` (a version tuple, None when unknown)."""
    if known is not None and (2, 13) <= known <= (2, 19):
        return EXIT_CODES.get(rc)
    if rc in _EXIT_CODES_UNKNOWN:
        # The banner is 2.13 and later; a newer minor may or may not have the longer enum.
        return _EXIT_CODES_UNKNOWN[rc]
    return EXIT_CODES.get(rc)


def rows_out_of_order(rows):
    """[(row, the larger size printed before it)] for rows smaller than an earlier row of the same
    type, op and root. One run prints each type/op's sizes in rising order (repeats happen: sizes
    are rounded down to whole elements per rank), so a smaller size later means two runs' tables
    in one output (processes that each printed their own)."""
    largest = {}
    found = []
    for row in rows or []:
        key = (row.get("type"), row.get("redop"), row.get("root"))
        size = row.get("size")
        if size is None:
            continue
        if key in largest and size < largest[key]:
            found.append((row, largest[key]))
        largest[key] = max(size, largest.get(key, size))
    return found


def problems(parsed, rc=None, text=""):
    """Every reason nccl-tests gives to distrust a run, one line each, quoting the output.

    parsed: parse()'s result or None (no rows); rc: the exit code (None: unknown); text: the
    output, for the failure lines a JSON result does not carry.
    """
    out = []
    failures = list((parsed or {}).get("failures") or [])
    failures += [line for line in failure_lines(text) if line not in failures]
    if rc not in (None, 0):
        out.append(_describe_rc(int(rc), (parsed or {}).get("version") or tests_version(text)))
    if parsed is not None:
        out += [problem for check in _RUN_CHECKS if (problem := check(parsed))]
    # The lines naming the cause (NCCL's or CUDA's error string) before nccl-tests' trace lines.
    failures.sort(key=lambda line: 0 if re.search(r"(?:NCCL|CUDA|Cuda) (?:failure|error)", line) else 1)
    out += [f'"{line}"' for line in failures[:3]]
    if len(failures) > 3:
        out.append(f"{len(failures) - 3} more failure lines")
    stopped = parsed is None or not parsed.get("complete")
    warns = warn_lines(text) if stopped and not failures else []
    if warns:
        out.append(f'last NCCL WARN in the output: "{warns[-1]}"')
    return out


def _avg_failed(parsed):
    if parsed.get("avg_status") != "FAILED":
        return ""
    return f'"Avg bus bandwidth : {parsed.get("avg_busbw") or 0:g} FAILED" (below NCCL_TESTS_MIN_BW x 0.9)'


def _out_of_bounds(parsed):
    if not parsed.get("out_of_bounds_failed"):
        return ""
    return f'"Out of bounds values : {parsed.get("out_of_bounds") or 0} FAILED"'


def _wrong_data(parsed):
    errors = data_errors(parsed)
    if not errors:
        return ""
    size, half, what = errors[0]
    more = f" (and {len(errors) - 1} more row halves)" if len(errors) > 1 else ""
    return f"{what} at {size} B {half.replace('_', '-')}{more}"


def _ranks_repeated(parsed):
    repeated = _repeated_ranks(parsed.get("devices"))
    if not repeated:
        return ""
    rank = repeated[0][0]
    listed = [d for d in parsed["devices"] if d.get("rank") == rank]
    hosts = sorted({d.get("host") or "?" for d in listed})
    return (
        f"rank {rank} is listed {len(listed)} times "
        f"(on {', '.join(hosts)}): the output holds more than one run, e.g. processes that ran "
        "alone instead of as one job (nccl-tests built without MPI=1, or started by a launcher its "
        "MPI does not know)"
    )


def _several_runs(parsed):
    if parsed.get("runs", 1) <= 1:
        return ""
    names = [parsed.get("program") or "?"] + [r.get("program") or "?" for r in parsed["other_runs"]]
    return (
        f"the output holds {parsed['runs']} nccl-tests runs ({', '.join(names)}): only the first "
        "is read; give each run its own output"
    )


def _rows_disordered(parsed):
    disorder = rows_out_of_order(parsed.get("rows"))
    if not disorder:
        return ""
    row, before = disorder[0]
    more = f" (and {len(disorder) - 1} more rows)" if len(disorder) > 1 else ""
    what = " ".join(str(x) for x in (row.get("type"), row.get("redop")) if x)
    return (
        f"the {row['size']} B {what} row comes after the {before} B row{more}: the output holds more "
        "than one run's table, e.g. processes that ran alone instead of as one job"
    )


def _cut_off(parsed):
    if parsed.get("complete"):
        return ""
    last = (parsed.get("rows") or [{}])[-1].get("size")
    cut = f", cut in the middle of {parsed['cut_line']!r}" if parsed.get("cut_line") else ""
    return f"output stops mid-table after the {last} B row{cut}: no 'Avg bus bandwidth' footer"


# What problems() checks in a parsed run, in the order it reports them ('' when it holds).
_RUN_CHECKS = (
    _avg_failed,
    _out_of_bounds,
    _wrong_data,
    _ranks_repeated,
    _several_runs,
    _rows_disordered,
    _cut_off,
)


def assess(output, rc=None, json_text=""):
    """Parse one nccl-tests run and list its problems; never raises.

    The -J JSON (full precision) is preferred for the rows; a JSON that is cut off or invalid
    (a killed run) falls back to the text. Returns {parsed: dict | None, problems: [str],
    error: str} where error is the parse error when no rows were found.
    """
    output = output or ""
    parsed, error = None, ""
    candidates = [json_text, output] if json_text else [output]
    for text in candidates:
        try:
            parsed = parse(text)
            break
        except ValueError as err:
            error = error or str(err)
    if parsed is not None and not parsed["version"]:
        parsed["version"] = tests_version(output)
    found = problems(parsed, rc, output)
    if parsed is None:
        head = next((line.strip() for line in _clean_lines(output) if line.strip()), "")
        if found and (failure_lines(output) or warn_lines(output)):
            found.append("no result rows")
        else:
            found.append(f'no result rows; the output starts with "{head}"' if head else "no output at all")
    return {"parsed": parsed, "problems": found, "error": "" if parsed is not None else error}


def best_busbw(row):
    """The better of out-of-place and in-place bus bandwidth of one row (GB/s), or None."""
    values = [
        row[k]["busbw"]
        for k in ("out_of_place", "in_place")
        if row.get(k) and row[k].get("busbw") is not None
    ]
    return max(values) if values else None


def row_at_or_above(rows, min_bytes):
    """The row with the largest size >= min_bytes, or None when every row is smaller."""
    candidates = [r for r in rows if r.get("size") is not None and r["size"] >= min_bytes]
    return max(candidates, key=lambda r: r["size"]) if candidates else None


# ---------------------------------------------------------------- building nccl-tests
class NcclInfo(TypedDict, total=False):
    """What the wireup_nccl_info module returns (its RETURN documents each key): the NCCL to build
    nccl-tests against, nvcc, the CPUs for make -j, the last build (nccl_tests.plan reads it)."""

    changed: bool
    cuda_home: str
    nvcc: bool
    nproc: int
    nccl: dict
    build: dict


def nccl_header_version(text):
    """'2.28.9' from nccl.h's NCCL_MAJOR/MINOR/PATCH defines (node.parse_nccl_header: the one
    reading of nccl.h); '' when they are missing."""
    try:
        return parse_nccl_header(text or "")
    except ValueError:
        return ""


def gencode(compute_capabilities):
    """NVCC_GENCODE and a short arch key for the given capabilities (["9.0"] -> sm_90 only).

    Returns {"flags": "-gencode=arch=compute_90,code=sm_90", "arch": "90"}; raises ValueError on
    an empty list or a value that is not MAJOR.MINOR.
    """
    archs = []
    for cap in compute_capabilities or []:
        match = re.match(r"^\s*(\d+)\.(\d+)\s*$", str(cap))
        if not match:
            raise ValueError(
                f"compute capability {cap!r} is not MAJOR.MINOR (wireup_node.gpu.compute_capabilities "
                "comes from nvidia-smi --query-gpu=compute_cap)"
            )
        arch = f"{int(match.group(1))}{int(match.group(2))}"
        if arch not in archs:
            archs.append(arch)
    if not archs:
        raise ValueError(
            "no GPU compute capability known for this node: nvidia-smi must list the GPUs "
            "(wireup_node.gpu.compute_capabilities is empty)"
        )
    archs.sort(key=int)
    flags = " ".join(f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs)
    return {"flags": flags, "arch": ",".join(archs)}


def supports_json(version):
    """nccl-tests writes -J JSON from 2.18.0 on ('v2.19.6', '2.17.1' -> bool)."""
    known = _version_tuple(version)
    return known is not None and known >= (2, 18)
