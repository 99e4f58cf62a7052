"""wireup.packages: which packages, versions and URLs each node gets, and the checks on them."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess

import pytest

from wireup import cuda_repo as p

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "h200x2"
NVIDIA_BASE = "https://developer.download.nvidia.com/compute/cuda/repos"

# A throwaway ed25519 key made with gpg 2.2.40 for this test; gpg printed the fingerprint below.
TEST_KEY = """-----BEGIN PGP PUBLIC KEY BLOCK-----

mDMEawxXchYJKwYBBAHaRw8BAQdAvREfLAjWUvouDp7r85ti2+ZmR5T58AzN+tBf
024eXYK0KndpcmV1cCB1bml0IHRlc3Qga2V5IDx0ZXN0QHdpcmV1cC5pbnZhbGlk
PoiQBBMWCAA4FiEExgEXlceL2LoEIN9Y3ZpJcKUuSggFAmsMV3ICGwMFCwkIBwIG
FQoJCAsCBBYCAwECHgECF4AACgkQ3ZpJcKUuSggaCAD9H0DYu5KHX0KrWRQ9C8GN
N/tTfxgPMbfJ8KAxiVYDNtABANuMnwPZR3RAamlwn79NzKIw+NqATtreHXPOi9/s
3dAF
=onyv
-----END PGP PUBLIC KEY BLOCK-----
"""
TEST_KEY_FPR = "C6011795C78BD8BA0420DF58DD9A4970A52E4A08"


# --- CUDA repository ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("base", "distro", "arch", "url"),
    [
        (NVIDIA_BASE, "ubuntu2404", "x86_64", f"{NVIDIA_BASE}/ubuntu2404/x86_64/"),
        (NVIDIA_BASE, "ubuntu2404", "sbsa", f"{NVIDIA_BASE}/ubuntu2404/sbsa/"),
        (NVIDIA_BASE, "ubuntu2204", "x86_64", f"{NVIDIA_BASE}/ubuntu2204/x86_64/"),
        (NVIDIA_BASE + "/", "debian12", "x86_64", f"{NVIDIA_BASE}/debian12/x86_64/"),
        ("http://10.99.0.1:8080/cuda", "debian12", "sbsa", "http://10.99.0.1:8080/cuda/debian12/sbsa/"),
        ("file:///srv/mirror/cuda", "ubuntu2204", "sbsa", "file:///srv/mirror/cuda/ubuntu2204/sbsa/"),
    ],
)
def test_cuda_repo_url(base, distro, arch, url):
    assert p.cuda_repo_url(base, distro, arch) == url


def test_cuda_repo_key_url_and_source_name():
    assert p.cuda_repo_key_url(NVIDIA_BASE, "ubuntu2404", "sbsa", "3bf863cc.pub") == (
        f"{NVIDIA_BASE}/ubuntu2404/sbsa/3bf863cc.pub"
    )
    assert p.cuda_repo_source_name("debian12", "x86_64") == "wireup-cuda-debian12-x86-64"
    assert p.cuda_repo_source_name("ubuntu2404", "sbsa") == "wireup-cuda-ubuntu2404-sbsa"


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (("ftp://mirror/cuda", "ubuntu2404", "x86_64"), "cuda_repo_base_url"),
        (("", "ubuntu2404", "x86_64"), "cuda_repo_base_url"),
        ((None, "ubuntu2404", "x86_64"), "cuda_repo_base_url"),
        ((NVIDIA_BASE, "ubuntu2004", "x86_64"), "cuda_repo_distro"),
        ((NVIDIA_BASE, "rhel9", "x86_64"), "cuda_repo_distro"),
        ((NVIDIA_BASE, "ubuntu2404", "aarch64"), "arch.cuda"),
        ((NVIDIA_BASE, "ubuntu2404", "arm64"), "arch.cuda"),
    ],
)
def test_cuda_repo_url_bad_input_names_the_variable(args, names):
    with pytest.raises(p.PackageError, match=names.replace(".", r"\.")):
        p.cuda_repo_url(*args)


@pytest.mark.parametrize("key_name", ["../evil.pub", "keys/3bf863cc.pub"])
def test_cuda_repo_key_name_must_be_a_file_name(key_name):
    with pytest.raises(p.PackageError, match="cuda_repo_key_name"):
        p.cuda_repo_key_url(NVIDIA_BASE, "ubuntu2404", "x86_64", key_name)


@pytest.mark.parametrize(
    ("cuda", "version", "spec", "home"),
    [
        ("13.0", "", "cuda-toolkit-13-0", "/usr/local/cuda-13.0"),
        ("12.8", "", "cuda-toolkit-12-8", "/usr/local/cuda-12.8"),
        ("13.0", "13.0.2-1", "cuda-toolkit-13-0=13.0.2-1", "/usr/local/cuda-13.0"),
    ],
)
def test_cuda_toolkit(cuda, version, spec, home):
    assert p.cuda_toolkit_spec(cuda, version) == spec
    assert p.cuda_home(cuda) == home


@pytest.mark.parametrize(
    ("cuda", "version", "variable"),
    [
        (13.0, "", "cuda_repo_version"),  # YAML number: must be quoted
        ("13", "", "cuda_repo_version"),
        ("13.0.2", "", "cuda_repo_version"),
        ("13.0", "12.8.1-1", "cuda_repo_toolkit_version"),
        ("13.0", "13.0.2", "cuda_repo_toolkit_version"),
        ("13.0", "13.01.2-1", "cuda_repo_toolkit_version"),
    ],
)
def test_cuda_toolkit_bad_input(cuda, version, variable):
    with pytest.raises(p.PackageError, match=variable):
        p.cuda_toolkit_spec(cuda, version)


# --- Key checks -----------------------------------------------------------------------------------
def test_pgp_fingerprint_of_a_known_key():
    assert p.pgp_fingerprints(TEST_KEY) == [TEST_KEY_FPR]


def test_check_key_accepts_spaced_lowercase_fingerprint_and_checksum():
    spaced = " ".join(TEST_KEY_FPR[i : i + 4] for i in range(0, 40, 4)).lower()
    digest = hashlib.sha256(TEST_KEY.encode()).hexdigest()
    result = p.check_key(TEST_KEY, ["0" * 40, spaced], "sha256:" + digest)
    assert result == {"fingerprints": [TEST_KEY_FPR], "sha256": digest}
    assert p.check_key(TEST_KEY, [TEST_KEY_FPR], digest.upper())["sha256"] == digest


def test_check_key_refuses_an_untrusted_key():
    with pytest.raises(p.PackageError, match=f"{TEST_KEY_FPR}.*cuda_repo_key_fingerprints"):
        p.check_key(TEST_KEY, ["EB693B3035CD5710E231E123A4B469963BF863CC"])


def test_check_key_refuses_a_changed_download():
    with pytest.raises(p.PackageError, match="cuda_repo_key_checksum"):
        p.check_key(TEST_KEY, [TEST_KEY_FPR], "sha256:" + "0" * 64)


@pytest.mark.parametrize(
    ("text", "fingerprints", "match"),
    [
        ("<html>404 Not Found</html>", [TEST_KEY_FPR], "not an ASCII-armored"),
        (TEST_KEY.replace("mDMEawxXchYJ", "mDMEaw!XchYJ"), [TEST_KEY_FPR], "base64"),
        (TEST_KEY, [], "non-empty list"),
        (TEST_KEY, "C6011795C78BD8BA0420DF58DD9A4970A52E4A08", "non-empty list"),
        (TEST_KEY, ["3BF863CC"], "full OpenPGP fingerprint"),
    ],
)
def test_check_key_bad_input(text, fingerprints, match):
    with pytest.raises(p.PackageError, match=match):
        p.check_key(text, fingerprints)


@pytest.mark.skipif(not shutil.which("gpg"), reason="gpg not installed")
def test_pgp_fingerprint_matches_gpg_for_a_fresh_rsa_key(tmp_path):
    env = dict(os.environ, GNUPGHOME=str(tmp_path))
    tmp_path.chmod(0o700)
    try:
        subprocess.run(
            ["gpg", "--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", "",
             "--quick-gen-key", "t <t@wireup.invalid>", "rsa2048", "sign", "never"],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        armored = subprocess.run(
            ["gpg", "--armor", "--export"], env=env, check=True, capture_output=True
        ).stdout
        colons = subprocess.run(
            ["gpg", "--with-colons", "--fingerprint"], env=env, check=True, capture_output=True, text=True
        ).stdout
    finally:
        # gpg started an agent for this home: stop it, so the test leaves no process behind.
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, check=False, capture_output=True)
    gpg_fpr = next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))
    assert p.pgp_fingerprints(armored.decode()) == [gpg_fpr]


# --- NCCL -----------------------------------------------------------------------------------------
def test_nccl_plan():
    plan = p.nccl_plan("2.28.9-1+cuda13.0", "2.28.9", "13.0")
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
    assert p.nccl_plan("2.21.5-1+cuda12.4", "2.21.5", "12.4")["cuda"] == "12.4"


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
        p.nccl_plan(pkg, nccl, cuda)


def test_parse_dpkg_status():
    text = (
        "libnccl2 hi  2.28.9-1+cuda13.0\n"
        "libnccl-dev ii  2.28.9-1+cuda13.0\n"
        "cuda-drivers-580 un  \n"
        "libfoo:amd64 ii  1.0-1\n"
    )
    assert p.parse_dpkg_status(text) == {
        "libnccl2": {"version": "2.28.9-1+cuda13.0", "held": True},
        "libnccl-dev": {"version": "2.28.9-1+cuda13.0", "held": False},
        "libfoo": {"version": "1.0-1", "held": False},
    }


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
    return p.nccl_plan(
        PIN, "2.28.9", "13.0", dpkg=dpkg, files=files or _files(), header_path="/usr/include/nccl.h"
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


@pytest.mark.parametrize(
    "files",
    [
        _files(pin=None),  # pin file deleted
        _files(pin=PIN_TEXT.replace("1001", "500")),  # edited by hand
        _files(pin=PIN_TEXT.replace(PIN, "2.27.7-1+cuda13.0")),  # an older pin
        _files(mode="0600"),  # apt (as _apt) could not read it
    ],
)
def test_nccl_plan_rewrites_a_pin_file_that_differs(files):
    assert _plan(CONVERGED, files)["apply"]


def test_nccl_plan_checks_the_header_of_packages_at_the_pin():
    assert not _plan(CONVERGED)["apply"]
    for header, said in [(HEADER.replace("PATCH 9", "PATCH 3"), "says 2.28.3"), (None, "says nothing")]:
        with pytest.raises(p.PackageError, match=f"nccl_header_path.*{said}.*--reinstall libnccl-dev"):
            _plan(CONVERGED, _files(header=header))
    # Packages to install: the header is checked after the install instead.
    assert _plan("", _files(header=None))["install"] == NCCL_NAMES
    # Not read (nccl_install_system: false): nothing checked, nothing known.
    assert p.nccl_plan(PIN, "2.28.9", "13.0")["install"] == NCCL_NAMES


def test_nccl_install_problems():
    plan = p.nccl_plan(PIN, "2.28.9", "13.0")
    assert p.nccl_install_problems(plan, {"changed": True}, HEADER, False) == []
    missing = {"failed": True, "msg": "No package matching 'libnccl2=2.28.9-1+cuda13.0' is available"}
    [problem] = p.nccl_install_problems(plan, missing, "", False)
    assert "cuda_repo role first" in problem and "nccl_package_version" in problem and "No package" in problem
    # --check on a fresh node: apt does not know the packages yet, nothing is installed.
    assert p.nccl_install_problems(plan, missing, "", True) == []
    [problem] = p.nccl_install_problems(plan, {"changed": True}, HEADER.replace("28", "27"), False)
    assert "nccl.h (nccl_header_path) says 2.27.9" in problem


def test_nccl_plan_unmanaged_applies_nothing_and_reports_the_node_s_nccl():
    plan = p.nccl_plan(
        "2.28.9-1+cuda13.0",
        "2.28.9",
        "13.0",
        manage=False,
        node_nccl={"version": "2.27.3", "source": "torch"},
    )
    assert plan["apply"] is False and plan["report"] == [
        p.nccl_unmanaged_report({"version": "2.27.3", "source": "torch"})
    ]
    managed = p.nccl_plan("2.28.9-1+cuda13.0", "2.28.9", "13.0")
    assert managed["apply"] is True and managed["report"] == []


def test_nccl_unmanaged_report():
    assert p.nccl_unmanaged_report({"version": "2.28.9", "source": "torch"}).endswith(
        "found on the node: 2.28.9 (torch)"
    )
    assert "none (jobs use the NCCL bundled with torch)" in p.nccl_unmanaged_report({"version": ""})
    assert "nccl_install_system: false" in p.nccl_unmanaged_report(None)


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
    line = p.nccl_torch_comparison("2.28.9", "gpu1", "/v", venv_info, probe)
    assert (expected in line) if expected else line == ""
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
    assert not p.nccl_mismatch("2.28.9", p.parse_torch_nccl_version(nccl))


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
    assert p.nccl_mismatch(system, torch) is differs


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


# --- the cuda_repo role's read of the node: skip the key, the source and apt update on a rerun ---
NVIDIA_URL = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"


@pytest.mark.parametrize(
    ("url", "prefix"),
    [
        # apt's URItoFileName: no scheme, '_' quoted as %5f, '/' -> '_'
        (NVIDIA_URL, "developer.download.nvidia.com_compute_cuda_repos_ubuntu2404_x86%5f64_"),
        (
            "http://10.213.1.1:18001/cuda/repos/debian12/x86_64/",
            "10.213.1.1:18001_cuda_repos_debian12_x86%5f64_",
        ),
        ("https://user:secret@mirror.example/cuda/sbsa/", "mirror.example_cuda_sbsa_"),  # credentials dropped
        ("http://mirror.example/a~b=c/", "mirror.example_a%7eb%3dc_"),
        ("file:///srv/cuda/repos/debian12/x86_64/", ""),  # apt reads file: repositories in place
        ("not a url", ""),
    ],
)
def test_apt_lists_prefix(url, prefix):
    assert p.apt_lists_prefix(url) == prefix


def test_apt_lists_have_source():
    prefix = "/var/lib/apt/lists/developer.download.nvidia.com_compute_cuda_repos_ubuntu2404_x86%5f64_"
    assert p.apt_lists_have_source([prefix + "InRelease", prefix + "Packages"], NVIDIA_URL)
    assert p.apt_lists_have_source([prefix + "Packages.lz4"], NVIDIA_URL)  # GzipIndexes images
    # Only the Release file: the index itself was never fetched.
    assert not p.apt_lists_have_source([prefix + "InRelease"], NVIDIA_URL)
    assert not p.apt_lists_have_source([], NVIDIA_URL)
    # Another architecture of the same repository does not count.
    other = "/var/lib/apt/lists/developer.download.nvidia.com_compute_cuda_repos_ubuntu2404_sbsa_Packages"
    assert not p.apt_lists_have_source([other], NVIDIA_URL)
    assert not p.apt_lists_have_source([prefix + "Packages"], "file:///srv/cuda/")


# --- cuda_repo's plan: from its one read of the node --------------------------------------------------
# What ansible.builtin.deb822_repository writes for the role's source (fields in its sorted order).
SOURCE = (
    "X-Repolib-Name: wireup-cuda-ubuntu2404-x86-64\n"
    "Signed-By: /etc/apt/keyrings/wireup-cuda.asc\n"
    "Suites: /\n"
    "Types: deb\n"
    f"URIs: {NVIDIA_URL}\n"
)


def test_cuda_repo_source_current():
    args = ("wireup-cuda-ubuntu2404-x86-64", NVIDIA_URL, "/etc/apt/keyrings/wireup-cuda.asc")
    assert p.cuda_repo_source_current(SOURCE, *args)
    assert p.cuda_repo_source_current("# edited by hand\n" + SOURCE.replace(": ", ":   "), *args)
    assert not p.cuda_repo_source_current(SOURCE.replace("Signed-By", "X-Signed-By"), *args)
    assert not p.cuda_repo_source_current("garbage without a colon\n", *args)
    assert not p.cuda_repo_source_current(None, *args)
    assert p.deb822_fields("A: 1\nB: x\n y\n") == {"A": "1", "B": "x\ny"}


NODE = {
    "cuda_repo_distro": "ubuntu2404",
    "arch": {"cuda": "x86_64"},
    "gpu": {"present": True},
    "cuda": {"version": "", "home": ""},
}
KEYRING = "/etc/apt/keyrings/wireup-cuda.asc"
LISTS = "/var/lib/apt/lists/developer.download.nvidia.com_compute_cuda_repos_ubuntu2404_x86%5f64_"
CUDA_VARS = {
    "manage_source": True,
    "base_url": NVIDIA_BASE,
    "key_name": "3bf863cc.pub",
    "fingerprints": [TEST_KEY_FPR.lower()],
    "checksum": "",
    "keyring_path": KEYRING,
    "version": "13.0",
    "toolkit_version": "",
    "install_toolkit": True,
    "toolkit_on_gpu_less": False,
}


SOURCE_PATH = "/etc/apt/sources.list.d/wireup-cuda-ubuntu2404-x86-64.sources"


def _read(key=None, lists=(), source=None, mode="0644"):
    """What wireup_file_state returns for the role's read (None: the file is missing)."""

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

    files = {KEYRING: one(key), SOURCE_PATH: one(source)}
    return {"files": files, "globs": {"/var/lib/apt/lists/*Packages*": list(lists)}}


