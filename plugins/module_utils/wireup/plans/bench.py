"""The bench role's plan (on each node) and the node's results for the report: every decision of
roles/bench in one tested place; the tasks only execute it.

plan(): inputs are the node's facts (wireup_node from preflight), the role's settings
(BenchSettings: each bench_* variable the plan reads, by name), the nccl-tests build (the
nccl_tests role's fact, None when that role did not run) and the tuned env file's text as read
before the run. It returns a BenchPlan: the commands, environments, torch jobs and skips.

multi_node(): the torch jobs across the whole group (torch_multi.yml), or why they are skipped.

node_results(): the registered outputs of one node's bench tasks -> the node data that
host_record.build_record takes (nccl-tests outputs, the tuning sweep, the tuned env file's state); the
role keeps it as the fact __bench_result for the report play (roles/bench_report).

The TypedDicts are what the role's YAML may read (tests/unit/test_plan_types.py checks every
``__bench_plan.<key>`` of the task files against them).
"""

from __future__ import annotations

import base64
import dataclasses
from typing import TypedDict

from ..core import redact
from ..judge import bandwidth, benchenv
from ..probe import bench_output, topology

# dpkg's file lists that tell when the driver and NCCL last changed (benchenv.change_probes).
PACKAGE_LIST_PATTERNS = (
    "libnccl2*.list",
    "nvidia-driver-*.list",
    "libnvidia-compute-*.list",
    "nvidia-kernel-common-*.list",
)
TUNED_FILE = "nccl-tuned.env"
TORCH_SCRIPT = "torch_allreduce.py"
STEPCOST_SCRIPT = "ddp_step.py"


# The role's defaults a play reads and no plan does (playbooks/bench.yml's node-alone play batches
# its nodes by bench_single_serial): every other bench_* default is a BenchSettings field.
PLAY_SETTINGS = ("bench_single_serial",)


@dataclasses.dataclass(frozen=True)
class BenchSettings:
    """The role's variables the plan reads (each named after its variable without ``bench_``),
    plus wireup_job_env, wireup_base_dir and stepcost_only (`--tags stepcost` alone). Every field
    is required: a variable the task forgets, or a misspelt one, is a TypeError."""

    collectives: list
    min_bytes: str | int
    max_bytes: str | int
    step_factor: int
    iterations: int
    warmup_iterations: int
    env: dict
    timeout: int
    torch: bool
    torch_min_bytes: str | int
    torch_max_bytes: str | int
    torch_cpu_max_bytes: str | int
    torch_step_factor: int
    stepcost: bool
    stepcost_params: list
    stepcost_cpu_params: list
    stepcost_hooks: list
    nccl_tune: bool
    nccl_tune_candidates: list
    nccl_tune_min_gain: float
    use_tuned_env: bool
    dir: str
    job_env: dict
    base_dir: str
    stepcost_only: bool


class NcclRun(TypedDict):
    collective: str
    argv: list[str]
    json_file: str


class Compare(TypedDict, total=False):
    """all_reduce at the top size, default NCCL beside other settings ({} when nothing is compared)."""

    mode: str
    store: bool
    size: str | int
    min_gain: float
    envs: list[dict]
    tried: list[dict]
    argv: list[str]


class TorchJob(TypedDict):
    """One torch benchmark job through torchrun_launch: kind (the report's key for its log), job
    (its name), script (in files/bench/), args (the script's arguments)."""

    kind: str
    job: str
    script: str
    args: list[str]


class Tuned(TypedDict):
    used: bool
    text: str
    values: dict[str, str]


class Probe(TypedDict):
    paths: list[str]
    patterns: list[str]


class Multi(TypedDict):
    """The torch jobs the plan wants across the group (bench.multi_node decides whether they run)."""

    torch: bool
    stepcost: bool


