"""site.yml as a user runs it, on 3 fresh testbed nodes: --check first, apply, a second run with
changed=0 everywhere; a node powered off drops out while the others complete; a bad inventory
or a bad variable stops the run before any node changes, with a message naming the fix.

The testbed's inventory carries the stand-in CUDA repository (cuda_repo_base_url and its key)
and the torch wheelhouse, exactly as `make run` uses them.
"""

from __future__ import annotations

import time

import pytest
import yaml

from .harness import run_playbook

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(testbed_factory):
    """Three nodes nobody else touches, so the first run really starts from a bare node."""
    return testbed_factory("site", nodes=3)


def _timed(label, *args, **kwargs):
    start = time.monotonic()
    result = run_playbook(*args, **kwargs)
    print(f"[site] {label}: rc={result.rc} in {time.monotonic() - start:.0f} s")
    return result


def _clean(result, label):
    assert result.rc == 0 and not result.failed_hosts and not result.unreachable_hosts, (
        f"{label}: {result.failure_messages()}\n{result.stdout[-4000:]}"
    )


def test_site_check_apply_idempotent(cluster):
    nodes = sorted(cluster.nodes)
    zero = dict.fromkeys(nodes, 0)

    check = _timed("--check on fresh nodes", "site.yml", cluster.inventory, check=True)
    _clean(check, "--check on fresh nodes")

    apply = _timed("first run", "site.yml", cluster.inventory)
    _clean(apply, "first run")
    assert all(apply.stats["changed"][n] > 0 for n in nodes), apply.stats

    # Every node reports itself in one preflight line, and each GPU role says in one line why
    # it does nothing on a GPU-less node.
    # One task, run once, prints every node's line (no task per node: issue 14).
    (report,) = apply.task_results(
        "Preflight | Check cluster addresses are set and unique, and report every node"
    ).values()
    assert sorted(line.split(":", 1)[0] for line in report["msg"]) == nodes, report["msg"]
    assert all("no NVIDIA GPU (GPU roles will skip this node)" in line for line in report["msg"])
    for node in nodes:
        venv = cluster.ssh(node, "/opt/wireup/venv/bin/python -c 'import torch; print(torch.__version__)'")
        assert venv.stdout.strip().startswith("2.13.0"), venv.stdout
        holds = set(cluster.ssh(node, "apt-mark showhold").stdout.split())
        assert {"libnccl2", "libnccl-dev"} <= holds, holds

    # torch's NCCL is compared on the first run too (after the venv exists), from the verification.
    nccl_lines = apply.messages("NCCL | Compare torch's NCCL with the system NCCL")
    assert sorted(nccl_lines) == nodes, nccl_lines
    assert all(
        "bundles NCCL none (CPU build); system NCCL 2.28.9" in " ".join(msg.split())
        for msg in nccl_lines.values()
    ), nccl_lines

    again = _timed("second run", "site.yml", cluster.inventory)
    _clean(again, "second run")
    assert {n: again.stats["changed"][n] for n in nodes} == zero, again.stats
    # A converged node starts no apt, no pip and no second torch import, and rewrites nothing
    # (issue 6: the probes decide; docs/performance.md).
    for task in CONVERGED_SKIPS:
        assert again.task_results(task) == {}, f"second run ran {task!r}: {again.task_results(task)}"
    assert sorted(again.task_results("NCCL | Compare torch's NCCL with the system NCCL")) == nodes


# Tasks that must not run at all on a converged node.
CONVERGED_SKIPS = [
    "CUDA repo | Download the repository signing key",
    "CUDA repo | Create the keyring folder",
    "CUDA repo | Install the verified key",
    "CUDA repo | Add the deb822 source signed by that key only",
    "CUDA repo | Refresh the apt cache for the new source",
    "CUDA repo | Install cuda-toolkit-13-0",
    "NCCL | Pin, install and hold libnccl2 and libnccl-dev",
    "NCCL | Pin the NCCL packages to the exact version",
    "NCCL | Install libnccl2 and libnccl-dev 2.28.9-1+cuda13.0",
    "NCCL | Hold the NCCL packages",
    "NCCL | Read nccl.h after the install",
    "NCCL | Ask the venv which NCCL torch uses",
    "PyTorch venv | Install venv support for the system Python",
    "PyTorch venv | Install with pip (torch, the extras, or the hash-checked requirements)",
    "PyTorch venv | Build the venv and install what it lacks (the plan's steps, each a task file)",
    "CUDA repo | Add the verified key and the deb822 source, install the toolkit (the plan's steps)",
]


