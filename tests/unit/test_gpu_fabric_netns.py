"""tests/gpu/fabric_netns.py's checks on the run kept in docs/example-h200x1/fabric-netns-2026-12-02
(4 simulated hosts on the 1x H200, n3 shaped): that run passes every check, and each check fails
when the one thing it is about is changed."""

import copy
import json
import pathlib
import shutil

import pytest

from tests.gpu import fabric_netns as netns

RUN = pathlib.Path(__file__).resolve().parents[2] / "docs/example-h200x1/fabric-netns-2026-12-02"
NAMES = ["n1", "n2", "n3", "n4"]


def record(run_id):
    return json.loads((RUN / "results/fabric" / run_id / "fabric.json").read_text())


HEALTHY = record("20261202T042743Z")
SHAPED = record("20261202T042858Z")


def log(name):
    return (RUN / f"{name}.log").read_text()


def test_the_kept_run_passes_every_check():
    failures = []
    netns.check_healthy(HEALTHY, NAMES, failures)
    netns.check_shaped(SHAPED, NAMES, "n3", 2, failures)
    assert netns.check_refused(2, log("launch-refused"), "n3", failures).startswith(
        "rc 2: [ERROR]: Task failed: Action failed: launch refused: fabric run 20261202T042858Z named n3 bad"
    )
    line = netns.check_skip(0, log("launch-skip"), RUN / "results", NAMES, "n3", failures=failures)
    assert line.startswith("rc 0, ranks {'n1': 0, 'n2': 1, 'n4': 2}, every node exited with code 0")
    netns.check_logs(netns.read_job_logs(RUN / "results/jobs"), failures)
    assert failures == []


def failed(check, *args):
    failures = []
    check(*args, failures)
    return failures


def test_a_healthy_round_on_lo_or_against_the_median_fails():
    on_lo = copy.deepcopy(HEALTHY)
    on_lo["pair_details"][0]["transports"]["n1"]["socket_interfaces"] = ["lo"]
    assert "NCCL's transports" in failed(netns.check_healthy, on_lo, NAMES)[0]
    median = dict(HEALTHY, reference_kind="median")
    assert "not the expectation" in failed(netns.check_healthy, median, NAMES)[0]


def test_a_shaped_round_naming_another_node_or_passing_the_play_fails():
    two_bad = copy.deepcopy(SHAPED)
    two_bad["bad"], two_bad["verdicts"]["n4"] = ["n3", "n4"], "FAIL"
    assert failed(netns.check_shaped, two_bad, NAMES, "n3", 2)[0].startswith("shaped round: bad ['n3', 'n4']")
    assert "the play failed ['n3'] (rc 0)" in failed(netns.check_shaped, SHAPED, NAMES, "n3", 0)[0]


def test_a_launch_that_starts_or_a_skip_run_with_the_bad_node_fails(tmp_path):
    assert failed(netns.check_refused, 0, "PLAY RECAP", "n3") == [
        "launch.yml was not refused naming n3 (rc 0)"
    ]
    results = tmp_path / "results"
    shutil.copytree(RUN / "results/jobs", results / "jobs")
    [summary] = (results / "jobs").glob("fabric-skip-*/summary.json")
    data = json.loads(summary.read_text())
    data["nodes"]["n3"] = {"node_rank": 3}
    summary.write_text(json.dumps(data))
    failures = []
    netns.check_skip(0, log("launch-skip"), results, NAMES, "n3", failures=failures)
    assert failures and failures[0].startswith("skip-launch: rc 0, ranks {")


@pytest.mark.parametrize("change", [{"inter_node": "ib"}, {"socket_interfaces": ["eth0", "lo"]}])
def test_a_job_log_off_the_veth_sockets_fails(change):
    parsed = netns.read_job_logs(RUN / "results/jobs")
    name = sorted(parsed)[0]
    parsed[name] = dict(parsed[name], **change)
    assert failed(netns.check_logs, parsed)[0].startswith("logs without NET/Socket on eth0")
