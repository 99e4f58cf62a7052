"""Which NVIDIA packages, versions and repository URLs a node gets: pure functions.

Text and strings in, plain data out; no Ansible imports. The roles nvidia_driver, cuda_repo and
nccl call these through the ``wireup_packages`` filter plugin, and tests/unit/test_cuda_repo.py
pins every choice. Bad input raises ``PackageError`` whose message names the variable and the fix.

Naming facts encoded here (checked against NVIDIA's and Ubuntu's repositories):
- NVIDIA's CUDA repository lives at ``<base>/<distro>/<arch>/`` (a flat apt repository, suite
  ``/``), with ``<distro>`` one of debian12/debian13/ubuntu2204/ubuntu2404/ubuntu2604 and
  ``<arch>`` x86_64 or sbsa (arm64 servers). Its signing key is published beside it
  (``3bf863cc.pub`` since 2022).
- Driver and Fabric Manager package names per branch era: wireup.plans.nvidia_driver.
- NCCL packages: ``libnccl2`` and ``libnccl-dev`` at ``<nccl>-<build>+cuda<major>.<minor>``.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from typing import TypedDict

from ..core.apt import PackageError, check_distro, require_str

# CUDA repository architecture -> Debian architecture.
CUDA_ARCHES = {"x86_64": "amd64", "sbsa": "arm64"}
_CUDA_RE = re.compile(r"(\d+)\.(\d+)")
_FINGERPRINT_RE = re.compile(r"[0-9A-F]{40}|[0-9A-F]{64}")


# --- Architecture --------------------------------------------------------------------------------
def check_cuda_arch(arch: str) -> str:
    if arch not in CUDA_ARCHES:
        raise PackageError(
            f"wireup_node.arch.cuda={arch!r} is not supported: NVIDIA's repositories exist for "
            f"{', '.join(CUDA_ARCHES)} (x86_64 and aarch64 machines)"
        )
    return arch


# --- CUDA repository ------------------------------------------------------------------------------
def cuda_version_parts(cuda_version, variable: str = "cuda_repo_version") -> tuple[int, int]:
    """'13.0' -> (13, 0)."""
    require_str(variable, cuda_version, '"13.0"')
    match = _CUDA_RE.fullmatch(cuda_version)
    if not match:
        raise PackageError(f'{variable}={cuda_version!r} is malformed: expected MAJOR.MINOR such as "13.0"')
    return int(match.group(1)), int(match.group(2))


def cuda_repo_url(base_url, distro: str, arch: str) -> str:
    """The apt URI of NVIDIA's CUDA repository (or a mirror of it) for a distro and arch."""
    require_str("cuda_repo_base_url", base_url, '"https://developer.download.nvidia.com/compute/cuda/repos"')
    base = base_url.strip().rstrip("/")
    if not re.fullmatch(r"(https?|file)://\S+", base):
        raise PackageError(
            f"cuda_repo_base_url={base_url!r} is not an http(s):// or file:// URL: set it to the "
            f"folder that holds <distro>/<arch>/ (NVIDIA's is "
            f"https://developer.download.nvidia.com/compute/cuda/repos)"
        )
    return f"{base}/{check_distro(distro)}/{check_cuda_arch(arch)}/"


# The signing key NVIDIA publishes beside each repository (NVIDIA/cuda-repo-management's README,
# "GPG keys": debian12 3bf863cc, debian13 8793F200; Debian 13 rejects the SHA-1-bound 3bf863cc).
# ubuntu2604: no published name found yet; it is assumed to follow debian13 (set cuda_repo_key_name
# to override). Used when cuda_repo_key_name is "" (the default).
CUDA_REPO_KEYS = {"debian13": "8793F200.pub", "ubuntu2604": "8793F200.pub"}
CUDA_REPO_KEY_DEFAULT = "3bf863cc.pub"


