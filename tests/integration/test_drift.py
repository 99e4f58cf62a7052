"""Drift on the 3-node testbed (issue 37 item 5): one node with an NCCL net plugin the others lack
(an empty libnccl-net.so where NCCL's dlopen looks, /usr/lib/x86_64-linux-gnu), and launch.yml
refuses the job before anything on a node changes, naming the field, the values and which nodes
have which; it starts when the operator accepts the field, and when the node is fixed."""

from __future__ import annotations

import json
import shlex

import pytest

from .harness import ensure_torch_venvs, run_playbook

pytestmark = pytest.mark.integration

BASE = "/opt/wireup"
PLUGIN = "/usr/lib/x86_64-linux-gnu/libnccl-net.so"
TORCH_FACT = "/etc/ansible/facts.d/wireup_torch.fact"
JOB = "it-drift"
# Render only: the refusal is a controller pre-task; a passing run needs no job to run.
EXTRA = {"wireup_nproc_per_node": 1, "torchrun_launch_job": JOB, "torchrun_launch_run": False}


def _rendered(testbed):
    return {n: testbed.ssh(n, f"test -e {BASE}/jobs/{JOB}/launch.sh && echo yes || true").stdout.strip()
            for n in ("node1", "node2", "node3")}  # fmt: skip


def test_launch_refuses_a_net_plugin_on_one_node_and_starts_when_accepted_or_fixed(testbed, tmp_path):
    ensure_torch_venvs(testbed, BASE)
    extra = dict(EXTRA, wireup_results_dir=str(tmp_path / "results"))
    testbed.ssh("node3", f"rm -rf {BASE}/jobs/{JOB} && touch {PLUGIN}")
    try:
        refused = run_playbook("launch.yml", testbed.inventory, extra)
        said = " ".join(m for _, _, m in refused.failure_messages())
        assert refused.rc != 0, refused.stdout[-3000:]
        assert (
            "the nodes differ in nccl_net_plugin (none on node1, node2; libnccl-net.so on node3)" in said
        ), said
        assert "-e wireup_launch_accept_drift=nccl_net_plugin" in said
        assert set(_rendered(testbed).values()) == {""}  # refused before anything on a node changed

        accepted = run_playbook(
            "launch.yml", testbed.inventory, dict(extra, wireup_launch_accept_drift="nccl_net_plugin")
        )
        assert accepted.rc == 0, accepted.failure_messages()
        assert _rendered(testbed)["node3"] == "yes"
    finally:
        testbed.ssh("node3", f"rm -f {PLUGIN}")
    fixed = run_playbook("launch.yml", testbed.inventory, extra)
    assert fixed.rc == 0, fixed.failure_messages()


def test_a_field_launch_does_not_refuse_on_is_refused_by_preflight(testbed, tmp_path):
    extra = dict(EXTRA, wireup_results_dir=str(tmp_path / "results"), wireup_launch_accept_drift="kernel")
    result = run_playbook("launch.yml", testbed.inventory, extra)
    said = " ".join(m for _, _, m in result.failure_messages())
    assert result.rc != 0 and "wireup_launch_accept_drift" in said, said


def test_launch_refuses_a_node_whose_torch_loads_another_nccl(testbed, tmp_path):
    """pytorch_venv's own local fact on node3 says its torch loads NCCL 2.27.3 (the testbed's CPU
    torch loads none): preflight reads the file where the role wrote it, and launch.yml refuses."""
    ensure_torch_venvs(testbed, BASE)
    extra = dict(EXTRA, wireup_results_dir=str(tmp_path / "results"))
    written = testbed.ssh("node3", f"cat {TORCH_FACT}").stdout
    fact = json.loads(written)
    assert fact["torch_version"] and fact["nccl_version"] == "", written  # the role's, a CPU build
    other = json.dumps(dict(fact, nccl_version="2.27.3"))
    for node in ("node1", "node2", "node3"):  # the test above left the job rendered on every node
        testbed.ssh(node, f"rm -rf {BASE}/jobs/{JOB}")
    testbed.ssh("node3", f"printf '%s\\n' {shlex.quote(other)} > {TORCH_FACT}")
    try:
        refused = run_playbook("launch.yml", testbed.inventory, extra)
        said = " ".join(m for _, _, m in refused.failure_messages())
        assert refused.rc != 0, refused.stdout[-3000:]
        assert "the nodes differ in torch_nccl (none on node1, node2; 2.27.3 on node3)" in said, said
        assert set(_rendered(testbed).values()) == {""}
    finally:
        testbed.ssh("node3", f"printf '%s' {shlex.quote(written)} > {TORCH_FACT}")
