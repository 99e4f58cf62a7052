"""Unit tests of the benchmark's pure helpers (no testbed, no root): .venv/bin/pytest tests/perf"""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from tests.perf.provision_bench import (
    STOCK_CFG,
    BenchError,
    allocate_nodes,
    goals,
    parse_probe_lines,
    parse_recap,
    parse_sizes,
    summarize,
    variant_config,
)

# ansible-playbook's recap lines (ruff: the real lines are longer than the limit).
RECAP = """\
PLAY [Preflight] ***
TASK [x] ***
ok: [node1]

PLAY RECAP *********************************************************************
localhost                  : ok=3    changed=0    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0
node1                      : ok=61   changed=0    unreachable=0    failed=0    skipped=29   rescued=0    ignored=0
node2                      : ok=58   changed=2    unreachable=0    failed=1    skipped=29   rescued=0    ignored=0
"""  # noqa: E501


def test_parse_recap_reads_every_host():
    recap = parse_recap(RECAP)
    assert sorted(recap) == ["localhost", "node1", "node2"]
    assert recap["node1"]["ok"] == 61 and recap["node1"]["changed"] == 0
    assert recap["node2"]["changed"] == 2 and recap["node2"]["failed"] == 1


def test_parse_recap_without_a_recap_is_empty():
    assert parse_recap("ERROR! the playbook could not be found") == {}


def test_parse_probe_lines():
    text = (
        "wireup: job perf-launch run x on node1: node 0/3\n"
        "wireup-perf-probe rank=0 world=3 host=node1 started=1700000010.250 joined=1700000012.500\n"
        "noise\n"
        "wireup-perf-probe rank=2 world=3 host=node3 started=1700000011.000 joined=1700000012.400\n"
    )
    probes = parse_probe_lines(text)
    assert [p["rank"] for p in probes] == [0, 2]
    assert probes[0]["started"] == pytest.approx(1700000010.25)
    assert probes[1]["host"] == "node3" and probes[1]["world"] == 3


@pytest.mark.parametrize("text", ["", "0,1", "a,2", "-1"])
def test_bad_sizes_name_the_option(text):
    with pytest.raises(BenchError, match="--sizes"):
        parse_sizes(text)


def test_sizes_sorted_unique():
    assert parse_sizes("4,1,2,1") == [1, 2, 4]


def test_allocate_nodes_is_disjoint():
    nodes = [f"node{i}" for i in range(1, 15)]
    groups = allocate_nodes(nodes, ["project", "stock"], [1, 2, 4])
    used = [n for cfg in groups.values() for g in cfg.values() for n in g]
    assert len(used) == len(set(used)) == 14
    assert groups["project"][4] == ["node4", "node5", "node6", "node7"]
    assert groups["stock"][1] == ["node8"]
    with pytest.raises(BenchError):
        allocate_nodes(nodes[:13], ["project", "stock"], [1, 2, 4])


def _run(kind, cfg, size, seconds, ok=True):
    return {
        "kind": kind,
        "config": cfg,
        "size": size,
        "seconds": seconds,
        "rc": 0,
        "ok": ok,
        "controller_cpu": 1.0,
        "node_cpu": 2.0,
    }


def test_summary_medians_ratios_and_goals():
    runs = [
        _run("first", "project", 1, 100),
        _run("first", "stock", 1, 150),
        _run("first", "project", 4, 200),
        _run("first", "stock", 4, 300),
        *(_run("rerun", "project", 1, s) for s in (10, 11, 30)),
        *(_run("rerun", "project", 4, s) for s in (12, 13, 14)),
        *(_run("rerun", "stock", 1, s) for s in (20, 22, 24)),
        *(_run("rerun", "stock", 4, s) for s in (15, 16, 17, 99)),
    ]
    runs[-1]["ok"] = False  # a rerun that changed something still counts its time, but is flagged
    summary = summarize(runs, ["project", "stock"], [1, 4])
    assert summary["medians"]["rerun/project/1"]["median"] == 11
    assert summary["medians"]["rerun/stock/4"]["median"] == 16.5
    assert summary["medians"]["rerun/stock/4"]["flagged"] == 1
    assert summary["ratios"]["rerun 4/1 nodes, project"] == pytest.approx(13 / 11)
    assert summary["ratios"]["rerun stock/project, 1 nodes"] == pytest.approx(2.0)
    met = {name: ok for name, _, _, ok in goals(summary, ["project", "stock"], [1, 4])}
    assert met == {
        "rerun(4 nodes)/rerun(1 node), project": True,
        "rerun stock/project, 1 nodes": True,
        "rerun stock/project, 4 nodes": False,
    }


def test_stock_config_has_no_speedups():
    cfg = configparser.ConfigParser()
    cfg.read_string(STOCK_CFG.format(root="/repo"))
    defaults, ssh = dict(cfg["defaults"]), dict(cfg["ssh_connection"])
    assert defaults == {"collections_path": "/repo/.collections"}
    assert ssh == {"ssh_args": "-C"}  # no ControlPersist, no pipelining


PROJECT_CFG = """\
[defaults]
collections_path = .collections
forks = 20

[ssh_connection]
pipelining = True
ssh_args = -o ControlMaster=auto -o ControlPersist=60s -o ServerAliveInterval=15
"""


