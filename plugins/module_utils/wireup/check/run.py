"""wireup-check, the program: reads the node (nvidia-smi, sysfs), compares it with its baseline
(judge/quick.py), prints one line and exits 0 (healthy) or non-zero; optionally runs nccl-tests at
one size, writes the result for node_exporter's textfile collector (report/metrics.py), writes the
baseline (--write-baseline) or drains the node in Slurm when it fails (--drain, launch/slurm.py's rules).

It fails closed (issue 35): anything that stops it before its verdict is the verdict ERROR (judge),
never a crash; with --drain the node is drained before any metrics are written (a metrics folder
that another user owns can hold up nothing), and what cannot be written as metrics never leaves an
earlier PASS standing.

It runs on the node with the node's own python3 and the standard library only: the node_check role
installs this package as one executable zip (check/bundle.py). No controller is needed. Usage:

    wireup-check [--config /etc/wireup/check.json] [--bench] [--json] [--drain]
    wireup-check --write-baseline [--manual] < bench-part.json

The configuration file (written by the node_check role; every key optional, DEFAULTS below):
host, baseline, textfile_dir, textfile (auto: write where the folder exists; always: create it;
never), nvidia_smi, sysfs_root, require_baseline, timeout, slurm_node, drain_max_share (percent of
the node's partition wireup may hold drained), drain_max_nodes (and at most so many), history_dir
(where each drain it makes is an event until repair.yml collects it: record/history.py), bench {run,
collective, size, tolerance, iterations, warmup, timeout}.

    wireup-check --write-textfile NAME < text     (bench.yml: the node's bench figures, NAME.prom)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time

from ..core import atomicfile, checks
from ..judge import bandwidth, quick
from ..probe import gpuhealth, topology
from ..probe import nics as probe_nics
from ..probe.nvlink import parse_nvlink_status
from ..record import history
from ..render import prom
from ..report import metrics

CONFIG = "/etc/wireup/check.json"
TEXTFILE = "wireup_check.prom"
SMI_DIRS = ("/usr/local/nvidia/bin", "/usr/bin", "/usr/local/bin")
TOOL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULTS = {
    "host": "",
    "baseline": "/var/lib/wireup/check/baseline.json",
    "textfile_dir": "",
    "textfile": "auto",
    "nvidia_smi": "",
    "sysfs_root": "/",
    "require_baseline": False,
    "timeout": 10,
    "slurm_node": "",
    "drain_max_share": 10,
    "drain_max_nodes": 8,
    "history_dir": history.NODE_DIR,
    "bench": {
        "run": False,
        "collective": "all_reduce",
        "size": 1 << 30,
        "tolerance": 0.2,
        "iterations": 20,
        "warmup": 5,
        "timeout": 25,
    },
}
ENV = {"LC_ALL": "C", "LANG": "C"}


# ------------------------------------------------------------------------------ configuration
def said(err) -> str:
    """An exception as one short line: its text, or its type where the text alone says little
    (RecursionError: maximum recursion depth exceeded; KeyError: 'name')."""
    text = " ".join(str(err).split())[:200]
    return text if isinstance(err, (OSError, ValueError)) and text else f"{type(err).__name__}: {text}"


def _typed(key, value, default):
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{key} must be true or false, got {value!r}")
    elif isinstance(default, (int, float)):
        if not checks.is_number(value) or value < 0:
            raise ValueError(f"{key} must be a number >= 0, got {value!r}")
    elif not isinstance(value, str):
        raise ValueError(f"{key} must be a string, got {value!r}")
    return value


def merge_config(given) -> dict:
    """DEFAULTS with the file's values; ValueError naming an unknown key or a wrong type."""
    if not isinstance(given, dict):
        raise ValueError("the configuration is not a JSON object")
    out = json.loads(json.dumps(DEFAULTS))
    for key, value in given.items():
        if key not in DEFAULTS:
            raise ValueError(f"unknown key {key!r}")
        if key == "bench":
            if not isinstance(value, dict):
                raise ValueError("bench must be an object")
            for bkey, bvalue in value.items():
                if bkey not in DEFAULTS["bench"]:
                    raise ValueError(f"unknown key bench.{bkey!r}")
                out["bench"][bkey] = _typed(f"bench.{bkey}", bvalue, DEFAULTS["bench"][bkey])
        else:
            out[key] = _typed(key, value, DEFAULTS[key])
    return out


