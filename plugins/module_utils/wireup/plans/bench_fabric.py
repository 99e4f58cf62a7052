"""The bench_fabric role's plan: what each node's pair or whole-group job runs (plan), which job a
node has in a round (job), what it reports of that job (result). The rounds' state lives in the
controller's judgement (wireup_fabric_bench: fabric_run.judge over pairwise.plan), which the role
calls after each round and which says when the run is done; the tasks only run this node's job.

The TypedDicts are what the role's YAML may read (tests/unit/test_plan_types.py checks them).
"""

from __future__ import annotations

import dataclasses
from typing import TypedDict

from ..judge import pairwise
from .bench import fresh_log

SCRIPT = "torch_allreduce.py"
# NCCL INFO for the INIT and NET subsystems: what NCCL chose between the nodes (probe/ncclinfo.py).
NCCL_INFO = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}


@dataclasses.dataclass(frozen=True)
class FabricSettings:
    """The role's variables the plan reads, each named after its variable without ``bench_fabric_``
    (env: bench_env, fabric_env: bench_fabric_env, dir: bench_dir)."""

    max_rounds: int
    max_bytes: str | int
    cpu_max_bytes: str | int
    iterations: int
    env: dict
    fabric_env: dict
    dir: str


class FabricPlan(TypedDict):
    """This node's part of every job: the program, its arguments (the size for its kind: GPU, or
    gloo on CPU), the job's environment (bench_env, bench_fabric_env, NCCL INFO) and the rounds
    the tasks include (0, which only plans, to pairwise.round_limit: the bound on new pairs,
    their confirmations, the whole-group run and its confirmation)."""

    program: str
    args: list[str]
    env: dict[str, str]
    rounds: list[int]


class FabricJob(TypedDict):
    """This node's job in a round: run (it has one), job (torchrun_launch's job name: the round's),
    group (the inventory group of its members: pairwise.job_name), members, kind (pair or group),
    confirms (the round whose failing figure it runs again; 0 for a first run)."""

    run: bool
    job: str
    group: str
    members: list[str]
    kind: str
    confirms: int


class PairResult(TypedDict):
    """What a node reports of its job in a round (result), gathered as ``__bench_fabric_results``
    for the judgement."""

    round: int
    pair: list[str]
    kind: str
    confirms: int
    host: str
    log: str
    ok: bool
    reason: str


class JudgedPlan(TypedDict, total=False):
    """fabric_run.judge's answer (pairwise.plan's keys and the judgement's); the YAML reads these."""

    done: bool
    next_jobs: list[dict]
    round: int
    phase: str
    verdicts: dict[str, str]
    failed: dict[str, str]
    findings: list[dict]


class FabricRecord(TypedDict, total=False):
    """fabric_run.build_record's answer (results/fabric/<run id>/fabric.json)."""

    run_id: str
    verdicts: dict[str, str]
    bad: list[str]
    unreachable: list[str]
    rounds: int
    group: dict
    group_line: str
    failed: dict[str, str]
    findings: list[dict]


class FabricPaths(TypedDict, total=False):
    json: str
    md: str
    png: str


class JudgeAnswer(TypedDict, total=False):
    """What wireup_fabric_bench returns: plan, and with store the record, its paths and the one
    summary line of the run."""

    changed: bool
    plan: JudgedPlan
    record: FabricRecord
    report: FabricPaths
    summary: str


def plan(node, **settings):
    """This node's FabricPlan. node: wireup_node; settings: FabricSettings' fields by name."""
    settings = FabricSettings(**settings)
    gpu = bool(((node or {}).get("gpu") or {}).get("present"))
    size = str(settings.max_bytes if gpu else settings.cpu_max_bytes)
    return {
        "program": f"{settings.dir}/{SCRIPT}",
        "args": [
            "--min-bytes",
            size,
            "--max-bytes",
            size,
            "--warmup",
            "2",
            "--iters",
            str(settings.iterations),
        ],
        "env": {**dict(settings.env or {}), **dict(settings.fabric_env or {}), **NCCL_INFO},
        "rounds": list(range(pairwise.round_limit(settings.max_rounds) + 1)),
    }


def job(judged_plan, host, round_no):
    """This node's FabricJob in round round_no of the judged plan (the last round's judgement; {}
    before round 1): run False when no job of the round has it (it waits)."""
    jobs = ((judged_plan or {}).get("next_jobs") or []) if round_no > 0 else []
    mine = next((j for j in jobs if host in j.get("members", [])), None)
    if not mine or len(mine["members"]) < 2:
        return {
            "run": False,
            "job": job_name(round_no),
            "group": "",
            "members": [],
            "kind": "",
            "confirms": 0,
        }
    members = list(mine["members"])
    return {
        "run": True,
        "job": job_name(round_no),
        "group": mine["name"],
        "members": members,
        "kind": mine["kind"],
        "confirms": int(mine.get("confirms") or 0),
    }


def job_name(round_no):
    """The torchrun_launch job name of a round (each round's logs apart)."""
    return f"bench-fabric-r{round_no}"


def result(the_job, launch, host, round_no) -> PairResult:
    """What this node reports of its job for the judgement: {round, pair, kind, confirms, host,
    log, ok, reason}. launch: torchrun_launch's result on this node ({} when none); a result left by an
    earlier round names another job in its log path, so it counts as the job not starting here."""
    log = (launch or {}).get("log") or ""
    fresh = bool(fresh_log(the_job["job"], launch))
    verdict = (launch or {}).get("verdict") or {}
    return {
        "round": round_no,
        "pair": the_job["members"],
        "kind": the_job["kind"],
        "confirms": the_job["confirms"],
        "host": host,
        "log": log,
        "ok": fresh and bool(verdict.get("ok", False)),
        "reason": (verdict.get("reason") or "") if fresh else "the job did not start on this node",
    }
