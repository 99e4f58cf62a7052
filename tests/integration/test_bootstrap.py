"""Bootstrap roles cuda_repo, nccl and nvidia_driver on the testbed's GPU-less Debian 12 nodes.

NVIDIA's repository is unreachable here, so a signed stand-in with its layout and package names
(tests/testbed/fake_cuda_repo.py) is served from the testbed's www dir; the roles only see
cuda_repo_base_url, exactly as with a site mirror. The sequence is the one every role must pass:
--check on fresh nodes, apply, then apply and --check again with nothing changed.

A second test runs the nvidia_driver install path on one node that preflight's facts are told
has GPUs and NVSwitches (the driver packages in the stand-in repository carry no kernel module):
packages, branch pin, hold, nouveau blacklist, Fabric Manager of the driver's exact version,
services, and the "reboot required" line instead of a reboot.
"""

from __future__ import annotations

import json

import pytest

from tests.testbed.fake_cuda_repo import build

from .harness import REPO_ROOT, run_playbook, write_playbook

pytestmark = pytest.mark.integration

TAGS = ["cuda_repo", "nccl", "nvidia_driver"]
NCCL = "2.28.9-1+cuda13.0"
NCCL_NEWER = "2.29.2-1+cuda13.0"  # also in the stand-in repository: the pin must refuse it
DRIVER = "580.95.05"


@pytest.fixture(scope="module")
def repo_vars(testbed):
    meta = build(testbed.www_dir, nccl=NCCL, nccl_newer=NCCL_NEWER, driver=DRIVER)
    return {
        "cuda_repo_base_url": testbed.www_url + meta["base_url_path"],
        "cuda_repo_key_name": meta["key_name"],
        "cuda_repo_key_fingerprints": [meta["fingerprint"]],
        "cuda_repo_key_checksum": "sha256:" + meta["key_sha256"],
        # The testbed has no GPU: ask for the toolkit anyway so its install path runs.
        "cuda_repo_toolkit_on_gpu_less_nodes": True,
        "nccl_package_version": NCCL,
    }


DRIVER_INCLUDE = "NVIDIA driver | Plan and apply the driver (a node without NVIDIA GPUs skips it)"


def _debug_msgs(result, task):
    return result.messages(task)


def test_bootstrap_check_apply_idempotent(testbed, repo_vars, tmp_path):
    nodes = sorted(testbed.nodes)
    zero = dict.fromkeys(nodes, 0)

    def changed(result):
        return {n: result.stats["changed"].get(n) for n in nodes}

    check = run_playbook("site.yml", testbed.inventory, repo_vars, check=True, tags=TAGS)
    assert check.rc == 0, check.failure_messages() or check.stdout[-3000:]

    apply = run_playbook("site.yml", testbed.inventory, repo_vars, tags=TAGS)
    assert apply.rc == 0, apply.failure_messages() or apply.stdout[-3000:]
    assert all(apply.stats["changed"][n] > 0 for n in nodes), apply.stats

    # nvidia_driver: a GPU-less node skips its one include (preflight's line says why), nothing else.
    assert apply.skipped_hosts(DRIVER_INCLUDE) == nodes
    said = _debug_msgs(apply, "Preflight | Check cluster addresses are set and unique, and report every node")
    assert all("no NVIDIA GPU (GPU roles will skip this node)" in str(m) for m in said.values()), said
    assert not any(
        ev.get("event_data", {}).get("task", "").startswith("NVIDIA driver | Install")
        for ev in apply.events
        if ev.get("event") in ("runner_on_ok", "runner_on_failed")
    )

    verified = _debug_msgs(apply, "NCCL | Check the install and nccl.h")
    assert sorted(verified) == nodes, verified
    assert all(f"libnccl2, libnccl-dev {NCCL} installed" in msg for msg in verified.values()), verified

    for node in nodes:
        holds = testbed.ssh(node, "apt-mark showhold").stdout.split()
        assert {"libnccl2", "libnccl-dev"} <= set(holds), (node, holds)
        versions = testbed.ssh(
            node, "dpkg-query -W -f='${Package}=${Version}\\n' libnccl2 libnccl-dev"
        ).stdout
        assert sorted(versions.split()) == [f"libnccl-dev={NCCL}", f"libnccl2={NCCL}"], (node, versions)
        # The newer NCCL is offered, and the pin keeps the node off it.
        policy = testbed.ssh(node, "apt-cache policy libnccl2").stdout
        assert NCCL_NEWER in policy and f"Candidate: {NCCL}" in policy, policy
        nvcc = testbed.ssh(node, "/usr/local/cuda/bin/nvcc --version").stdout
        assert "release 13.0, V13.0.88" in nvcc, nvcc
        source = testbed.ssh(node, "cat /etc/apt/sources.list.d/wireup-cuda-debian12-x86-64.sources").stdout
        assert "Signed-By: /etc/apt/keyrings/wireup-cuda.asc" in source, source
        assert f"URIs: {repo_vars['cuda_repo_base_url']}/debian12/x86_64/" in source, source

    again = run_playbook("site.yml", testbed.inventory, repo_vars, tags=TAGS)
    assert again.rc == 0, again.failure_messages() or again.stdout[-3000:]
    assert changed(again) == zero, again.stats
    check_again = run_playbook("site.yml", testbed.inventory, repo_vars, check=True, tags=TAGS)
    assert check_again.rc == 0, check_again.failure_messages()
    assert changed(check_again) == zero, check_again.stats


