"""wireup.plans.nccl: the nccl role's plan (pins, dpkg's versions and holds, nccl.h) and its checks."""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core.apt import parse_dpkg_status
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import nccl as p

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "h200x2"


# --- NCCL -----------------------------------------------------------------------------------------
def test_nccl_plan():
    plan = p.plan("2.28.9-1+cuda13.0", "2.28.9", "13.0")
    assert plan == {
        "names": ["libnccl2", "libnccl-dev"],
        "specs": ["libnccl2=2.28.9-1+cuda13.0", "libnccl-dev=2.28.9-1+cuda13.0"],
        "version": "2.28.9",
        "package_version": "2.28.9-1+cuda13.0",
        "cuda": "13.0",
        "install": ["libnccl2", "libnccl-dev"],  # nothing read: nothing known installed
        "hold": ["libnccl2", "libnccl-dev"],
        "known": [],
        "pin_path": "/etc/apt/preferences.d/wireup-nccl.pref",
        "pin": plan["pin"],
        "apply": True,
        "report": [],
    }
    assert p.plan("2.21.5-1+cuda12.4", "2.21.5", "12.4")["cuda"] == "12.4"


@pytest.mark.parametrize(
    ("pkg", "nccl", "cuda", "match"),
    [
        ("2.28.9", "2.28.9", "13.0", "nccl_package_version=.*malformed"),
        ("2.28.9-1", "2.28.9", "13.0", "nccl_package_version=.*malformed"),
        ("2.28.9-1+cuda13", "2.28.9", "13.0", "nccl_package_version=.*malformed"),
        ("2.28.9-1+cuda12.9", "2.28.9", "13.0", r"\+cuda13.0.*2\.28\.9-1\+cuda13\.0"),
        ("2.28.9-1+cuda13.0", "2.27.7", "13.0", "nccl_version"),
        ("2.28.9-1+cuda13.0", "2.28", "13.0", "nccl_version"),
        ("2.28.9-1+cuda13.0", "2.28.9", 13.0, "nccl_cuda_version"),
        (2.28, "2.28.9", "13.0", "nccl_package_version"),
    ],
)
def test_nccl_plan_bad_input(pkg, nccl, cuda, match):
    with pytest.raises(p.PackageError, match=match):
        p.plan(pkg, nccl, cuda)


NCCL_NAMES = ["libnccl2", "libnccl-dev"]
PIN = "2.28.9-1+cuda13.0"
HEADER = '#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n#define NCCL_SUFFIX ""\n'


PIN_TEXT = (  # the pin file as the role's template wrote it before issue 14 (and the role writes now)
    "#\n# Ansible managed\n#\n"
    "# NCCL stays at exactly the pinned version, even when the repository offers a newer one.\n"
    f"Package: libnccl2 libnccl-dev\nPin: version {PIN}\nPin-Priority: 1001\n"
)
PREF = "/etc/apt/preferences.d/wireup-nccl.pref"


def _files(pin=PIN_TEXT, header=HEADER, mode="0644"):
    """wireup_file_state's files for the role's read (None: the file is missing)."""

    def one(content):
        if content is None:
            return {"exists": False}
        return {
            "exists": True,
            "type": "file",
            "mode": mode,
            "owner": "root",
            "group": "root",
            "content": content,
        }

    return {PREF: one(pin), "/usr/include/nccl.h": one(header)}


def _plan(dpkg, files=None):
    return p.plan(
        PIN,
        "2.28.9",
        "13.0",
        installed=parse_dpkg_status(dpkg),
        files=files or _files(),
        header_path="/usr/include/nccl.h",
    )