def _variant(name, **kw):
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read_string(variant_config(PROJECT_CFG, name, root=Path("/repo"), workdir=Path("/w"), **kw))
    return cfg


def test_variants_change_one_thing_and_make_paths_absolute():
    assert _variant("no-pipelining")["ssh_connection"]["pipelining"] == "False"
    assert _variant("no-controlpersist")["ssh_connection"]["ssh_args"] == "-o ServerAliveInterval=15"
    assert _variant("forks-5")["defaults"]["forks"] == "5"
    cache = _variant("fact-cache")["defaults"]
    assert cache["gathering"] == "smart" and cache["fact_caching_connection"] == "/w/fact-cache"
    piped = _variant("piped")
    assert piped["ssh_connection"]["transfer_method"] == "piped"
    assert piped["ssh_connection"]["pipelining"] == "True"
    assert (
        piped["defaults"]["collections_path"] == "/repo/.collections" and piped["defaults"]["forks"] == "20"
    )


def test_mitogen_variant_needs_the_package(tmp_path):
    with pytest.raises(BenchError, match="--mitogen-path"):
        _variant("mitogen")
    with pytest.raises(BenchError, match=r"mitogen_linear\.py"):
        _variant("mitogen", mitogen_path=tmp_path)
    strategy = tmp_path / "ansible_mitogen" / "plugins" / "strategy"
    strategy.mkdir(parents=True)
    (strategy / "mitogen_linear.py").write_text("")
    cfg = _variant("mitogen", mitogen_path=tmp_path)["defaults"]
    assert cfg["strategy"] == "mitogen_linear" and cfg["strategy_plugins"] == str(strategy)


def test_scaling_one_host_inventory(tmp_path):
    """Each loopback node of tests/perf/scaling_one_host.py keeps the GPU machine's settings but
    its own venv, facts, address and ssh endpoint, with host key checking on."""
    import yaml

    from tests.perf import scaling_one_host as soh

    names = ["n1", "n2", "n3"]
    addresses = {n: f"127.0.0.{i + 2}" for i, n in enumerate(names)}
    hosts = yaml.safe_load(soh.write_inventory(tmp_path, names, addresses).read_text())["all"]["children"]
    hosts = hosts["gpu_nodes"]["hosts"]
    assert sorted(hosts) == names
    for name, host in hosts.items():
        assert "ansible_connection" not in host  # ssh, the project's connection settings
        assert host["ansible_host"] == addresses[name] and host["ansible_port"] == soh.PORT
        assert f"UserKnownHostsFile={tmp_path / 'known_hosts'}" in host["ansible_ssh_common_args"]
        assert host["wireup_venv_path"] == f"/opt/wireup-scale/{name}/venv"
        assert host["wireup_address"].startswith("192.0.2.")  # TEST-NET-1: never contacted
        assert host["pytorch_venv_system_site_packages"] is True  # tests/gpu/inventory.yml's settings
    assert len({h["wireup_address"] for h in hosts.values()}) == len(names)


def test_task_counts_split_module_and_controller_tasks():
    from tests.perf.provision_bench import task_counts

    profile = {
        "tasks": [
            {"action": "ansible.builtin.apt", "hosts": ["n1", "n2"], "skipped": []},
            {"action": "ansible.builtin.apt", "hosts": ["n1"], "skipped": ["n1"]},
            {"action": "ansible.builtin.set_fact", "hosts": ["n1"], "skipped": []},
            {"action": "wireup_node_facts", "hosts": ["n2"], "skipped": []},
            {"action": "ansible.builtin.assert", "hosts": ["localhost"], "skipped": []},
        ]
    }
    assert task_counts(profile, "n1") == {"tasks": 3, "module_tasks": 1, "no_module_tasks": 2}
    assert task_counts(profile, "n2") == {"tasks": 2, "module_tasks": 2, "no_module_tasks": 0}
    assert task_counts({}, "n1") == {"tasks": 0, "module_tasks": 0, "no_module_tasks": 0}


def test_controller_breakdown_reads_a_cprofile(tmp_path):
    import cProfile
    import time

    from tests.perf.scaling_one_host import controller_breakdown

    prof = cProfile.Profile()
    prof.enable()
    time.sleep(0.05)
    prof.disable()
    path = tmp_path / "x.prof"
    prof.dump_stats(str(path))
    rows = {what: (secs, calls) for what, secs, calls in controller_breakdown(path, 1.5)}
    assert rows["wall"] == (1.5, 0)
    # the profiler's clock is not the test's: under load (and on 3.13's profiler) a 50 ms sleep
    # has been read as 31 ms, so the row is checked for being there and counted, not for its length
    assert rows["idle: waiting on workers and nodes (sleep)"][0] > 0
    assert rows["idle: waiting on workers and nodes (sleep)"][1] == 1
    assert rows["  of which fork() itself"] == (0.0, 0)


# ---------------------------------------------------------------- ab_rerun: reruns of two checkouts
def test_ab_rerun_alternates_the_first_side_and_flags_a_rerun_that_changed():
    from tests.perf.ab_rerun import clean, order

    assert [order(i) for i in range(3)] == [("before", "after"), ("after", "before"), ("before", "after")]
    recap = parse_recap(RECAP)
    assert clean(recap["node1"]) and not clean(recap["node2"]) and not clean({})