def load_config(path):
    """(config, error): the defaults when the file does not exist; an error when it cannot be
    read or used (the check then fails closed)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return merge_config(json.load(handle)), ""
    except FileNotFoundError:
        return merge_config({}), ""
    except (OSError, ValueError, RecursionError) as err:  # RecursionError: JSON nested too deep
        return merge_config({}), f"cannot use the configuration {path}: {said(err)}"


def load_baseline(path):
    """(baseline or None, error): None and '' when there is none; an error when it cannot be
    read or is not a baseline (fail closed)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError) as err:  # ValueError: not UTF-8
        return None, f"cannot read the baseline {path}: {said(err)}"
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as err:
        return None, f"the baseline {path} is not JSON ({said(err)}): cut off or edited"
    problem = quick.baseline_problem(doc)
    return (None, f"the baseline {path} is unusable: {problem}") if problem else (doc, "")


# ------------------------------------------------------------------------------ reading the node
def run_all(commands, timeout):
    """Run {key: argv} at the same time; {key: (rc, stdout, stderr)}, rc None when it outlived
    ``timeout`` seconds (killed) or could not start (stderr says why)."""
    procs, out = {}, {}
    env = dict(os.environ, **ENV)
    for key, argv in commands.items():
        try:
            # wireup-check is its own program on the node (no AnsibleModule, so no run_command):
            # ansible-core 2.21's pylint names subprocess calls in module_utils.
            procs[key] = subprocess.Popen(  # pylint: disable=ansible-bad-function
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
            )
        except OSError as err:
            out[key] = (None, b"", str(err).encode())
    deadline = time.monotonic() + timeout
    for key, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            out[key] = (proc.returncode, stdout, stderr)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out[key] = (None, b"", f"still running after {timeout} s: killed".encode())
    return out


def find_nvidia_smi(given=""):
    if given:
        return given if os.access(given, os.X_OK) else ""
    return shutil.which("nvidia-smi", path=os.pathsep.join([os.environ.get("PATH", ""), *SMI_DIRS])) or ""


def _smi_commands(smi):
    return {
        "topo -m": [smi, "topo", "-m"],
        "nvlink -s": [smi, "nvlink", "-s"],
        "--query-gpu": [smi, f"--query-gpu={quick.QUERY_FIELDS}", "--format=csv"],
        "-q -x": [smi, "-q", "-x"],
    }


def _first_line(data):
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[0][:200] if text else "no output"


def parse_gpus(outputs):
    """(topology, texts, problems, errors) from run_all's answers to _smi_commands: a command that
    failed or hung is a problem (the GPU stack is sick: FAIL), an output that does not parse an
    error (the check cannot judge: ERROR)."""
    texts, problems, errors = {}, [], []
    for name, (rc, stdout, stderr) in outputs.items():
        if rc != 0:
            said = _first_line(stderr or stdout)
            how = f"failed (exit code {rc})" if rc is not None else "did not answer"
            problems.append(quick._problem("nvidia_smi", "nvidia-smi", f"nvidia-smi {name} {how}: {said}"))
            continue
        try:
            texts[name] = topology.decode_output(stdout, f"nvidia-smi {name}")
        except ValueError as err:
            errors.append(str(err))
    if problems or errors:
        return None, texts, problems, errors
    try:
        query = topology.parse_query_gpu_csv(texts["--query-gpu"])
        topo = topology.parse_topo_matrix(texts["topo -m"])
        nvl = parse_nvlink_status(texts["nvlink -s"], len(query))
        return topology.combine_topology(topo=topo, nvlink=nvl, query=query), texts, [], []
    except ValueError as err:
        return None, texts, [], [str(err)]


