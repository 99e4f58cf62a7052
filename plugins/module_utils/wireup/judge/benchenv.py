"""The environment every benchmark figure ran with, and the tuned NCCL env file's state.

A figure (one nccl-tests collective, one torch benchmark, the tuning sweep) records:

  {"mode": "default" | "tuned",
   "vars": {what wireup gave the process: tuned values (tuned mode), wireup_job_env, bench_env,
            LD_LIBRARY_PATH for the venv's NCCL},
   "seen": {the NCCL_/GLOO_/TORCH_/... variables the process itself saw (nccl-tests' -J JSON
            "env" list; the torch script's ``wireup_bench_env`` line), or None when not told},
   "tuned_file": {path, written, run_id, host, stale, stale_reasons} when mode is tuned, else None}

The tuned env file (``{{ wireup_base_dir }}/nccl-tuned.env``) starts with a ``# wireup:`` line
naming its origin (run id, host, UTC time written, driver, NCCL and nccl-tests versions, the
busbw that won) and holds ``KEY='value'`` lines. It is stale when the driver or NCCL it was
measured with is not the one installed now (versions differ), or when it was written before the
last driver/NCCL change. The last change is the newest modification time of the files that are
the driver and NCCL on the node (see :func:`last_changes`): dpkg's file lists of the driver and
libnccl2 packages (dpkg rewrites a package's ``.list`` at each install or upgrade, while the
files it unpacks keep the package's build time), the ``nvidia-smi`` binary, and the
``libnccl.so.2`` the benchmarks load (pip writes a wheel's files at install time).
"""

import calendar
import json
import re
import shlex
import time

from ..core import checks, redact

# Variables worth recording from a process's environment: they change what NCCL, gloo or torch
# do. The rest of the environment is neither recorded nor stored (it may hold secrets).
RECORDED_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "CUDA_", "NVSHMEM_", "UCX_", "FI_", "LD_LIBRARY_PATH")
_ORIGIN_PREFIX = "# wireup:"
_TIME_FMT = "%Y-%m-%dT%H:%M:%SZ"


def recorded(env):
    """The part of an environment worth recording (see RECORDED_PREFIXES), values as strings."""
    return {
        str(k): "" if v is None else str(v)
        for k, v in sorted((env or {}).items())
        if str(k).startswith(RECORDED_PREFIXES)
    }


def format_env(env, secret=()):
    """{K: V} -> 'K=V K=V' sorted; '(none)' when empty. For reports and log lines: a secret's
    value shows as <redacted> (redact.redact_env; secret: wireup_secret_env's names)."""
    env = redact.redact_env(env, secret)
    if not env:
        return "(none)"
    return " ".join(f"{k}={v}" for k, v in sorted(env.items()))


def utc(seconds):
    """Seconds since the epoch -> '2026-12-01T01:02:03Z'; '' for None."""
    if seconds is None:
        return ""
    return time.strftime(_TIME_FMT, time.gmtime(float(seconds)))


def _seconds(text):
    try:
        return float(calendar.timegm(time.strptime(text, _TIME_FMT)))
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- the tuned env file
def _one_line(value) -> str:
    """An origin field fit for the one comment line: every character that is not printable (a
    newline would end the comment, and the shell sourcing the file would run what follows) is '?'."""
    return "".join(ch if ch.isprintable() else "?" for ch in str(value))


def tuned_env_file(best, origin):
    """Text of the tuned env file: a comment, the origin line, one KEY='value' line per setting.

    best: {NCCL_X: value}; origin: {run_id, host, written (UTC text), driver, nccl, nccl_tests,
    size, busbw, default_busbw}. Raises ValueError for a name that is not a shell name."""
    bad = sorted(str(k) for k in best if not checks.is_shell_name(k))
    if bad:
        raise ValueError(f"tuned NCCL settings must be shell names, got {bad}")
    fields = ("run_id", "host", "written", "driver", "nccl", "nccl_tests", "size", "busbw", "default_busbw")
    line = " ".join(
        f"{k}={shlex.quote(_one_line(origin.get(k, '')))}" for k in fields if origin.get(k) not in (None, "")
    )
    out = [
        "# NCCL settings that beat the default all_reduce on this node, written by wireup's bench role.",
        "# bench.yml uses them only with bench_use_tuned_env=true; launch scripts source them.",
        f"{_ORIGIN_PREFIX} {line}",
    ]
    out += [f"{k}={shlex.quote(str(v))}" for k, v in sorted(best.items())]
    return "\n".join(out) + "\n"