def cuda_repo_key_url(base_url, distro: str, arch: str, key_name) -> str:
    """Where the repository's signing key is published (beside the repository); key_name ""
    means NVIDIA's key for the distribution (CUDA_REPO_KEYS)."""
    require_str("cuda_repo_key_name", key_name, '"3bf863cc.pub"')
    if key_name == "":
        key_name = CUDA_REPO_KEYS.get(distro, CUDA_REPO_KEY_DEFAULT)
    if not key_name or "/" in key_name:
        raise PackageError(
            f"cuda_repo_key_name={key_name!r} must be a file name inside the repository folder, "
            f'e.g. "3bf863cc.pub"'
        )
    return cuda_repo_url(base_url, distro, arch) + key_name


def cuda_repo_source_name(distro: str, arch: str) -> str:
    """Name of the deb822 source, which is also its file name (/etc/apt/sources.list.d/<name>.sources):
    deb822_repository turns '_' into '-' in file names, so the name has none."""
    return f"wireup-cuda-{check_distro(distro)}-{check_cuda_arch(arch)}".replace("_", "-")


def cuda_toolkit_package(cuda_version) -> str:
    """'13.0' -> 'cuda-toolkit-13-0' (the name itself pins major.minor)."""
    major, minor = cuda_version_parts(cuda_version)
    return f"cuda-toolkit-{major}-{minor}"


def cuda_toolkit_spec(cuda_version, toolkit_version="") -> str:
    """apt spec for the toolkit: the package, or package=version when a full version is pinned."""
    name = cuda_toolkit_package(cuda_version)
    require_str("cuda_repo_toolkit_version", toolkit_version, '"13.0.2-1"')
    if not toolkit_version:
        return name
    if not toolkit_version.startswith(cuda_version + ".") or not re.fullmatch(
        r"\d+\.\d+\.\d+-\d+", toolkit_version
    ):
        raise PackageError(
            f"cuda_repo_toolkit_version={toolkit_version!r} is not a {name} version: expected "
            f'"{cuda_version}.<patch>-<build>" such as "{cuda_version}.2-1", or "" for the newest'
        )
    return f"{name}={toolkit_version}"


def cuda_home(cuda_version) -> str:
    major, minor = cuda_version_parts(cuda_version)
    return f"/usr/local/cuda-{major}.{minor}"


# Characters apt quotes as %xx in list file names (apt-pkg/contrib/strutl.cc URItoFileName), besides
# controls, space and non-ASCII.
_APT_QUOTED = set('\\|{}[]<>"^~_=!@#$%^&*')


def apt_lists_prefix(repo_url: str) -> str:
    """The file-name prefix of a flat repository's indexes in /var/lib/apt/lists, as apt's
    URItoFileName makes it: the URI without scheme and credentials, unsafe characters quoted
    (lower-case %xx: '_' -> '%5f'), '/' -> '_'. 'https://developer.download.nvidia.com/compute/cuda/
    repos/ubuntu2404/x86_64/' -> 'developer.download.nvidia.com_compute_cuda_repos_ubuntu2404_x86%5f64_'
    (then 'Packages', 'InRelease', ...). '' for a URI apt reads in place (file:, or unparsable)."""
    match = re.fullmatch(r"(https?)://(?:[^/@]*@)?([^/]+)(/.*)?", str(repo_url).strip())
    if not match:
        return ""
    text = match.group(2) + (match.group(3) or "/")
    out = []
    for ch in text:
        code = ord(ch)
        out.append(f"%{code:02x}" if ch in _APT_QUOTED or code <= 0x20 or code >= 0x7F else ch)
    return "".join(out).replace("/", "_")


def apt_lists_have_source(list_files, repo_url: str) -> bool:
    """True when apt has fetched the flat repository's Packages index: one of ``list_files`` (paths
    in /var/lib/apt/lists) is <prefix>Packages, possibly compressed (Packages.lz4 and the like)."""
    prefix = apt_lists_prefix(repo_url)
    if not prefix:
        return False
    names = [str(path).rsplit("/", 1)[-1] for path in list_files or []]
    return any(name.startswith(prefix + "Packages") for name in names)


