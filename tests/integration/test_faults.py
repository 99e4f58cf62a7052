"""First contact with a broken setup (issue 12): an empty or misspelled node group, a bad port and
a dead node must each be named, with the fix, instead of passing silently or failing in a template.

Runs on the session testbed; the dead-node test powers node3 off and boots it again at the end.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import yaml

from .harness import run_playbook

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ENTRY_PLAYBOOKS = ("site.yml", "bench.yml", "launch.yml")


def _timed(label, *args, **kwargs):
    start = time.monotonic()
    result = run_playbook(*args, **kwargs)
    print(f"[faults] {label}: rc={result.rc} in {time.monotonic() - start:.1f} s")
    return result


def _messages(result):
    return " ".join(" ".join(msg.split()) for _, _, msg in result.failure_messages())


@pytest.fixture
def empty_group_inventory(testbed, tmp_path):
    """The testbed's nodes under another group, and gpu_nodes defined but empty."""
    data = yaml.safe_load(testbed.inventory.read_text())["gpu_nodes"]
    path = tmp_path / "hosts.yml"
    trainers = {"hosts": data["hosts"], "vars": data["vars"]}
    path.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {}}, "trainers": trainers}}}))
    return path


@pytest.mark.parametrize("playbook", ENTRY_PLAYBOOKS)
def test_empty_node_group_fails_every_entry_playbook(empty_group_inventory, playbook):
    result = _timed(f"{playbook} on an empty group", playbook, empty_group_inventory)
    assert result.rc != 0, result.stdout[-3000:]
    messages = _messages(result)
    assert "inventory group 'gpu_nodes' (wireup_node_group) has no hosts" in messages, messages
    assert "-e wireup_node_group=<the group that holds them>" in messages
    # Stopped on the controller: no node was contacted.
    assert set(result.hosts) == {"localhost"}, result.hosts


def test_misspelled_node_group_fails(empty_group_inventory):
    result = _timed(
        "bench.yml, misspelled group", "bench.yml", empty_group_inventory, {"wireup_node_group": "trainrs"}
    )
    assert result.rc != 0
    messages = _messages(result)
    assert "inventory group 'trainrs' (wireup_node_group) does not exist" in messages, messages
    assert set(result.hosts) == {"localhost"}, result.hosts


@pytest.mark.parametrize(
    ("port", "expected"),
    [
        (99999, "wireup_master_port=99999 must be a TCP port from 1024 to 65535"),
        ("abc", "wireup_master_port"),
    ],
)
def test_bad_master_port_stops_bench_in_preflight(testbed, tmp_path, port, expected):
    result = _timed(
        f"bench.yml with port {port}",
        "bench.yml",
        testbed.inventory,
        {
            "wireup_master_port": port,
            "wireup_results_dir": str(tmp_path),
        },
    )
    assert result.rc != 0
    assert expected in _messages(result), _messages(result)
    # Stopped in preflight's checks: nothing ran on a node (not even the fact gathering), and no
    # benchmark was stored.
    ran = {
        ev["event_data"]["task"]
        for ev in result.events
        if ev.get("event") in ("runner_on_ok", "runner_on_failed")
        and ev["event_data"].get("host") != "localhost"
    }
    assert "Preflight | Gather GPU, driver, CUDA, NCCL, OS, network and disk facts" not in ran, ran
    assert not [t for t in ran if not t.startswith(("Preflight |", "Validating arguments"))], ran
    assert not (tmp_path / "bench").exists()


def test_dead_node_is_named_and_the_live_nodes_are_judged(testbed, tmp_path):
    nodes = sorted(testbed.nodes)
    dead, live = nodes[-1], nodes[:-1]
    testbed.stop_node(dead)
    try:
        result = _timed(
            f"bench.yml with {dead} powered off",
            "bench.yml",
            testbed.inventory,
            {"wireup_results_dir": str(tmp_path), "bench_iterations": 2, "bench_warmup_iterations": 1},
        )
    finally:
        testbed.start_node(dead)
    out = " ".join(result.stdout.split())
    # Ansible's own verdict on the dead node; no host failed, no template error anywhere.
    assert result.unreachable_hosts == [dead], result.stats
    assert result.failed_hosts == [], result.failure_messages()
    assert "HostVarsVars" not in out
    # The cross-node run is skipped, with the reason.
    assert (
        f"bench: torch benchmark across all nodes skipped: not every node of gpu_nodes is left in this "
        f"run ({dead} unreachable or failed earlier)"
    ) in out, out[-3000:]
    # The summary names the dead node with Ansible's reason.
    assert re.search(
        rf"{dead}: UNREACHABLE, [^']*? - "
        + re.escape("unreachable, not benchmarked: timed out waiting for ping module test:"),
        out,
    )
    assert "Make sure this host can be reached over ssh" in out
    # Stored and reported: the live nodes judged, the dead one named.
    [run] = sorted((tmp_path / "bench").iterdir())
    records = {p.stem: json.loads(p.read_text()) for p in run.glob("*.json")}
    assert sorted(records) == nodes
    assert records[dead]["verdict"] == "UNREACHABLE"
    assert records[dead]["findings"][0]["code"] == "bench_host_unreachable"
    for node in live:
        assert records[node]["verdict"] != "UNREACHABLE"
        codes = [f["code"] for f in records[node]["findings"]]
        assert "bench_torch_multi_skipped" in codes, codes
    md = (run / "report.md").read_text()
    assert f"| {dead} | UNREACHABLE |" in md
    assert f"## {dead}: UNREACHABLE" in md