def parse_tuned_env(text):
    """{values: {K: V}, origin: {...}} of a tuned env file; a hand-written one has no origin.
    Lines that are neither comments nor KEY=VALUE are ignored (the shell would fail on them)."""
    values, origin = {}, {}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if line.startswith(_ORIGIN_PREFIX):
            try:
                words = shlex.split(line[len(_ORIGIN_PREFIX) :])
            except ValueError:
                continue
            origin.update(w.split("=", 1) for w in words if "=" in w)
            continue
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].strip()
        key, sep, value = line.partition("=")
        if not sep or not checks.is_shell_name(key):
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            continue
        values[key] = words[0] if words else ""
    return {"values": values, "origin": origin}


def last_changes(probes):
    """When the driver and NCCL last changed on a node.

    probes: [{what: "driver"|"nccl", path, mtime (seconds)}], from dpkg's file lists and the
    binaries (see the module docstring). Returns {driver: {time, path} | None, nccl: ...}: the
    newest of each."""
    out = {"driver": None, "nccl": None}
    for probe in probes or []:
        what, mtime = probe.get("what"), probe.get("mtime")
        if what not in out or mtime is None:
            continue
        if out[what] is None or float(mtime) > out[what]["mtime"]:
            out[what] = {"mtime": float(mtime), "time": utc(mtime), "path": probe.get("path", "")}
    return out


def change_probes(package_lists=None, files=None):
    """last_changes' probes from what the bench role gathered: Ansible find's files of
    /var/lib/dpkg/info (libnccl2*.list: NCCL, the rest: the driver) and stat results looped over
    [{what, path}] (the nvidia-smi binary, the libnccl.so.2 the benchmarks load)."""
    probes = []
    for item in package_lists or []:
        name = str(item.get("path", "")).rsplit("/", 1)[-1]
        probes.append(
            {
                "what": "nccl" if name.startswith("libnccl") else "driver",
                "path": item.get("path"),
                "mtime": item.get("mtime"),
            }
        )
    for result in files or []:
        stat = result.get("stat") or {}
        wanted = result.get("item") or {}
        if stat.get("exists") and wanted.get("what"):
            probes.append({"what": wanted["what"], "path": wanted.get("path"), "mtime": stat.get("mtime")})
    return probes


def tuned_env_state(path, text=None, *, mtime=None, versions=None, changes=None, used=False):
    """The tuned env file as the report needs it.

    text None: no file. versions: the node's versions now ({driver, nccl}); changes: last_changes'
    answer. Returns {path, present, values, origin, written, used, stale, stale_reasons}."""
    state = {
        "path": path,
        "present": text is not None,
        "values": {},
        "origin": {},
        "written": "",
        "used": bool(used) and text is not None,
        "stale": False,
        "stale_reasons": [],
    }
    if text is None:
        return state
    parsed = parse_tuned_env(text)
    state["values"] = parsed["values"]
    state["origin"] = parsed["origin"]
    # The origin line's time; a hand-written file is dated by its modification time.
    state["written"] = parsed["origin"].get("written") or utc(mtime)
    if not parsed["origin"]:
        state["origin_note"] = "no origin line (not written by wireup): its driver/NCCL versions are unknown"
    state["stale_reasons"] = _stale_reasons(parsed["origin"], state["written"], versions or {}, changes or {})
    state["stale"] = bool(state["stale_reasons"])
    return state


def _stale_reasons(origin, written, versions, changes):
    """Why a tuned env file no longer fits the node: measured with another driver or NCCL than
    the one installed now, or written before their last change."""
    labels = (("driver", "driver"), ("nccl", "NCCL"))
    reasons = [
        f"measured with {label} {origin.get(key)}, {label} {versions.get(key)} now"
        for key, label in labels
        if origin.get(key) and versions.get(key) and origin.get(key) != versions.get(key)
    ]
    written_s = _seconds(written)
    for key, label in labels:
        change = changes.get(key)
        if change and written_s is not None and change["mtime"] > written_s:
            reasons.append(
                f"written {written}, before the last {label} change {change['time']} ({change['path']})"
            )
    return reasons


