"""Which NVIDIA packages, versions and repository URLs a node gets: pure functions.

Text and strings in, plain data out; no Ansible imports. The roles nvidia_driver, cuda_repo and
nccl call these through the ``wireup_packages`` filter plugin, and tests/unit/test_cuda_repo.py
pins every choice. Bad input raises ``PackageError`` whose message names the variable and the fix.

Naming facts encoded here (checked against NVIDIA's and Ubuntu's repositories):
- NVIDIA's CUDA repository lives at ``<base>/<distro>/<arch>/`` (a flat apt repository, suite
  ``/``), with ``<distro>`` one of debian12/debian13/ubuntu2204/ubuntu2404/ubuntu2604 and
  ``<arch>`` x86_64 or sbsa (arm64 servers). Its signing key is published beside it
  (``3bf863cc.pub`` since 2022).
- Driver and Fabric Manager package names per branch era: wireup.driver.
- NCCL packages: ``libnccl2`` and ``libnccl-dev`` at ``<nccl>-<build>+cuda<major>.<minor>``.
"""

from __future__ import annotations

import base64
import hashlib
import re

from .nccltests import gencode, nccl_header_version, supports_json

SUPPORTED_DISTROS = ("debian12", "debian13", "ubuntu2204", "ubuntu2404", "ubuntu2604")
# CUDA repository architecture -> Debian architecture.
CUDA_ARCHES = {"x86_64": "amd64", "sbsa": "arm64"}
NCCL_PACKAGES = ("libnccl2", "libnccl-dev")
_CUDA_RE = re.compile(r"(\d+)\.(\d+)")
_NCCL_PKG_RE = re.compile(r"(?P<version>\d+\.\d+\.\d+)-(?P<build>\d+)\+cuda(?P<cuda>\d+\.\d+)")
_NCCL_RE = re.compile(r"\d+\.\d+\.\d+")
_FINGERPRINT_RE = re.compile(r"[0-9A-F]{40}|[0-9A-F]{64}")


class PackageError(ValueError):
    """Bad input: the message names the variable and the fix."""


def _require_str(name: str, value, example: str) -> str:
    if not isinstance(value, str):
        raise PackageError(
            f"{name}={value!r} is a {type(value).__name__}, not a string: quote it in YAML, "
            f"e.g. {name}: {example}"
        )
    return value


# --- Distribution and architecture ----------------------------------------------------------------
def check_distro(distro: str) -> str:
    """A CUDA-repository distro name (wireup_node.cuda_repo_distro) wireup supports."""
    if distro not in SUPPORTED_DISTROS:
        raise PackageError(
            f"wireup_node.cuda_repo_distro={distro!r} is not supported: wireup installs NVIDIA "
            f"packages on {', '.join(SUPPORTED_DISTROS)} only (run preflight on a supported OS)"
        )
    return distro


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
    _require_str(variable, cuda_version, '"13.0"')
    match = _CUDA_RE.fullmatch(cuda_version)
    if not match:
        raise PackageError(f'{variable}={cuda_version!r} is malformed: expected MAJOR.MINOR such as "13.0"')
    return int(match.group(1)), int(match.group(2))


def cuda_repo_url(base_url, distro: str, arch: str) -> str:
    """The apt URI of NVIDIA's CUDA repository (or a mirror of it) for a distro and arch."""
    _require_str("cuda_repo_base_url", base_url, '"https://developer.download.nvidia.com/compute/cuda/repos"')
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
    _require_str("cuda_repo_key_name", key_name, '"3bf863cc.pub"')
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
    _require_str("cuda_repo_toolkit_version", toolkit_version, '"13.0.2-1"')
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


def deb822_fields(text) -> dict:
    """The fields of a one-stanza deb822 file ({'Types': 'deb', ...}); continuation lines are
    joined with newlines; comments (#) are skipped. {} for no text."""
    fields, key = {}, None
    for line in (text or "").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] in " \t" and key:
            fields[key] += "\n" + line.strip()
            continue
        key, sep, value = line.partition(":")
        if not sep:
            return {"<unparsable>": line}
        key = key.strip()
        fields[key] = value.strip()
    return fields


