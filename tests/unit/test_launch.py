"""wireup.launch: master choice, node ranks, processes per node, env checks, job verdicts."""

import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import torchrun_launch


def node(address, interface="eth0", gpus=0, ib=(), hostname=""):
    return {
        "address": address,
        "interface": interface,
        "gpu_present": gpus > 0,
        "gpu_count": gpus,
        "infiniband": list(ib),
        "hostname": hostname,
    }


THREE = {
    "node3": node("10.0.0.13", hostname="wb-node3"),
    "node1": node("10.0.0.11", hostname="wb-node1"),
    "node2": node("10.0.0.12", hostname="wb-node2"),
}


def test_three_cpu_nodes_sorted_ranks_first_is_master():
    plan = torchrun_launch.plan(["node3", "node1", "node2"], THREE, group="gpu_nodes", nproc_per_node=2)
    assert plan["errors"] == []
    assert plan["hosts"] == ["node1", "node2", "node3"]
    assert [plan["nodes"][h]["node_rank"] for h in plan["hosts"]] == [0, 1, 2]
    assert plan["master"] == "node1"
    assert plan["rdzv_endpoint"] == "10.0.0.11:29500"
    assert plan["world_size"] == 6
    assert [h for h in plan["hosts"] if plan["nodes"][h]["is_master"]] == ["node1"]


def test_master_not_first_keeps_sorted_ranks_for_c10d():
    plan = torchrun_launch.plan(list(THREE), THREE, master_host="node3", master_port=29611)
    assert plan["errors"] == []
    assert plan["master"] == "node3"
    assert plan["rdzv_endpoint"] == "10.0.0.13:29611"
    assert plan["nodes"]["node3"]["node_rank"] == 2
    assert plan["nodes"]["node3"]["is_master"]


def test_static_backend_puts_the_master_first():
    plan = torchrun_launch.plan(list(THREE), THREE, master_host="node2", rdzv_backend="static")
    assert plan["errors"] == []
    assert plan["order"] == ["node2", "node1", "node3"]
    assert plan["nodes"]["node2"]["node_rank"] == 0
    assert plan["nodes"]["node1"]["node_rank"] == 1


def test_master_outside_a_job_group_is_its_first_host():
    # wireup_master_host is preflight's check (a host of wireup_node_group); a job over another
    # group without it (bench's one-node groups) takes that group's first host. Before, the plan
    # failed such a job: "wireup_master_host='node1' is not in torchrun_launch_group=...".
    plan = torchrun_launch.plan(["node2"], THREE, master_host="node1", group="wireup_bench_solo_node2")
    assert plan["errors"] == []
    assert plan["master"] == "node2" and plan["rdzv_endpoint"] == "10.0.0.12:29500"


def test_explicit_master_addr_overrides_the_facts():
    plan = torchrun_launch.plan(list(THREE), THREE, master_addr="192.168.7.1")
    assert plan["rdzv_endpoint"] == "192.168.7.1:29500"
    bad = torchrun_launch.plan(list(THREE), THREE, master_addr="not an address!")
    assert any("torchrun_launch_master_addr" in e for e in bad["errors"])


def test_ipv6_master_endpoint_is_bracketed():
    nodes = {"a": node("fd00::1"), "b": node("fd00::2")}
    assert torchrun_launch.plan(["a", "b"], nodes)["rdzv_endpoint"] == "[fd00::1]:29500"


@pytest.mark.parametrize(
    ("setting", "gpus", "expected", "error"),
    [
        ("auto", 8, 8, None),
        ("auto", 0, 1, None),  # a GPU-less node runs one CPU process
        (2, 0, 2, None),  # CPU processes: any number
        ("4", 8, 4, None),
        (3, 2, 3, "wireup_nproc_per_node=3 exceeds the 2 GPU(s) found on n1"),
        (0, 2, 0, "must be at least 1"),
        ("many", 2, 0, "is not 'auto' or a positive whole number"),
        (True, 2, 0, "is not 'auto' or a positive whole number"),
    ],
)
def test_resolve_nproc(setting, gpus, expected, error):
    nproc, errors = torchrun_launch.resolve_nproc(setting, gpus > 0, gpus, "n1")
    assert nproc == expected
    if error is None:
        assert errors == []
    else:
        assert len(errors) == 1
        assert error in errors[0]


def test_gpus_on_pci_but_none_usable_is_an_error_for_auto():
    _, errors = torchrun_launch.resolve_nproc("auto", True, 0, "n1")
    assert "nvidia-smi lists none" in errors[0]


