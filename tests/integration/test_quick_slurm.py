"""`bench.yml --tags quick` through Slurm (issue 39, roles/node_check/tasks/quick_route.yml) on a
real Slurm: the session testbed's 3 nodes with Debian 12's slurm-wlm 22.05 (tests/testbed/slurm.py:
slurmctld on node1, slurmd on every node), brought up for this module alone (no torch venvs).

node2's baseline claims an InfiniBand rail the node does not have (test_slurm's stand-in fault).
The quick check through Ansible (node_check_via: ansible, a task per node) and through Slurm
(node_check_via: auto, which finds every node idle in Slurm: one srun from node1) give the same
verdicts: node1 and node3 PASS, node2 FAIL in its record, with the same line, and the same
textfile on node2; through Slurm no task runs on the nodes."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.testbed import slurm as testbed_slurm

from .harness import run_playbook

pytestmark = pytest.mark.integration

NODES = ["node1", "node2", "node3"]
BASELINE = "/var/lib/wireup/check/baseline.json"
CHECK = "/usr/local/sbin/wireup-check"
TEXTFILES = "/var/lib/prometheus/node-exporter"
RUN_TASK = "Node check | Run wireup-check"
ROUTE_TASK = "Node check | Run the quick check through Slurm where it can run there (node_check_via)"
QUICK_PLAY = "Bench | Quick node check on every node"


@pytest.fixture(scope="module")
def slurm_nodes(testbed):
    """The session testbed with Slurm running, wireup-check installed and a baseline on every node
    (each node's own restored afterwards)."""
    t0 = time.monotonic()
    testbed_slurm.up(testbed)
    print(f"[quick slurm] slurm up: {time.monotonic() - t0:.1f} s")
    try:
        installed = run_playbook("site.yml", testbed.inventory, tags=["node_check"])
        assert installed.rc == 0, f"{installed.failure_messages()}\n{installed.stdout[-3000:]}"
        for node in NODES:
            testbed.ssh(
                node,
                f"test -s {BASELINE} && cp -p {BASELINE} {BASELINE}.it; {CHECK} --write-baseline --manual",
            )
        yield testbed
    finally:
        for node in NODES:
            testbed.ssh(
                node, f"rm -f {BASELINE}; test -f {BASELINE}.it && mv {BASELINE}.it {BASELINE}", check=False
            )
        testbed_slurm.down(testbed)


def _quick(testbed, results, via):
    extra = {"wireup_results_dir": str(results), "node_check_via": via}
    t0 = time.monotonic()
    result = run_playbook("bench.yml", testbed.inventory, extra, tags=["quick"])
    took = time.monotonic() - t0
    [run] = (results / "quick").iterdir()
    records = {p.stem: json.loads(p.read_text()) for p in sorted(run.glob("node*.json"))}
    routed = result.task_results(ROUTE_TASK)
    ran = {
        "wireup-check by Ansible on": sorted(result.task_results(RUN_TASK)),
        "wireup_quick_slurm on": sorted(routed),
        "path": [r["route"]["via"] for r in routed.values()],
    }
    # Task runs (a worker each) in the quick check's node play, skipped ones left out.
    runs = sum(
        1
        for ev in result.events
        if ev.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable")
        and ev.get("event_data", {}).get("play") == QUICK_PLAY
    )
    print(
        f"[quick slurm] bench.yml --tags quick via {via}: rc={result.rc} in {took:.1f} s; "
        f"{runs} task runs in the node play; tasks run {ran}"
    )
    return result, records, ran


def _seen(records):
    """Each record's verdicts and the check's line and problems (its seconds and time differ per run)."""
    return {
        h: (r["verdict"], r["node_check"]["verdict"], r["node_check"]["line"], r["node_check"]["problems"])
        for h, r in records.items()
    }


def test_quick_check_through_slurm_gives_the_ansible_paths_verdicts(slurm_nodes, tmp_path):
    tb = slurm_nodes
    rail = {"name": "mlx5_0:1", "kind": "ib", "up": True, "gbps": 400.0, "watched": True}
    tb.ssh(
        "node2",
        f"python3 -c \"import json; p='{BASELINE}'; d=json.load(open(p)); "
        f"d['node']['ports'].append({rail!r}); json.dump(d, open(p, 'w'))\"",
    )
    by_ansible, records_a, ran_a = _quick(tb, tmp_path / "ansible", "ansible")
    prom_a = tb.ssh("node2", f"cat {TEXTFILES}/wireup_check.prom").stdout
    by_slurm, records_s, ran_s = _quick(tb, tmp_path / "slurm", "auto")
    prom_s = tb.ssh("node2", f"cat {TEXTFILES}/wireup_check.prom").stdout

    assert by_ansible.rc != 0 and by_slurm.rc != 0  # node2 FAILs: the run fails, both ways
    out_s = " ".join(by_slurm.stdout.split())
    assert "quick check: one Slurm job step: Slurm knows all 3 node(s)" in out_s, out_s[-3000:]
    assert "3 of 3 node(s) answered through Slurm" in out_s
    assert "quick check: node_check_via is ansible: one task per node" in " ".join(by_ansible.stdout.split())
    # Through Slurm: one srun on node1 (the master), wireup-check run by no Ansible task; through
    # Ansible, a task per node.
    on_master = {"wireup_quick_slurm on": ["node1"]}
    assert ran_s == dict(on_master, **{"wireup-check by Ansible on": [], "path": ["slurm"]})
    assert ran_a == dict(on_master, **{"wireup-check by Ansible on": NODES, "path": ["ansible"]})
    seen = _seen(records_s)
    assert {h: v[:2] for h, v in seen.items()} == {
        "node1": ("PASS", "PASS"),
        "node2": ("FAIL", "FAIL"),
        "node3": ("PASS", "PASS"),
    }
    assert seen["node2"][2].startswith("wireup-check: FAIL node2: NIC mlx5_0:1 missing (was up at 400 Gb/s")
    assert seen == _seen(records_a)
    for prom in (prom_a, prom_s):
        assert 'wireup_check_verdict{host="node2",verdict="FAIL"} 1' in prom
    assert re.sub(r"wireup_check_(timestamp|duration)_seconds\S* \S+", "", prom_a) == re.sub(
        r"wireup_check_(timestamp|duration)_seconds\S* \S+", "", prom_s
    )
    assert {r["kind"] for r in records_s.values()} == {"quick"}
    summary = Path(tmp_path / "slurm/quick").glob("*/report.md")
    assert "not healthy: node2." in next(summary).read_text()