class BenchPlan(TypedDict):
    bench_dir: str
    tuned_path: str
    tuned: Tuned
    # The tuned env file the torch jobs' launch scripts source ('' : default NCCL).
    tuned_env_file: str
    env: dict[str, str]
    env_default: dict[str, str]
    nccl_env: dict[str, str]
    torch_env_given: dict[str, str]
    nccl_runs: list[NcclRun]
    json: bool
    compare: Compare
    torch_single: bool
    torch_args_gpu: list[str]
    torch_args_cpu: list[str]
    stepcost: bool
    stepcost_single: bool
    stepcost_args_gpu: list[str]
    stepcost_args_cpu: list[str]
    stepcost_only: bool
    multi: Multi
    scripts: list[str]
    notes: list[str]
    skipped: str
    probe: Probe
    single_jobs: list[TorchJob]


class MultiNode(TypedDict):
    run: bool
    skipped: str
    lost: list[str]
    gpu: bool
    stepcost: bool
    jobs: list[TorchJob]
    notes: list[str]


class Tuning(TypedDict, total=False):
    """bench.tuning's answer ({} when the plan compares nothing): bandwidth.pick_tuning's ranking
    plus what the comparison (tasks/main.yml) shows and writes."""

    candidates: list[dict]
    best: dict
    best_busbw: float | None
    default_busbw: float | None
    size: str | int
    path: str
    mode: str
    min_gain: float
    env: dict
    file_text: str
    summary: str
    writes: list[str]  # the tuned env file's path when a sweep stores a winner, else []
    removes: list[str]  # its path when a sweep found no winner (a stale file goes), else []


class NcclOutput(TypedDict):
    """One collective's nccl-tests run as node_results keeps it: its text, exit code, -J JSON."""

    output: str
    rc: int | None
    json: str


class NodeData(TypedDict, total=False):
    """node_results' answer (kept as __bench_result): what host_record.build_record judges of a node.
    A node that stopped early has only failed and skipped (NO_DATA). The store checks each node's
    against it before judging (bench_report.store_nodes, core/shape.py): its topology is the node's own
    module's answer."""

    failed: bool
    skipped: str
    topology: topology.Topology
    nccl_tests: dict[str, NcclOutput]
    env: dict
    figure_env: dict
    tuned_env: dict
    versions: dict
    gpus: int | None
    tuning: Tuning


def _iterations(settings):
    return ["-w", str(settings.warmup_iterations), "-n", str(settings.iterations)]


def _torch_args(settings, max_bytes):
    sizes = ["--min-bytes", str(settings.torch_min_bytes), "--max-bytes", str(max_bytes)]
    loops = ["--warmup", str(settings.warmup_iterations), "--iters", str(settings.iterations)]
    return [*sizes, "--factor", str(settings.torch_step_factor), *loops]


def _stepcost_args(settings, params, gloo):
    """files/bench/ddp_step.py's arguments (issue 16): sizes, hooks, warm-up (at least 3), steps."""
    args = ["--params", ",".join(str(p) for p in params), "--hooks", ",".join(settings.stepcost_hooks)]
    args += ["--warmup", str(max(int(settings.warmup_iterations), 3))]
    args += ["--iters", str(settings.iterations)]
    return [*args, "--backend", "gloo"] if gloo else args


def _torch_jobs(scope, wanted, args):
    """[TorchJob] of the wanted torch jobs ("torch": the all-reduce, "stepcost": the DDP step) for
    scope single/multi; args: {"torch": [...], "stepcost": [...]} (the GPU or the CPU sizes)."""
    jobs = (
        ("torch", "bench-torch", TORCH_SCRIPT, ""),
        ("stepcost", "bench-stepcost", STEPCOST_SCRIPT, "stepcost_"),
    )
    return [
        {"kind": f"{prefix}{scope}_node", "job": f"{job}-{scope}", "script": script, "args": args[key]}
        for key, job, script, prefix in jobs
        if key in wanted
    ]