def test_nproc_over_gpus_fails_the_plan_naming_host_and_variable():
    nodes = {"g1": node("10.1.0.1", gpus=2), "g2": node("10.1.0.2", gpus=1)}
    plan = torchrun_launch.plan(["g1", "g2"], nodes, nproc_per_node=2)
    assert plan["errors"] == [
        "wireup_nproc_per_node=2 exceeds the 1 GPU(s) found on g2: lower it to 1 or less, or use 'auto'"
    ]


def test_per_host_nproc_mapping():
    nodes = {"g1": node("10.1.0.1", gpus=8), "g2": node("10.1.0.2", gpus=4)}
    plan = torchrun_launch.plan(["g1", "g2"], nodes, nproc_per_node={"g1": "auto", "g2": 2})
    assert plan["errors"] == []
    assert (plan["nodes"]["g1"]["nproc"], plan["nodes"]["g2"]["nproc"]) == (8, 2)
    assert plan["world_size"] == 10


def test_hosts_missing_from_the_play_are_named():
    plan = torchrun_launch.plan(list(THREE), THREE, play_hosts=["node1", "node2"], group="gpu_nodes")
    assert any(
        e.startswith("node3 of torchrun_launch_group='gpu_nodes' not in this play") for e in plan["errors"]
    )


def test_empty_group_and_missing_addresses():
    assert "has no hosts" in torchrun_launch.plan([], {}, group="trainers")["errors"][0]
    plan = torchrun_launch.plan(["a"], {"a": node("", interface="")})
    assert any("the master a has no cluster address" in e and "wireup_address" in e for e in plan["errors"])
    assert any("a has no cluster interface" in e and "wireup_interface" in e for e in plan["errors"])


def test_master_port_is_preflights_check_not_repeated_in_the_plan():
    # checks.validate_port runs in preflight before the role; the plan only uses the port.
    plan = torchrun_launch.plan(list(THREE), THREE, master_port="29611")
    assert plan["errors"] == [] and plan["rdzv_endpoint"] == "10.0.0.11:29611"
    assert not any(
        "wireup_master_port" in e for e in torchrun_launch.plan(list(THREE), THREE, master_port=80)["errors"]
    )


def test_ib_hca_exact_names_sorted():
    assert torchrun_launch.ib_hca(["mlx5_1", "mlx5_0", "mlx5_1"]) == "=mlx5_0,mlx5_1"
    assert torchrun_launch.ib_hca([]) == ""
    assert torchrun_launch.ib_hca(None) == ""


def test_env_checks_and_exports_quote_values():
    assert torchrun_launch.env_errors({"NCCL_DEBUG": "INFO", "N": 2}, "v") == []
    errors = torchrun_launch.env_errors(
        {"1BAD": "x", "GOOD": {"a": 1}, "with-dash": "y"}, "torchrun_launch_env"
    )
    assert len(errors) == 3
    assert all(e.startswith("torchrun_launch_env: ") for e in errors)
    # The name rule is checks.shell_name_errors (preflight's for wireup_job_env's names).
    assert (
        errors[0] == "torchrun_launch_env: '1BAD' is not a valid shell variable name (letters, digits, '_')"
    )
    assert torchrun_launch.env_errors({"1BAD": "x", "GOOD": [1]}, "wireup_job_env", names=False) == [
        "wireup_job_env: GOOD must be a string or number, not list"
    ]
    assert torchrun_launch.env_errors(["A=1"], "wireup_job_env") == [
        "wireup_job_env must be a mapping of VARIABLE: value, not list"
    ]
    lines = torchrun_launch.exports({"A": "two words", "B": "it's", "C": True, "D": 3})
    assert lines == ["export A='two words'", "export B='it'\"'\"'s'", "export C=1", "export D=3"]


@pytest.mark.parametrize(
    ("job", "ok"),
    [
        ("ddp-multinode", True),
        ("bench.allreduce_2", True),
        ("-x", False),
        ("a b", False),
        ("a/b", False),
        ("", False),
    ],
)
def test_job_names(job, ok):
    assert (torchrun_launch.job_name_errors(job) == []) is ok


def test_hosts_entries_skip_localhost_and_ip_names():
    nodes = {
        "gpu-a01": node("10.40.0.11", hostname="a01"),
        "10.20.0.12": node("10.40.0.12", hostname="a02"),
        "localhost": node("10.40.0.13", hostname="localhost"),
        "same": node("10.40.0.14", hostname="same"),
    }
    assert torchrun_launch.hosts_entries(nodes, mapped=False) == [
        "10.40.0.12 a02",
        "10.40.0.11 gpu-a01 a01",
        "10.40.0.14 same",
    ]
    plan = torchrun_launch.plan(list(nodes), nodes)
    assert torchrun_launch.resolve_names(plan) == ["a02", "gpu-a01", "a01", "same"]


