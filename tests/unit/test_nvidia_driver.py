"""wireup.plans.nvidia_driver: package names per branch era, the branch lock, the switch, the report."""

from __future__ import annotations

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import nvidia_driver as d

FM = "nvidia-fabricmanager"
NODE = {
    "gpu": {"present": True, "count": 8, "nvswitch_count": 4},
    "cuda_repo_distro": "debian12",
    "driver": {"loaded": False, "version": "", "branch": "", "kernel_module": ""},
    "service_mgr": "systemd",
    "kernel": "6.1.0-26-amd64",
    "secure_boot": False,
    "is_local": False,
}


def _pkgs(**versions):
    """apt.parse_dpkg_status' shape: {name: {'version': ..., 'held': False}} (underscores -> dashes)."""
    return {k.replace("_", "-"): {"version": v, "held": False} for k, v in versions.items()}


def _node(**over):
    node = {**NODE, **over}
    return node


# --- names per era --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("branch", "flavor", "distro", "source", "names", "fm", "pinning"),
    [
        # Up to 580: the branch is in the names; wireup's pin file locks it.
        ("580", "open", "ubuntu2404", "cuda", ["nvidia-driver-580-open"], "nvidia-fabricmanager", ""),
        ("580", "open", "ubuntu2204", "cuda", ["nvidia-driver-580-open"], "nvidia-fabricmanager", ""),
        ("580", "proprietary", "ubuntu2404", "cuda", ["cuda-drivers-580"], "nvidia-fabricmanager", ""),
        ("580", "open", "debian12", "cuda", ["nvidia-open-580"], "nvidia-fabricmanager", ""),
        ("580", "open", "debian13", "cuda", ["nvidia-open-580"], "nvidia-fabricmanager", ""),
        ("570", "proprietary", "debian12", "cuda", ["cuda-drivers-570"], "nvidia-fabricmanager-570", ""),
        # The boundary, and later branches: unversioned names, NVIDIA's pinning package.
        ("590", "open", "ubuntu2404", "cuda", ["nvidia-open"], FM, "nvidia-driver-pinning-590"),
        ("590", "open", "debian13", "cuda", ["nvidia-open"], FM, "nvidia-driver-pinning-590"),
        ("595", "proprietary", "ubuntu2604", "cuda", ["cuda-drivers"], "nvidia-fabricmanager",
         "nvidia-driver-pinning-595"),
        ("610", "proprietary", "debian12", "cuda", ["cuda-drivers"], "nvidia-fabricmanager",
         "nvidia-driver-pinning-610"),
        # Ubuntu's archive keeps branch names in every era and has no pinning packages.
        ("580", "open", "ubuntu2404", "distro", ["nvidia-driver-580-server-open"], FM + "-580", ""),
        ("610", "proprietary", "ubuntu2204", "distro", ["nvidia-driver-610-server"], FM + "-610", ""),
    ],
)  # fmt: skip
def test_packages_per_era(branch, flavor, distro, source, names, fm, pinning):  # noqa: PLR0917
    pkgs = d.packages_for(branch, flavor, distro, source)
    assert pkgs["names"] == names
    assert pkgs["fabricmanager"] == fm
    assert pkgs["pinning_package"] == pinning
    # Never both: a pin file exactly when there is no pinning package.
    assert (pkgs["pin_file"] is None) == bool(pinning)
    if pkgs["pin_file"]:
        assert pkgs["pin_file"]["version"] == f"{branch}.*"
        assert {"nvidia-*", "libnvidia-*", "cuda-drivers*"} <= set(pkgs["pin_file"]["packages"])


ERAS = [("550", "pin-file"), ("580", "pin-file"), ("589", "pin-file"), ("590", "pinning-package"),
        ("595", "pinning-package")]  # fmt: skip


@pytest.mark.parametrize(("branch", "era"), ERAS)
def test_era_boundary_is_590(branch, era):
    assert d.PINNING_PACKAGES_FROM == 590
    assert d.era(branch, "cuda") == era
    assert d.era(branch, "distro") == "pin-file"


def test_exact_version_pins_file_or_picks_the_versioned_pinning_package():
    assert (
        d.packages_for("580", "open", "ubuntu2404", "cuda", "580.95.05")["pin_file"]["version"]
        == "580.95.05-*"
    )
    pkgs = d.packages_for("590", "open", "ubuntu2404", "cuda", "590.48.01")
    assert pkgs["pinning_package"] == "nvidia-driver-pinning-590.48.01"
    assert pkgs["pin_file"] is None


