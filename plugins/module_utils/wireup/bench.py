"""The bench role's plan (on each node) and the node's results as the store takes them (on the
controller): every decision of roles/bench in one tested place; the tasks only execute it.

plan(): inputs are the node's facts (wireup_node from preflight), the nccl-tests build (the
nccl_tests role's fact, None when that role did not run), the bench_* settings, and the tuned env
file's text as read before the run. It returns the commands, environments and skips.

node_results(): the registered outputs of one node's bench tasks -> the node dict that
results.build_record takes (nccl-tests outputs, the tuning sweep, the tuned env file's state).
"""

from __future__ import annotations

import base64

from . import bandwidth, benchenv, nccltests, redact

# dpkg's file lists that tell when the driver and NCCL last changed (benchenv.change_probes).
PACKAGE_LIST_PATTERNS = (
    "libnccl2*.list",
    "nvidia-driver-*.list",
    "libnvidia-compute-*.list",
    "nvidia-kernel-common-*.list",
)
TUNED_FILE = "nccl-tuned.env"


def _iterations(settings):
    return ["-w", str(settings["bench_warmup_iterations"]), "-n", str(settings["bench_iterations"])]


def _sizes_args(settings, gpus, min_bytes, max_bytes):
    sizes = ["-b", str(min_bytes), "-e", str(max_bytes), "-f", str(settings["bench_step_factor"])]
    return [*sizes, "-g", str(gpus), *_iterations(settings)]


def _torch_args(settings, max_bytes):
    sizes = ["--min-bytes", str(settings["bench_torch_min_bytes"]), "--max-bytes", str(max_bytes)]
    loops = [
        "--warmup",
        str(settings["bench_warmup_iterations"]),
        "--iters",
        str(settings["bench_iterations"]),
    ]
    return [*sizes, "--factor", str(settings["bench_torch_step_factor"]), *loops]


def _stepcost_args(settings, params, gloo):
    """files/bench/ddp_step.py's arguments (issue 16): sizes, hooks, warm-up (at least 3), steps."""
    args = [
        "--params",
        ",".join(str(p) for p in params),
        "--hooks",
        ",".join(settings["bench_stepcost_hooks"]),
    ]
    args += ["--warmup", str(max(int(settings["bench_warmup_iterations"]), 3))]
    args += ["--iters", str(settings["bench_iterations"])]
    return [*args, "--backend", "gloo"] if gloo else args


# The torch jobs torch_single.yml / torch_multi.yml loop over: kind (the report's key), the job's
# name, the plan entry holding its arguments (the GPU or the CPU sizes).
_TORCH_JOBS = (("torch", "bench-torch"), ("stepcost", "bench-stepcost"))


def _torch_jobs(scope, wanted, gpu):
    """[{kind, job, args}] of the wanted torch jobs (keys of _TORCH_JOBS) for scope single/multi."""
    return [
        {
            "kind": f"{'stepcost_' if key == 'stepcost' else ''}{scope}_node",
            "job": f"{job}-{scope}",
            "args": f"{key}_args_{'gpu' if gpu else 'cpu'}",
        }
        for key, job in _TORCH_JOBS
        if key in wanted
    ]


def plan(node, settings, build=None, tuned_text=None, host=""):
    """Every decision of the bench role on one node (``single_jobs``: the torch jobs this node
    runs alone, in order: the all-reduce on 2+ GPUs, the DDP step benchmark on 1+)."""
    out = _plan(node, settings, build, tuned_text, host)
    wanted = [k for k, on in (("torch", out["torch_single"]), ("stepcost", out["stepcost_single"])) if on]
    out["single_jobs"] = _torch_jobs("single", wanted, True)
    return out