def read_state(config, baseline, run=run_all):
    """(state, texts, problems, errors, notes): the node now, read as the baseline was."""
    smi = find_nvidia_smi(config["nvidia_smi"])
    problems, errors, notes, texts, topo = [], [], [], {}, None
    gpus_then = len(((baseline or {}).get("node") or {}).get("gpus") or [])
    if smi:
        topo, texts, problems, errors = parse_gpus(run(_smi_commands(smi), config["timeout"]))
    elif gpus_then:
        problems.append(
            quick._problem(
                "nvidia_smi",
                "nvidia-smi",
                f"nvidia-smi not found ({config['nvidia_smi'] or 'PATH, ' + ', '.join(SMI_DIRS)}): "
                f"the baseline has {gpus_then} GPU(s)",
            )
        )
    nics = probe_nics.parse_nic_facts(probe_nics.read_tree(config["sysfs_root"]))
    return quick.node_state(topo, nics), texts, problems, errors, notes


def gpu_health(texts, baseline):
    """(parsed, findings, problems, errors, notes) of issue 25's per-GPU health; nothing where no
    GPU was read."""
    text = texts.get("-q -x")
    if not text:
        return None, [], [], [], []
    try:
        parsed = gpuhealth.parse(text)
        found = list(gpuhealth.findings(parsed, previous=(baseline or {}).get("gpu_health")))
    except Exception as err:  # any read that fails is the check's ERROR, never its crash
        return None, [], [], [f"nvidia-smi -q -x could not be read ({said(err)})"], []
    return parsed, found, quick.gpu_health_problems(found), [], []


# ------------------------------------------------------------------------------ the benchmark
def bench_plan(config, baseline, gpus):
    """(argv, env, note): nccl-tests at one size, or None and why not."""
    figure = (baseline or {}).get("bench", {}).get("figure") or {}
    build = (baseline or {}).get("bench", {}).get("nccl_tests") or {}
    skip = bandwidth.nccl_tests_skip(gpus, config["host"])
    if skip:
        return None, None, f"benchmark skipped: {skip}"
    if not build.get("bin_dir"):
        return None, None, "benchmark skipped: the baseline names no nccl-tests build"
    b = config["bench"]
    exe = os.path.join(build["bin_dir"], f"{b['collective']}_perf")
    size = str(int(b["size"]))
    argv = ["timeout", str(int(b["timeout"])), exe, "-b", size, "-e", size, "-g", str(gpus)]
    argv += ["-w", str(int(b["warmup"])), "-n", str(int(b["iterations"]))]
    env = {"LD_LIBRARY_PATH": build["ld_library_path"]} if build.get("ld_library_path") else {}
    note = "" if figure.get("size") == int(b["size"]) else "no figure of the last passing bench at that size"
    return argv, env, note


def _changeable(path) -> str:
    """Why someone other than root (or this user) could change ``path`` or a folder above it
    ('' when no one could): an owner who is someone else, or a group or others who may write (a
    sticky folder such as /tmp excepted: only owners rename there, and the next part is checked)."""
    parts = os.path.abspath(path).split("/")
    for end in range(1, len(parts) + 1):
        here = "/".join(parts[:end]) or "/"
        st = os.lstat(here)
        if not atomicfile.trusted_owner(st.st_uid):
            return f"{here} is owned by uid {st.st_uid}"
        writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if writable and not stat.S_ISLNK(st.st_mode) and not st.st_mode & stat.S_ISVTX:
            return f"{here} is writable by its group or others"
    return ""


def untrusted(path, *, entries=False) -> str:
    """Why ``path`` is not root's alone ('' when it is): the path, where it leads, and with
    ``entries`` every file in that folder (a library folder: each is loaded from there)."""
    try:
        real = os.path.realpath(path)
        for one in dict.fromkeys([os.path.abspath(path), real]):
            problem = _changeable(one)
            if problem:
                return problem
        for entry in os.scandir(real) if entries else ():
            problem = _changeable(os.path.realpath(entry.path)) or _changeable(entry.path)
            if problem:
                return problem
    except OSError as err:
        return said(err)
    return ""


def bench_refusal(exe, ld_library_path) -> str:
    """Why the benchmark must not run ('' when it may): wireup-check runs as root, and runs no
    program and loads no library that another user could have changed (the venv's NCCL, where
    pytorch_venv_owner is not root)."""
    problem = untrusted(exe)
    for folder in ld_library_path.split(":") if ld_library_path else ():
        problem = problem or (
            untrusted(folder, entries=True) if folder else "LD_LIBRARY_PATH has an empty entry"
        )
    if not problem:
        return ""
    return (
        f"benchmark refused: {problem}: wireup-check runs nothing as root that another user can "
        "change (pytorch_venv_owner: root, or no --bench)"
    )