@pytest.mark.parametrize(
    ("args", "variable"),
    [
        ((580, "open", "ubuntu2404"), "nvidia_driver_branch"),  # YAML number
        (("58", "open", "ubuntu2404"), "nvidia_driver_branch"),
        (("r580", "open", "ubuntu2404"), "nvidia_driver_branch"),
        (("580", "opensource", "ubuntu2404"), "nvidia_driver_flavor"),
        (("580", "open", "ubuntu2404", "runfile"), "nvidia_driver_source"),
        (("580", "open", "debian12", "distro"), "nvidia_driver_source"),
        (("590", "open", "debian13", "distro"), "nvidia_driver_source"),
        (("580", "open", "ubuntu2004"), "cuda_repo_distro"),
        (("580", "open", "ubuntu2404", "cuda", "570.1.2"), "nvidia_driver_version"),
        (("590", "open", "ubuntu2404", "cuda", "580.95.05"), "nvidia_driver_version"),
        (("580", "open", "ubuntu2404", "cuda", "580"), "nvidia_driver_version"),
    ],
)
def test_bad_input_names_the_variable(args, variable):
    with pytest.raises(d.PackageError, match=variable):  # DriverError, or packages' for the distro
        d.packages_for(*args)


def test_bad_fabricmanager_choice_and_kernel_name_the_variable():
    with pytest.raises(d.DriverError, match="nvidia_driver_fabricmanager"):
        d.plan(NODE, {}, fabricmanager="yes")
    with pytest.raises(d.DriverError, match="nvidia_driver_kernel_headers"):
        d.plan(_node(kernel="; rm -rf /"), {})


@pytest.mark.parametrize(
    ("deb", "upstream"),
    [("580.95.05-1", "580.95.05"), ("580.159.03-0ubuntu0.24.04.1", "580.159.03"),
     ("1:580.95.05-1", "580.95.05"), ("610-2ubuntu1", "610"), ("580.95.05", "580.95.05"), ("", "")],
)  # fmt: skip
def test_upstream_version(deb, upstream):
    assert d.upstream_version(deb) == upstream


# --- the plan -------------------------------------------------------------------------------------
def test_gpu_less_node_is_one_line():
    plan = d.plan(_node(gpu={"present": False}), {}, host="n1")
    assert plan["manage"] is False and plan["install"] == [] and plan["hold"] == []
    assert plan["summary"] == "nvidia_driver on n1: skipped: no NVIDIA GPU found (PCI vendor 10de)"


def test_image_driver_of_the_branch_is_left_alone():
    node = _node(driver={"loaded": True, "version": "580.159.04", "branch": "580", "kernel_module": "open"})
    plan = d.plan(node, {}, host="h200")
    assert plan["manage"] is False
    assert plan["summary"] == (
        "nvidia_driver on h200: driver 580.159.04 (open module) already running, branch 580, "
        "not installed from nvidia-open-580: left alone"
    )
    assert "(nvidia_driver_flavor is proprietary)" in d.plan(node, {}, flavor="proprietary")["summary"]


def test_fresh_node_580_installs_driver_headers_and_fabricmanager():
    plan = d.plan(NODE, {"linux-headers-6.1.0-26-amd64": {"version": "6.1.112-1"}}, host="n1")
    assert plan["install"] == ["nvidia-open-580", "nvidia-fabricmanager"]  # headers already there
    assert plan["remove"] == [] and plan["pinning_package"] == ""
    assert (
        plan["apt_first"] == [] and plan["stale"] == []
    )  # no removal, no pinning package; the pin file kept
    assert plan["pin_file"]["version"] == "580.*"
    assert plan["hold"] == ["nvidia-open-580", "nvidia-fabricmanager"]
    assert plan["fabricmanager"] == {"name": "nvidia-fabricmanager", "version": ""}
    assert plan["services"] == ["nvidia-persistenced", "nvidia-fabricmanager"]
    assert d.plan(NODE, {})["install"][0] == "linux-headers-6.1.0-26-amd64"