def _tuned(settings, tuned_text, host, tuned_path):
    """(Tuned, notes): the tuned env file's settings when bench_use_tuned_env asks for them."""
    values = benchenv.parse_tuned_env(tuned_text or "")["values"] if settings.use_tuned_env else {}
    notes = []
    if settings.use_tuned_env and not values:
        notes.append(
            f"bench: bench_use_tuned_env is true but {host} has no {tuned_path}: its figures measure "
            "default NCCL (run bench.yml -e bench_nccl_tune=true first to write one)"
        )
    text = (tuned_text or "") if settings.use_tuned_env else ""
    return {"used": bool(values), "text": text, "values": values}, notes


def _envs(settings, build, tuned):
    """Every benchmark process: wireup_job_env, then bench_env, then (nccl-tests built against the
    venv's NCCL wheel) that library's folder; a tuned file's settings sit under all of them, as
    launch.sh sources the file before the job's own env."""
    ld_path = (build or {}).get("ld_library_path") or ""
    job_env, bench_env = dict(settings.job_env or {}), dict(settings.env or {})
    default = {**job_env, **bench_env, **({"LD_LIBRARY_PATH": ld_path} if ld_path else {})}
    values = tuned["values"] if tuned["used"] else {}
    return {
        "env": {**job_env, **bench_env},
        "env_default": default,
        "nccl_env": {**values, **default},
        "torch_env_given": {**values, **job_env, **bench_env},
    }


def _probe(base, tuned_exists, build, gpu):
    """What the find task looks at after the plan: dpkg's file lists, the tuned env file, the
    driver's nvidia-smi and the NCCL library nccl-tests load (their times: benchenv)."""
    paths = {
        "/var/lib/dpkg/info",
        base if tuned_exists else "",
        (build or {}).get("ld_library_path") or "",
        str(gpu.get("nvidia_smi") or "").rpartition("/")[0],
    }
    return {
        "paths": sorted(paths - {""}),
        "patterns": [*PACKAGE_LIST_PATTERNS, TUNED_FILE, "nvidia-smi", "libnccl.so.2"],
    }


def _nccl_runs(settings, build, count):
    """[NcclRun] of every collective. `sh -c` only to remove the previous JSON first: nccl-tests
    never overwrites, it writes FILE.1. `timeout` stops a hung collective; its rc (124) then shows
    in the report as a FAIL."""
    sizes = ["-b", str(settings.min_bytes), "-e", str(settings.max_bytes), "-f", str(settings.step_factor)]
    args = [*sizes, "-g", str(count), *_iterations(settings)]
    runs = []
    for name in settings.collectives:
        json_file = f"{settings.dir}/{name}.json"
        argv = [
            "/bin/sh",
            "-c",
            'rm -f "$1" && shift && exec "$@"',
            "sh",
            json_file,
            "timeout",
            str(settings.timeout),
        ]
        argv += [f"{build['bin_dir']}/{name}_perf", *args, *(["-J", json_file] if build.get("json") else [])]
        runs.append({"collective": name, "argv": argv, "json_file": json_file})
    return runs


def _compare(settings, build, count, tuned, env_default):
    """all_reduce at the largest size, default NCCL beside other settings: the tuning sweep, or
    with bench_use_tuned_env the tuned file's settings (the report shows both side by side)."""
    sweep = bool(settings.nccl_tune)
    others = (
        list(settings.nccl_tune_candidates or []) if sweep else ([tuned["values"]] if tuned["used"] else [])
    )
    if count < 2 or not others:
        return {}
    top = settings.max_bytes
    return {
        "mode": "sweep" if sweep else "tuned_vs_default",
        "store": sweep,
        "size": top,
        "min_gain": float(settings.nccl_tune_min_gain),
        # Every setting sits under the default environment (wireup_job_env and bench_env win).
        "envs": [env_default] + [{**dict(e), **env_default} for e in others],
        "tried": [{}] + [dict(e) for e in others],
        "argv": [
            *["timeout", str(settings.timeout), f"{build['bin_dir']}/all_reduce_perf"],
            *["-b", str(top), "-e", str(top), "-g", str(count), *_iterations(settings)],
        ],
    }