def test_hash_checked_install_refuses_a_changed_wheel_then_installs(testbed_factory, tmp_path):
    """pytorch_venv_requirements_file: pip --require-hashes from the testbed's wheelhouse. A lock
    whose hash for one wheel differs (the wheel changed since it was vetted) fails before anything
    is installed; the true lock installs, and the rerun starts no pip."""
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import wheelhouse

    bed = testbed_factory("hash", nodes=1)
    [node] = list(bed.nodes)
    lock = wheelhouse.lock_directory(str(bed.www_dir / "wheels"))
    good = tmp_path / "requirements-hashed.txt"
    good.write_text(lock)
    bad = tmp_path / "requirements-tampered.txt"
    bad.write_text(re.sub(r"(torchinfo==\S+ --hash=sha256:)[0-9a-f]{64}", r"\g<1>" + "0" * 64, lock))
    assert bad.read_text() != lock

    refused = _timed("pytorch_venv, tampered lock", "site.yml", bed.inventory,
                     {"pytorch_venv_requirements_file": str(bad)}, tags=["pytorch_venv"])  # fmt: skip
    assert refused.failed_hosts == [node], refused.stats
    messages = _messages(refused)
    assert "could not install the hash-checked requirements" in messages, messages
    assert "DO NOT MATCH THE HASHES" in messages or "Expected sha256" in messages, messages
    assert bed.ssh(node, "test -e /opt/wireup/venv/bin/torchrun", check=False).returncode != 0

    installed = _timed("pytorch_venv, true lock", "site.yml", bed.inventory,
                       {"pytorch_venv_requirements_file": str(good)}, tags=["pytorch_venv"])  # fmt: skip
    assert installed.rc == 0 and not installed.failed_hosts, installed.failure_messages()
    # One pip call: exactly the wheels of the file, each checked against its hash (no torch/extras call).
    ran = installed.item_keys(
        "PyTorch venv | Install with pip (torch, the extras, or the hash-checked requirements)"
    )
    assert ran[node] == ["hashed"], ran
    check = bed.ssh(
        node, "/opt/wireup/venv/bin/python -c 'import torch, torchinfo, numpy; print(torch.__version__)'"
    )
    assert check.stdout.strip() == "2.13.0+cpu", check.stdout

    again = _timed("pytorch_venv, rerun", "site.yml", bed.inventory,
                   {"pytorch_venv_requirements_file": str(good)}, tags=["pytorch_venv"])  # fmt: skip
    assert again.rc == 0 and again.stats["changed"][node] == 0, again.stats


def _fake_pip(testbed, node, seconds):
    """A process on the node whose argv is the venv's pip, as an interrupted run leaves it."""
    started = testbed.ssh(
        node,
        f"nohup bash -c 'exec -a /opt/wireup/venv/bin/pip sleep {seconds}' >/dev/null 2>&1 & echo $!",
    )
    return int(started.stdout.strip())


def test_a_rerun_waits_for_the_pip_an_interrupted_run_left(testbed):
    node = sorted(testbed.nodes)[0]
    # Still running when the wait is over: the run stops and names the process.
    pid = _fake_pip(testbed, node, 300)
    try:
        stopped = _timed("pytorch_venv --check, pip left running", "site.yml", testbed.inventory,
                         {"pytorch_venv_pip_wait_timeout": 0}, tags=["pytorch_venv"], check=True,
                         limit=node)  # fmt: skip
    finally:
        testbed.ssh(node, f"kill {pid}", check=False)
    assert stopped.failed_hosts == [node], stopped.stats
    assert f"pip PID {pid} still installs into /opt/wireup/venv after 0 s" in _messages(stopped)

    # Ends while the rerun waits: the rerun says what it found, then goes on.
    pid = _fake_pip(testbed, node, 8)
    try:
        waited = _timed("pytorch_venv --check, pip ending", "site.yml", testbed.inventory,
                        {"pytorch_venv_pip_wait_timeout": 120}, tags=["pytorch_venv"], check=True,
                        limit=node)  # fmt: skip
    finally:
        testbed.ssh(node, f"kill {pid}", check=False)
    assert waited.rc == 0 and not waited.failed_hosts, waited.failure_messages()
    [said] = waited.task_results("PyTorch venv | Report torch").values()
    text = " ".join(said["msg"].split())
    assert f"found pip still installing into /opt/wireup/venv (an interrupted earlier run?): {pid}" in text
    assert "instead of starting a second pip, then read the venv it left" in text
