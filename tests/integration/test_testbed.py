"""The testbed itself: nodes reachable over ssh and paramiko, distinct, booted with systemd, able to
reach the registries and nothing else, served the torch wheelhouse; a stopped node shows up as
unreachable in the recap while the others carry on; several testbeds coexist and clean up.

No probe traffic leaves loopback, the bridge and the nodes: the "nothing else" part is asserted on
the firewall rules the testbed installed, never by sending packets elsewhere."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from tests.testbed import Testbed, cache, system

from .harness import run_playbook, write_playbook

pytestmark = pytest.mark.integration

PING = """\
- name: Ping the testbed nodes
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Ping
      ansible.builtin.ping:
"""

IDENTITY = """\
- name: Each node is its own Debian 12 machine, booted by systemd
  hosts: gpu_nodes
  gather_facts: true
  tasks:
    - name: Hostname, address, OS and service manager are the node's own
      ansible.builtin.assert:
        that:
          - ansible_facts.hostname == inventory_hostname
          - ansible_facts.default_ipv4.address == ansible_host
          - ansible_facts.distribution == "Debian"
          - ansible_facts.distribution_major_version == "12"
          - ansible_facts.service_mgr == "systemd"
          - ansible_facts.python.version.major == 3
    - name: Hostnames, machine ids and addresses differ across the nodes
      ansible.builtin.assert:
        that:
          - groups.gpu_nodes | map("extract", hostvars, ["ansible_facts", "hostname"]) | unique | length
            == groups.gpu_nodes | length
          - groups.gpu_nodes | map("extract", hostvars, ["ansible_facts", "machine_id"]) | unique | length
            == groups.gpu_nodes | length
          - groups.gpu_nodes | map("extract", hostvars, ["ansible_facts", "default_ipv4", "address"])
            | unique | length == groups.gpu_nodes | length
      run_once: true
    - name: The node resolves its own name (as Debian does) but not the other nodes' names
      ansible.builtin.command:
        cmd: getent hosts {{ item }}
      register: lookup
      changed_when: false
      failed_when: (lookup.rc == 0) != (item == inventory_hostname)
      loop: "{{ groups.gpu_nodes }}"
    - name: Systemd booted cleanly (no failed units, e.g. from nodes sharing a cgroup tree)
      ansible.builtin.command:
        cmd: systemctl is-system-running
      register: boot
      changed_when: false
      failed_when: boot.stdout != "running"
    - name: An sshd service task runs for real (systemd answers)
      ansible.builtin.systemd_service:
        name: ssh
        state: started
"""

REGISTRIES = """\
- name: The node reaches the Debian archive and PyPI
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Apt index from the Debian archive
      ansible.builtin.apt:
        update_cache: true
    - name: A virtualenv for pip
      ansible.builtin.command:
        cmd: python3 -m venv /tmp/wireup-testbed-venv
        creates: /tmp/wireup-testbed-venv/bin/pip
    - name: Download a tiny package from PyPI
      ansible.builtin.command:
        cmd: /tmp/wireup-testbed-venv/bin/pip download --no-deps -d /tmp/wireup-testbed-dl six
      changed_when: true
    - name: The downloaded wheel is there
      ansible.builtin.find:
        paths: /tmp/wireup-testbed-dl
        patterns: "six-*.whl"
      register: wheels
      failed_when: wheels.matched != 1
    - name: Clean up
      ansible.builtin.file:
        path: "{{ item }}"
        state: absent
      loop: [/tmp/wireup-testbed-venv, /tmp/wireup-testbed-dl]
"""

WHEELHOUSE = """\
- name: The nodes see the wheelhouse at pytorch_venv_wheelhouse_url
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: HEAD the torch wheel
      ansible.builtin.uri:
        url: "{{ pytorch_venv_wheelhouse_url }}{{ torch_wheel | urlencode }}"
        method: HEAD
      register: head
      failed_when: head.status != 200 or (head.content_length | int) != (torch_wheel_size | int)
