"""wireup as a user gets it: the artifact of `ansible-galaxy collection build`, installed into a
temporary folder, runs its roles by FQCN (wireup.cluster.preflight, wireup.cluster.gpu_topology)
from a playbook outside the repository, on the session testbed. The run's working directory is not
the repository, so neither its ansible.cfg nor its .collections is seen: only the installed copy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import busy

from .harness import REPO_ROOT, run_playbook, write_playbook

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent

PLAYBOOK = """\
- name: Check the inventory on the controller
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The run reads no ansible.cfg and finds collections in the temporary folder only
      ansible.builtin.assert:
        that:
          - ansible_config_file is none
          - lookup('ansible.builtin.config', 'COLLECTIONS_PATHS') == [collections]
    - name: Check the node group and every role's variables
      ansible.builtin.import_role:
        name: wireup.cluster.preflight
        tasks_from: inventory

- name: Node facts and the GPU topology
  hosts: gpu_nodes
  gather_facts: false
  roles:
    - wireup.cluster.preflight
    - wireup.cluster.gpu_topology
"""


def _outside(**env):
    """This process's environment without a pointer to the repository's ansible.cfg."""
    return {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"} | env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(collections folder, the installed collection) from the artifact built out of this checkout."""
    top = tmp_path_factory.mktemp("wireup-collection")
    build, collections = top / "build", top / "collections"
    subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(build), str(REPO_ROOT)],
        cwd=top, capture_output=True, text=True, check=True, timeout=busy.HANG_S,
    )  # fmt: skip
    [artifact] = build.glob("wireup-cluster-*.tar.gz")
    subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "install", "-p", str(collections), str(artifact)],
        cwd=top, env=_outside(ANSIBLE_COLLECTIONS_PATH=str(collections)),
        capture_output=True, text=True, check=True, timeout=busy.HANG_S,
    )  # fmt: skip
    return collections, collections / "ansible_collections/wireup/cluster"


@pytest.fixture
def project(installed, tmp_path):
    """A user's project folder outside the repository: the playbook and, as the README says, the
    collection's group_vars/all.yml copied beside it (results kept in the project)."""
    _, collection = installed
    pins = yaml.safe_load((collection / "group_vars/all.yml").read_text())
    pins["wireup_results_dir"] = str(tmp_path / "results")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars/all.yml").write_text(yaml.safe_dump(pins))
    return write_playbook(tmp_path, "play.yml", PLAYBOOK)


def _run(testbed, installed, project, extravars=None):
    collections, _ = installed
    (project.parent / "runner").mkdir()
    return run_playbook(
        project,
        testbed.inventory,
        {"collections": str(collections), "preflight_min_free_mb": 0, **(extravars or {})},
        project_dir=project.parent,
        envvars={"ANSIBLE_COLLECTIONS_PATH": str(collections)},
        private_data_dir=project.parent / "runner",
        timeout=600,
    )


def test_the_installed_collection_runs_preflight_and_gpu_topology(testbed, installed, project):
    _, collection = installed
    result = _run(testbed, installed, project)
    assert result.rc == 0, f"{result.failure_messages()}\n{result.stdout[-3000:]}"
    nodes = sorted(testbed.nodes)
    assert result.failed_hosts == [] and result.unreachable_hosts == []
    # Every role task ran from the installed copy, none from the repository.
    paths = {
        ev["event_data"]["task_path"].rsplit(":", 1)[0]
        for ev in result.events
        if ev.get("event") == "playbook_on_task_start" and "/roles/" in ev["event_data"].get("task_path", "")
    }
    assert {p.split("/roles/")[1] for p in paths} >= {
        "preflight/tasks/inventory.yml", "preflight/tasks/main.yml", "gpu_topology/tasks/main.yml",
    }  # fmt: skip
    assert all(p.startswith(str(collection / "roles")) for p in paths), paths
    # wireup_node_facts and the preflight filters: one summary per node, naming it.
    report = "Preflight | Check cluster addresses are set and unique, and report every node"
    [summary] = result.messages(report).values()
    assert [line.split(":", 1)[0] for line in summary] == nodes
    # wireup_nic_facts read each node's NICs; gpu_topology says, per node, that it has no GPU.
    nics = result.task_results("GPU topology | Read the NICs, GPUDirect RDMA readiness and IOMMU mode")
    assert sorted(nics) == nodes
    assert all(res["ansible_facts"]["gpu_topology_nics"] for res in nics.values()), nics
    said = result.messages("GPU topology | Summarize the node and its findings")
    assert said == {n: [f"gpu_topology {n}: skipped: no NVIDIA GPU found (PCI vendor 10de)"] for n in nodes}
    gpu_read = "GPU topology | Read topology, NVLink, P2P, PCIe, kernel log and lspci"
    assert result.skipped_hosts(gpu_read) == nodes


def test_preflight_checks_every_role_s_arguments_from_the_installed_collection(testbed, installed, project):
    """preflight reads every role's argument_specs by path: from the installed collection too, and
    it stops the run on the controller, before any node is touched."""
    result = _run(testbed, installed, project, {"nvidia_driver_flavor": "closed"})
    assert result.rc != 0
    [(host, task, message)] = result.failure_messages()
    assert host == "localhost" and task.startswith("Preflight | Check the project's group_vars are loaded")
    assert "nvidia_driver role: value of nvidia_driver_flavor must be one of: open, proprietary" in message
    assert set(result.hosts) == {"localhost"}