def test_converged_node_plans_nothing_to_install_and_reports_reboot_until_loaded():
    pkgs = _pkgs(nvidia_open_580="580.95.05-1", nvidia_fabricmanager="580.95.05-1")
    plan = d.plan(NODE, pkgs, kernel_headers=False, host="n1")
    assert plan["install"] == [] and plan["remove"] == []
    assert plan["summary"].endswith("; installed")
    assert "reboot required to load driver branch 580" in d.report(plan)
    loaded = _node(driver={"loaded": True, "version": "580.95.05", "branch": "580", "kernel_module": "open"})
    assert d.report(d.plan(loaded, pkgs, kernel_headers=False)).endswith("; installed")


def test_fabricmanager_of_another_version_is_reinstalled_at_the_driver_version():
    pkgs = _pkgs(nvidia_open_580="580.95.05-1", nvidia_fabricmanager="580.82.07-1")
    plan = d.plan(NODE, pkgs, kernel_headers=False)
    assert plan["install"] == ["nvidia-fabricmanager"]
    specs = d.install_specs(plan, "", apt_rc=100)  # no apt question needed: the driver is in place
    assert specs == {
        "specs": ["nvidia-fabricmanager=580.95.05-*"],
        "error": "",
        "message": "",
        "driver": False,
    }


def test_switch_580_to_590_on_debian_replaces_packages_and_migrates_the_lock():
    pkgs = _pkgs(nvidia_open_580="580.95.05-1", nvidia_fabricmanager="580.95.05-1",
                 nvidia_persistenced="580.95.05-1", nvidia_open="580.95.05-1")  # fmt: skip
    plan = d.plan(NODE, pkgs, branch="590", kernel_headers=False, host="n1")
    assert plan["era"] == "pinning-package"
    # nvidia-open at 580 may be what nvidia-open-580 depends on: upgraded in place, not removed.
    assert plan["remove"] == ["nvidia-open-580"]
    assert plan["install"] == ["nvidia-driver-pinning-590", "nvidia-open", "nvidia-fabricmanager"]
    assert plan["pin_file"] is None and plan["hold"] == ["nvidia-open", "nvidia-fabricmanager"]
    # One apt loop before apt is asked: the old branch out (held or not), then the pinning package.
    assert plan["apt_first"] == [
        {"name": ["nvidia-open-580"], "state": "absent", "allow_held": True},
        {"name": ["nvidia-driver-pinning-590"], "state": "present", "allow_held": False},
    ]
    assert plan["stale"] == ["/etc/apt/preferences.d/wireup-nvidia-driver.pref"]
    show = "Package: nvidia-open\nVersion: 590.48.01-1\nDepends: nvidia-persistenced (= 590.48.01-1)\n\n"
    specs = d.install_specs(plan, show)
    assert specs["specs"] == ["nvidia-open=590.48.01-1", "nvidia-fabricmanager=590.48.01-*"]
    assert specs["driver"] is True
    line = d.report(plan, driver_changed=True, pin_file_removed=True)
    assert "remove nvidia-open-580" in line and "install nvidia-driver-pinning-590" in line
    assert "wireup's pin file /etc/apt/preferences.d/wireup-nvidia-driver.pref removed" in line
    assert "locks the branch" in line and "reboot required to load driver branch 590" in line


def test_switch_in_check_mode_says_would_before_it_happens():
    pkgs = _pkgs(nvidia_open_580="580.95.05-1", nvidia_fabricmanager="580.95.05-1")
    plan = d.plan(NODE, pkgs, branch="590", kernel_headers=False, check_mode=True)
    line = d.report(plan, driver_changed=True, pin_file_removed=True)
    assert "would remove nvidia-open-580" in line and "would install nvidia-driver-pinning-590" in line
    assert "would be removed" in line
    # Before the pinning package is in place apt's candidate is the newest branch: --check says so,
    # and only a real run stops on it.
    show = "Package: nvidia-open\nVersion: 595.45.04-1\n\n"
    checked = d.install_specs(plan, show, check_mode=True)
    assert checked["error"] == "" and checked["specs"] == []
    assert "would install nvidia-driver-pinning-590, nvidia-open, nvidia-fabricmanager;" in checked["message"]
    assert checked["message"].endswith(
        "the exact version of branch 590 once nvidia-driver-pinning-590 is in place"
    )
    assert d.report(plan, note=checked["message"]).startswith(checked["message"])
    real = d.install_specs({**plan}, show)
    assert "apt offers nvidia-open 595.45.04-1, not of branch 590" in real["error"]
    assert "nvidia_driver_branch" in real["error"]