@pytest.mark.parametrize(
    ("dpkg", "install", "hold"),
    [
        # every rerun: both at the pin and held -> nothing to apply, apt is not started
        (f"libnccl2 hi  {PIN}\nlibnccl-dev hi  {PIN}\n", [], []),
        # at the pin, one hold lost (apt-mark unhold) -> only that hold
        (f"libnccl2 hi  {PIN}\nlibnccl-dev ii  {PIN}\n", [], ["libnccl-dev"]),
        # a fresh node: dpkg knows neither (rc 1, stdout empty)
        ("", NCCL_NAMES, NCCL_NAMES),
        # a new pin over an older held NCCL
        ("libnccl2 hi  2.27.7-1+cuda13.0\nlibnccl-dev hi  2.27.7-1+cuda13.0\n", NCCL_NAMES, []),
        # removed but configuration left ("rc"), and one half-installed ("iF")
        (f"libnccl2 rc  {PIN}\nlibnccl-dev iF  {PIN}\n", NCCL_NAMES, NCCL_NAMES),
        # an upgrade to a newer build of the same release is drift too
        (f"libnccl2 hi  2.28.9-2+cuda13.0\nlibnccl-dev hi  {PIN}\n", ["libnccl2"], []),
    ],
)
def test_nccl_plan_from_dpkg(dpkg, install, hold):
    plan = _plan(dpkg)
    assert (plan["install"], plan["hold"]) == (install, hold)
    # Held in --check: only packages dpkg has installed (dpkg_selections fails on the others).
    assert plan["known"] == ([] if dpkg == "" or " rc " in dpkg else NCCL_NAMES)
    assert plan["apply"] is bool(install or hold)
    assert plan["pin"] == PIN_TEXT and plan["pin_path"] == PREF


CONVERGED = f"libnccl2 hi  {PIN}\nlibnccl-dev hi  {PIN}\n"


def test_nccl_plan_writes_a_missing_pin_file_and_leaves_its_content_to_copy():
    """A deleted pin file runs the steps; what it holds and its mode are copy's to keep whenever
    they run (issue 24: no second idempotency model): a hand edit alone is not judged here."""
    assert _plan(CONVERGED, _files(pin=None))["apply"]
    for files in (_files(pin=PIN_TEXT.replace("1001", "500")), _files(mode="0600")):
        assert not _plan(CONVERGED, files)["apply"]
    # A new pin moves the packages: dpkg is off the plan, so the steps run (the pin file with them).
    older = "libnccl2 hi  2.27.7-1+cuda13.0\nlibnccl-dev hi  2.27.7-1+cuda13.0\n"
    assert _plan(older, _files(pin=PIN_TEXT.replace(PIN, "2.27.7-1+cuda13.0")))["apply"]


def test_nccl_plan_checks_the_header_of_packages_at_the_pin():
    assert not _plan(CONVERGED)["apply"]
    for header, said in [(HEADER.replace("PATCH 9", "PATCH 3"), "says 2.28.3"), (None, "says nothing")]:
        with pytest.raises(p.PackageError, match=f"nccl_header_path.*{said}.*--reinstall libnccl-dev"):
            _plan(CONVERGED, _files(header=header))
    # Packages to install: the header is checked after the install instead.
    assert _plan("", _files(header=None))["install"] == NCCL_NAMES
    # Not read (nccl_install_system: false): nothing checked, nothing known.
    assert p.plan(PIN, "2.28.9", "13.0")["install"] == NCCL_NAMES


def test_nccl_install_problems():
    plan = p.plan(PIN, "2.28.9", "13.0")
    assert p.install_problems(plan, {"changed": True}, HEADER, False) == []
    missing = {"failed": True, "msg": "No package matching 'libnccl2=2.28.9-1+cuda13.0' is available"}
    [problem] = p.install_problems(plan, missing, "", False)
    assert "cuda_repo role first" in problem and "nccl_package_version" in problem and "No package" in problem
    # --check on a fresh node: apt does not know the packages yet, nothing is installed.
    assert p.install_problems(plan, missing, "", True) == []
    [problem] = p.install_problems(plan, {"changed": True}, HEADER.replace("28", "27"), False)
    assert "nccl.h (nccl_header_path) says 2.27.9" in problem


def test_nccl_plan_unmanaged_applies_nothing_and_reports_the_node_s_nccl():
    plan = p.plan(
        "2.28.9-1+cuda13.0",
        "2.28.9",
        "13.0",
        manage=False,
        node_nccl={"version": "2.27.3", "source": "torch"},
    )
    assert plan["apply"] is False and plan["report"] == [
        p.unmanaged_report({"version": "2.27.3", "source": "torch"})
    ]
    managed = p.plan("2.28.9-1+cuda13.0", "2.28.9", "13.0")
    assert managed["apply"] is True and managed["report"] == []


def test_nccl_unmanaged_report():
    assert p.unmanaged_report({"version": "2.28.9", "source": "torch"}).endswith(
        "found on the node: 2.28.9 (torch)"
    )
    assert "none (jobs use the NCCL bundled with torch)" in p.unmanaged_report({"version": ""})
    assert "nccl_install_system: false" in p.unmanaged_report(None)