def run_bench(config, baseline, gpus):
    """(measured, notes, refusal): {collective, size, busbw, error} of the one-size run; the
    refusal ('' when it ran) says why it did not (bench_refusal)."""
    from ..probe import bench_output

    argv, env, note = bench_plan(config, baseline, gpus)
    if argv is None:
        return {}, [note], ""
    refusal = bench_refusal(argv[2], env.get("LD_LIBRARY_PATH", ""))
    if refusal:
        return {}, [], refusal
    b = config["bench"]
    proc = subprocess.run(  # pylint: disable=ansible-bad-function  # wireup-check's own, as in run_all
        argv, capture_output=True, check=False, env=dict(os.environ, **ENV, **env)
    )
    text = proc.stdout.decode("utf-8", "replace")
    measured = {"collective": b["collective"], "size": int(b["size"]), "busbw": None, "error": ""}
    found = bench_output.assess(text, proc.returncode)
    if found["problems"] or not found["parsed"]:
        measured["error"] = "; ".join(found["problems"]) or _first_line(proc.stderr or proc.stdout)
        return measured, [note] if note else [], ""
    measured["busbw"] = bench_output.figure(found["parsed"]["rows"], int(b["size"]), b["collective"])
    return measured, [note] if note else [], ""


# ------------------------------------------------------------------------------ the check
def _benchmark(config, baseline, state, found):
    """The one-size benchmark, where nothing else failed: its measure; its problem, notes and a
    refusal (an ERROR: it cannot judge what it was asked to) go into ``found``."""
    if found["errors"] or found["problems"]:
        return {}
    measured, notes, refusal = run_bench(config, baseline, len(state["gpus"] or []))
    found["notes"] += notes
    if refusal:
        found["errors"].append(refusal)
        return measured
    figure = ((baseline or {}).get("bench") or {}).get("figure")
    at = quick.since(baseline) if baseline else ""
    found["problems"] += quick.bench_problem(figure, measured, config["bench"]["tolerance"], at)
    return measured


def check(config, *, run_bench_now=False, run=run_all) -> quick.CheckRun:
    """The check's result (quick.result) with time and seconds."""
    start, now = time.monotonic(), time.time()
    baseline, error = load_baseline(config["baseline"])
    state, texts, problems, errors, notes = read_state(config, baseline, run)
    parsed, gpu_found, health, health_errors, health_notes = gpu_health(texts, baseline)
    found = {
        "errors": ([error] if error else []) + errors + health_errors,
        "problems": problems + health,
        "notes": notes + health_notes,
    }
    measured = _benchmark(config, baseline, state, found) if run_bench_now else {}
    return quick.result(
        config["host"],
        baseline,
        state,
        found=found,
        require_baseline=config["require_baseline"],
        time=now,
        seconds=round(time.monotonic() - start, 3),
        bench=measured,
        gpu_findings=gpu_found,
        gpu_health=parsed,
    )


def could_not_check(config, error, start=None) -> quick.CheckRun:
    """The result of a check that could not judge: ERROR naming why (it fails closed)."""
    seconds = round(time.monotonic() - start, 3) if start is not None else 0.0
    return quick.result(
        config["host"], None, None, found={"errors": [error]}, time=time.time(), seconds=seconds
    )


def judge(config, error="", *, run_bench_now=False, run=run_all) -> quick.CheckRun:
    """check()'s result; settings that cannot be used (``error``) or anything that stops the
    check before its verdict is the verdict ERROR, naming it: never a crash that drains nothing."""
    if error:
        return could_not_check(config, error)
    start = time.monotonic()
    try:
        return check(config, run_bench_now=run_bench_now, run=run)
    except Exception as err:
        return could_not_check(config, f"the check stopped on {said(err)}", start)


TEXTFILE_MODES = ("auto", "always", "never")