def test_cuda_repo_plan_on_a_fresh_node():
    plan = p.cuda_repo_plan(_read(), NODE, **CUDA_VARS)
    assert plan["url"] == NVIDIA_URL and plan["key_url"] == NVIDIA_URL + "3bf863cc.pub"
    assert plan["source_name"] == "wireup-cuda-ubuntu2404-x86-64" and plan["source_path"] == SOURCE_PATH
    assert p.cuda_repo_source_path(NODE) == SOURCE_PATH
    assert plan["fingerprints"] == [TEST_KEY_FPR]
    assert (plan["key"], plan["download_key"], plan["lists_fetched"], plan["write"]) == (
        "",
        True,
        False,
        True,
    )
    assert plan["toolkit"] | {"missing": ""} == {
        "wanted": True, "spec": "cuda-toolkit-13-0", "home": "/usr/local/cuda-13.0", "missing": "",
    }  # fmt: skip
    assert plan["report"] == []


FETCHED = [LISTS + "InRelease", LISTS + "Packages"]


def test_cuda_repo_plan_on_a_converged_node_downloads_and_updates_nothing():
    plan = p.cuda_repo_plan(
        _read(TEST_KEY, FETCHED, SOURCE),
        NODE | {"cuda": {"version": "13.0", "home": "/usr/local/cuda"}},
        **CUDA_VARS,
    )
    assert (plan["key"], plan["download_key"], plan["lists_fetched"], plan["write"]) == (
        TEST_KEY,
        False,
        True,
        False,
    )
    assert not plan["toolkit"]["wanted"]
    assert plan["report"] == ["toolkit not installed: CUDA 13.0 already at /usr/local/cuda"]