def test_switch_back_590_to_580_removes_the_pinning_package_and_newer_metapackage():
    pkgs = _pkgs(
        nvidia_open="590.48.01-1", nvidia_driver_pinning_590="590-1", nvidia_fabricmanager="590.48.01-1"
    )
    plan = d.plan(NODE, pkgs, branch="580", kernel_headers=False)
    assert plan["remove"] == ["nvidia-driver-pinning-590", "nvidia-open"]
    assert plan["pin_file"] is not None and plan["pinning_package"] == ""
    assert plan["apt_first"] == [
        {"name": ["nvidia-driver-pinning-590", "nvidia-open"], "state": "absent", "allow_held": True}
    ]
    assert plan["stale"] == []
    assert plan["install"] == ["nvidia-open-580", "nvidia-fabricmanager"]


def test_590_to_595_swaps_the_pinning_package():
    pkgs = _pkgs(
        nvidia_open="590.48.01-1", nvidia_driver_pinning_590="590-1", nvidia_fabricmanager="590.48.01-1"
    )
    plan = d.plan(NODE, pkgs, branch="595", kernel_headers=False)
    assert plan["remove"] == ["nvidia-driver-pinning-590"]
    assert plan["install"] == ["nvidia-driver-pinning-595", "nvidia-open", "nvidia-fabricmanager"]


def test_converged_590_node_plans_nothing():
    pkgs = _pkgs(
        nvidia_open="590.48.01-1", nvidia_driver_pinning_590="590-1", nvidia_fabricmanager="590.48.01-1"
    )
    plan = d.plan(NODE, pkgs, branch="590", kernel_headers=False)
    assert plan["install"] == [] and plan["remove"] == [] and plan["apt_first"] == []
    assert plan["stale"] == ["/etc/apt/preferences.d/wireup-nvidia-driver.pref"]  # gone: file's absent is ok


def test_ubuntu_580_to_610_removes_branch_named_packages():
    pkgs = _pkgs(nvidia_driver_580_open="580.95.05-0ubuntu1", cuda_drivers_580="580.95.05-1",
                 nvidia_fabricmanager="580.95.05-1")  # fmt: skip
    plan = d.plan(_node(cuda_repo_distro="ubuntu2404"), pkgs, branch="610", kernel_headers=False)
    assert plan["remove"] == ["cuda-drivers-580", "nvidia-driver-580-open"]
    assert plan["install"][:2] == ["nvidia-driver-pinning-610", "nvidia-open"]


def test_services_and_holds_in_check_mode_wait_for_the_packages():
    plan = d.plan(NODE, {}, kernel_headers=False, check_mode=True)
    assert plan["services"] == [] and "would enable its services once installed" in plan["summary"]
    assert plan["hold"] == []  # dpkg_selections fails on a package dpkg does not know
    switching = d.plan(
        NODE, _pkgs(nvidia_open="580.95.05-1"), branch="590", kernel_headers=False, check_mode=True
    )
    assert switching["hold"] == ["nvidia-open"]
    assert d.plan(_node(service_mgr="process_api"), {}, kernel_headers=False)["services"] == []
    assert d.plan(NODE, {}, kernel_headers=False, persistenced=False, fabricmanager="never")["services"] == []


def test_reboot_only_remote_nodes_when_asked():
    assert d.plan(NODE, {}, reboot=True)["may_reboot"] is True
    local = d.plan(_node(is_local=True), {}, reboot=True)
    assert local["may_reboot"] is False
    assert "this is the control node: reboot it yourself" in d.report(local, driver_changed=True)
    assert d.plan(NODE, {}, reboot=False)["may_reboot"] is False


def test_apt_without_the_packages_names_the_variables():
    plan = d.plan(NODE, {}, kernel_headers=False, host="n1")
    stopped = d.install_specs(plan, "", apt_rc=100, apt_err="E: No packages found")
    assert (
        "nvidia-open-580 not available from n1's apt sources (apt said: E: No packages found)"
        in stopped["error"]
    )
    assert "cuda_repo_base_url" in stopped["error"] and "--tags" in stopped["error"]
    in_check = d.plan(NODE, {}, kernel_headers=False, check_mode=True)
    checked = d.install_specs(in_check, "", apt_rc=100, check_mode=True)
    assert checked["error"] == "" and "would install nvidia-open-580" in checked["message"]


# --- Secure Boot ----------------------------------------------------------------------------------
def _probe(rc, stdout="", stderr=""):
    return {"rc": rc, "stdout": stdout, "stderr": stderr}