def _plan(node, settings, build=None, tuned_text=None, host=""):
    """Every decision of the bench role on one node but its torch job list.

    node: wireup_node ({gpu: {present, count}}); settings: the bench_* variables plus
    wireup_job_env and wireup_base_dir; build: nccl_tests_build or None; tuned_text: the tuned env
    file's text before the run ('' when there is none). Raises ValueError (naming the variable and
    the fix) when the run cannot go on. tuned_text None: there is no tuned env file."""
    gpu = (node or {}).get("gpu") or {}
    present, count = bool(gpu.get("present")), int(gpu.get("count") or 0)
    base = str(settings["wireup_base_dir"]).rstrip("/")
    tuned_path = f"{base}/{TUNED_FILE}"
    job_env = dict(settings.get("wireup_job_env") or {})
    bench_env = dict(settings.get("bench_env") or {})
    notes = []

    tuned_exists, tuned_text = tuned_text is not None, tuned_text or ""
    use_tuned = bool(settings.get("bench_use_tuned_env"))
    tuned_values = benchenv.parse_tuned_env(tuned_text)["values"] if use_tuned else {}
    if use_tuned and not tuned_values:
        notes.append(
            f"bench: bench_use_tuned_env is true but {host} has no {tuned_path}: its figures measure "
            "default NCCL (run bench.yml -e bench_nccl_tune=true first to write one)"
        )
    tuned_used = bool(tuned_values)

    # Every benchmark process: wireup_job_env, then bench_env, then (nccl-tests built against the
    # venv's NCCL wheel) that library's folder; a tuned file's settings sit under all of them, as
    # launch.sh sources the file before the job's own env.
    ld_path = (build or {}).get("ld_library_path") or ""
    env_default = {**job_env, **bench_env, **({"LD_LIBRARY_PATH": ld_path} if ld_path else {})}
    nccl_env = {**tuned_values, **env_default} if tuned_used else env_default
    torch_env_given = {**(tuned_values if tuned_used else {}), **job_env, **bench_env}

    out = {
        "bench_dir": settings["bench_dir"],
        "tuned_path": tuned_path,
        "tuned": {"used": tuned_used, "text": tuned_text if use_tuned else "", "values": tuned_values},
        "env": {**job_env, **bench_env},
        "env_default": env_default,
        "nccl_env": nccl_env,
        "torch_env_given": torch_env_given,
        "nccl_runs": [],
        "json": False,
        "compare": {},
        "torch_single": bool(settings.get("bench_torch")) and present and count >= 2,
        "torch_args_gpu": _torch_args(settings, settings["bench_torch_max_bytes"]),
        "torch_args_cpu": _torch_args(settings, settings["bench_torch_cpu_max_bytes"]),
        # The DDP step benchmark: each GPU node alone (1+ GPUs), and the group (torch_multi.yml).
        "stepcost": bool(settings.get("bench_stepcost", False)),
        "stepcost_single": bool(settings.get("bench_stepcost", False)) and present,
        "stepcost_args_gpu": _stepcost_args(settings, settings.get("bench_stepcost_params") or [], False),
        "stepcost_args_cpu": _stepcost_args(settings, settings.get("bench_stepcost_cpu_params") or [], True),
        # `--tags stepcost` alone: the step benchmark only (no nccl-tests, no torch all-reduce).
        "stepcost_only": bool(settings.get("stepcost_only", False)),
        # What files/bench/ ships into bench_dir for the torch jobs.
        "scripts": (["torch_allreduce.py"] if not settings.get("stepcost_only") else [])
        + (["ddp_step.py"] if settings.get("bench_stepcost", False) else []),
        "notes": notes,
        "skipped": "",
        # What the find task looks at after the plan: dpkg's file lists, the tuned env file, the
        # driver's nvidia-smi and the NCCL library nccl-tests load (their times: benchenv).
        "probe": {
            "paths": sorted(
                {
                    "/var/lib/dpkg/info",
                    base if tuned_exists else "",
                    ld_path,
                    str(gpu.get("nvidia_smi") or "").rpartition("/")[0],
                }
                - {""}
            ),
            "patterns": [*PACKAGE_LIST_PATTERNS, TUNED_FILE, "nvidia-smi", "libnccl.so.2"],
        },
    }
    if not present:
        out["skipped"] = "no NVIDIA GPU: GPU benchmarks skipped"
        notes.append(
            f"bench: nccl-tests and the single-node torch benchmark skipped on {host}: no NVIDIA GPU "
            "found (PCI vendor 10de)"
        )
        return out
    if out["stepcost_only"]:
        out["torch_single"] = False
        return out
    # Issue 26, item 5: no nccl-tests where they cannot give a figure (nccl_tests_skip below).
    skip = nccl_tests_skip(count, host)
    if skip:
        out["skipped"] = skip
        notes.append(f"bench: {skip}")
        return out
    if not build:
        raise ValueError(
            f"nccl_tests_build is not set on {host}: run bench.yml with the nccl_tests tag too "
            "(e.g. --tags nccl_tests,bench) or without tags, so the nccl_tests role builds the binaries "
            "first."
        )

    # `sh -c` only to remove the previous JSON first: nccl-tests never overwrites, it writes FILE.1.
    # `timeout` stops a hung collective; its rc (124) then shows in the report as a FAIL.
    timeout = str(settings["bench_timeout"])
    json_on = bool(build.get("json"))
    args = _sizes_args(settings, count, settings["bench_min_bytes"], settings["bench_max_bytes"])
    for name in settings["bench_collectives"]:
        json_file = f"{settings['bench_dir']}/{name}.json"
        argv = ["/bin/sh", "-c", 'rm -f "$1" && shift && exec "$@"', "sh", json_file, "timeout", timeout]
        argv += [f"{build['bin_dir']}/{name}_perf", *args, *(["-J", json_file] if json_on else [])]
        out["nccl_runs"].append({"collective": name, "argv": argv, "json_file": json_file})
    out["json"] = json_on

    # all_reduce at the largest size, default NCCL beside other settings: the tuning sweep, or with
    # bench_use_tuned_env the tuned file's settings (the report shows both side by side).
    sweep = bool(settings.get("bench_nccl_tune"))
    others = (
        list(settings.get("bench_nccl_tune_candidates") or [])
        if sweep
        else ([tuned_values] if tuned_used else [])
    )
    if count >= 2 and others:
        top = settings["bench_max_bytes"]
        out["compare"] = {
            "mode": "sweep" if sweep else "tuned_vs_default",
            "store": sweep,
            "size": top,
            "min_gain": float(settings["bench_nccl_tune_min_gain"]),
            # Every setting sits under the default environment (wireup_job_env and bench_env win).
            "envs": [env_default] + [{**dict(e), **env_default} for e in others],
            "tried": [{}] + [dict(e) for e in others],
            "argv": [
                *["timeout", timeout, f"{build['bin_dir']}/all_reduce_perf"],
                *["-b", str(top), "-e", str(top), "-g", str(count), *_iterations(settings)],
            ],
        }
    return out