def describe_tuned(state):
    """One sentence about the tuned env file for the report ('' when there is none)."""
    if not state or not state.get("present"):
        return ""
    origin = state.get("origin") or {}
    made = (
        f"written {state.get('written') or '?'} by run {origin.get('run_id', '?')} "
        f"on {origin.get('host', '?')} (driver {origin.get('driver', '?')}, NCCL {origin.get('nccl', '?')})"
        if origin
        else f"written {state.get('written') or '?'}, {state.get('origin_note', 'origin unknown')}"
    )
    use = (
        "used by this run's figures" if state.get("used") else "NOT used by this run's figures (default NCCL)"
    )
    stale = f"; STALE: {'; '.join(state['stale_reasons'])}" if state.get("stale") else ""
    return f"Tuned NCCL env {state.get('path')}: {format_env(state.get('values'))}, {made}; {use}{stale}."


# ---------------------------------------------------------------- what a process saw
# A "NAME=value" string of nccl-tests' -J JSON ("env": [...]); in a cut-off JSON the last may be open.
_JSON_ENV_ITEM = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)=((?:[^"\\]|\\.)*)("|\\?\Z)')


def redact_nccl_json(text, secret=()):
    """nccl-tests' -J JSON text with the secret values of its "env" strings redacted
    (redact.redact_value); everything else byte for byte, a cut-off JSON too."""

    def one(match):
        name, raw, closed = match.groups()
        if not closed:  # cut off inside the string: a secret's or a URL's rest is hidden whole
            hide = redact.is_secret_name(name, secret) or "://" in raw
            return f'"{name}={redact.MARKER}' if hide else match.group(0)
        try:
            value = json.loads(match.group(0))[len(name) + 1 :]
        except ValueError:
            return match.group(0)
        shown = redact.redact_value(name, value, secret)
        return match.group(0) if shown == value else json.dumps(f"{name}={shown}")

    return _JSON_ENV_ITEM.sub(one, text or "")


def nccl_json_env(text):
    """The recorded variables of nccl-tests' -J JSON ("env": ["K=V", ...]); None when the text
    is not that JSON (text output, or a run that wrote none)."""
    try:
        data = json.loads(text or "")
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("env"), list):
        return None
    return recorded(dict(str(item).partition("=")[::2] for item in data["env"] if "=" in str(item)))


def torch_log_env(text):
    """The recorded variables from the torch benchmark's ``{"wireup_bench_env": ...}`` line, with
    ``tuned_env`` (the file launch.sh sourced, '' when none); None when the log has no such line."""
    for line in (text or "").splitlines():
        start = line.find("{")
        if start < 0 or '"wireup_bench_env"' not in line:
            continue
        try:
            item, _end = json.JSONDecoder().raw_decode(line[start:])
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("wireup_bench_env"), dict):
            return {"vars": recorded(item["wireup_bench_env"]), "tuned_env": str(item.get("tuned_env") or "")}
    return None


def figure_env(given, tuned_state=None, seen=None):
    """One figure's environment record (see the module docstring).

    given: what wireup passed the process; tuned_state: tuned_env_state() of the file when the
    figure ran with it (None: default NCCL); seen: the process's own recorded variables."""
    out = {
        "mode": "tuned" if tuned_state else "default",
        "vars": recorded(given),
        "seen": seen,
        "tuned_file": None,
    }
    if tuned_state:
        origin = tuned_state.get("origin") or {}
        out["tuned_file"] = {
            "path": tuned_state.get("path"),
            "values": dict(tuned_state.get("values") or {}),
            "written": tuned_state.get("written", ""),
            "run_id": origin.get("run_id", ""),
            "host": origin.get("host", ""),
            "stale": bool(tuned_state.get("stale")),
            "stale_reasons": list(tuned_state.get("stale_reasons") or []),
        }
    return out


def describe_figure_env(env):
    """'default NCCL; NCCL_NVLS_ENABLE=0' or 'tuned NCCL (file, written ...); ...' for tables."""
    if not env:
        return "not recorded"
    shown = env.get("seen") if env.get("seen") is not None else env.get("vars")
    text = format_env(shown)
    tuned = env.get("tuned_file")
    if env.get("mode") == "tuned" and tuned:
        stale = ", STALE" if tuned.get("stale") else ""
        return f"tuned NCCL ({tuned.get('path')}, written {tuned.get('written') or '?'}{stale}); {text}"
    return f"default NCCL; {text}"
