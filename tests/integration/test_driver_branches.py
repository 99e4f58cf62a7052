"""nvidia_driver across NVIDIA's packaging eras, and a bootstrap on a mixed Debian 12/13 pair.

The stand-in NVIDIA repository (tests/testbed/fake_cuda_repo.py) serves both eras: branch 580 with
the branch in its package names (locked by wireup's apt pin file), branch 590 with the unversioned
names and NVIDIA's pinning package, and a newer 595 that the 590 lock must refuse. Testbed nodes
have no GPU, so the switch runs on a node preflight is told has GPUs and NVSwitches; the packages
carry no kernel module, everything else (apt, pins, holds, removals, services) runs for real.
"""

from __future__ import annotations

import pytest

from tests.testbed.fake_cuda_repo import build

from .harness import REPO_ROOT, run_playbook, write_playbook

pytestmark = pytest.mark.integration

NCCL = "2.28.9-1+cuda13.0"
NCCL_NEWER = "2.29.2-1+cuda13.0"
DRIVER, NEXT, NEWEST = "580.95.05", "590.48.01", "595.45.04"
REPORT = "NVIDIA driver | Report what the driver role did"
PIN_FILE = "/etc/apt/preferences.d/wireup-nvidia-driver.pref"
TIMEOUT = 600  # seconds per playbook run: a hang fails the test instead of CI

PLAY = """\
- name: Preflight
  ansible.builtin.import_playbook: {repo}/playbooks/preflight.yml

- name: CUDA repository and the driver on a node preflight is told has 8 GPUs and 4 NVSwitches
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
    - {{role: wireup.cluster.cuda_repo, tags: [cuda_repo]}}
    - {{role: wireup.cluster.nvidia_driver, tags: [nvidia_driver]}}
"""


def _repo_vars(testbed):
    meta = build(testbed.www_dir, nccl=NCCL, nccl_newer=NCCL_NEWER, driver=DRIVER)
    return {
        "cuda_repo_base_url": testbed.www_url + meta["base_url_path"],
        "cuda_repo_key_name": meta["key_name"],
        "cuda_repo_key_fingerprints": [meta["fingerprint"]],
        "cuda_repo_key_checksum": "sha256:" + meta["key_sha256"],
        "cuda_repo_toolkit_on_gpu_less_nodes": True,
        "nccl_package_version": NCCL,
        # No kernel headers for the host's kernel in a container; no reboot of a testbed node.
        "nvidia_driver_kernel_headers": False,
        "nvidia_driver_reboot": False,
    }


def _report(result, node):
    return {h: r.get("msg", "") for h, r in result.task_results(REPORT).items()}.get(node, "MISSING")


def _dpkg(testbed, node, *names):
    """{package: version} of those installed (dpkg-query exits 1 when one is unknown: not a failure)."""
    out = testbed.ssh(
        node,
        "dpkg-query -W -f='${Package}=${Version} ${db:Status-Abbrev}\\n' " + " ".join(names),
        check=False,
    )
    return {
        line.split("=", 1)[0]: line.split("=", 1)[1].split()[0]
        for line in out.stdout.splitlines()
        if line.split()[-1] in ("ii", "hi")
    }


def _ok(result):
    return result.failure_messages() or result.stdout[-3000:]