def cuda_repo_source_current(text, name: str, repo_url: str, keyring_path: str) -> bool:
    """True when a sources file already says exactly what the cuda_repo role's deb822 source says
    (the fields ansible.builtin.deb822_repository writes for it, nothing more or less)."""
    return deb822_fields(text) == {
        "X-Repolib-Name": name,
        "Signed-By": keyring_path,
        "Suites": "/",
        "Types": "deb",
        "URIs": repo_url,
    }


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
    _require_str(variable, value, '"EB693B3035CD5710E231E123A4B469963BF863CC"')
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
    if not isinstance(fingerprints, list) or not fingerprints:
        raise PackageError(
            "cuda_repo_key_fingerprints must be a non-empty list of the fingerprints you trust for "
            "the CUDA repository key"
        )
    wanted = [normalize_fingerprint(f) for f in fingerprints]
    found = pgp_fingerprints(armored)
    if not set(found) & set(wanted):
        raise PackageError(
            f"the CUDA repository key has fingerprint(s) {', '.join(found)}, none of "
            f"cuda_repo_key_fingerprints ({', '.join(wanted)}): the download is not the key you trust; "
            f"check cuda_repo_base_url, or add the new fingerprint after verifying it with NVIDIA"
        )
    digest = hashlib.sha256(armored.encode()).hexdigest()
    _require_str("cuda_repo_key_checksum", sha256, '"sha256:<64 hex digits>"')
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
    and checksum (cuda_repo_plan); raises check_key's message otherwise, so the copy that writes
    it never starts."""
    check_key(armored, plan["fingerprints"], plan["checksum"])
    return armored


# --- cuda_repo: the role's one plan ---------------------------------------------------------------
def cuda_repo_plan(
    state,
    node,
    *,
    manage_source,
    base_url,
    key_name,
    fingerprints,
    checksum,
    keyring_path,
    version,
    toolkit_version,
    install_toolkit,
    toolkit_on_gpu_less,
) -> dict:
    """Everything the cuda_repo role decides, from its one read of the node and its variables.

    ``state``: what wireup_file_state read ({files: {keyring_path: ..., source_path: ...},
    globs: {pattern: [paths]}}); ``node``: preflight's wireup_node (cuda_repo_distro, arch.cuda,
    gpu.present, cuda.version/home). Returns the repository's URL, key URL, source name and path;
    ``key``: the installed key's text when it is one of the trusted keys (else '' and
    ``download_key``); ``lists_fetched``: whether apt has this repository's index; ``write``:
    whether the key, the source or apt's index need the builtins at all (a trusted key root:root
    0644, the source exactly as deb822_repository writes it and the index fetched: a rerun runs
    none of them); ``toolkit``: {wanted, spec, home, missing}; ``report``: the lines the role
    prints, one for each thing it leaves alone (none otherwise). Bad input raises PackageError naming
    the variable and the fix.
    """
    node = node or {}
    distro, arch = node.get("cuda_repo_distro"), (node.get("arch") or {}).get("cuda")
    url = cuda_repo_url(base_url, distro, arch)
    name, source_path = cuda_repo_source_name(distro, arch), cuda_repo_source_path(node)
    spec = cuda_toolkit_spec(version, toolkit_version)
    if not isinstance(fingerprints, list) or not fingerprints:
        raise PackageError(
            "cuda_repo_key_fingerprints must be a non-empty list of the fingerprints you trust for "
            "the CUDA repository key"
        )
    fingerprints = [normalize_fingerprint(f) for f in fingerprints]
    _require_str("cuda_repo_key_checksum", checksum, '"sha256:<64 hex digits>"')
    files = (state or {}).get("files") or {}
    key_file, source_file = files.get(keyring_path) or {}, files.get(source_path) or {}
    installed = key_file.get("content")
    key = installed if manage_source and key_trusted(installed, fingerprints, checksum) else ""
    lists = [path for paths in ((state or {}).get("globs") or {}).values() for path in paths]
    lists_fetched = apt_lists_have_source(lists, url)
    key_in_place = bool(key) and _root_0644(key_file)
    source_in_place = _root_0644(source_file, owner=False) and cuda_repo_source_current(
        source_file.get("content"), name, url, keyring_path
    )
    cuda = node.get("cuda") or {}
    has_release = cuda.get("version") == version
    gpu = bool((node.get("gpu") or {}).get("present"))
    if has_release and not toolkit_version:
        why = f"CUDA {version} already at {cuda.get('home')}"
    elif not install_toolkit:
        why = "cuda_repo_install_toolkit is false"
    elif not (gpu or toolkit_on_gpu_less):
        why = "no NVIDIA GPU (set cuda_repo_toolkit_on_gpu_less_nodes: true to install it anyway)"
    else:
        why = ""
    report = []
    if not manage_source:
        found = cuda.get("version") or "none"
        at = f" at {cuda['home']}" if cuda.get("home") else ""
        report.append(f"apt sources left alone (cuda_repo_manage_source: false); CUDA found: {found}{at}")
    if why:
        report.append(f"toolkit not installed: {why}")
    return {
        "manage_source": bool(manage_source),
        "url": url,
        "key_url": cuda_repo_key_url(base_url, distro, arch, key_name),
        "source_name": name,
        "source_path": source_path,
        "fingerprints": fingerprints,
        "checksum": checksum,
        "key": key,
        "download_key": bool(manage_source) and not key,
        "lists_fetched": lists_fetched,
        "write": bool(manage_source) and not (key_in_place and source_in_place and lists_fetched),
        "toolkit": {
            "wanted": not why,
            "spec": spec,
            "home": cuda_home(version),
            "missing": (
                f"{spec} is not available from this node's apt sources ({url}): check that "
                f"cuda_repo_base_url carries it and cuda_repo_version / cuda_repo_toolkit_version are right"
            ),
        },
        "report": report,
    }


def _root_0644(file_state, owner: bool = True) -> bool:
    """A regular file, mode 0644 (and root:root), as wireup_file_state read it."""
    state = file_state or {}
    wanted = ("file", "0644", "root", "root") if owner else ("file", "0644")
    got = (state.get("type"), state.get("mode"), state.get("owner"), state.get("group"))
    return got[: len(wanted)] == wanted


def cuda_toolkit_problems(plan: dict, apt_result, check_mode: bool) -> list[str]:
    """After the toolkit install (``apt_result``: the apt task's registered result): what is wrong
    ([] when nothing). In --check on a fresh node the source is not fetched yet, so apt cannot know
    the package: not an error there."""
    result = apt_result or {}
    if check_mode or not result.get("failed"):
        return []
    return [f"{plan['toolkit']['missing']}; apt said: {str(result.get('msg', '')).strip()}"]


# --- NVIDIA driver: plugins/module_utils/wireup/driver.py -----------------------------------------


# --- NCCL -----------------------------------------------------------------------------------------
def parse_nccl_package_version(value) -> dict:
    """'2.28.9-1+cuda13.0' -> {'version': '2.28.9', 'build': '1', 'cuda': '13.0'}."""
    _require_str("nccl_package_version", value, '"2.28.9-1+cuda13.0"')
    match = _NCCL_PKG_RE.fullmatch(value)
    if not match:
        raise PackageError(
            f"nccl_package_version={value!r} is malformed: NVIDIA's repository names libnccl2 "
            f'versions "<X.Y.Z>-<build>+cuda<A.B>", e.g. "2.28.9-1+cuda13.0"'
        )
    return match.groupdict()


NCCL_PIN_PATH = "/etc/apt/preferences.d/wireup-nccl.pref"


def nccl_pin(names, package_version: str) -> str:
    """The apt preferences file that keeps the NCCL packages at exactly package_version (priority
    1001: never a newer one from the repository), byte for byte what the role's template wrote
    before issue 14, so upgrading wireup rewrites nothing."""
    return (
        "#\n# Ansible managed\n#\n"
        "# NCCL stays at exactly the pinned version, even when the repository offers a newer one.\n"
        f"Package: {' '.join(names)}\nPin: version {package_version}\nPin-Priority: 1001\n"
    )


def nccl_plan(
    package_version,
    nccl_version,
    cuda_version,
    *,
    dpkg=None,
    files=None,
    header_path="",
    manage=True,
    node_nccl=None,
) -> dict:
    """Everything the nccl role decides: validated libnccl2/libnccl-dev specs, consistent with
    nccl_version and the node's CUDA; from the role's one read of the node (``dpkg``: the output
    of `dpkg-query -W -f '${Package} ${db:Status-Abbrev} ${Version}\\n'` for the packages, which
    tells versions and holds, what package_facts cannot; ``files``: wireup_file_state's files,
    the pin file and ``header_path``), which packages apt must install, which dpkg must hold, the
    pin file's text and ``apply``: whether the pin, install and hold steps have anything to do
    (a rerun runs none of them). Packages at the pin while nccl.h says another version raise
    PackageError: another package or a hand install replaced the header builds compile against.
    ``manage`` false (nccl_install_system: false): nothing to apply; ``report`` says what the node has
    instead (preflight's ``node_nccl``), one line the role prints ([] when it manages NCCL)."""
    parsed = parse_nccl_package_version(package_version)
    _require_str("nccl_version", nccl_version, '"2.28.9"')
    if not _NCCL_RE.fullmatch(nccl_version):
        raise PackageError(f'nccl_version={nccl_version!r} is malformed: expected X.Y.Z such as "2.28.9"')
    if parsed["version"] != nccl_version:
        raise PackageError(
            f"nccl_package_version={package_version!r} is NCCL {parsed['version']} but "
            f"nccl_version={nccl_version!r}: set both to the same NCCL release"
        )
    cuda_version_parts(cuda_version, "nccl_cuda_version")
    if parsed["cuda"] != cuda_version:
        raise PackageError(
            f"nccl_package_version={package_version!r} is built for CUDA {parsed['cuda']} but the node "
            f"gets CUDA {cuda_version} (nccl_cuda_version, from cuda_repo_version): use the "
            f"'+cuda{cuda_version}' build, e.g. \"{nccl_version}-{parsed['build']}+cuda{cuda_version}\""
        )
    names = list(NCCL_PACKAGES)
    status = parse_dpkg_status(dpkg or "")
    install = [n for n in names if status.get(n, {}).get("version") != package_version]
    hold = [n for n in names if not status.get(n, {}).get("held")]
    files = files or {}
    pin = nccl_pin(names, package_version)
    pin_file = files.get(NCCL_PIN_PATH) or {}
    pin_current = _root_0644(pin_file) and pin_file.get("content") == pin
    if files and not install:
        found = nccl_header_version((files.get(header_path) or {}).get("content") or "")
        if found != parsed["version"]:
            raise PackageError(
                f"libnccl2 and libnccl-dev are {package_version} but nccl.h (nccl_header_path) says "
                f"{found or 'nothing (missing, or no NCCL_MAJOR/MINOR/PATCH)'}: another package or a hand "
                f"install replaced it; run `apt-get install --reinstall libnccl-dev` on the node, or fix "
                f"nccl_header_path"
            )
    return {
        "names": names,
        "specs": [f"{name}={package_version}" for name in names],
        "version": parsed["version"],
        "package_version": package_version,
        "cuda": parsed["cuda"],
        "install": install,
        "hold": hold,
        # dpkg_selections fails on a package dpkg has never seen: in --check on a fresh node (where
        # apt installed nothing) only these are held.
        "known": [n for n in names if n in status],
        "pin_path": NCCL_PIN_PATH,
        "pin": pin,
        "apply": bool(manage) and bool(install or hold or not pin_current),
        "report": [] if manage else [nccl_unmanaged_report(node_nccl)],
    }


def nccl_install_problems(plan: dict, apt_result, header, check_mode: bool) -> list[str]:
    """After apt installed the pin: what is wrong ([] when nothing). In --check on a fresh node the
    CUDA source is not fetched yet, so apt cannot know the packages and nothing is checked."""
    if check_mode:
        return []
    apt_result = apt_result or {}
    if apt_result.get("failed"):
        return [
            f"{' and '.join(plan['specs'])} are not available from this node's apt sources: run the "
            f"cuda_repo role first (tags cuda_repo,nccl), check that cuda_repo_base_url carries that "
            f"version, or fix nccl_package_version. apt said: {str(apt_result.get('msg', '')).strip()}"
        ]
    found = nccl_header_version(header or "")
    if found != plan["version"]:
        return [
            f"apt installed libnccl-dev {plan['package_version']} but nccl.h (nccl_header_path) says "
            f"{found or 'nothing'}: point nccl_header_path at the header libnccl-dev installs"
        ]
    return []


def nccl_unmanaged_report(node_nccl) -> str:
    """The nccl role's line when nccl_install_system is false: what the node has instead."""
    nccl = node_nccl or {}
    found = (
        f"{nccl['version']} ({nccl.get('source')})"
        if nccl.get("version")
        else ("none (jobs use the NCCL bundled with torch)")
    )
    return f"system NCCL not installed (nccl_install_system: false); found on the node: {found}"


def nccl_torch_comparison(system_version, host: str, venv_path: str, venv_info=None, probe=None) -> str:
    """The nccl role's comparison of torch's bundled NCCL with the system NCCL, as one line ('' when
    there is nothing to compare: no venv yet). ``venv_info``: pytorch_venv_info (from a torch that
    imported), else ``probe``: the registered result of files/torch_nccl.py run by the venv's
    python (skipped when the venv does not exist)."""
    if venv_info:
        torch_ok, torch = True, str(venv_info.get("nccl_version") or "")
    elif probe and not probe.get("skipped") and "rc" in probe:
        torch_ok = probe.get("rc") == 0
        torch = parse_torch_nccl_version(probe.get("stdout", "")) if torch_ok else ""
    else:
        return ""
    differ = nccl_mismatch(system_version or "", torch)
    shown = torch or ("none (CPU build)" if torch_ok else "unknown: torch does not import")
    line = (
        f"nccl on {host}: torch in {venv_path} bundles NCCL {shown}; system NCCL {system_version or 'none'}"
    )
    if differ:
        line = (
            f"WARNING: {line}; they differ in major.minor, so jobs (torch NCCL) and nccl-tests (system "
            f"NCCL) are not comparable: align nccl_package_version with torch, or the torch pin with NCCL"
        )
    return line


def parse_dpkg_status(text: str) -> dict:
    """`dpkg-query -W -f '${Package} ${db:Status-Abbrev} ${Version}\\n' pkgs...` ->
    {pkg: {'version': ..., 'held': bool}} for installed packages only (status 'ii' or 'hi')."""
    found = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in ("ii", "hi"):
            found[fields[0].split(":", 1)[0]] = {"version": fields[2], "held": fields[1] == "hi"}
    return found


def parse_torch_nccl_version(text) -> str:
    """What `torch.cuda.nccl.version()` printed -> 'X.Y.Z' ('' for none / CPU builds).

    Newer torch returns a tuple (2, 28, 9), printed here as '2.28.9'; older ones an int code:
    major*1000+minor*100+patch before NCCL 2.9 (2708), major*10000+minor*100+patch after (22809).
    """
    value = str(text).strip().strip("()").replace(",", ".").replace(" ", "")
    if not value or value.lower() == "none":
        return ""
    if re.fullmatch(r"\d+\.\d+\.\d+", value):
        return value
    if value.isdigit():
        code = int(value)
        if code >= 20900:
            return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
        return f"{code // 1000}.{code // 100 % 10}.{code % 100}"
    raise PackageError(f"torch.cuda.nccl.version() printed {text!r}: not an NCCL version")


def major_minor(version: str) -> str:
    parts = version.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else ""


def nccl_mismatch(system_version: str, torch_version: str) -> bool:
    """True when both are known and differ in major.minor (patch differences are harmless)."""
    if not system_version or not torch_version:
        return False
    return major_minor(system_version) != major_minor(torch_version)


# --- nccl_tests: the role's one plan --------------------------------------------------------------
# What wireup_nccl_info reports when it cannot find the NCCL to build against -> the fix.
_NCCL_FIND_PROBLEMS = {
    "venv_python": "nccl_tests_venv_python {path!r} is not an executable Python: run site.yml (pytorch_venv) "
    "first, or point nccl_tests_venv_python at the venv whose NCCL to use",
    "venv_probe": "{path} could not look for the NCCL wheel ({detail}): check nccl_tests_venv_python",
    "wheel": "no NCCL wheel importable by {path} (nvidia.nccl): pip install nvidia-nccl-cu13 into that venv, "
    "or set nccl_tests_nccl_source=system",
    "home_header": "{path}/nccl.h is missing: nccl_tests_nccl_home must hold include/nccl.h",
    "home_lib": "no libnccl.so* in {path}: nccl_tests_nccl_home must hold lib/libnccl.so.2",
    "system": "no system NCCL (nccl.h and libnccl.so) found: run site.yml (the nccl role installs "
    "libnccl-dev), or set nccl_tests_nccl_source=venv or nccl_tests_nccl_home",
}
BUILD_STAMP = "wireup-build.stamp"


def nccl_tests_plan(
    info,
    node,
    *,
    host,
    version,
    commit,
    git_url,
    source,
    source_kind,
    strip_components,
    nccl_source,
    mpi,
    mpi_home,
    make_jobs,
    base_dir,
) -> dict:
    """Everything the nccl_tests role decides, from wireup_nccl_info's one read of the node
    (``info``: cuda_home, nvcc, nccl, build {stamp, binary}, nproc) and its variables.

    ``source_kind``: what nccl_tests_source is on the controller: git (empty), dir, archive or
    missing. Returns ``build`` (whether to rebuild: the stamp of what the build depends on differs
    from the last build's, or the binary is missing), the directories and links to create (the
    source's, and a venv wheel's private NCCL_HOME), the make argv and the nccl_tests_build fact;
    raises PackageError naming the variable and the fix for anything that would stop the build.
    """
    info, node = info or {}, node or {}
    cuda_home_dir = info.get("cuda_home", "")
    if not info.get("nvcc"):
        raise PackageError(
            f"{cuda_home_dir}/bin/nvcc not found on {host}: run site.yml (cuda_repo installs the toolkit) "
            f"or set nccl_tests_cuda_home to the CUDA toolkit directory"
        )
    nccl = info.get("nccl") or {}
    problem = nccl.get("problem")
    if problem:
        raise PackageError(_NCCL_FIND_PROBLEMS[problem["kind"]].format(**problem))
    if source_kind == "missing":
        raise PackageError(
            f"nccl_tests_source={source} does not exist on the controller: give a directory or an archive "
            f"(git archive --format=tar.gz --prefix=nccl-tests/ {version}) of nccl-tests {version}, or leave "
            f"it empty to clone nccl_tests_git_url"
        )
    if source_kind not in ("git", "dir", "archive"):
        raise PackageError(f"source_kind={source_kind!r}: expected git, dir, archive or missing")
    if nccl_source not in ("system", "venv"):
        raise PackageError(f"nccl_tests_nccl_source={nccl_source!r} is not system or venv")
    arch = gencode((node.get("gpu") or {}).get("compute_capabilities"))
    jobs = int(make_jobs) if int(make_jobs) > 0 else int(info.get("nproc") or 1)
    root = str(base_dir).rstrip("/")
    src, build = f"{root}/src-{version}", f"{root}/build"
    paths = [{"path": src, "state": "directory"}]
    nccl_home = nccl.get("home", "")
    if nccl_source == "venv":
        # The NCCL wheel ships libnccl.so.2 but no libnccl.so to link against (-lnccl): build
        # against a private NCCL_HOME of links to the wheel's files instead of writing into the venv.
        nccl_home = f"{root}/nccl-home"
        paths += [
            {"path": f"{nccl_home}/lib", "state": "directory"},
            {"path": f"{nccl_home}/include", "src": nccl["include_dir"], "state": "link"},
            {
                "path": f"{nccl_home}/lib/libnccl.so.2",
                "src": f"{nccl['lib_dir']}/libnccl.so.2",
                "state": "link",
            },
            {
                "path": f"{nccl_home}/lib/libnccl.so",
                "src": f"{nccl['lib_dir']}/libnccl.so.2",
                "state": "link",
            },
        ]
    # What the build depends on: a different stamp means a rebuild.
    stamp = (
        f"tag={version}\narch={arch['arch']}\n"
        f"nccl={nccl_source} {nccl.get('version', '')} {nccl.get('lib_dir', '')}\nmpi={bool(mpi)}\n"
    )
    build_state = info.get("build") or {}
    argv = [
        "make",
        f"-j{jobs}",
        f"MPI={1 if mpi else 0}",
        f"NVCC_GENCODE={arch['flags']}",
        f"CUDA_HOME={cuda_home_dir}",
        f"BUILDDIR={build}",
    ]
    argv += [f"NCCL_HOME={nccl_home}"] if nccl_home else []
    argv += [f"MPI_HOME={mpi_home}"] if mpi else []
    strip = [f"--strip-components={int(strip_components)}"] if not str(source).endswith(".zip") else []
    return {
        "build": build_state.get("stamp") != stamp or not build_state.get("binary"),
        "source_kind": source_kind,
        "source": str(source).rstrip("/"),
        "git_url": git_url,
        "commit": commit,
        "unarchive_opts": strip,
        "src": src,
        "build_dir": build,
        "stamp_path": f"{build}/{BUILD_STAMP}",
        "stamp": stamp,
        "paths": paths,
        "make_argv": argv,
        "fact": {
            "bin_dir": build,
            "version": version,
            "json": supports_json(version),
            "arch": arch["arch"],
            "mpi": bool(mpi),
            "nccl_source": nccl_source,
            "nccl_version": nccl.get("version", ""),
            # The venv wheel's libnccl.so.2 is not on the loader's path: runs need it in LD_LIBRARY_PATH.
            "ld_library_path": nccl.get("lib_dir", "") if nccl_source == "venv" else "",
        },
    }


def nccl_tests_source_problems(plan: dict, git_result, makefile_exists: bool, check_mode: bool) -> list[str]:
    """After the source was fetched: a moved tag (git) or a tree without src/Makefile ([] when fine).
    In --check nothing was fetched, so nothing is checked."""
    if check_mode:
        return []
    problems = []
    after = (git_result or {}).get("after")
    if plan["source_kind"] == "git" and after != plan["commit"]:
        problems.append(
            f"{plan['git_url']} tag {plan['fact']['version']} is commit {after}, not the pinned "
            f"nccl_tests_commit {plan['commit']}: the tag was moved or the mirror differs. Check the "
            f"repository; if the new commit is wanted, set nccl_tests_commit to it (group_vars/all.yml), "
            f"and remove {plan['src']} on the node."
        )
    if not makefile_exists:
        problems.append(
            f"{plan['src']}/src/Makefile is missing: nccl_tests_source is not an nccl-tests tree, or "
            f"nccl_tests_source_strip_components does not match the archive."
        )
    return problems