def cuda_repo_source_path(node) -> str:
    """Where ansible.builtin.deb822_repository writes the role's source for this node."""
    node = node or {}
    name = cuda_repo_source_name(node.get("cuda_repo_distro"), (node.get("arch") or {}).get("cuda"))
    return f"/etc/apt/sources.list.d/{name}.sources"


# --- OpenPGP key checks ---------------------------------------------------------------------------
def _dearmor(text: str) -> bytes:
    lines = [line.strip() for line in text.strip().splitlines()]
    try:
        start = lines.index("-----BEGIN PGP PUBLIC KEY BLOCK-----")
        end = lines.index("-----END PGP PUBLIC KEY BLOCK-----")
    except ValueError:
        raise PackageError(
            "the CUDA repository key is not an ASCII-armored OpenPGP public key (no BEGIN/END PGP "
            "PUBLIC KEY BLOCK lines): check cuda_repo_key_name and cuda_repo_base_url"
        ) from None
    body = lines[start + 1 : end]
    # Armor headers ("Version: ...", "Comment: ...") end at the first empty line.
    if "" in body:
        body = body[body.index("") + 1 :]
    data = "".join(line for line in body if line and not line.startswith("="))
    try:
        return base64.b64decode(data, validate=True)
    except ValueError:
        raise PackageError("the CUDA repository key's armored body is not valid base64") from None


def _packets(data: bytes):
    pos = 0
    while pos < len(data):
        head = data[pos]
        if not head & 0x80:
            raise PackageError(f"the CUDA repository key is not OpenPGP data (bad packet at byte {pos})")
        if head & 0x40:  # new format
            tag = head & 0x3F
            first = data[pos + 1]
            if first < 192:
                length, pos = first, pos + 2
            elif first < 224:
                length, pos = ((first - 192) << 8) + data[pos + 2] + 192, pos + 3
            elif first == 255:
                length, pos = int.from_bytes(data[pos + 2 : pos + 6], "big"), pos + 6
            else:
                raise PackageError("the CUDA repository key uses partial packet lengths: not a key file")
        else:  # old format
            tag = (head >> 2) & 0x0F
            size = {0: 1, 1: 2, 2: 4}.get(head & 0x03)
            if size is None:
                raise PackageError("the CUDA repository key has an indeterminate-length packet")
            length = int.from_bytes(data[pos + 1 : pos + 1 + size], "big")
            pos += 1 + size
        yield tag, data[pos : pos + length]
        pos += length


def pgp_fingerprints(armored: str) -> list[str]:
    """Fingerprints (upper-case hex) of the primary keys in an armored OpenPGP public key block."""
    found = []
    for tag, body in _packets(_dearmor(armored)):
        if tag != 6 or not body:  # 6: public-key packet (primary key)
            continue
        if body[0] == 4:  # v4 fingerprints are SHA-1 by definition (RFC 4880 12.2)
            digest = hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest()
        elif body[0] == 6:
            digest = hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest()
        else:
            raise PackageError(f"the CUDA repository key is an OpenPGP v{body[0]} key: only v4/v6 are read")
        found.append(digest.upper())
    if not found:
        raise PackageError("the CUDA repository key file holds no public key")
    return found


def normalize_fingerprint(value, variable: str = "cuda_repo_key_fingerprints") -> str:
    require_str(variable, value, '"EB693B3035CD5710E231E123A4B469963BF863CC"')
    fpr = value.replace(" ", "").upper()
    if not _FINGERPRINT_RE.fullmatch(fpr):
        raise PackageError(
            f"{variable} item {value!r} is not a full OpenPGP fingerprint (40 or 64 hex digits, "
            f"spaces allowed): copy it from `gpg --show-keys <key file>`"
        )
    return fpr


