"""Which NVIDIA packages, versions and repository URLs a node gets: pure functions.

Text and strings in, plain data out; no Ansible imports. The roles nvidia_driver, cuda_repo and
nccl call these through the ``wireup_packages`` filter plugin, and tests/unit/test_packages.py
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

SUPPORTED_DISTROS = ("debian12", "debian13", "ubuntu2204", "ubuntu2404", "ubuntu2604")
# CUDA repository architecture -> Debian architecture.
CUDA_ARCHES = {"x86_64": "amd64", "sbsa": "arm64"}
NCCL_PACKAGES = ("libnccl2", "libnccl-dev")
_CUDA_RE = re.compile(r"^(\d+)\.(\d+)$")
_NCCL_PKG_RE = re.compile(r"^(?P<version>\d+\.\d+\.\d+)-(?P<build>\d+)\+cuda(?P<cuda>\d+\.\d+)$")
_NCCL_RE = re.compile(r"^\d+\.\d+\.\d+$")
_FINGERPRINT_RE = re.compile(r"^[0-9A-F]{40}$|^[0-9A-F]{64}$")


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
    match = _CUDA_RE.match(cuda_version)
    if not match:
        raise PackageError(f'{variable}={cuda_version!r} is malformed: expected MAJOR.MINOR such as "13.0"')
    return int(match.group(1)), int(match.group(2))


def cuda_repo_url(base_url, distro: str, arch: str) -> str:
    """The apt URI of NVIDIA's CUDA repository (or a mirror of it) for a distro and arch."""
    _require_str("cuda_repo_base_url", base_url, '"https://developer.download.nvidia.com/compute/cuda/repos"')
    base = base_url.strip().rstrip("/")
    if not re.match(r"^(https?|file)://\S+$", base):
        raise PackageError(
            f"cuda_repo_base_url={base_url!r} is not an http(s):// or file:// URL: set it to the "
            f"folder that holds <distro>/<arch>/ (NVIDIA's is "
            f"https://developer.download.nvidia.com/compute/cuda/repos)"
        )
    return f"{base}/{check_distro(distro)}/{check_cuda_arch(arch)}/"


def cuda_repo_key_url(base_url, distro: str, arch: str, key_name) -> str:
    """Where the repository's signing key is published (beside the repository)."""
    _require_str("cuda_repo_key_name", key_name, '"3bf863cc.pub"')
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
    if not toolkit_version.startswith(cuda_version + ".") or not re.match(
        r"^\d+\.\d+\.\d+-\d+$", toolkit_version
    ):
        raise PackageError(
            f"cuda_repo_toolkit_version={toolkit_version!r} is not a {name} version: expected "
            f'"{cuda_version}.<patch>-<build>" such as "{cuda_version}.2-1", or "" for the newest'
        )
    return f"{name}={toolkit_version}"


def cuda_home(cuda_version) -> str:
    major, minor = cuda_version_parts(cuda_version)
    return f"/usr/local/cuda-{major}.{minor}"


def apt_policy_has_source(policy_text: str, repo_url: str) -> bool:
    """True when `apt-cache policy` lists the repository's Packages index (it was fetched)."""
    url = repo_url.rstrip("/")
    for line in policy_text.splitlines():
        fields = line.split()
        # " 500 http://host/path/x86_64  Packages" (flat repositories: no suite/component)
        if len(fields) >= 3 and fields[1].rstrip("/") == url and fields[-1] == "Packages":
            return True
    return False


# Characters apt quotes as %xx in list file names (apt-pkg/contrib/strutl.cc URItoFileName), besides
# controls, space and non-ASCII.
_APT_QUOTED = set('\\|{}[]<>"^~_=!@#$%^&*')


def apt_lists_prefix(repo_url: str) -> str:
    """The file-name prefix of a flat repository's indexes in /var/lib/apt/lists, as apt's
    URItoFileName makes it: the URI without scheme and credentials, unsafe characters quoted
    (lower-case %xx: '_' -> '%5f'), '/' -> '_'. 'https://developer.download.nvidia.com/compute/cuda/
    repos/ubuntu2404/x86_64/' -> 'developer.download.nvidia.com_compute_cuda_repos_ubuntu2404_x86%5f64_'
    (then 'Packages', 'InRelease', ...). '' for a URI apt reads in place (file:, or unparsable)."""
    match = re.match(r"^(https?)://(?:[^/@]*@)?([^/]+)(/.*)?$", str(repo_url).strip())
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
    if not _FINGERPRINT_RE.match(fpr):
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


