"""wireup.plans.cuda_repo: NVIDIA's CUDA repository (URLs, the key's trust, the toolkit) and the role's
plan."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import cuda_repo as p

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
# What ansible.builtin.deb822_repository writes for the role's source.
SOURCE = (
    "X-Repolib-Name: wireup-cuda-ubuntu2404-x86-64\n"
    "Signed-By: /etc/apt/keyrings/wireup-cuda.asc\n"
    "Suites: /\n"
    "Types: deb\n"
    f"URIs: {NVIDIA_URL}\n"
)


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
    plan = p.plan(_read(), NODE, **CUDA_VARS)
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
    assert plan["steps"] == ["repo", "toolkit"]
    assert plan["report"] == []


FETCHED = [LISTS + "InRelease", LISTS + "Packages"]


def test_cuda_repo_plan_on_a_converged_node_downloads_and_updates_nothing():
    plan = p.plan(
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
    assert plan["steps"] == []  # the include loop runs nothing
    assert plan["report"] == ["toolkit not installed: CUDA 13.0 already at /usr/local/cuda"]


@pytest.mark.parametrize(
    "key",
    [
        "<html>404</html>",  # a key that is not one
        TEST_KEY.replace("mDMEawxXchYJ", "mDMEawxXchYK"),  # another key (or a mangled one)
    ],
)
def test_cuda_repo_plan_replaces_a_key_that_is_not_trusted(key):
    plan = p.plan(_read(key, FETCHED, SOURCE), NODE, **CUDA_VARS)
    assert (plan["key"], plan["download_key"], plan["write"]) == ("", True, True)


@pytest.mark.parametrize(
    ("read", "download"),
    [
        (_read(TEST_KEY, FETCHED, None), False),  # source deleted: rewritten, key kept (no download)
        (_read(TEST_KEY, [LISTS + "InRelease"], SOURCE), False),  # index never fetched (a run stopped)
        (_read(None, FETCHED, SOURCE), True),  # key deleted
    ],
)
def test_cuda_repo_plan_writes_when_anything_is_off(read, download):
    plan = p.plan(read, NODE, **CUDA_VARS)
    assert plan["write"] and plan["download_key"] is download
    assert plan["steps"][0] == "repo"


def test_cuda_repo_plan_leaves_the_files_content_and_modes_to_the_builtins():
    """The read decides whether the steps run at all (a trusted key, the source file, apt's index
    of this URL); what the files hold and their modes are copy's and deb822_repository's to keep
    whenever they run (issue 24: no second idempotency model). A new URL is a new index."""
    for read in (
        _read(TEST_KEY, FETCHED, SOURCE + "Enabled: no\n"),
        _read(TEST_KEY, FETCHED, SOURCE, mode="0600"),
    ):
        assert not p.plan(read, NODE, **CUDA_VARS)["write"]
    moved = CUDA_VARS | {"base_url": "http://mirror.example/cuda/repos"}
    assert p.plan(_read(TEST_KEY, FETCHED, SOURCE), NODE, **moved)["write"]


def test_cuda_repo_plan_key_checksum_pinned():
    digest = hashlib.sha256(TEST_KEY.encode()).hexdigest()
    assert p.plan(_read(TEST_KEY), NODE, **CUDA_VARS | {"checksum": "sha256:" + digest})["key"]
    assert not p.plan(_read(TEST_KEY), NODE, **CUDA_VARS | {"checksum": "0" * 64})["key"]


def test_cuda_repo_plan_image_node_left_alone():
    node = NODE | {"cuda": {"version": "13.0", "home": "/usr/local/cuda"}}
    plan = p.plan(_read(TEST_KEY), node, **CUDA_VARS | {"manage_source": False})
    assert (plan["manage_source"], plan["download_key"], plan["key"]) == (False, False, "")
    assert plan["steps"] == []
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
    plan = p.plan(_read(), node, **CUDA_VARS | change)
    assert plan["toolkit"]["wanted"] is wanted
    assert plan["steps"] == ["repo"] + (["toolkit"] if wanted else [])  # a fresh node's read: repo too
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
        p.plan(_read(), node, **CUDA_VARS | change)


def test_verified_key_only_returns_a_trusted_key():
    plan = p.plan(_read(), NODE, **CUDA_VARS)
    assert p.verified_key(TEST_KEY, plan) == TEST_KEY
    other = p.plan(
        _read(), NODE, **CUDA_VARS | {"fingerprints": ["EB693B3035CD5710E231E123A4B469963BF863CC"]}
    )
    with pytest.raises(p.PackageError, match="not the key you trust"):
        p.verified_key(TEST_KEY, other)
    with pytest.raises(p.PackageError, match="not an ASCII-armored"):
        p.verified_key("<html>404</html>", plan)


def test_cuda_toolkit_problems():
    plan = p.plan(_read(), NODE, **CUDA_VARS)
    assert p.toolkit_problems(plan, {"changed": True}, False) == []
    failed = {"failed": True, "msg": "No package matching 'cuda-toolkit-13-0' is available"}
    [problem] = p.toolkit_problems(plan, failed, False)
    assert problem.startswith("cuda-toolkit-13-0 is not available from this node's apt sources")
    assert "cuda_repo_base_url" in problem and "No package matching" in problem
    assert p.toolkit_problems(plan, failed, True) == []  # --check on a fresh node


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