def test_untrusted_key_stops_before_any_change(testbed, repo_vars):
    node = sorted(testbed.nodes)[0]
    bad = {**repo_vars, "cuda_repo_key_fingerprints": ["EB693B3035CD5710E231E123A4B469963BF863CC"]}
    result = run_playbook("site.yml", testbed.inventory, bad, tags=["cuda_repo"], limit=node)
    assert result.failed_hosts == [node]
    messages = " ".join(msg for _, _, msg in result.failure_messages(node))
    assert "cuda_repo_key_fingerprints" in messages and "not the key you trust" in messages, messages
    assert result.stats["changed"][node] == 0


def test_bad_nccl_pin_names_the_variable(testbed, repo_vars):
    node = sorted(testbed.nodes)[0]
    bad = {**repo_vars, "nccl_package_version": "2.28.9-1+cuda12.9", "nccl_cuda_version": "13.0"}
    result = run_playbook("site.yml", testbed.inventory, bad, tags=["nccl"], limit=node)
    assert result.failed_hosts == [node]
    messages = " ".join(msg for _, _, msg in result.failure_messages(node))
    assert "nccl_package_version" in messages and "+cuda13.0" in messages, messages
    assert result.stats["changed"][node] == 0


DRIVER_PLAY = """\
- name: Preflight
  ansible.builtin.import_playbook: {repo}/playbooks/preflight.yml

- name: Driver on a node preflight is told has 8 GPUs and 4 NVSwitches
  hosts: "{{{{ wireup_node_group | default('gpu_nodes') }}}}"
  gather_facts: false
  pre_tasks:
    - name: Pretend this node has GPUs and NVSwitches, and no driver loaded
      ansible.builtin.set_fact:
        wireup_node: >-
          {{{{ wireup_node | combine({{'gpu': {{'present': true, 'count': 8, 'pci_count': 8,
             'nvswitch_count': 4}}, 'driver': {{'loaded': false, 'version': '', 'branch': '',
             'kernel_module': ''}}}}, recursive=true) }}}}
      tags: [always]
  roles:
    # As in site.yml: cuda_repo first, the driver's source.
    - {{role: wireup.cluster.cuda_repo, tags: [cuda_repo]}}
    - {{role: wireup.cluster.nvidia_driver, tags: [nvidia_driver]}}
"""

REPORT = "NVIDIA driver | Report what the driver role did"