@pytest.mark.parametrize(
    "key",
    [
        "<html>404</html>",  # a key that is not one
        TEST_KEY.replace("mDMEawxXchYJ", "mDMEawxXchYK"),  # another key (or a mangled one)
    ],
)
def test_cuda_repo_plan_replaces_a_key_that_is_not_trusted(key):
    plan = p.cuda_repo_plan(_read(key, FETCHED, SOURCE), NODE, **CUDA_VARS)
    assert (plan["key"], plan["download_key"], plan["write"]) == ("", True, True)


@pytest.mark.parametrize(
    ("read", "download"),
    [
        (_read(TEST_KEY, FETCHED, None), False),  # source deleted: rewritten, key kept (no download)
        (_read(TEST_KEY, FETCHED, SOURCE.replace("x86_64/", "sbsa/")), False),  # another source
        (_read(TEST_KEY, FETCHED, SOURCE + "Enabled: no\n"), False),  # more than the role's
        (_read(TEST_KEY, FETCHED, SOURCE, mode="0600"), False),  # modes apt cannot read
        (_read(TEST_KEY, [LISTS + "InRelease"], SOURCE), False),  # index never fetched (a run stopped)
        (_read(None, FETCHED, SOURCE), True),  # key deleted
    ],
)
def test_cuda_repo_plan_writes_when_anything_is_off(read, download):
    plan = p.cuda_repo_plan(read, NODE, **CUDA_VARS)
    assert plan["write"] and plan["download_key"] is download