@pytest.mark.parametrize(
    ("venv_info", "probe", "expected"),
    [
        # after pytorch_venv (site.yml): its fact, nothing run on the node
        ({"nccl_version": "2.28.3"}, None, "bundles NCCL 2.28.3; system NCCL 2.28.9"),
        ({"nccl_version": ""}, None, "bundles NCCL none (CPU build); system NCCL 2.28.9"),
        (
            {"nccl_version": "2.27.7"},
            None,
            "WARNING: nccl on gpu1: torch in /v bundles NCCL 2.27.7; system NCCL 2.28.9",
        ),
        # alone: files/torch_nccl.py's output (with the CRLF of a pty)
        (None, {"rc": 0, "stdout": "2.27.7\r\n"}, "WARNING: "),
        (None, {"rc": 0, "stdout": "None\n"}, "bundles NCCL none (CPU build)"),
        (None, {"rc": 1, "stdout": "", "stderr": "ImportError"}, "NCCL unknown: torch does not import"),
        # no venv yet (script skipped by removes:), or the probe not run: nothing to say
        (None, {"skipped": True, "msg": "/v/bin/python does not exist"}, ""),
        (None, None, ""),
    ],
)
def test_nccl_torch_comparison(venv_info, probe, expected):
    line = p.torch_comparison("2.28.9", "gpu1", "/v", venv_info, probe)
    assert (expected in line) if expected else line == ""
    # The task loops over the lines: this one, none without one or with nccl_check_torch false.
    assert p.torch_lines("2.28.9", "gpu1", "/v", venv_info, probe) == ([line] if line else [])
    assert p.torch_lines("2.28.9", "gpu1", "/v", venv_info, probe, check=False) == []
    assert line.startswith("WARNING: ") is (expected.startswith("WARNING") or "2.27.7" in line)


@pytest.mark.parametrize(
    ("printed", "version"),
    [
        ("2.28.9", "2.28.9"),
        ("(2, 28, 9)", "2.28.9"),
        ("22809", "2.28.9"),
        ("21805", "2.18.5"),
        ("2708", "2.7.8"),
        ("None", ""),
        ("", ""),
    ],
)
def test_parse_torch_nccl_version(printed, version):
    assert p.parse_torch_nccl_version(printed) == version


def test_torch_nccl_version_from_the_h200_capture():
    # torch_versions.txt: "<torch> <cuda> <nccl> <gpus>" read off the lent H200 machine.
    torch, _cuda, nccl, _gpus = (FIXTURES / "torch_versions.txt").read_text().split()
    assert torch.startswith("2.11")
    assert p.parse_torch_nccl_version(nccl) == "2.28.9"
    assert not p.mismatch("2.28.9", p.parse_torch_nccl_version(nccl))


def test_parse_torch_nccl_version_refuses_garbage():
    with pytest.raises(p.PackageError):
        p.parse_torch_nccl_version("Traceback (most recent call last)")


@pytest.mark.parametrize(
    ("system", "torch", "differs"),
    [
        ("2.28.9", "2.28.3", False),
        ("2.28.9", "2.27.7", True),
        ("2.28.9", "3.28.9", True),
        ("", "2.27.7", False),
        ("2.28.9", "", False),
    ],
)
def test_nccl_mismatch_is_major_minor(system, torch, differs):
    assert p.mismatch(system, torch) is differs


def test_filter_plugin_exposes_and_wraps_errors():
    ansible_errors = pytest.importorskip("ansible.errors")
    import importlib.util

    path = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "filter" / "wireup_packages.py"
    spec = importlib.util.spec_from_file_location("wireup_packages_filter", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    filters = module.FilterModule().filters()
    assert filters["wireup_pkg_nccl_plan"](PIN, "2.28.9", "13.0")["specs"][0] == f"libnccl2={PIN}"
    with pytest.raises(ansible_errors.AnsibleFilterError, match="nccl_package_version"):
        filters["wireup_pkg_nccl_plan"]("2.28.9", "2.28.9", "13.0")
    # Each role's plan is one filter (the names the role tasks use).
    for name in ("wireup_pkg_cuda_repo_plan", "wireup_pkg_nccl_plan", "wireup_pkg_nccl_tests_plan"):
        assert name in filters