def _torch_plan(settings, present, count):
    """The torch all-reduce and the DDP step benchmark: alone on this node (the all-reduce on 2+
    GPUs, the step on 1+), across the group (torch_multi.yml), and their GPU and CPU arguments.
    `--tags stepcost` alone (stepcost_only): the step benchmark only."""
    return {
        "torch_single": bool(settings.torch) and present and count >= 2 and not settings.stepcost_only,
        "torch_args_gpu": _torch_args(settings, settings.torch_max_bytes),
        "torch_args_cpu": _torch_args(settings, settings.torch_cpu_max_bytes),
        "stepcost": bool(settings.stepcost),
        "stepcost_single": bool(settings.stepcost) and present,
        "stepcost_args_gpu": _stepcost_args(settings, settings.stepcost_params or [], False),
        "stepcost_args_cpu": _stepcost_args(settings, settings.stepcost_cpu_params or [], True),
        "stepcost_only": bool(settings.stepcost_only),
        "multi": {
            "torch": bool(settings.torch) and not settings.stepcost_only,
            "stepcost": bool(settings.stepcost),
        },
    }


def _scripts(settings):
    """What files/bench/ ships into bench_dir for the torch jobs."""
    return ([TORCH_SCRIPT] if not settings.stepcost_only else []) + (
        [STEPCOST_SCRIPT] if settings.stepcost else []
    )


def plan(node, settings, build=None, tuned_text=None, host=""):
    """Every decision of the bench role on one node (a BenchPlan).

    node: wireup_node ({gpu: {present, count, nvidia_smi}}); settings: BenchSettings; build:
    nccl_tests_build or None; tuned_text: the tuned env file's text before the run (None: there is
    no tuned env file). Raises ValueError (naming the variable and the fix) when the run cannot go
    on. single_jobs: the torch jobs this node runs alone, in order: the all-reduce on 2+ GPUs, the
    DDP step benchmark on 1+."""
    gpu = (node or {}).get("gpu") or {}
    present, count = bool(gpu.get("present")), int(gpu.get("count") or 0)
    base = str(settings.base_dir).rstrip("/")
    tuned_path = f"{base}/{TUNED_FILE}"
    tuned, notes = _tuned(settings, tuned_text, host, tuned_path)
    out = {
        "bench_dir": settings.dir,
        "tuned_path": tuned_path,
        "tuned": tuned,
        "tuned_env_file": tuned_path if tuned["used"] else "",
        **_envs(settings, build, tuned),
        "nccl_runs": [],
        "json": False,
        "compare": {},
        **_torch_plan(settings, present, count),
        "scripts": _scripts(settings),
        "notes": notes,
        "skipped": "",
        "probe": _probe(base, tuned_text is not None, build, gpu),
    }
    _plan_gpu_runs(out, settings, build, host, count=count if present else None)
    wanted = [k for k, on in (("torch", out["torch_single"]), ("stepcost", out["stepcost_single"])) if on]
    out["single_jobs"] = _torch_jobs(
        "single", wanted, {"torch": out["torch_args_gpu"], "stepcost": out["stepcost_args_gpu"]}
    )
    return out


def _plan_gpu_runs(out, settings, build, host, *, count):
    """nccl-tests' runs and the comparison on a GPU node (count: its GPUs; None: no GPU, skip)."""
    if count is None:
        out["skipped"] = "no NVIDIA GPU: GPU benchmarks skipped"
        out["notes"].append(
            f"bench: nccl-tests and the single-node torch benchmark skipped on {host}: no NVIDIA GPU "
            "found (PCI vendor 10de)"
        )
        return
    if settings.stepcost_only:
        return
    # Issue 26, item 5: no nccl-tests where they cannot give a figure (bandwidth.nccl_tests_skip).
    skip = bandwidth.nccl_tests_skip(count, host)
    if skip:
        out["skipped"] = skip
        out["notes"].append(f"bench: {skip}")
        return
    if not build:
        raise ValueError(
            f"nccl_tests_build is not set on {host}: run bench.yml with the nccl_tests tag too "
            "(e.g. --tags nccl_tests,bench) or without tags, so the nccl_tests role builds the binaries "
            "first."
        )
    out["nccl_runs"] = _nccl_runs(settings, build, count)
    out["json"] = bool(build.get("json"))
    out["compare"] = _compare(settings, build, count, out["tuned"], out["env_default"])