def textfile_folder(config):
    """(folder, note): where metrics go, by the configuration's textfile mode ('' and why not)."""
    folder, mode = config["textfile_dir"], config["textfile"]
    if mode not in TEXTFILE_MODES:
        return "", f"metrics not written: textfile mode {mode!r} is not one of {', '.join(TEXTFILE_MODES)}"
    if mode == "never" or not folder:
        return "", ""
    if mode == "always":
        os.makedirs(folder, mode=0o755, exist_ok=True)
    if not os.path.isdir(folder):
        return "", ""  # auto: no node_exporter here
    return folder, ""


def write_textfile(config, name, text):
    """Write ``name`` in the textfile folder atomically (atomicfile: a temporary file in the
    folder's descriptor whose name does not end in .prom, then renamed; the folder is not trusted:
    a FIFO or a link at the name is replaced, never opened or followed): (changed, note).
    Unchanged content is not written again; a failure is a note (metrics never change a verdict)
    and removes the old file, so no stale verdict stays for node_exporter."""
    if not metrics.TEXTFILE_NAME.fullmatch(name):
        return False, f"metrics not written: {name!r} is not a textfile name like wireup_bench.prom"
    try:
        folder, note = textfile_folder(config)
    except OSError as err:
        return False, f"metrics not written: {said(err)}"
    if not folder:
        return False, note
    path = os.path.join(folder, name)
    data = prom.utf8(text).encode("utf-8")
    try:
        if atomicfile.read_regular(path, len(data) + 1) == data:
            return False, ""
        atomicfile.write_bytes(path, data, mode=0o644)
    except (OSError, ValueError) as err:
        return False, f"metrics not written: {said(err)}{_remove_stale(path)}"
    return True, ""


def _remove_stale(path):
    """'; the old file removed' (or why not): a file that could not be replaced goes."""
    try:
        return "; the old file removed" if atomicfile.remove(path) else ""
    except OSError as err:
        return f"; the old file not removed: {said(err)}"


def check_metrics(result):
    """(text, note): wireup_check.prom's text; where it cannot be made (a shape the renderer
    refuses), the verdict alone (metrics.check_verdict_text) and a note saying why."""
    try:
        return metrics.check_text(result), ""
    except Exception as err:  # the metrics of a failing node are never lost to a stale PASS
        return metrics.check_verdict_text(result), f"metrics cut to the verdict: {said(err)}"


def write_check_textfile(config, result):
    """Write wireup_check.prom for ``result``; a note ('' when none) for the line."""
    text, cut = check_metrics(result)
    _changed, note = write_textfile(config, TEXTFILE, text)
    return "; ".join(n for n in (cut, note) if n)