def check_key(armored: str, fingerprints, sha256: str = "") -> dict:
    """Verify a downloaded key: its primary fingerprint is one of ``fingerprints`` and, when
    ``sha256`` is given, the text's SHA-256 equals it. Returns what was found; raises otherwise."""
    wanted = _trusted(fingerprints)
    found = pgp_fingerprints(armored)
    if not set(found) & set(wanted):
        raise PackageError(
            f"the CUDA repository key has fingerprint(s) {', '.join(found)}, none of "
            f"cuda_repo_key_fingerprints ({', '.join(wanted)}): the download is not the key you trust; "
            f"check cuda_repo_base_url, or add the new fingerprint after verifying it with NVIDIA"
        )
    digest = hashlib.sha256(armored.encode()).hexdigest()
    require_str("cuda_repo_key_checksum", sha256, '"sha256:<64 hex digits>"')
    want = sha256.lower().removeprefix("sha256:")
    if want and want != digest:
        raise PackageError(
            f"the CUDA repository key's SHA-256 is {digest}, not cuda_repo_key_checksum={sha256!r}: "
            f"the download changed; verify it, then update cuda_repo_key_checksum (or set it to '')"
        )
    return {"fingerprints": found, "sha256": digest}


def key_trusted(armored, fingerprints, sha256: str = "") -> bool:
    """check_key as a yes/no for a key already on the node (None: no key there). A key that is not
    one of the trusted ones is simply 'no' here: the role then downloads, checks (and stops with
    check_key's message) and replaces it."""
    if not armored:
        return False
    try:
        check_key(armored, fingerprints, sha256)
    except PackageError:
        return False
    return True


def verified_key(armored, plan: dict) -> str:
    """The downloaded key text, once check_key accepts it against the plan's trusted fingerprints
    and checksum (plan); raises check_key's message otherwise, so the copy that writes
    it never starts."""
    check_key(armored, plan["fingerprints"], plan["checksum"])
    return armored


# --- cuda_repo: the role's one plan ---------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """The role's variables the plan reads (roles/cuda_repo/tasks/main.yml passes each by name)."""

    manage_source: bool
    base_url: str
    key_name: str
    fingerprints: list
    checksum: str
    keyring_path: str
    version: str
    toolkit_version: str
    install_toolkit: bool
    toolkit_on_gpu_less: bool


class Toolkit(TypedDict):
    wanted: bool
    spec: str  # apt's spec: the package, or package=version
    home: str
    missing: str  # the message when apt does not offer it


class CudaRepoPlan(TypedDict):
    """``__cuda_repo``: what roles/cuda_repo/tasks read."""

    manage_source: bool
    url: str
    key_url: str
    source_name: str
    source_path: str
    fingerprints: list[str]  # normalised: upper-case hex without spaces
    checksum: str
    key: str  # the installed key's text when it is one of the trusted keys, else ''
    download_key: bool
    lists_fetched: bool  # apt has this repository's Packages index
    write: bool  # whether the key, source and apt update steps run at all
    toolkit: Toolkit
    steps: list[str]  # the task files main.yml includes, in turn: repo (write), toolkit (wanted)
    report: list[str]  # one line for each thing the role leaves alone


def _trusted(fingerprints) -> list[str]:
    """cuda_repo_key_fingerprints, normalised; PackageError for anything but a non-empty list."""
    if not isinstance(fingerprints, list) or not fingerprints:
        raise PackageError(
            "cuda_repo_key_fingerprints must be a non-empty list of the fingerprints you trust for "
            "the CUDA repository key"
        )
    return [normalize_fingerprint(f) for f in fingerprints]


def _toolkit_skipped(s: Settings, node: dict) -> str:
    """Why the toolkit is not installed ('' when it is)."""
    cuda = node.get("cuda") or {}
    if cuda.get("version") == s.version and not s.toolkit_version:
        return f"CUDA {s.version} already at {cuda.get('home')}"
    if not s.install_toolkit:
        return "cuda_repo_install_toolkit is false"
    if not ((node.get("gpu") or {}).get("present") or s.toolkit_on_gpu_less):
        return "no NVIDIA GPU (set cuda_repo_toolkit_on_gpu_less_nodes: true to install it anyway)"
    return ""