def fresh_log(job, launch):
    """The log path torchrun_launch's result (launch, {} when none) gives for job, or '' when it
    is a result left by an earlier job (its log path names another job): the one rule for whether a
    benchmark's result on a node is this job's."""
    log = (launch or {}).get("log") or ""
    return log if f"/{job}-" in log else ""


def _busbw_at_top(text):
    """all_reduce's figure at the largest size it has one (bench_output.figure: the verdict's rule)."""
    rows = bench_output.parse(text or "")["rows"]
    sizes = bench_output.figure_sizes(rows, "all_reduce")
    return bench_output.figure(rows, sizes[-1], "all_reduce") if sizes else None


def origin_of(run_id, host, node, build):
    """The tuned env file's origin line: which run, node, driver, NCCL and nccl-tests wrote it."""
    run_id = str(run_id or "")
    written = ""
    if len(run_id) >= 16:
        # The run id's time (UTC): the file of one run carries one date, whoever computes it.
        written = f"{run_id[0:4]}-{run_id[4:6]}-{run_id[6:8]}T{run_id[9:11]}:{run_id[11:13]}:{run_id[13:15]}Z"
    return {
        "run_id": run_id,
        "host": host,
        "written": written,
        "driver": ((node or {}).get("driver") or {}).get("version"),
        "nccl": (build or {}).get("nccl_version"),
        "nccl_tests": (build or {}).get("version"),
    }


def _measured(compare, runs):
    """[{env, busbw}] of the comparison's registered runs (None where a run failed or printed nothing)."""
    measured = []
    for tried, run in zip(compare["tried"], runs or [], strict=False):
        busbw = None
        if (run or {}).get("rc") == 0:
            try:
                busbw = _busbw_at_top((run or {}).get("stdout"))
            except ValueError:
                busbw = None
        measured.append({"env": tried, "busbw": busbw})
    return measured


def tuning(the_plan, runs, origin=None):
    """The comparison's answer (a Tuning) from its registered runs (in the order of
    plan.compare.envs): bandwidth.pick_tuning's dict plus size, path, mode, min_gain, env, the
    tuned env file's text a sweep writes (file_text; '' when nothing beat the default: the file is
    removed), one line for the play output (summary) and the file's fate, each a list the tasks
    loop over (writes, removes: its path or nothing). {} when the plan compares nothing."""
    compare = the_plan.get("compare") or {}
    if not compare:
        return {}
    out = bandwidth.pick_tuning(_measured(compare, runs), compare["min_gain"])
    out.update(
        size=compare["size"],
        path=the_plan["tuned_path"],
        mode=compare["mode"],
        min_gain=compare["min_gain"],
        env=the_plan["env_default"],
        file_text="",
    )
    if compare["store"] and out["best"]:
        origin = dict(origin or {}, size=compare["size"], busbw=out["best_busbw"])
        origin["default_busbw"] = out["default_busbw"]
        out["file_text"] = benchenv.tuned_env_file(out["best"], origin)
    others = "; ".join(f"{benchenv.format_env(c['env'])}: {c['busbw']}" for c in out["candidates"][1:])
    stored = f"; stored {benchenv.format_env(out['best'])} in {out['path']}" if out["file_text"] else ""
    what = "tuning" if compare["store"] else "tuned env vs default"
    out["summary"] = (
        f"bench {what}: all_reduce at {compare['size']}, default NCCL {out['default_busbw']} GB/s; "
        f"{others} GB/s{stored}"
    )
    out["writes"] = [out["path"]] if out["file_text"] else []
    out["removes"] = [out["path"]] if compare["store"] and not out["file_text"] else []
    return out


def decoded(text):
    """Base64 text (slurp's content) -> str; '' when it is not base64."""
    try:
        return base64.b64decode(text or "").decode("utf-8", errors="replace")
    except ValueError:
        return ""