@pytest.mark.parametrize(
    ("probes", "stops", "says"),
    [
        ([_probe(0, "DKMS module signing key"), _probe(0)], False, ""),
        ([_probe(0, "\n"), _probe(0)], True, "the nvidia module is unsigned"),
        ([_probe(1), _probe(0, "/var/lib/dkms/mok.pub is already enrolled")], False, ""),
        ([_probe(1), _probe(1, "/var/lib/dkms/mok.pub is not enrolled")], True, "is not enrolled"),
        (
            [_probe(1), {"rc": 2, "msg": "[Errno 2] No such file or directory: b'mokutil'"}],
            True,
            "No such file",
        ),
    ],
)
def test_secure_boot_verdict(probes, stops, says):
    plan = d.plan(_node(secure_boot=True), {}, secure_boot_probes=probes, host="n2")
    assert bool(plan["error"]) is stops
    if stops:
        assert plan["error"].startswith("n2: Secure Boot is on") and says in plan["error"]
        assert "mokutil --import" in plan["error"] or "dkms autoinstall" in plan["error"]
    # Turned off, or Secure Boot off: no verdict.
    assert (
        d.plan(_node(secure_boot=True), {}, secure_boot_probes=probes, secure_boot_check=False)["error"] == ""
    )
    assert d.plan(NODE, {}, secure_boot_probes=probes)["error"] == ""


def test_check_mode_before_the_pin_file_is_written_asks_apt_nothing():
    """--check on a node whose source is in place but whose pin file is not written yet: apt's
    candidates are not locked (apt's simulation failed with 'held broken packages' on the 590/595
    dependencies of the stand-in repository), so --check says what it would do instead."""
    plan = d.plan(NODE, {}, kernel_headers=False, check_mode=True, host="n3")
    show = "Package: nvidia-open-580\nVersion: 580.95.05-1\n\n"
    checked = d.install_specs(plan, show, check_mode=True, lock_ready=False)
    assert checked["specs"] == [] and checked["error"] == ""
    assert checked["message"].endswith("; the exact version of branch 580 once the pin file is in place")
    ready = d.install_specs(plan, show, check_mode=True, lock_ready=True)
    assert ready["specs"] == ["nvidia-open-580=580.95.05-1", "nvidia-fabricmanager=580.95.05-*"]
    # A real run writes the lock first: lock_ready does not matter there.
    assert d.install_specs(plan, show, lock_ready=False)["specs"] == ready["specs"]


def test_plan_reads_the_roles_dpkg_query_like_package_facts():
    """The role reads dpkg-query (package_facts needs python3-apt in Ansible's interpreter, which the
    GPU machine's venv lacks: it failed there); its lines give the plan of the same packages. Held and removed
    (rc: config files left) packages as dpkg-query prints them."""
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import apt as packages

    text = (
        "nvidia-open-580 hi 580.95.05-1\n"
        "nvidia-fabricmanager ii 580.95.05-1\n"
        "nvidia-open-575 rc 575.57.08-1\n"
        "linux-headers-6.1.0-26-amd64 ii 6.1.112-1\n"
        "nvidia-settings un <none>\n"
    )
    dpkg = packages.parse_dpkg_status(text)
    facts = _pkgs(
        nvidia_open_580="580.95.05-1",
        nvidia_fabricmanager="580.95.05-1",
        linux_headers_6_1_0_26_amd64="6.1.112-1",
    )
    facts = {k.replace("6-1-0-26-amd64", "6.1.0-26-amd64"): v for k, v in facts.items()}
    assert d.plan(NODE, dpkg, host="n1") == d.plan(NODE, facts, host="n1")
    assert d.plan(NODE, dpkg, host="n1")["install"] == []


def test_reads_are_dpkg_then_the_secure_boot_probes_only_when_asked():
    dpkg = d.reads({"secure_boot": False})
    assert dpkg == [d.DPKG_READ] and dpkg[0][:2] == ["dpkg-query", "-W"]
    assert "linux-headers-*" in dpkg[0] and "nvidia-*" in dpkg[0]
    on = d.reads({"secure_boot": True})
    assert on[1:] == [["modinfo", "-F", "signer", "nvidia"], ["mokutil", "--test-key", d.MOK_KEY]]
    assert d.reads({"secure_boot": True}, secure_boot_check=False) == [d.DPKG_READ]
    assert d.reads({"secure_boot": None}) == [d.DPKG_READ]  # unknown: not probed
    assert d.reads(None) == [d.DPKG_READ]