def test_cuda_repo_plan_key_checksum_pinned():
    digest = hashlib.sha256(TEST_KEY.encode()).hexdigest()
    assert p.cuda_repo_plan(_read(TEST_KEY), NODE, **CUDA_VARS | {"checksum": "sha256:" + digest})["key"]
    assert not p.cuda_repo_plan(_read(TEST_KEY), NODE, **CUDA_VARS | {"checksum": "0" * 64})["key"]


def test_cuda_repo_plan_image_node_left_alone():
    node = NODE | {"cuda": {"version": "13.0", "home": "/usr/local/cuda"}}
    plan = p.cuda_repo_plan(_read(TEST_KEY), node, **CUDA_VARS | {"manage_source": False})
    assert (plan["manage_source"], plan["download_key"], plan["key"]) == (False, False, "")
    assert plan["report"] == [
        "apt sources left alone (cuda_repo_manage_source: false); CUDA found: 13.0 at /usr/local/cuda",
        "toolkit not installed: CUDA 13.0 already at /usr/local/cuda",
    ]


@pytest.mark.parametrize(
    ("node", "change", "wanted", "why"),
    [
        (
            NODE | {"gpu": {"present": False}},
            {},
            False,
            "no NVIDIA GPU (set cuda_repo_toolkit_on_gpu_less_nodes",
        ),
        (NODE | {"gpu": {"present": False}}, {"toolkit_on_gpu_less": True}, True, ""),
        (NODE, {"install_toolkit": False}, False, "cuda_repo_install_toolkit is false"),
        # CUDA of another release on the node: this one is installed beside it
        (NODE | {"cuda": {"version": "12.8", "home": "/usr/local/cuda"}}, {}, True, ""),
        # an exact version pinned: apt keeps it at that version even when the release is there
        (
            NODE | {"cuda": {"version": "13.0", "home": "/usr/local/cuda"}},
            {"toolkit_version": "13.0.2-1"},
            True,
            "",
        ),
    ],
)
def test_cuda_repo_plan_toolkit_decision(node, change, wanted, why):
    plan = p.cuda_repo_plan(_read(), node, **CUDA_VARS | change)
    assert plan["toolkit"]["wanted"] is wanted
    assert (why in "; ".join(plan["report"])) if why else plan["report"] == []