# --- Issue 26, item 5: benchmarks that cannot give a figure are not run ------------------------
MIN_GPUS_FOR_NCCL_TESTS = 2


def nccl_tests_skip(count, host=""):
    """Why a node with ``count`` GPUs runs no nccl-tests ('' when it runs them). With one GPU
    nccl-tests' collectives have no GPU pair to measure: all_reduce, all_gather, reduce_scatter
    and alltoall report a bus bandwidth of 0 (algbw x 2(n-1)/n or (n-1)/n) and no collective has an
    expectation (bandwidth.expected_busbw needs a link between two GPUs), so every verdict would
    be N/A: on the 1x H200 the four collectives to 8 GiB cost 123 s for four N/As. The same rule
    keeps the quick check (wireup-check) from running its one-size benchmark there."""
    if int(count or 0) >= MIN_GPUS_FOR_NCCL_TESTS:
        return ""
    return (
        f"nccl-tests skipped on {host}: {int(count or 0)} GPU, no GPU pair to give a bus bandwidth "
        "figure (every collective would be N/A)"
    )


def _busbw_at_top(text):
    """all_reduce's figure at the largest size it has one (nccltests.figure: the verdict's rule)."""
    rows = nccltests.parse(text or "")["rows"]
    sizes = nccltests.figure_sizes(rows, "all_reduce")
    return nccltests.figure(rows, sizes[-1], "all_reduce") if sizes else None


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


def tuning(the_plan, runs, origin=None):
    """The comparison's answer from its registered runs (in the order of plan.compare.envs):
    bandwidth.pick_tuning's dict plus size, path, mode, min_gain, env, the tuned env file's text a
    sweep writes (file_text; '' when nothing beat the default: the file is removed) and one line
    for the play output (summary). {} when the plan compares nothing."""
    compare = the_plan.get("compare") or {}
    if not compare:
        return {}
    measured = []
    for tried, run in zip(compare["tried"], runs or [], strict=False):
        busbw = None
        if (run or {}).get("rc") == 0:
            try:
                busbw = _busbw_at_top((run or {}).get("stdout"))
            except ValueError:
                busbw = None
        measured.append({"env": tried, "busbw": busbw})
    out = bandwidth.pick_tuning(measured, compare["min_gain"])
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


