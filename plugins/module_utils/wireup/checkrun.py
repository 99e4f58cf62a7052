"""wireup-check, the program: reads the node (nvidia-smi, sysfs), compares it with its baseline
(nodecheck.py), prints one line and exits 0 (healthy) or non-zero; optionally runs nccl-tests at
one size, writes the result for node_exporter's textfile collector (promtext.py), writes the
baseline (--write-baseline) or drains the node in Slurm when it fails (--drain, slurm.py's rules).

It runs on the node with the node's own python3 and the standard library only: the node_check role
installs this package as one executable zip (checkbundle.py). No controller is needed. Usage:

    wireup-check [--config /etc/wireup/check.json] [--bench] [--json] [--drain]
    wireup-check --write-baseline [--manual] < bench-part.json

The configuration file (written by the node_check role; every key optional, DEFAULTS below):
host, baseline, textfile_dir, textfile (auto: write where the folder exists; always: create it;
never), nvidia_smi, sysfs_root, require_baseline, timeout, slurm_node, bench {run, collective,
size, tolerance, iterations, warmup, timeout}.

    wireup-check --write-textfile NAME < text     (bench.yml: the node's bench figures, NAME.prom)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time

from . import atomicfile, bench, fabric, nodecheck, promtext, topology
from .nvlink import parse_nvlink_status

try:  # issue 25's per-GPU health; absent from a wireup without it: skipped with one note
    from . import gpuhealth
except ImportError:
    gpuhealth = None

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
def _typed(key, value, default):
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{key} must be true or false, got {value!r}")
    elif isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
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
    except (OSError, ValueError) as err:
        return merge_config({}), f"cannot use the configuration {path}: {err}"


def load_baseline(path):
    """(baseline or None, error): None and '' when there is none; an error when it cannot be
    read or is not a baseline (fail closed)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None, ""
    except OSError as err:
        return None, f"cannot read the baseline {path}: {err}"
    try:
        doc = json.loads(text)
    except ValueError as err:
        return None, f"the baseline {path} is not JSON ({err}): cut off or edited"
    problem = nodecheck.baseline_problem(doc)
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
    commands = {
        "topo -m": [smi, "topo", "-m"],
        "nvlink -s": [smi, "nvlink", "-s"],
        "--query-gpu": [smi, f"--query-gpu={nodecheck.QUERY_FIELDS}", "--format=csv"],
    }
    if gpuhealth is not None:
        commands["-q -x"] = [smi, "-q", "-x"]
    return commands


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
            problems.append(
                nodecheck._problem("nvidia_smi", "nvidia-smi", f"nvidia-smi {name} {how}: {said}")
            )
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
            nodecheck._problem(
                "nvidia_smi",
                "nvidia-smi",
                f"nvidia-smi not found ({config['nvidia_smi'] or 'PATH, ' + ', '.join(SMI_DIRS)}): "
                f"the baseline has {gpus_then} GPU(s)",
            )
        )
    nics = fabric.parse_nic_facts(fabric.read_tree(config["sysfs_root"]))
    return nodecheck.node_state(topo, nics), texts, problems, errors, notes


def gpu_health(texts, baseline):
    """(parsed, findings, problems, errors, notes) of issue 25's per-GPU health; skipped with one
    note where this wireup has no wireup.gpuhealth, or no GPU was read."""
    if gpuhealth is None:
        return None, [], [], [], ["GPU health not checked (this wireup has no wireup.gpuhealth)"]
    text = texts.get("-q -x")
    if not text:
        return None, [], [], [], []
    try:
        parsed = gpuhealth.parse(text)
        found = list(gpuhealth.findings(parsed, previous=(baseline or {}).get("gpu_health")))
    except ValueError as err:
        return None, [], [], [f"nvidia-smi -q -x: {err}"], []
    return parsed, found, nodecheck.gpu_health_problems(found), [], []


# ------------------------------------------------------------------------------ the benchmark
def bench_plan(config, baseline, gpus):
    """(argv, env, note): nccl-tests at one size, or None and why not."""
    figure = (baseline or {}).get("bench", {}).get("figure") or {}
    build = (baseline or {}).get("bench", {}).get("nccl_tests") or {}
    skip = bench.nccl_tests_skip(gpus, config["host"])
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


def run_bench(config, baseline, gpus):
    """(measured, notes): {collective, size, busbw, error} of the one-size run."""
    from . import nccltests

    argv, env, note = bench_plan(config, baseline, gpus)
    if argv is None:
        return {}, [note]
    b = config["bench"]
    proc = subprocess.run(  # pylint: disable=ansible-bad-function  # wireup-check's own, as in run_all
        argv, capture_output=True, check=False, env=dict(os.environ, **ENV, **env)
    )
    text = proc.stdout.decode("utf-8", "replace")
    measured = {"collective": b["collective"], "size": int(b["size"]), "busbw": None, "error": ""}
    found = nccltests.assess(text, proc.returncode)
    if found["problems"] or not found["parsed"]:
        measured["error"] = "; ".join(found["problems"]) or _first_line(proc.stderr or proc.stdout)
        return measured, [note] if note else []
    measured["busbw"] = nccltests.figure(found["parsed"]["rows"], int(b["size"]), b["collective"])
    return measured, [note] if note else []