@pytest.mark.parametrize(
    ("change", "node", "match"),
    [
        ({"base_url": "ftp://mirror/cuda"}, NODE, "cuda_repo_base_url"),
        ({"version": "13"}, NODE, "cuda_repo_version"),
        ({"toolkit_version": "12.9.1-1"}, NODE, "cuda_repo_toolkit_version"),
        ({"fingerprints": []}, NODE, "cuda_repo_key_fingerprints must be a non-empty list"),
        ({"fingerprints": ["3BF863CC"]}, NODE, "cuda_repo_key_fingerprints item"),
        ({"checksum": None}, NODE, "cuda_repo_key_checksum"),
        ({"key_name": "keys/x.pub"}, NODE, "cuda_repo_key_name"),
        ({}, NODE | {"cuda_repo_distro": "rhel9"}, "wireup_node.cuda_repo_distro"),
    ],
)
def test_cuda_repo_plan_bad_input_names_the_variable(change, node, match):
    with pytest.raises(p.PackageError, match=match):
        p.cuda_repo_plan(_read(), node, **CUDA_VARS | change)


def test_verified_key_only_returns_a_trusted_key():
    plan = p.cuda_repo_plan(_read(), NODE, **CUDA_VARS)
    assert p.verified_key(TEST_KEY, plan) == TEST_KEY
    other = p.cuda_repo_plan(
        _read(), NODE, **CUDA_VARS | {"fingerprints": ["EB693B3035CD5710E231E123A4B469963BF863CC"]}
    )
    with pytest.raises(p.PackageError, match="not the key you trust"):
        p.verified_key(TEST_KEY, other)
    with pytest.raises(p.PackageError, match="not an ASCII-armored"):
        p.verified_key("<html>404</html>", plan)