def _report(s: Settings, node: dict, why: str) -> list[str]:
    report = []
    if not s.manage_source:
        cuda = node.get("cuda") or {}
        found = (cuda.get("version") or "none") + (f" at {cuda['home']}" if cuda.get("home") else "")
        report.append(f"apt sources left alone (cuda_repo_manage_source: false); CUDA found: {found}")
    return report + ([f"toolkit not installed: {why}"] if why else [])


def plan(state, node, **settings) -> CudaRepoPlan:
    """Everything the cuda_repo role decides, from its one read of the node and its variables
    (``settings``: Settings' fields).

    ``state``: what wireup_file_state read ({files: {keyring_path: ..., source_path: ...},
    globs: {pattern: [paths]}}); ``node``: preflight's wireup_node (cuda_repo_distro, arch.cuda,
    gpu.present, cuda.version/home). ``write``: whether the key, source and apt update steps run at
    all: not when the installed key is one of the trusted ones, the source file is there and apt
    has fetched this URL's index (a rerun runs none of them; the files' content and modes are copy's
    and deb822_repository's to keep whenever the steps run). Bad input raises PackageError naming
    the variable and the fix.
    """
    s, node, state = Settings(**settings), node or {}, state or {}
    distro, arch = node.get("cuda_repo_distro"), (node.get("arch") or {}).get("cuda")
    url = cuda_repo_url(s.base_url, distro, arch)
    spec = cuda_toolkit_spec(s.version, s.toolkit_version)
    fingerprints = _trusted(s.fingerprints)
    require_str("cuda_repo_key_checksum", s.checksum, '"sha256:<64 hex digits>"')
    files, source_path = state.get("files") or {}, cuda_repo_source_path(node)
    installed = (files.get(s.keyring_path) or {}).get("content")
    key = installed if s.manage_source and key_trusted(installed, fingerprints, s.checksum) else ""
    lists_fetched = apt_lists_have_source([p for ps in (state.get("globs") or {}).values() for p in ps], url)
    source_there = bool((files.get(source_path) or {}).get("exists"))
    why = _toolkit_skipped(s, node)
    write = bool(s.manage_source) and not (key and source_there and lists_fetched)
    return {
        "manage_source": bool(s.manage_source),
        "url": url,
        "key_url": cuda_repo_key_url(s.base_url, distro, arch, s.key_name),
        "source_name": cuda_repo_source_name(distro, arch),
        "source_path": source_path,
        "fingerprints": fingerprints,
        "checksum": s.checksum,
        "key": key,
        "download_key": bool(s.manage_source) and not key,
        "lists_fetched": lists_fetched,
        "write": write,
        "toolkit": {
            "wanted": not why,
            "spec": spec,
            "home": cuda_home(s.version),
            "missing": (
                f"{spec} is not available from this node's apt sources ({url}): check that "
                f"cuda_repo_base_url carries it and cuda_repo_version / cuda_repo_toolkit_version are right"
            ),
        },
        # One include loop runs them; a rerun has none (nothing to write, the toolkit in place).
        "steps": (["repo"] if write else []) + ([] if why else ["toolkit"]),
        "report": _report(s, node, why),
    }


def toolkit_problems(the_plan: CudaRepoPlan, apt_result, check_mode: bool) -> list[str]:
    """After the toolkit install (``apt_result``: the apt task's registered result): what is wrong
    ([] when nothing). In --check on a fresh node the source is not fetched yet, so apt cannot know
    the package: not an error there."""
    result = apt_result or {}
    if check_mode or not result.get("failed"):
        return []
    return [f"{the_plan['toolkit']['missing']}; apt said: {str(result.get('msg', '')).strip()}"]