def node_results(facts):
    """One node's bench data for results.build_record, from what its tasks registered.

    facts: {plan, run_id, node (wireup_node), build (nccl_tests_build|None), topology
    (gpu_topology_facts), tuned_read (slurp result), found (find result), nccl_runs and nccl_json
    (registered loop results), tune_runs (registered), host (inventory name), secret_env (the
    host's wireup_secret_env)}. No secret value leaves it: every env mapping, and the -J JSON's
    environment, through redact (the report play's variables and the store's arguments hold none)."""
    the_plan = facts.get("plan") or {}
    # A node that stopped before its plan, or before a step its plan has, left no whole result.
    if (
        not the_plan
        or (the_plan.get("nccl_runs") and not facts.get("nccl_runs"))
        or (the_plan.get("compare") and not facts.get("tune_runs"))
    ):
        return dict(NO_DATA)
    node = facts.get("node") or {}
    build = facts.get("build") or {}
    secret = list(facts.get("secret_env") or [])
    runs = (facts.get("nccl_runs") or {}).get("results") or []
    jsons = (facts.get("nccl_json") or {}).get("results") or []
    nccl = {}
    for index, run in enumerate(runs):
        json_item = jsons[index] if index < len(jsons) and isinstance(jsons[index], dict) else {}
        nccl[run["item"]["collective"]] = {
            "output": "\n".join([run.get("stdout") or "", run.get("stderr") or ""]),
            "rc": run.get("rc", -1),
            "json": benchenv.redact_nccl_json(decoded(json_item["content"]), secret)
            if "content" in json_item
            else "",
        }
    origin = origin_of(facts.get("run_id"), facts.get("host"), node, build)
    tune = tuning(the_plan, (facts.get("tune_runs") or {}).get("results"), origin)

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
        "skipped": the_plan.get("skipped", ""),
        "topology": facts.get("topology") or {},
        "nccl_tests": nccl,
        "env": redact.redact_env(the_plan.get("env"), secret),
        "figure_env": {
            "nccl_tests": redact.redact_env(the_plan.get("nccl_env"), secret) if build else {},
            "torch": redact.redact_env(the_plan.get("torch_env_given"), secret),
            "tuned_used": (the_plan.get("tuned") or {}).get("used", False),
            "tuned_text": (the_plan.get("tuned") or {}).get("text", ""),
        },
        "tuned_env": {
            "path": tuned_path,
            "text": text,
            "mtime": stat.get("mtime"),
            "mode": stat.get("mode", ""),
            "package_lists": lists if text is not None else [],
            "files": files if text is not None else [],
        },
        "versions": {
            "driver": (node.get("driver") or {}).get("version"),
            "cuda": (node.get("cuda") or {}).get("version"),
            "nccl": build.get("nccl_version") or (node.get("nccl") or {}).get("version"),
            "nccl_source": build.get("nccl_source", ""),
            "nccl_tests": build.get("version", ""),
        },
        "gpus": (node.get("gpu") or {}).get("count"),
        "tuning": _redact_tuning(
            {k: v for k, v in tune.items() if k not in ("file_text", "summary")}, secret
        ),
    }


def _redact_tuning(tune, secret):
    """bench.tuning's answer without secret values (its env is the run's default environment)."""
    out = dict(tune)
    if "env" in out:
        out["env"] = redact.redact_env(out["env"], secret)
    return out


def multi_node(group, play_hosts_all, play_hosts, *, name, torch_on, gpu_present, stepcost_on=False):
    """The torch benchmark across all nodes: run it only when every node of the group is left in
    this run (a node lost earlier has no facts to plan it with) and the group has two or more.

    group: the node group's hosts, name: its name; gpu_present: {host: bool}. Returns {run,
    skipped (the reason, '' when it runs or is off), lost (hosts lost earlier in this run), gpu
    (every node has a GPU: nccl, else gloo sizes), stepcost (the DDP step benchmark across the
    group runs: stepcost_on and the same conditions), jobs (what torch_multi.yml loops over, as
    plan's single_jobs), notes (the line saying why it is skipped, if it is)}."""
    group, left = sorted(group), set(play_hosts)
    lost = sorted(set(play_hosts_all) - left)
    out = {"run": False, "skipped": "", "lost": lost, "gpu": all(gpu_present.get(h) for h in group)}
    out.update(stepcost=False, jobs=[], notes=[])
    if not (torch_on or stepcost_on) or len(group) < 2:
        return out
    missing = [h for h in group if h not in left]
    if not missing:
        out["run"], out["stepcost"] = bool(torch_on), bool(stepcost_on)
        wanted = [k for k, on in (("torch", torch_on), ("stepcost", stepcost_on)) if on]
        out["jobs"] = _torch_jobs("multi", wanted, out["gpu"])
        return out
    why = (
        f"{', '.join(lost)} unreachable or failed earlier"
        if lost
        else f"{', '.join(h for h in group if h not in set(play_hosts_all))} left out by --limit"
    )
    out["skipped"] = f"not every node of {name} is left in this run ({why})"
    out["notes"] = [f"bench: torch benchmark across all nodes skipped: {out['skipped']}"]
    return out