def test_cuda_toolkit_problems():
    plan = p.cuda_repo_plan(_read(), NODE, **CUDA_VARS)
    assert p.cuda_toolkit_problems(plan, {"changed": True}, False) == []
    failed = {"failed": True, "msg": "No package matching 'cuda-toolkit-13-0' is available"}
    [problem] = p.cuda_toolkit_problems(plan, failed, False)
    assert problem.startswith("cuda-toolkit-13-0 is not available from this node's apt sources")
    assert "cuda_repo_base_url" in problem and "No package matching" in problem
    assert p.cuda_toolkit_problems(plan, failed, True) == []  # --check on a fresh node


# --- nccl_tests' plan: from wireup_nccl_info's one read -------------------------------------------
INFO = {
    "cuda_home": "/usr/local/cuda",
    "nvcc": True,
    "nproc": 16,
    "nccl": {
        "home": "",
        "include_dir": "/usr/include",
        "lib_dir": "/usr/lib/x86_64-linux-gnu",
        "version": "2.28.9",
    },
    "build": {"stamp": None, "binary": False},
}
H200 = {"gpu": {"compute_capabilities": ["9.0", "9.0"]}}
NT_VARS = {
    "host": "gpu1",
    "version": "v2.19.6",
    "commit": "a0b82b2260cf5152b9f8c061bbf7eaf0ba096432",
    "git_url": "https://github.com/NVIDIA/nccl-tests.git",
    "source": "",
    "source_kind": "git",
    "strip_components": 1,
    "nccl_source": "system",
    "mpi": False,
    "mpi_home": "/usr/lib/x86_64-linux-gnu/openmpi",
    "make_jobs": 0,
    "base_dir": "/opt/wireup/nccl-tests",
}
STAMP = "tag=v2.19.6\narch=90\nnccl=system 2.28.9 /usr/lib/x86_64-linux-gnu\nmpi=False\n"