def test_branch_switch_580_to_590(testbed, tmp_path):
    node = sorted(testbed.nodes)[1]
    extra = _repo_vars(testbed)
    (tmp_path / "group_vars").symlink_to(REPO_ROOT / "group_vars")
    play = write_playbook(tmp_path, "driver.yml", PLAY.format(repo=REPO_ROOT))

    def run(branch, tags=("nvidia_driver",), **kw):
        return run_playbook(
            play, testbed.inventory, {**extra, "nvidia_driver_branch": branch}, limit=node, tags=list(tags),
            timeout=TIMEOUT, **kw,
        )  # fmt: skip

    try:
        first = run("580", tags=("cuda_repo", "nvidia_driver"))  # the driver's source first
        assert first.rc == 0, _ok(first)
        assert _dpkg(testbed, node, "nvidia-open-580", "nvidia-fabricmanager") == {
            "nvidia-open-580": f"{DRIVER}-1",
            "nvidia-fabricmanager": f"{DRIVER}-1",
        }
        assert testbed.ssh(node, f"test -f {PIN_FILE}", check=False).returncode == 0

        # --check shows the switch before it happens, and changes nothing.
        check = run("590", check=True)
        assert check.rc == 0, _ok(check)
        line = _report(check, node)
        assert "branch 590 (nvidia-open, locked by nvidia-driver-pinning-590)" in line, line
        assert "would remove nvidia-open-580" in line and "would install nvidia-driver-pinning-590" in line, (
            line
        )
        assert f"wireup's pin file {PIN_FILE} would be removed" in line, line
        assert "nvidia-open-580" in _dpkg(testbed, node, "nvidia-open-580")
        assert testbed.ssh(node, f"test -f {PIN_FILE}", check=False).returncode == 0

        switch = run("590")
        assert switch.rc == 0, _ok(switch)
        line = _report(switch, node)
        assert "remove nvidia-open-580" in line and "install nvidia-driver-pinning-590" in line, line
        assert f"wireup's pin file {PIN_FILE} removed (nvidia-driver-pinning-590 locks the branch)" in line, (
            line
        )
        assert "reboot required to load driver branch 590" in line, line
        # Old packages replaced; the lock is NVIDIA's pinning package alone (never both).
        installed = _dpkg(
            testbed, node, "nvidia-open-580", "nvidia-open", "nvidia-fabricmanager", "nvidia-persistenced",
            "nvidia-driver-pinning-590",
        )  # fmt: skip
        assert installed == {
            "nvidia-open": f"{NEXT}-1",
            "nvidia-fabricmanager": f"{NEXT}-1",
            "nvidia-persistenced": f"{NEXT}-1",
            "nvidia-driver-pinning-590": "590-1",
        }, installed
        assert testbed.ssh(node, f"test -e {PIN_FILE}", check=False).returncode != 0
        holds = set(testbed.ssh(node, "apt-mark showhold").stdout.split())
        assert {"nvidia-open", "nvidia-fabricmanager"} <= holds and "nvidia-open-580" not in holds, holds
        # Branch locked: the repository offers 595, apt's candidate stays on 590.
        policy = testbed.ssh(node, "apt-cache policy nvidia-open").stdout
        assert f"{NEWEST}-1" in policy and f"Candidate: {NEXT}-1" in policy, policy
        for unit in ("nvidia-fabricmanager", "nvidia-persistenced"):
            state = testbed.ssh(
                node, f"systemctl is-enabled {unit}; systemctl is-active {unit}"
            ).stdout.split()
            assert state == ["enabled", "active"], (unit, state)

        again = run("590")
        assert again.rc == 0, _ok(again)
        assert again.stats["changed"].get(node) == 0, again.stats
        assert "reboot required to load driver branch 590" in _report(again, node)
        check_again = run("590", check=True)
        assert check_again.rc == 0, _ok(check_again)
        assert check_again.stats["changed"].get(node) == 0, check_again.stats
    finally:
        # Leave the shared node as the other tests expect it: no driver packages, no lock.
        testbed.ssh(
            node,
            "apt-mark unhold nvidia-open nvidia-open-580 nvidia-fabricmanager >/dev/null 2>&1; "
            "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q nvidia-open nvidia-open-580 "
            "nvidia-fabricmanager nvidia-persistenced 'nvidia-driver-pinning-*' >/dev/null 2>&1; "
            f"rm -f {PIN_FILE}",
            check=False,
        )


def test_bootstrap_on_a_mixed_debian_12_13_pair(testbed_factory, tmp_path):
    """A bookworm and a trixie node: preflight, NVIDIA's repository (debian12 and debian13), NCCL and
    the driver role (the one line on GPU-less nodes) with --check, apply and a rerun; then the
    driver install path of branch 590 on the trixie node."""
    pair = testbed_factory("mixed", nodes=2, suites=("bookworm", "trixie"))
    old, new = sorted(pair.nodes)
    extra = _repo_vars(pair)
    os_release = {n: pair.ssh(n, ". /etc/os-release; echo $VERSION_ID").stdout.strip() for n in (old, new)}
    assert os_release == {old: "12", new: "13"}, os_release
    tags = ["cuda_repo", "nccl", "nvidia_driver"]

    def site(**kw):
        return run_playbook("site.yml", pair.inventory, extra, tags=tags, timeout=TIMEOUT, **kw)

    check = site(check=True)
    assert check.rc == 0, _ok(check)
    apply = site()
    assert apply.rc == 0, _ok(apply)
    for node, distro in ((old, "debian12"), (new, "debian13")):
        source = pair.ssh(node, f"cat /etc/apt/sources.list.d/wireup-cuda-{distro}-x86-64.sources").stdout
        assert f"URIs: {extra['cuda_repo_base_url']}/{distro}/x86_64/" in source, (node, source)
        assert _dpkg(pair, node, "libnccl2") == {"libnccl2": NCCL}, node
    # GPU-less nodes skip the driver's one include (preflight's line says why).
    skipped = apply.skipped_hosts(
        "NVIDIA driver | Plan and apply the driver (a node without NVIDIA GPUs skips it)"
    )
    assert skipped == sorted([old, new]), skipped
    again = site()
    assert again.rc == 0, _ok(again)
    assert {n: again.stats["changed"][n] for n in (old, new)} == {old: 0, new: 0}, again.stats

    (tmp_path / "group_vars").symlink_to(REPO_ROOT / "group_vars")
    play = write_playbook(tmp_path, "driver.yml", PLAY.format(repo=REPO_ROOT))
    driver = run_playbook(
        play, pair.inventory, {**extra, "nvidia_driver_branch": "590"}, limit=new,
        tags=["cuda_repo", "nvidia_driver"], timeout=TIMEOUT,
    )  # fmt: skip
    assert driver.rc == 0, _ok(driver)
    assert _dpkg(pair, new, "nvidia-open", "nvidia-driver-pinning-590") == {
        "nvidia-open": f"{NEXT}-1",
        "nvidia-driver-pinning-590": "590-1",
    }
    assert "reboot required to load driver branch 590" in _report(driver, new)