def installed_key_trusted(file_state, fingerprints, sha256: str = "") -> bool:
    """A key file as wireup_file_state read it ({exists, type, mode, owner, group, content}): a
    regular file, root:root 0644 (apt reads it as _apt), whose content key_trusted accepts."""
    state = file_state or {}
    return (
        state.get("type") == "file"
        and (state.get("mode"), state.get("owner"), state.get("group")) == ("0644", "root", "root")
        and key_trusted(state.get("content"), fingerprints, sha256)
    )


def installed_source_current(file_state, name: str, repo_url: str, keyring_path: str) -> bool:
    """A sources file as wireup_file_state read it: a regular 0644 file (deb822_repository's mode)
    whose fields are exactly the role's (cuda_repo_source_current)."""
    state = file_state or {}
    return (
        state.get("type") == "file"
        and state.get("mode") == "0644"
        and cuda_repo_source_current(state.get("content"), name, repo_url, keyring_path)
    )


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


# --- NVIDIA driver: plugins/module_utils/wireup/driver.py -----------------------------------------


# --- NCCL -----------------------------------------------------------------------------------------
def parse_nccl_package_version(value) -> dict:
    """'2.28.9-1+cuda13.0' -> {'version': '2.28.9', 'build': '1', 'cuda': '13.0'}."""
    _require_str("nccl_package_version", value, '"2.28.9-1+cuda13.0"')
    match = _NCCL_PKG_RE.match(value)
    if not match:
        raise PackageError(
            f"nccl_package_version={value!r} is malformed: NVIDIA's repository names libnccl2 "
            f'versions "<X.Y.Z>-<build>+cuda<A.B>", e.g. "2.28.9-1+cuda13.0"'
        )
    return match.groupdict()


def nccl_plan(package_version, nccl_version, cuda_version) -> dict:
    """Validated libnccl2/libnccl-dev specs, consistent with nccl_version and the node's CUDA."""
    parsed = parse_nccl_package_version(package_version)
    _require_str("nccl_version", nccl_version, '"2.28.9"')
    if not _NCCL_RE.match(nccl_version):
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
    return {
        "names": list(NCCL_PACKAGES),
        "specs": [f"{name}={package_version}" for name in NCCL_PACKAGES],
        "version": parsed["version"],
        "package_version": package_version,
        "cuda": parsed["cuda"],
    }


def parse_dpkg_status(text: str) -> dict:
    """`dpkg-query -W -f '${Package} ${db:Status-Abbrev} ${Version}\\n' pkgs...` ->
    {pkg: {'version': ..., 'held': bool}} for installed packages only (status 'ii' or 'hi')."""
    found = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in ("ii", "hi"):
            found[fields[0].split(":", 1)[0]] = {"version": fields[2], "held": fields[1] == "hi"}
    return found


def dpkg_drift(text: str, names, package_version: str) -> dict:
    """How dpkg's view of `names` differs from the pin, from the same `dpkg-query` output as
    parse_dpkg_status: {'install': names not installed at package_version (missing or another
    version), 'missing': names not installed at all, 'hold': names not held}. All three empty:
    the packages are as pinned and held, and apt has nothing to do."""
    if isinstance(names, str) or not names:
        raise PackageError(f"dpkg_drift needs a list of package names, got {names!r}")
    status = parse_dpkg_status(text)
    names = list(names)
    return {
        "install": [n for n in names if status.get(n, {}).get("version") != package_version],
        "missing": [n for n in names if n not in status],
        "hold": [n for n in names if not status.get(n, {}).get("held")],
    }


def parse_torch_nccl_version(text) -> str:
    """What `torch.cuda.nccl.version()` printed -> 'X.Y.Z' ('' for none / CPU builds).

    Newer torch returns a tuple (2, 28, 9), printed here as '2.28.9'; older ones an int code:
    major*1000+minor*100+patch before NCCL 2.9 (2708), major*10000+minor*100+patch after (22809).
    """
    value = str(text).strip().strip("()").replace(",", ".").replace(" ", "")
    if not value or value.lower() == "none":
        return ""
    if re.match(r"^\d+\.\d+\.\d+$", value):
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