"""


def _all(testbed, value):
    return dict.fromkeys(testbed.nodes, value)


def test_ping_over_ssh_with_host_key_checking(testbed, tmp_path):
    inventory = Path(testbed.inventory).read_text()
    assert "StrictHostKeyChecking=yes" in inventory
    assert f"UserKnownHostsFile={testbed.known_hosts}" in inventory
    result = run_playbook(write_playbook(tmp_path, "ping.yml", PING), testbed.inventory)
    assert result.rc == 0, result.stdout
    assert result.stats["ok"] == _all(testbed, 1)
    assert result.stats["unreachable"] == _all(testbed, 0)


def test_ping_over_paramiko(testbed, tmp_path):
    result = run_playbook(
        write_playbook(tmp_path, "ping.yml", PING), testbed.inventory, connection="paramiko"
    )
    assert result.rc == 0, result.stdout
    assert result.stats["ok"] == _all(testbed, 1)
    assert any(
        ev.get("event_data", {}).get("res", {}).get("ping") == "pong"
        for ev in result.events
        if ev.get("event") == "runner_on_ok"
    )


def test_wrong_host_key_is_refused(testbed, tmp_path):
    """ssh really checks host keys: a known_hosts with another key for the node makes it unreachable."""
    node = next(iter(testbed.nodes))
    system.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", tmp_path / "impostor"])
    kind, key = (tmp_path / "impostor.pub").read_text().split()[:2]
    assert key not in testbed.known_hosts.read_text()
    bad = tmp_path / "known_hosts"
    bad.write_text(f"{testbed.address(node)} {kind} {key}\n")
    result = run_playbook(
        write_playbook(tmp_path, "ping.yml", PING),
        testbed.inventory,
        {"ansible_ssh_common_args": f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={bad}"},
        limit=node,
        # No shared master connection: an earlier, checked connection must not be reused here.
        envvars={"ANSIBLE_SSH_ARGS": "-o ControlMaster=no -o ControlPath=none"},
    )
    assert result.stats["unreachable"] == {node: 1}
    assert "host key verification failed" in " ".join(m for _, _, m in result.failure_messages(node)).lower()


def test_nodes_are_distinct_systemd_machines(testbed, tmp_path):
    result = run_playbook(write_playbook(tmp_path, "identity.yml", IDENTITY), testbed.inventory)
    assert result.rc == 0, result.stdout
    assert result.stats["failed"] == _all(testbed, 0)
    assert result.stats["unreachable"] == _all(testbed, 0)
    assert all(n >= 5 for n in result.stats["ok"].values()), result.stats
    inits = {testbed.state["nodes"][n]["leader"] for n in testbed.nodes}
    cgroups = {Path(f"/proc/{pid}/cgroup").read_text() for pid in inits}
    assert len(cgroups) == len(testbed.nodes), cgroups  # each node's systemd has a cgroup tree of its own


def test_a_node_reaches_debian_archive_and_pypi(testbed, tmp_path):
    node = next(iter(testbed.nodes))
    result = run_playbook(
        write_playbook(tmp_path, "registries.yml", REGISTRIES), testbed.inventory, limit=node
    )
    assert result.rc == 0, result.stdout
    assert result.stats["failed"] == {node: 0}
    assert result.stats["ok"][node] >= 5


def test_forwarding_allows_only_the_registry_front(testbed):
    st = testbed.state
    br, subnet = st["bridge"], st["subnet"]
    fronts = sorted({a for h in cache.registry_hosts() for a in system.resolve_v4(h)})
    assert st["front_addresses"] == fronts
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text().strip() == "1"
    rules = testbed.iptables_rules()
    fch, nch = st["iptables"]["filter"], st["iptables"]["nat"]
    accept = [r for r in rules["filter"] if r.endswith("-j ACCEPT")]
    allowed = {f"{a}/32" for a in fronts}
    for rule in accept:
        words = rule.split()
        if "-o" in words and words[words.index("-o") + 1] == br and "-i" in words:
            assert words[words.index("-i") + 1] == br, rule  # node to node on the bridge
        elif "--ctstate" in words:
            assert words[words.index("--ctstate") + 1] == "RELATED,ESTABLISHED" and f"-d {subnet}" in rule, (
                rule
            )
        else:  # new connections leaving the bridge: only to the front, only apt/pip ports
            assert words[words.index("-d") + 1] in allowed, rule
            assert f"-i {br}" in rule and f"-s {subnet}" in rule, rule
            assert re.search(r"--dport (80|443)\b", rule), rule
    assert {r.split("-d ")[1].split()[0] for r in accept if "--dport" in r} == allowed
    # Whatever was not accepted above is refused: the chain ends with REJECT both ways.
    assert rules["filter"][-2:] == [
        f"-A {fch} -i {br} -j REJECT --reject-with icmp-port-unreachable",
        f"-A {fch} -o {br} -j REJECT --reject-with icmp-port-unreachable",
    ]
    nat = [r for r in rules["nat"] if r.startswith(f"-A {nch}")]
    assert nat == [f"-A {nch} -s {subnet} -d {a}/32 -j MASQUERADE" for a in fronts]
    assert sorted(rules["jumps"]) == sorted(
        [
            f"-A FORWARD -i {br} -j {fch}",
            f"-A FORWARD -o {br} -j {fch}",
            f"-A POSTROUTING -s {subnet} -j {nch}",
        ]
    )
    # The chain is consulted before anything else in FORWARD (a docker DROP policy cannot win).
    forward = [
        r for r in system.run(["iptables", "-w", "-S", "FORWARD"]).stdout.splitlines() if r.startswith("-A")
    ]
    # Other testbeds (a factory testbed of this session, another engineer's) jump to their own
    # chains; apart from those, this testbed's jumps come first.
    forward = [r for r in forward if not re.search(r"-j WTB\d+-FWD$", r) or r.endswith(f"-j {fch}")]
    assert set(forward[:2]) == {f"-A FORWARD -i {br} -j {fch}", f"-A FORWARD -o {br} -j {fch}"}, forward
    # Nodes resolve the registries to the front through /etc/hosts, and have no DNS server at all.
    node = next(iter(testbed.nodes))
    hosts = testbed.ssh(node, "cat /etc/hosts").stdout
    for name in cache.registry_hosts():
        assert re.search(rf"^{re.escape(fronts[0])}\s.*\b{re.escape(name)}\b", hosts, re.M), hosts
    assert "nameserver" not in testbed.ssh(node, "cat /etc/resolv.conf").stdout


def test_wheelhouse_serves_the_torch_wheel(testbed, tmp_path):
    wheel = cache.torch_wheel()
    url = f"{testbed.www_url}wheels/"
    with urllib.request.urlopen(url, timeout=10) as resp:  # the bridge address: local
        listing = resp.read().decode()
    assert urllib.request.quote(wheel.name) in listing or wheel.name in listing
    for dep in ("filelock", "sympy", "networkx", "jinja2", "fsspec", "typing_extensions"):
        assert re.search(rf"{dep}-[^\"]+\.whl", listing), dep
    head = urllib.request.Request(url + urllib.request.quote(wheel.name), method="HEAD")
    with urllib.request.urlopen(head, timeout=10) as resp:
        assert int(resp.headers["Content-Length"]) == wheel.stat().st_size
    result = run_playbook(
        write_playbook(tmp_path, "wheelhouse.yml", WHEELHOUSE),
        testbed.inventory,
        extravars={"torch_wheel": wheel.name, "torch_wheel_size": wheel.stat().st_size},
    )
    assert result.rc == 0, result.stdout
    assert result.stats["failed"] == _all(testbed, 0)
    assert result.stats["ok"] == _all(testbed, 1)


def test_second_testbed_coexists_and_cleans_up(testbed, testbed_factory, tmp_path):
    other = testbed_factory("b", nodes=1)
    for key in ("bridge", "subnet", "port", "bridge_ip"):
        assert other.state[key] != testbed.state[key], key
    ping = write_playbook(tmp_path, "ping.yml", PING)
    for tb in (testbed, other):
        result = run_playbook(ping, tb.inventory)
        assert result.rc == 0, result.stdout
        assert result.stats["ok"] == _all(tb, 1)

    # A fresh testbed made and removed again; down() works from state.json alone (as after a crash).
    scratch = Testbed(f"{testbed.name}-c"[:20]).up(nodes=1)
    st = json.loads(scratch.state_file.read_text())
    node = st["nodes"]["node1"]
    system.stop_process(st["http"]["pid"], st["http"]["start"])  # a crashed piece
    Testbed(scratch.name).down()
    assert not system.is_our_process(node["pid"], node["start"])
    assert not system.link_exists(st["bridge"]) and not system.link_exists(node["veth"])
    assert not system.is_mountpoint(Path(node["root"]))
    assert node["cgroups"] and not any(Path(cg).exists() for cg in node["cgroups"])
    assert not Path(st["state_dir"]).exists()
    saved = system.run(["iptables-save"]).stdout
    assert st["iptables"]["filter"] not in saved and st["iptables"]["nat"] not in saved
    assert not (system.RUN_DIR / "slots" / f"{st['slot']}.json").exists()


def test_a_stopped_node_is_unreachable_while_the_others_run(testbed, tmp_path):
    ping = write_playbook(tmp_path, "ping.yml", PING)
    victim = list(testbed.nodes)[-1]
    others = [n for n in testbed.nodes if n != victim]
    assert testbed.stop_node(victim) in ("stopped", "killed")
    try:
        result = run_playbook(ping, testbed.inventory)
        assert result.rc != 0
        assert result.unreachable_hosts == [victim]
        assert result.stats["ok"] == {**dict.fromkeys(others, 1), victim: 0}
        assert result.stats["failed"] == _all(testbed, 0)
    finally:
        testbed.start_node(victim)
    result = run_playbook(ping, testbed.inventory)
    assert result.rc == 0, result.stdout
    assert result.stats["ok"] == _all(testbed, 1)