NO_DATA = {
    "failed": True,
    "skipped": "no bench data: the host failed or became unreachable during bench.yml (see the play output)",
}


def _nccl_outputs(facts, secret):
    """{collective: {output, rc, json}} from the registered runs and -J JSON reads (the JSON's
    environment through redact)."""
    runs = (facts.get("nccl_runs") or {}).get("results") or []
    jsons = (facts.get("nccl_json") or {}).get("results") or []
    out = {}
    for index, run in enumerate(runs):
        item = jsons[index] if index < len(jsons) and isinstance(jsons[index], dict) else {}
        out[run["item"]["collective"]] = {
            "output": "\n".join([run.get("stdout") or "", run.get("stderr") or ""]),
            "rc": run.get("rc", -1),
            "json": benchenv.redact_nccl_json(decoded(item["content"]), secret) if "content" in item else "",
        }
    return out


def _tuned_env_state(facts, the_plan, tune, node, build):
    """The tuned env file after the run (benchenv.tuned_env_state's input): its text, time and
    mode, and what dates the last driver/NCCL change (dpkg's lists, nvidia-smi, libnccl.so.2)."""
    tuned_path = the_plan.get("tuned_path", "")
    read = facts.get("tuned_read") or {}
    found = {f.get("path"): f for f in (facts.get("found") or {}).get("files") or []}
    text = decoded(read["content"]) if "content" in read else None
    stat = found.get(tuned_path) or {}
    if tune and the_plan["compare"].get("store"):
        # The sweep replaced the file (or removed it when nothing beat the default).
        text = tune["file_text"] or None
        stat = {"mode": "0640"} if text else {}
    lib = f"{build['ld_library_path']}/libnccl.so.2" if build.get("ld_library_path") else ""
    watched = {(node.get("gpu") or {}).get("nvidia_smi") or "": "driver", lib: "nccl"}
    files = [
        {"item": {"what": watched[path], "path": path}, "stat": {"exists": True, "mtime": f.get("mtime")}}
        for path, f in found.items()
        if path and watched.get(path)
    ]
    lists = [f for path, f in found.items() if path.startswith("/var/lib/dpkg/info/")]
    return {
        "path": tuned_path,
        "text": text,
        "mtime": stat.get("mtime"),
        "mode": stat.get("mode", ""),
        "package_lists": lists if text is not None else [],
        "files": files if text is not None else [],
    }


def _stopped_early(the_plan, facts):
    """A node that stopped before its plan, or before a step its plan has, left no whole result."""
    return (
        not the_plan
        or (the_plan.get("nccl_runs") and not facts.get("nccl_runs"))
        or (the_plan.get("compare") and not facts.get("tune_runs"))
    )


# What node_results reads of a node (the bench role's registers and facts, passed by name).
NODE_FACTS = frozenset(
    [
        "plan",
        "run_id",
        "node",
        "build",
        "topology",
        "tuned_read",
        "found",
        "nccl_runs",
        "nccl_json",
        "tune_runs",
        "host",
        "secret_env",
    ]
)