def test_driver_install_path_on_a_pretend_gpu_node(testbed, repo_vars, tmp_path):
    node = sorted(testbed.nodes)[-1]
    # Beside the throw-away playbook, the project's group_vars (as for the real entry playbooks).
    (tmp_path / "group_vars").symlink_to(REPO_ROOT / "group_vars")
    play = write_playbook(tmp_path, "driver.yml", DRIVER_PLAY.format(repo=REPO_ROOT))
    # No kernel headers for the host's kernel in a container; no reboot of a testbed node.
    extra = {**repo_vars, "nvidia_driver_kernel_headers": False, "nvidia_driver_reboot": False}

    tags = ["cuda_repo", "nvidia_driver"]
    check = run_playbook(play, testbed.inventory, extra, check=True, limit=node, tags=tags)
    assert check.rc == 0, check.failure_messages() or check.stdout[-3000:]

    first = run_playbook(play, testbed.inventory, extra, limit=node, tags=tags)
    assert first.rc == 0, first.failure_messages() or first.stdout[-3000:]
    reboot = _debug_msgs(first, REPORT)
    assert "reboot required" in reboot.get(node, ""), reboot

    holds = set(testbed.ssh(node, "apt-mark showhold").stdout.split())
    assert {"nvidia-open-580", "nvidia-fabricmanager"} <= holds, holds
    fm = testbed.ssh(node, "dpkg-query -W -f='${Version}' nvidia-fabricmanager").stdout
    assert fm == f"{DRIVER}-1", fm
    pref = testbed.ssh(node, "cat /etc/apt/preferences.d/wireup-nvidia-driver.pref").stdout
    assert "Pin: version 580.*" in pref and "Pin-Priority: 1001" in pref, pref
    assert (
        "blacklist nouveau" in testbed.ssh(node, "cat /etc/modprobe.d/wireup-blacklist-nouveau.conf").stdout
    )
    for unit in ("nvidia-fabricmanager", "nvidia-persistenced"):
        state = testbed.ssh(node, f"systemctl is-enabled {unit}; systemctl is-active {unit}").stdout.split()
        assert state == ["enabled", "active"], (unit, state)

    second = run_playbook(play, testbed.inventory, extra, limit=node, tags=tags)
    assert second.rc == 0, second.failure_messages()
    assert second.stats["changed"].get(node) == 0, second.stats
    # The driver is installed but not loaded (no reboot yet): still reported.
    assert "reboot required" in _debug_msgs(second, REPORT).get(node, "")


PRETEND_PLAY = """\
- name: Preflight
  ansible.builtin.import_playbook: {repo}/playbooks/preflight.yml

- name: Nodes preflight is told are other machines (test_pretend, per host)
  hosts: "{{{{ wireup_node_group | default('gpu_nodes') }}}}"
  gather_facts: false
  vars:
    # The lent GPU machine's inventory turns these off (its image has CUDA, torch's NCCL, no repository).
    cuda_repo_manage_source: "{{{{ inventory_hostname not in test_image_nodes }}}}"
    nccl_install_system: "{{{{ inventory_hostname not in test_image_nodes }}}}"
  pre_tasks:
    - name: Pretend
      ansible.builtin.set_fact:
        wireup_node: >-
          {{{{ wireup_node
             | combine(test_pretend[inventory_hostname] | default({{}}), recursive=true) }}}}
      tags: [always]
  roles:
    - {{role: wireup.cluster.nvidia_driver, tags: [nvidia_driver]}}
    - {{role: wireup.cluster.cuda_repo, tags: [cuda_repo]}}
    - {{role: wireup.cluster.nccl, tags: [nccl]}}
"""