def drain(config, result, run=subprocess.run):
    """On a failed check: drain the node in Slurm with the check's line as the reason (whose
    problem it is: quick.drain_whose), by slurm.drain_plan's rules (a node drained already, for
    wireup or by someone else, is left as it is) and within the blast radius of its partitions
    (blast.verdict over one read of every node: wireup's drains there plus this one stay within
    drain_max_share % and drain_max_nodes, else nothing is drained); never resumes anything.
    Each drain made is an event in the node's history folder (record_drain). Returns the lines
    saying what was done."""
    from ..launch import slurm

    node = config["slurm_node"] or socket.gethostname().split(".")[0]
    if not checks.is_host_name(node):
        return [f"Slurm: {node!r} is not a node name: not drained"]
    scontrol = shutil.which("scontrol", path=os.pathsep.join([os.environ.get("PATH", ""), TOOL_PATH]))
    if not scontrol:
        return ["Slurm: scontrol not found: not drained"]
    finding = quick.drain_finding(result)
    whose = quick.drain_whose(result)
    reason = slurm.drain_reason(finding, whose=whose, check="quick")
    argv = slurm.drain_argv(node, finding, whose=whose, check="quick")
    # run is subprocess.run (tests pass their own): wireup-check's own call, as in run_all.
    shown = run([scontrol, *slurm.NODE_STATE_ARGV[1:]], capture_output=True, text=True, check=False)  # pylint: disable=ansible-bad-function
    answer = {"stdout": shown.stdout, "stderr": shown.stderr, "rc": shown.returncode}
    refused = _over_budget(config, node, finding, answer)
    if refused:
        return refused
    plan = slurm.drain_plan([{"host": config["host"], "node": node, "reason": reason, "argv": argv}], answer)
    lines = list(plan["show"])
    for item in plan["drain"]:
        done = run(  # pylint: disable=ansible-bad-function
            [scontrol, *item["argv"][1:]], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            lines.append(
                f"Slurm: scontrol update failed (exit code {done.returncode}): {done.stderr.strip()[:200]}"
            )
        else:
            lines.append(record_drain(config, item["reason"]))
    return lines


def record_drain(config, reason) -> str:
    """The drain as an event in the node's history folder (history.write_node: who
    node:wireup-check, why the drain's reason); a line saying where, or why not (the drain stands)."""
    try:
        ev = history.event(config["host"], "drain", history.NODE_WHO, reason)
        path = history.write_node(config["history_dir"], ev)
    except (OSError, ValueError) as err:
        return f"history: the drain not recorded: {said(err)}"
    return f"history: the drain recorded in {path}"


def _over_budget(config, node, finding, answer) -> list:
    """The blast radius seen from one node: its partitions (or itself alone, in none) from
    ``scontrol show node -o``'s answer for every node. Lines when draining it would take more
    than the limit out (nothing is drained), or when the answer does not name it (it cannot tell:
    nothing is drained); [] when the drain may go ahead. Two nodes failing at the same moment
    both read the count before either drains: the limit can be passed by the nodes that drain
    within one read's time of each other (docs/repair.md)."""
    from ..launch import blast, slurm

    parsed = slurm.parse_show_node(answer["stdout"])
    st = parsed.get(node)
    if st is not None and st["drain"]:
        return []  # drained already: drain_plan says by whom, nothing new is taken out
    groups = blast.groups_of(parsed, [node]) if st else {}
    if st and not groups:
        groups = {f"node {node} (in no partition)": [node]}
    out = blast.held_out(parsed, slurm.reason_owner)
    share, cap = config["drain_max_share"], config["drain_max_nodes"]
    found = blast.verdict(groups, out, {node: finding}, max_share=share, max_nodes=cap)
    return [f"Slurm: {line}" for line in found["lines"]]


# ------------------------------------------------------------------------------ the baseline
def write_baseline(config, bench_text, *, manual=False, run=run_all):
    """Take the node's state now as its baseline (atomically, 0640, in a 0750 folder): after a
    passing bench (bench_text: quick.bench_part's JSON, from the controller) or by hand
    (manual). Refused when the node cannot be read or is not what the bench record judged.
    Returns (exit code, line, changed)."""
    host = config["host"]
    part = {"run_id": "manual", "gpu_count": 0, "links": [], "figure": {}, "nccl_tests": {}}
    try:
        part = part if manual else json.loads(bench_text)
    except ValueError as err:
        return 2, f"wireup-check: ERROR {host}: the bench part on stdin is not JSON ({err})", False
    problem = quick.bench_part_problem(part)
    if problem:
        return 2, f"wireup-check: ERROR {host}: the bench part on stdin is not usable ({problem})", False
    state, texts, problems, errors, _notes = read_state(config, None, run)
    if errors or problems:
        said = (errors or [p["message"] for p in problems])[0]
        return 2, f"wireup-check: ERROR {host}: baseline not written: {said}", False
    if manual:
        part.update(
            gpu_count=len(state["gpus"] or []),
            links=sorted((k["a"], k["b"], k["class"]) for k in state["links"]),
        )
    mismatch = quick.record_mismatch(part, state)
    if mismatch:
        return 1, f"wireup-check: FAIL {host}: baseline not written: {mismatch}", False
    old = load_baseline(config["baseline"])[0]
    if old and not manual and (old.get("bench") or {}).get("run_id") == part["run_id"]:
        return 0, f"wireup-check: baseline of {host} is already bench run {part['run_id']}", False
    parsed, _found, _p, _e, _n = gpu_health(texts, None)
    doc = quick.baseline_doc(host, part, state, taken="manual" if manual else "bench", gpu_health=parsed)
    folder = os.path.dirname(os.path.abspath(config["baseline"]))
    os.makedirs(folder, mode=0o750, exist_ok=True)
    atomicfile.write_json(config["baseline"], doc)
    how = "by hand" if manual else f"from bench run {part['run_id']}"
    return 0, f"wireup-check: baseline of {host} written {how} ({config['baseline']})", True


# ------------------------------------------------------------------------------ main
def parse_args(argv):
    parser = argparse.ArgumentParser(prog="wireup-check", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--config", default=CONFIG, help=f"configuration file (default {CONFIG})")
    parser.add_argument("--bench", action="store_true", help="run nccl-tests at the configured size too")
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON instead")
    parser.add_argument("--drain", action="store_true", help="on failure, drain this node in Slurm")
    parser.add_argument("--write-baseline", action="store_true", help="take the node now as its baseline")
    parser.add_argument("--manual", action="store_true", help="with --write-baseline: without a bench record")
    parser.add_argument("--write-textfile", metavar="NAME", help="write stdin as NAME in the textfile folder")
    for key in ("baseline", "nvidia_smi", "sysfs_root", "textfile_dir", "textfile", "host"):
        parser.add_argument(
            f"--{key.replace('_', '-')}", dest=key, help=f"override the configuration's {key}"
        )
    return parser.parse_args(argv)


def _public(result):
    """The result as --json prints it: the baseline's identity, not its whole body."""
    base = result.get("baseline") or {}
    out = {k: v for k, v in result.items() if k not in ("baseline", "gpu_health")}
    out["baseline"] = (
        {
            "run_id": (base.get("bench") or {}).get("run_id"),
            "time": base.get("time"),
            "taken": base.get("taken"),
        }
        if base
        else None
    )
    return out


def _say(text, stream=None):
    """One line on stdout (or ``stream``): the program's output (module_utils writes no print).
    Text from the node that is not UTF-8 (a NIC's name) shows as backslash escapes."""
    (stream or sys.stdout).write(f"{prom.utf8(text)}\n")


def _settings(args):
    """(config, error): the configuration file with the command line's overrides."""
    config, error = load_config(args.config)
    for key in ("baseline", "nvidia_smi", "sysfs_root", "textfile_dir", "textfile", "host"):
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    config["host"] = config["host"] or socket.gethostname().split(".")[0]
    return config, error


def _textfile_main(args, config):
    """--write-textfile NAME: stdin as NAME in the textfile folder; always exit 0."""
    changed, note = write_textfile(config, args.write_textfile, sys.stdin.read())
    _say(
        json.dumps({"changed": changed, "note": note}) if args.json else note or f"{args.write_textfile}: ok"
    )
    return 0


def _baseline_main(args, config, error):
    """--write-baseline [--manual]: the node now as its baseline (the bench part on stdin)."""
    if error:
        _say(f"wireup-check: ERROR {config['host']}: {error}")
        return 2
    code, line, changed = write_baseline(config, "" if args.manual else sys.stdin.read(), manual=args.manual)
    _say(json.dumps({"rc": code, "line": line, "changed": changed}) if args.json else line)
    return code


def _drain_lines(config, result):
    """drain()'s lines; a drain that fails says so (the verdict stands)."""
    try:
        return drain(config, result)
    except Exception as err:
        return [f"Slurm: not drained: {said(err)}"]


def _check_main(args, config, error):
    """The check: its verdict (ERROR for anything that stops it), then the drain on failure, then
    its textfile (the drain never waits on metrics), its line (or --json); its exit code."""
    result = judge(config, error, run_bench_now=args.bench or config["bench"]["run"])
    drained = _drain_lines(config, result) if args.drain and result["exit"] != 0 else []
    note = write_check_textfile(config, result)
    if note:
        result["notes"].append(note)
        result["line"] = quick.line(result)
    _say(json.dumps(_public(result), sort_keys=True, default=str) if args.json else result["line"])
    for text in drained:
        with contextlib.suppress(OSError):
            _say(text, sys.stderr)
    return result["exit"]


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    config, error = _settings(args)
    if args.write_textfile:
        return _textfile_main(args, config)
    if args.write_baseline:
        return _baseline_main(args, config, error)
    return _check_main(args, config, error)