def st(state, rc=None, ended=None, elapsed=1.0):
    return {"state": state, "rc": rc, "ended": ended, "elapsed": elapsed}


def test_verdict_all_exited_zero_is_ok():
    v = torchrun_launch.job_verdict({"a": st("exited", 0, 5), "b": st("exited", 0, 6)}, ["a", "b"], 60)
    assert v["over"] and v["ok"] and v["first_failure"] == ""


def test_verdict_running_is_not_over():
    v = torchrun_launch.job_verdict({"a": st("running"), "b": st("exited", 0, 6)}, ["a", "b"], 60)
    assert not v["over"] and not v["ok"] and v["running"] == ["a"]


def test_verdict_first_failure_is_the_earliest_end():
    states = {"n1": st("exited", 1, 20.5), "n2": st("exited", 137, 10.0), "n3": st("running")}
    v = torchrun_launch.job_verdict(states, list(states), 60)
    assert v["over"] and not v["ok"]
    assert v["first_failure"] == "n2"
    assert v["reason"] == "n2 exited with code 137"


def test_verdict_lost_and_gone_nodes_fail_the_job():
    v = torchrun_launch.job_verdict({"n1": st("running"), "n2": st("lost", ended=3)}, ["n1", "n2"], 60)
    assert v["first_failure"] == "n2" and "killed" in v["reason"]
    v = torchrun_launch.job_verdict({"n1": st("running"), "n2": st("running")}, ["n1"], 60)
    assert v["over"] and v["first_failure"] == "n2" and v["reason"] == "n2 became unreachable"


def test_verdict_timeout():
    v = torchrun_launch.job_verdict(
        {"n1": st("running", elapsed=61), "n2": st("exited", 0, 4)}, ["n1", "n2"], 60
    )
    assert v["over"] and v["timed_out"] and not v["ok"]
    assert v["reason"] == "still running after 60 s on n1"
    assert not torchrun_launch.job_verdict({"n1": st("running", elapsed=10**6)}, ["n1"], 0)["over"]


def test_hosts_entries_reverse_map_the_ipv4_mapped_form_under_another_name():
    # c10d's dual-stack store sees peers as ::ffff:A.B.C.D and reverse-resolves them; glibc's
    # files backend does not match that against the IPv4 line (seen on a Debian 12 testbed node:
    # getnameinfo(::ffff:10.213.2.12) -> EAI_AGAIN -3 with "10.213.2.12 node2" in /etc/hosts).
    nodes = {"n1": node("10.0.0.1", hostname="h1"), "n2": node("fd00::2", hostname="h2")}
    assert torchrun_launch.hosts_entries(nodes) == [
        "10.0.0.1 n1 h1",
        "fd00::2 n2 h2",
        "::ffff:10.0.0.1 n1-ipv4-mapped",
    ]
    # Forward lookups of the real names stay what they were: the pre-check resolves only those.
    assert torchrun_launch.resolve_names(torchrun_launch.plan(list(nodes), nodes)) == ["n1", "h1", "n2", "h2"]


@pytest.mark.parametrize(
    ("cpus", "nproc", "setting", "expected"),
    [
        (16, 1, "auto", "16"),
        (16, 2, "auto", "8"),
        (2, 8, "auto", "1"),
        (None, 2, "auto", "1"),
        (16, 2, 3, "3"),
    ],
)
def test_omp_threads_per_process_from_the_node_cpus(cpus, nproc, setting, expected):
    facts = dict(node("10.0.0.1"), cpus=cpus)
    plan = torchrun_launch.plan(["n1"], {"n1": facts}, nproc_per_node=nproc, omp_threads=setting)
    assert plan["errors"] == []
    assert plan["nodes"]["n1"]["env"] == {"OMP_NUM_THREADS": expected}


@pytest.mark.parametrize("setting", [0, "many", True, -1])
def test_bad_omp_threads_names_the_variable(setting):
    plan = torchrun_launch.plan(["n1"], {"n1": node("10.0.0.1")}, omp_threads=setting)
    assert any("torchrun_launch_omp_threads" in e for e in plan["errors"])


MOUNTINFO = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "mountinfo"


