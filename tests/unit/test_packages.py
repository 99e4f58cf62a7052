"""wireup.packages: which packages, versions and URLs each node gets, and the checks on them."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess

import pytest

from wireup import packages as p

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


@pytest.mark.parametrize("key_name", ["", "../evil.pub", "keys/3bf863cc.pub"])
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


POLICY = """Package files:
 100 /var/lib/dpkg/status
     release a=now
 500 http://10.99.0.1:8080/cuda/debian12/x86_64  Packages
     release o=NVIDIA,l=NVIDIA CUDA,c=
     origin 10.99.0.1
 500 http://deb.debian.org/debian bookworm/main amd64 Packages
     release v=12.8,o=Debian,a=stable,n=bookworm,l=Debian,c=main,b=amd64
Pinned packages:
"""


def test_apt_policy_has_source():
    assert p.apt_policy_has_source(POLICY, "http://10.99.0.1:8080/cuda/debian12/x86_64/")
    assert not p.apt_policy_has_source(POLICY, "http://10.99.0.1:8080/cuda/debian12/sbsa/")
    assert not p.apt_policy_has_source("Package files:\n 100 /var/lib/dpkg/status\n", "http://x/cuda/")


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


@pytest.mark.parametrize(
    ("text", "install", "missing", "hold"),
    [
        # every rerun: both at the pin and held -> apt is not started
        (f"libnccl2 hi  {PIN}\nlibnccl-dev hi  {PIN}\n", [], [], []),
        # at the pin, one hold lost (apt-mark unhold) -> only that hold
        (f"libnccl2 hi  {PIN}\nlibnccl-dev ii  {PIN}\n", [], [], ["libnccl-dev"]),
        # a fresh node: dpkg knows neither (rc 1, stdout empty)
        ("", NCCL_NAMES, NCCL_NAMES, NCCL_NAMES),
        # a new pin over an older held NCCL
        ("libnccl2 hi  2.27.7-1+cuda13.0\nlibnccl-dev hi  2.27.7-1+cuda13.0\n", NCCL_NAMES, [], []),
        # removed but configuration left ("rc"), and one half-installed ("iF")
        (f"libnccl2 rc  {PIN}\nlibnccl-dev iF  {PIN}\n", NCCL_NAMES, NCCL_NAMES, NCCL_NAMES),
        # an upgrade to a newer build of the same release is drift too
        (f"libnccl2 hi  2.28.9-2+cuda13.0\nlibnccl-dev hi  {PIN}\n", ["libnccl2"], [], []),
    ],
)
def test_dpkg_drift(text, install, missing, hold):
    assert p.dpkg_drift(text, NCCL_NAMES, PIN) == {"install": install, "missing": missing, "hold": hold}


def test_dpkg_drift_needs_a_list():
    with pytest.raises(p.PackageError, match="list of package names"):
        p.dpkg_drift("", "libnccl2", PIN)


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
    assert filters["wireup_pkg_cuda_toolkit_spec"]("13.0") == "cuda-toolkit-13-0"
    assert (
        filters["wireup_pkg_nccl_header_version"](
            "#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n"
        )
        == "2.28.9"
    )
    with pytest.raises(ansible_errors.AnsibleFilterError, match="nccl_package_version"):
        filters["wireup_pkg_nccl_plan"]("2.28.9", "2.28.9", "13.0")


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


# What ansible.builtin.deb822_repository writes for the role's source (fields in its sorted order).
SOURCE = (
    "X-Repolib-Name: wireup-cuda-ubuntu2404-x86-64\n"
    "Signed-By: /etc/apt/keyrings/wireup-cuda.asc\n"
    "Suites: /\n"
    "Types: deb\n"
    f"URIs: {NVIDIA_URL}\n"
)
SOURCE_ARGS = ("wireup-cuda-ubuntu2404-x86-64", NVIDIA_URL, "/etc/apt/keyrings/wireup-cuda.asc")


def test_cuda_repo_source_current():
    assert p.cuda_repo_source_current(SOURCE, *SOURCE_ARGS)
    assert p.cuda_repo_source_current("# edited by hand\n" + SOURCE.replace(": ", ":   "), *SOURCE_ARGS)
    assert not p.cuda_repo_source_current(SOURCE.replace("x86_64/", "sbsa/"), *SOURCE_ARGS)
    assert not p.cuda_repo_source_current(SOURCE + "Enabled: no\n", *SOURCE_ARGS)  # more than the role's
    assert not p.cuda_repo_source_current(SOURCE.replace("Signed-By", "X-Signed-By"), *SOURCE_ARGS)
    assert not p.cuda_repo_source_current("garbage without a colon\n", *SOURCE_ARGS)
    assert not p.cuda_repo_source_current(None, *SOURCE_ARGS)
    assert p.deb822_fields("A: 1\nB: x\n y\n") == {"A": "1", "B": "x\ny"}


def _state(content, mode="0644", owner="root", kind="file"):
    return {"exists": True, "type": kind, "mode": mode, "owner": owner, "group": "root", "content": content}


def test_installed_key_and_source():
    digest = hashlib.sha256(TEST_KEY.encode()).hexdigest()
    assert p.installed_key_trusted(_state(TEST_KEY), [TEST_KEY_FPR])
    assert p.installed_key_trusted(_state(TEST_KEY), [TEST_KEY_FPR], "sha256:" + digest)
    assert not p.installed_key_trusted(_state(TEST_KEY), [TEST_KEY_FPR], "sha256:" + "0" * 64)
    assert not p.installed_key_trusted(_state(TEST_KEY), ["EB693B3035CD5710E231E123A4B469963BF863CC"])
    assert not p.installed_key_trusted(_state(TEST_KEY, mode="0600"), [TEST_KEY_FPR])  # apt could not read it
    assert not p.installed_key_trusted(_state(TEST_KEY, owner="nobody"), [TEST_KEY_FPR])
    assert not p.installed_key_trusted(_state("<html>404</html>"), [TEST_KEY_FPR])
    assert not p.installed_key_trusted({"exists": False}, [TEST_KEY_FPR])
    assert p.installed_source_current(_state(SOURCE), *SOURCE_ARGS)
    assert not p.installed_source_current(_state(SOURCE, mode="0600"), *SOURCE_ARGS)
    assert not p.installed_source_current({"exists": False}, *SOURCE_ARGS)
    assert not p.key_trusted(None, [TEST_KEY_FPR])