def node_results(facts) -> NodeData:
    """One node's bench data for host_record.build_record, from what its tasks registered.

    facts: {plan, run_id, node (wireup_node), build (nccl_tests_build|None), topology
    (gpu_topology_facts), tuned_read (slurp result), found (find result), nccl_runs and nccl_json
    (registered loop results), tune_runs (registered), host (inventory name), secret_env (the
    host's wireup_secret_env)}. No secret value leaves it: every env mapping, and the -J JSON's
    environment, through redact (the report play's variables and the store's arguments hold none)."""
    unknown = sorted(set(facts) - NODE_FACTS)
    if unknown:
        raise ValueError(
            f"bench.node_results: unknown {', '.join(unknown)} (it reads {', '.join(sorted(NODE_FACTS))})"
        )
    the_plan = facts.get("plan") or {}
    if _stopped_early(the_plan, facts):
        return dict(NO_DATA)
    node = facts.get("node") or {}
    build = facts.get("build") or {}
    secret = list(facts.get("secret_env") or [])
    origin = origin_of(facts.get("run_id"), facts.get("host"), node, build)
    tune = tuning(the_plan, (facts.get("tune_runs") or {}).get("results"), origin)
    return {
        "skipped": the_plan.get("skipped", ""),
        "topology": facts.get("topology") or {},
        "nccl_tests": _nccl_outputs(facts, secret),
        "env": redact.redact_env(the_plan.get("env"), secret),
        "figure_env": _figure_env(the_plan, build, secret),
        "tuned_env": _tuned_env_state(facts, the_plan, tune, node, build),
        "versions": _versions(node, build),
        "gpus": (node.get("gpu") or {}).get("count"),
        "tuning": _redact_tuning(
            {k: v for k, v in tune.items() if k not in ("file_text", "summary", "writes", "removes")}, secret
        ),
    }


def _figure_env(the_plan, build, secret):
    """The environments the figures were given (redacted) and the tuned env file they used."""
    tuned = the_plan.get("tuned") or {}
    return {
        "nccl_tests": redact.redact_env(the_plan.get("nccl_env"), secret) if build else {},
        "torch": redact.redact_env(the_plan.get("torch_env_given"), secret),
        "tuned_used": tuned.get("used", False),
        "tuned_text": tuned.get("text", ""),
    }


def _versions(node, build):
    return {
        "driver": (node.get("driver") or {}).get("version"),
        "cuda": (node.get("cuda") or {}).get("version"),
        "nccl": build.get("nccl_version") or (node.get("nccl") or {}).get("version"),
        "nccl_source": build.get("nccl_source", ""),
        "nccl_tests": build.get("version", ""),
    }


def _redact_tuning(tune, secret):
    """bench.tuning's answer without secret values (its env is the run's default environment)."""
    out = dict(tune)
    if "env" in out:
        out["env"] = redact.redact_env(out["env"], secret)
    return out


def multi_node(the_plan, hosts, *, name, gpu_present):
    """The torch jobs across all nodes (a MultiNode): run them only when every node of the group
    is left in this run (a node lost earlier has no facts to plan it with) and the group has two
    or more.

    the_plan: a BenchPlan of the group (what it wants across the group, and the jobs' arguments);
    hosts: {group, play_hosts_all, play_hosts} (the node group's hosts, the play's hosts at its
    start and now); name: the group's name; gpu_present: {host: bool}. Returns {run (the torch
    all-reduce runs), skipped (the reason, '' when it runs or is off), lost (hosts lost earlier in
    this run), gpu (every node has a GPU: nccl, else gloo sizes), stepcost (the DDP step benchmark
    runs), jobs (what torch_multi.yml loops over), notes (the line saying why it is skipped)}."""
    group, left = sorted(hosts["group"]), set(hosts["play_hosts"])
    lost = sorted(set(hosts["play_hosts_all"]) - left)
    wanted = [k for k, on in the_plan["multi"].items() if on]
    out = {"run": False, "skipped": "", "lost": lost, "gpu": all(gpu_present.get(h) for h in group)}
    out.update(stepcost=False, jobs=[], notes=[])
    if not wanted or len(group) < 2:
        return out
    if all(h in left for h in group):
        kind = "gpu" if out["gpu"] else "cpu"
        args = {"torch": the_plan[f"torch_args_{kind}"], "stepcost": the_plan[f"stepcost_args_{kind}"]}
        out.update(
            run="torch" in wanted, stepcost="stepcost" in wanted, jobs=_torch_jobs("multi", wanted, args)
        )
        return out
    why = (
        f"{', '.join(lost)} unreachable or failed earlier"
        if lost
        else f"{', '.join(h for h in group if h not in set(hosts['play_hosts_all']))} left out by --limit"
    )
    out["skipped"] = f"not every node of {name} is left in this run ({why})"
    out["notes"] = [f"bench: torch benchmark across all nodes skipped: {out['skipped']}"]
    return out