def test_hosts_file_mount_decides_unsafe_writes():
    bound = (MOUNTINFO / "debian12_nspawn_node_hosts_bind.txt").read_text()
    plain = (MOUNTINFO / "debian12_nspawn_node.txt").read_text()
    assert torchrun_launch.is_mount_point(bound) is True
    assert torchrun_launch.is_mount_point(plain) is False
    assert torchrun_launch.is_mount_point(plain, "/proc") is True
    # Octal escapes in mount points, mangled whitespace, truncated lines.
    assert torchrun_launch.is_mount_point(
        "30 28 259:3 / /etc/hosts\\040old rw - ext4 /dev/x rw\n", "/etc/hosts old"
    )
    assert torchrun_launch.is_mount_point("  30   28 259:3 /   /etc/hosts  rw - ext4 /dev/x rw\n") is True
    assert torchrun_launch.is_mount_point("30 28 259:3 /\n") is False
    assert torchrun_launch.is_mount_point("") is False


def test_watchdog_config_and_errors():
    nodes = {h: node(f"10.0.0.{i}") for i, h in enumerate(["a", "b", "c"], 1)}
    plan = torchrun_launch.plan(list(nodes), nodes)
    limits = dict(port=29501, interval=5, timeout=30, join_timeout=300, grace=15, job_dir="/opt/j")
    cfg = torchrun_launch.watchdog_config(plan, "b", **limits)
    assert cfg == {
        "self": "b",
        "master": "a",
        "hosts": ["a", "b", "c"],
        "addr": "10.0.0.1",
        "bind": "10.0.0.1",  # the master's cluster address, not every interface (issue 23)
        "port": 29501,
        "interval": 5.0,
        "timeout": 30.0,
        "join_timeout": 300.0,
        "grace": 15,
        "job_dir": "/opt/j",
    }
    v6 = torchrun_launch.plan(["a"], nodes, master_addr="fd00::1")
    assert torchrun_launch.watchdog_config(v6, "a", **limits)["bind"] == "fd00::1"
    assert torchrun_launch.watchdog_errors(29501, 5, 30, 29500) == []
    assert "wireup_master_port too" in torchrun_launch.watchdog_errors(29500, 5, 30, 29500)[0]
    assert "at least twice" in torchrun_launch.watchdog_errors(29501, 5, 6, 29500)[0]
    assert "TCP port" in torchrun_launch.watchdog_errors("x", 5, 30, 29500)[0]


def test_gpu_usage_rows_and_status_lines():
    text = "0, 97, 40960, 143771\n1, [N/A], 10, 143771\nFailed to initialize NVML\n2, 3, 1\n"
    gpus = torchrun_launch.parse_gpu_usage(text)
    assert gpus == [{"index": 0, "util": 97, "mem_used": 40960, "mem_total": 143771}]
    running = {"state": "running", "rc": None, "started": 1796086923.5, "elapsed": 12.4, "reason": ""}
    assert torchrun_launch.status_line("n1", running, gpus) == (
        "n1: running since 2026-12-01 01:02:03 UTC (12 s); GPU0 97% 40.0/140 GiB"
    )
    stopped = {"state": "stopped", "elapsed": 30, "reason": "stopped by the watchdog: n2 exited with code 1"}
    assert torchrun_launch.status_line("n3", stopped) == (
        "n3: stopped after 30 s (stopped by the watchdog: n2 exited with code 1)"
    )
    assert (
        torchrun_launch.status_line("n2", {"state": "exited", "rc": 1, "elapsed": 3})
        == "n2: exited with code 1 after 3 s"
    )


def test_run_list_merges_nodes_newest_first():
    n1 = torchrun_launch.parse_run_list(
        '{"job": "a", "run_id": "r1", "state": "exited", "rc": 0, "started": 100.5}\n'
        "garbage\n"
        '{"job": "a", "run_id": "r2", "state": "running", "rc": null, "started": 200}\n'
    )
    n2 = torchrun_launch.parse_run_list(
        '{"job": "a", "run_id": "r2", "state": "stopped", "rc": null, "started": 200.1}\n'
    )
    assert torchrun_launch.runs_table({"n2": n2, "n1": n1}) == [
        "a r2 started 1970-01-01 00:03:20 UTC: n1 running, n2 stopped",
        "a r1 started 1970-01-01 00:01:40 UTC: n1 exited 0",
    ]


def test_watchdog_keys_are_32_random_bytes_in_hex():
    keys = {torchrun_launch.watchdog_key() for _ in range(20)}
    assert len(keys) == 20
    assert all(len(k) == 64 and int(k, 16) >= 0 for k in keys)
    assert (
        len(torchrun_launch.watchdog_key(8)) == 64 and len(torchrun_launch.watchdog_key(48)) == 96
    )  # never under 32