def test_nccl_tests_plan_first_build():
    plan = p.nccl_tests_plan(INFO, H200, **NT_VARS)
    assert plan["build"] and plan["stamp"] == STAMP  # the stamp text the role wrote before issue 14
    assert plan["make_argv"] == [
        "make", "-j16", "MPI=0", "NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90",
        "CUDA_HOME=/usr/local/cuda", "BUILDDIR=/opt/wireup/nccl-tests/build",
    ]  # fmt: skip
    assert plan["paths"] == [{"path": "/opt/wireup/nccl-tests/src-v2.19.6", "state": "directory"}]
    assert plan["stamp_path"] == "/opt/wireup/nccl-tests/build/wireup-build.stamp"
    assert plan["fact"] == {
        "bin_dir": "/opt/wireup/nccl-tests/build", "version": "v2.19.6", "json": True, "arch": "90",
        "mpi": False, "nccl_source": "system", "nccl_version": "2.28.9", "ld_library_path": "",
    }  # fmt: skip


def test_nccl_tests_plan_rebuilds_only_when_the_stamp_or_binary_differ():
    built = INFO | {"build": {"stamp": STAMP, "binary": True}}
    assert not p.nccl_tests_plan(built, H200, **NT_VARS)["build"]
    assert p.nccl_tests_plan(INFO | {"build": {"stamp": STAMP, "binary": False}}, H200, **NT_VARS)["build"]
    assert p.nccl_tests_plan(built, {"gpu": {"compute_capabilities": ["10.0"]}}, **NT_VARS)["build"]
    assert p.nccl_tests_plan(built, H200, **NT_VARS | {"mpi": True})["build"]
    assert p.nccl_tests_plan(built, H200, **NT_VARS | {"version": "v2.19.7"})["build"]


def test_nccl_tests_plan_venv_wheel_gets_a_private_nccl_home():
    wheel = "/opt/wireup/venv/lib/python3.12/site-packages/nvidia/nccl"
    info = INFO | {
        "nccl": {
            "home": wheel,
            "include_dir": wheel + "/include",
            "lib_dir": wheel + "/lib",
            "version": "2.27.7",
        }
    }
    plan = p.nccl_tests_plan(info, H200, **NT_VARS | {"nccl_source": "venv", "mpi": True, "make_jobs": 4})
    home = "/opt/wireup/nccl-tests/nccl-home"
    assert plan["make_argv"][1] == "-j4" and plan["make_argv"][-2:] == [
        f"NCCL_HOME={home}", "MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi",
    ]  # fmt: skip
    assert [(x["path"], x.get("src")) for x in plan["paths"][1:]] == [
        (f"{home}/lib", None),
        (f"{home}/include", wheel + "/include"),
        (f"{home}/lib/libnccl.so.2", wheel + "/lib/libnccl.so.2"),
        (f"{home}/lib/libnccl.so", wheel + "/lib/libnccl.so.2"),
    ]
    assert plan["fact"]["ld_library_path"] == wheel + "/lib" and plan["fact"]["nccl_version"] == "2.27.7"