def test_image_provided_stack_left_alone_and_secure_boot_stop(testbed, repo_vars, tmp_path):
    """node1 looks like the lent H200 machine (driver 580 from a mount, CUDA 13.0 in the image,
    torch's NCCL): every role reports and changes nothing. node2 has GPUs, no driver and Secure
    Boot on with no DKMS key enrolled: the driver role stops before installing, saying why."""
    image, secure = sorted(testbed.nodes)[:2]
    (tmp_path / "group_vars").symlink_to(REPO_ROOT / "group_vars")
    play = write_playbook(tmp_path, "pretend.yml", PRETEND_PLAY.format(repo=REPO_ROOT))
    gpus = {"present": True, "count": 2, "pci_count": 2, "nvswitch_count": 0}
    extra = {
        **repo_vars,
        "cuda_repo_toolkit_on_gpu_less_nodes": False,
        "test_image_nodes": [image],
        "test_pretend": {
            image: {
                "gpu": gpus,
                "driver": {"loaded": True, "version": "580.159.04", "branch": "580", "kernel_module": "open"},
                "cuda": {"version": "13.0", "home": "/usr/local/cuda"},
                "service_mgr": "process_api",
            },
            secure: {
                "gpu": gpus,
                "driver": {"loaded": False, "version": "", "branch": "", "kernel_module": ""},
                "secure_boot": True,
            },
        },
    }
    result = run_playbook(play, testbed.inventory, extra, limit=f"{image},{secure}", tags=TAGS)

    assert result.failed_hosts == [secure], result.failure_messages() or result.stdout[-3000:]
    assert result.stats["changed"][image] == 0, result.stats
    lines = " | ".join(
        msg
        for task in (
            REPORT,
            "CUDA repo | Report what is left alone",
            "NCCL | Report that the system NCCL is not managed here",
        )
        for msg in [_debug_msgs(result, task).get(image, "MISSING: " + task)]
    )
    assert "driver 580.159.04 (open module) already running, branch 580, not installed from" in lines
    assert "not installed from nvidia-open-580: left alone" in lines
    assert "apt sources left alone (cuda_repo_manage_source: false)" in lines
    assert "toolkit not installed: CUDA 13.0 already at /usr/local/cuda" in lines
    assert "system NCCL not installed (nccl_install_system: false)" in lines
    assert "MISSING" not in lines, lines

    messages = " ".join(msg for _, _, msg in result.failure_messages(secure))
    assert "Secure Boot is on" in messages and "mokutil --import" in messages, messages
    assert result.stats["changed"][secure] == 0, result.stats
    assert testbed.ssh(
        secure, "test -e /etc/apt/preferences.d/wireup-nvidia-driver.pref", check=False
    ).returncode


FAKE_TORCH = (
    "import types\ncuda = types.SimpleNamespace(nccl=types.SimpleNamespace(version=lambda: {version}))\n"
)


@pytest.mark.parametrize(("torch_nccl", "warns"), [((2, 27, 7), True), ((2, 28, 3), False)])
def test_torch_nccl_compared_with_system_nccl(testbed, repo_vars, torch_nccl, warns):
    """A venv whose `torch` reports a given NCCL (a stand-in module: the real CPU wheel has none):
    a major.minor difference from the system's 2.28.9 warns, a patch difference does not."""
    node = sorted(testbed.nodes)[0]
    venv = "/opt/wireup-test-venv"
    site = testbed.ssh(
        node,
        f"python3 -m venv {venv} && {venv}/bin/python -c 'import site; print(site.getsitepackages()[0])'",
    ).stdout.strip()
    module = FAKE_TORCH.format(version=torch_nccl)
    testbed.ssh(node, f"mkdir -p {site}/torch && printf '%s' '{module}' > {site}/torch/__init__.py")
    extra = {**repo_vars, "wireup_venv_path": venv}
    result = run_playbook("site.yml", testbed.inventory, extra, tags=["cuda_repo", "nccl"], limit=node)
    assert result.rc == 0, result.failure_messages() or result.stdout[-3000:]
    msg = _debug_msgs(result, "NCCL | Compare torch's NCCL with the system NCCL")[node]
    assert f"bundles NCCL {'.'.join(map(str, torch_nccl))}" in msg and "system NCCL 2.28.9" in msg, msg
    assert msg.startswith("WARNING: ") is warns, msg
    assert ("differ in major.minor" in msg) is warns, msg


def test_fake_repo_is_what_the_roles_expect(testbed):
    meta = build(testbed.www_dir, nccl=NCCL, nccl_newer=NCCL_NEWER, driver=DRIVER)
    repo = testbed.www_dir / "cuda" / "debian12" / "x86_64"
    for name in ("Packages", "Packages.gz", "Release", "InRelease", "Release.gpg", meta["key_name"]):
        assert (repo / name).is_file(), name
    assert f"libnccl2_{NCCL}_amd64.deb" in meta["packages"]
    assert "cuda-toolkit-13-0_13.0.2-1_amd64.deb" in meta["packages"]
    assert (
        json.loads((testbed.www_dir / "cuda" / "wireup-fake-repo.json").read_text())["fingerprint"]
        == (meta["fingerprint"])
    )