# ------------------------------------------------------------------------------ the check
def check(config, *, run_bench_now=False, run=run_all):
    """The check's result (nodecheck.result) with time and seconds."""
    start, now = time.monotonic(), time.time()
    baseline, error = load_baseline(config["baseline"])
    state, texts, problems, errors, notes = read_state(config, baseline, run)
    errors = ([error] if error else []) + errors
    parsed, found, health, health_errors, health_notes = gpu_health(texts, baseline)
    problems, errors, notes = problems + health, errors + health_errors, notes + health_notes
    measured = {}
    if run_bench_now and not errors and not problems:
        measured, more = run_bench(config, baseline, len(state["gpus"] or []))
        notes += more
        figure = ((baseline or {}).get("bench") or {}).get("figure")
        at = nodecheck.since(baseline) if baseline else ""
        problems += nodecheck.bench_problem(figure, measured, config["bench"]["tolerance"], at)
    return nodecheck.result(
        config["host"],
        baseline,
        state,
        found={"errors": errors, "problems": problems, "notes": notes},
        require_baseline=config["require_baseline"],
        time=now,
        seconds=round(time.monotonic() - start, 3),
        bench=measured,
        gpu_findings=found,
        gpu_health=parsed,
    )


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
    """Write ``name`` in the textfile folder atomically (a temporary file in the same folder whose
    name does not end in .prom, then its name): (changed, note). Unchanged content is not written
    again; a failure is a note (metrics never change a verdict)."""
    if not promtext.TEXTFILE_NAME.fullmatch(name):
        return False, f"metrics not written: {name!r} is not a textfile name like wireup_bench.prom"
    try:
        folder, note = textfile_folder(config)
        if not folder:
            return False, note
        path = os.path.join(folder, name)
        with contextlib.suppress(OSError), open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return False, ""
        atomicfile.write_text(path, text, mode=0o644)
    except (OSError, ValueError) as err:
        return False, f"metrics not written: {err}"
    return True, ""


def drain(config, result, run=subprocess.run):
    """On a failed check: drain the node in Slurm with the check's line as the reason, by
    slurm.drain_plan's rules (a node drained already, for wireup or by someone else, is left as
    it is); never resumes anything. Returns the lines saying what was done."""
    from . import slurm, validate

    node = config["slurm_node"] or socket.gethostname().split(".")[0]
    if not validate.is_host_name(node):
        return [f"Slurm: {node!r} is not a node name: not drained"]
    scontrol = shutil.which("scontrol", path=os.pathsep.join([os.environ.get("PATH", ""), TOOL_PATH]))
    if not scontrol:
        return ["Slurm: scontrol not found: not drained"]
    reason = slurm.drain_reason(nodecheck.reason(result))
    argv = slurm.drain_argv(node, nodecheck.reason(result))
    # run is subprocess.run (tests pass their own): wireup-check's own call, as in run_all.
    show_argv = [scontrol, *slurm.node_state_argv([node])[1:]]
    shown = run(show_argv, capture_output=True, text=True, check=False)  # pylint: disable=ansible-bad-function
    plan = slurm.drain_plan(
        [{"host": config["host"], "node": node, "reason": reason, "argv": argv}],
        {"stdout": shown.stdout, "stderr": shown.stderr, "rc": shown.returncode},
    )
    lines = list(plan["show"])
    for item in plan["drain"]:
        done = run(  # pylint: disable=ansible-bad-function
            [scontrol, *item["argv"][1:]], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            lines.append(
                f"Slurm: scontrol update failed (exit code {done.returncode}): {done.stderr.strip()[:200]}"
            )
    return lines


# ------------------------------------------------------------------------------ the baseline
def write_baseline(config, bench_text, *, manual=False, run=run_all):
    """Take the node's state now as its baseline (atomically, 0640, in a 0750 folder): after a
    passing bench (bench_text: nodecheck.bench_part's JSON, from the controller) or by hand
    (manual). Refused when the node cannot be read or is not what the bench record judged.
    Returns (exit code, line, changed)."""
    host = config["host"]
    part = {"run_id": "manual", "gpu_count": 0, "links": [], "figure": {}, "nccl_tests": {}}
    try:
        part = part if manual else json.loads(bench_text)
    except ValueError as err:
        return 2, f"wireup-check: ERROR {host}: the bench part on stdin is not JSON ({err})", False
    problem = nodecheck.bench_part_problem(part)
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
    mismatch = nodecheck.record_mismatch(part, state)
    if mismatch:
        return 1, f"wireup-check: FAIL {host}: baseline not written: {mismatch}", False
    old = load_baseline(config["baseline"])[0]
    if old and not manual and (old.get("bench") or {}).get("run_id") == part["run_id"]:
        return 0, f"wireup-check: baseline of {host} is already bench run {part['run_id']}", False
    parsed, _found, _p, _e, _n = gpu_health(texts, None)
    doc = nodecheck.baseline_doc(host, part, state, taken="manual" if manual else "bench", gpu_health=parsed)
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
    """One line on stdout (or ``stream``): the program's output (module_utils writes no print)."""
    (stream or sys.stdout).write(f"{text}\n")


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


def _check_main(args, config, error):
    """The check: its line (or --json), its textfile, the drain on failure; its exit code."""
    if error:  # settings that cannot be used: nothing is read, the check fails closed
        result = nodecheck.result(
            config["host"], None, None, found={"errors": [error]}, time=time.time(), seconds=0.0
        )
    else:
        result = check(config, run_bench_now=args.bench or config["bench"]["run"])
    try:
        _changed, note = write_textfile(config, TEXTFILE, promtext.check_text(result))
    except ValueError as err:  # metrics never stop the check
        note = f"metrics not written: {err}"
    if note:
        result["notes"].append(note)
        result["line"] = nodecheck.line(result)
    drained = drain(config, result) if args.drain and result["exit"] != 0 else []
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