def test_site_repairs_drift_the_fast_path_would_hide(cluster):
    """The skips above rest on probes: drift on one node must still be seen and repaired, and
    only there."""
    nodes = sorted(cluster.nodes)
    node = nodes[0]
    for command in (
        "apt-mark unhold libnccl-dev",
        "/opt/wireup/venv/bin/pip uninstall -q -y torchinfo",
        "rm /etc/ansible/facts.d/wireup_torch.fact",
        "sed -i 's/^include-system-site-packages = false/include-system-site-packages = true/'"
        " /opt/wireup/venv/pyvenv.cfg",
        "chmod 0700 /opt/wireup/venv",
        "rm /etc/apt/sources.list.d/wireup-cuda-debian12-x86-64.sources",
    ):
        assert cluster.ssh(node, command).returncode == 0, command
    result = _timed(f"after drift on {node}", "site.yml", cluster.inventory)
    _clean(result, f"after drift on {node}")
    # 6 repairs, and apt update after the source came back (changed when apt wrote new lists).
    assert result.stats["changed"][node] in (6, 7), result.stats
    assert all(result.stats["changed"][n] == 0 for n in nodes if n != node), result.stats
    for task in (
        "CUDA repo | Add the deb822 source signed by that key only",
        "NCCL | Hold the NCCL packages",
        "PyTorch venv | Write the local fact wireup_torch",
        "PyTorch venv | Keep the venv's system-site-packages setting",
        "PyTorch venv | Create the venv directory",
    ):
        ran = result.task_results(task)
        assert {host for host, res in ran.items() if res.get("changed")} == {node}, (task, ran)
    # pip ran only the extras' install (torchinfo, numpy), only there.
    pip = result.item_keys(
        "PyTorch venv | Install with pip (torch, the extras, or the hash-checked requirements)"
    )
    assert {host: keys for host, keys in pip.items() if keys} == {node: ["extras"]}, pip
    assert "libnccl-dev" in cluster.ssh(node, "apt-mark showhold").stdout.split()
    # numpy is in the venv (issue 12: the CPU torch wheel does not bring it), so torchinfo imports
    # and torch prints no "Failed to initialize NumPy".
    meta = cluster.ssh(node, "/opt/wireup/venv/bin/python -c 'import torch, torchinfo, numpy' 2>&1")
    assert meta.returncode == 0 and "NumPy" not in meta.stdout, meta.stdout
    assert cluster.ssh(node, "test -s /etc/ansible/facts.d/wireup_torch.fact").returncode == 0
    cfg = cluster.ssh(node, "cat /opt/wireup/venv/pyvenv.cfg").stdout
    assert "include-system-site-packages = false" in cfg, cfg
    assert cluster.ssh(node, "stat -c %a /opt/wireup/venv").stdout.strip() == "755"


def test_a_node_down_the_others_complete(cluster):
    nodes = sorted(cluster.nodes)
    down = nodes[-1]
    cluster.stop_node(down)
    try:
        result = _timed(f"with {down} powered off", "site.yml", cluster.inventory)
        assert result.unreachable_hosts == [down], result.stats
        assert result.failed_hosts == [], result.failure_messages()
        for node in nodes[:-1]:
            assert result.stats["ok"][node] > 0
        # The recap names the unreachable node.
        recap = result.stdout[result.stdout.rindex("PLAY RECAP") :]
        assert f"{down}" in recap and "unreachable=1" in recap, recap
    finally:
        cluster.start_node(down)


def _inventory(tmp_path, groups, **extra_vars):
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": groups, "vars": extra_vars}}))
    return path


def _testbed_hosts(testbed):
    data = yaml.safe_load(testbed.inventory.read_text())["gpu_nodes"]
    return data["hosts"], data["vars"]


def _no_change(result):
    assert result.rc != 0
    assert sum(result.stats["changed"].values()) == 0, result.stats
    return " ".join(msg for _, _, msg in result.failure_messages())


def test_missing_group_fails_on_the_controller(cluster, tmp_path):
    hosts, node_vars = _testbed_hosts(cluster)
    inventory = _inventory(tmp_path, {"trainers": {"hosts": hosts}}, **node_vars)
    result = run_playbook("site.yml", inventory)
    messages = _no_change(result)
    assert "inventory group 'gpu_nodes' (wireup_node_group) does not exist" in messages, messages
    assert "-e wireup_node_group=<your group>" in messages
    # Nothing reached a node: the controller play stopped the run.
    assert set(result.hosts) == {"localhost"}, result.hosts


def test_duplicate_address_fails_before_any_change(cluster, tmp_path):
    hosts, node_vars = _testbed_hosts(cluster)
    first, second = sorted(hosts)[:2]
    hosts = {name: dict(h) for name, h in hosts.items()}
    hosts[second]["wireup_address"] = hosts[first]["ansible_host"]
    inventory = _inventory(tmp_path, {"gpu_nodes": {"hosts": hosts}}, **node_vars)
    result = run_playbook("site.yml", inventory)
    messages = _no_change(result)
    assert f"hosts {first} and {second} share the address {hosts[first]['ansible_host']}" in messages
    assert "every node needs its own (check ansible_host / wireup_address)" in messages


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"nccl_package_version": "2.28.9"}, "nccl_package_version='2.28.9' is malformed"),
        ({"cuda_repo_version": 13.0}, "cuda_repo_version=13.0 is a number, not a string: quote it"),
        ({"wireup_master_host": "node9"}, "wireup_master_host='node9' is not a host of group 'gpu_nodes'"),
        ({"wireup_nproc_per_node": "many"}, "wireup_nproc_per_node='many' is not 'auto'"),
        ({"nvidia_driver_flavor": "closed"}, "nvidia_driver_flavor must be one of: open, proprietary"),
    ],
)
def test_bad_variable_fails_before_any_change(cluster, extra, expected):
    result = run_playbook("site.yml", cluster.inventory, extra)
    messages = _no_change(result)
    assert expected in messages, messages
    # Stopped in preflight: no task of a later role ran anywhere.
    later = [
        ev["event_data"]["task"]
        for ev in result.events
        if ev.get("event") in ("runner_on_ok", "runner_on_failed")
        and ev["event_data"].get("role") != "preflight"
    ]
    assert later == [], later


def test_a_misspelled_variable_stops_in_preflight(cluster):
    """Issue 38's done-when: `-e torchrun_lauch_action=stop` ran jobs.yml's default action (status)
    with rc 0 and stopped nothing. Now the controller play stops before any node is contacted,
    naming the documented variable."""
    result = run_playbook("jobs.yml", cluster.inventory, {"torchrun_lauch_action": "stop"})
    messages = _no_change(result)
    assert "torchrun_lauch_action is not a wireup variable: did you mean torchrun_launch_action?" in messages
    assert set(result.hosts) == {"localhost"}, result.hosts