def test_nccl_tests_plan_archive_source():
    plan = p.nccl_tests_plan(
        INFO, H200, **NT_VARS | {"source": "/srv/nccl-tests.tar.gz", "source_kind": "archive"}
    )
    assert plan["unarchive_opts"] == ["--strip-components=1"]
    zipped = NT_VARS | {"source": "/srv/nccl-tests.zip", "source_kind": "archive"}
    assert p.nccl_tests_plan(INFO, H200, **zipped)["unarchive_opts"] == []


def _missing(kind, path=""):
    """wireup_nccl_info's answer when it found no NCCL to build against."""
    return INFO | {"nccl": {"problem": {"kind": kind, "path": path, "detail": ""}}}


@pytest.mark.parametrize(
    ("info", "node", "change", "match"),
    [
        (INFO | {"nvcc": False}, H200, {}, "bin/nvcc not found on gpu1.*nccl_tests_cuda_home"),
        (_missing("system"), H200, {}, "no system NCCL.*nccl_tests_nccl_source=venv or nccl_tests_nccl_home"),
        (_missing("venv_python", "/v/bin/python"), H200, {},
         "nccl_tests_venv_python '/v/bin/python' is not an executable Python"),
        (_missing("wheel", "/v/bin/python"), H200, {}, "pip install nvidia-nccl-cu13"),
        (_missing("home_lib", "/n/lib"), H200, {}, "no libnccl.so. in /n/lib: nccl_tests_nccl_home"),
        (INFO, H200, {"source": "/n.tgz", "source_kind": "missing"}, "nccl_tests_source=/n.tgz does not"),
        (INFO, {"gpu": {"compute_capabilities": []}}, {}, "compute_capabilities is empty"),
        (INFO, H200, {"nccl_source": "conda"}, "nccl_tests_nccl_source"),
    ],
)  # fmt: skip
def test_nccl_tests_plan_errors_name_the_fix(info, node, change, match):
    with pytest.raises(ValueError, match=match):
        p.nccl_tests_plan(info, node, **NT_VARS | change)


def test_nccl_tests_source_problems():
    plan = p.nccl_tests_plan(INFO, H200, **NT_VARS)
    assert p.nccl_tests_source_problems(plan, {"after": NT_VARS["commit"]}, True, False) == []
    [moved] = p.nccl_tests_source_problems(plan, {"after": "f" * 40}, True, False)
    assert f"is commit {'f' * 40}, not the pinned nccl_tests_commit {NT_VARS['commit']}" in moved
    [tree] = p.nccl_tests_source_problems(plan | {"source_kind": "archive"}, {"skipped": True}, False, False)
    assert "src/Makefile is missing" in tree and "nccl_tests_source_strip_components" in tree
    assert p.nccl_tests_source_problems(plan, {}, False, True) == []  # --check: nothing fetched


@pytest.mark.parametrize(
    ("distro", "key"),
    [
        ("debian12", "3bf863cc.pub"),
        ("ubuntu2404", "3bf863cc.pub"),
        ("debian13", "8793F200.pub"),
        ("ubuntu2604", "8793F200.pub"),
    ],
)
def test_empty_key_name_picks_nvidias_key_for_the_distribution(distro, key):
    assert p.cuda_repo_key_url(NVIDIA_BASE, distro, "x86_64", "") == f"{NVIDIA_BASE}/{distro}/x86_64/{key}"
    # a name given is used as given
    assert p.cuda_repo_key_url(NVIDIA_BASE, distro, "x86_64", "mine.pub").endswith("/mine.pub")


def test_role_defaults_trust_both_nvidia_keys():
    import yaml

    defaults = yaml.safe_load(
        (pathlib.Path(__file__).resolve().parents[2] / "roles/cuda_repo/defaults/main.yml").read_text()
    )
    assert defaults["cuda_repo_key_name"] == ""
    assert {f[-8:] for f in defaults["cuda_repo_key_fingerprints"]} == {"3BF863CC", "8793F200"}
