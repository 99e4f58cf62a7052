"""What apt and dpkg read and take, shared by the roles that install Debian packages (cuda_repo,
nvidia_driver, nccl, pytorch_venv) and by preflight's node facts.

Stdlib only: preflight's module (wireup_node_facts) imports it on the nodes, whose Python may lack
``packaging``. Bad input raises ``PackageError``, whose message names the variable and the fix.

- dpkg's one read: ``dpkg_query_argv`` (the argv) and ``parse_dpkg_status`` (its lines), the only
  copy of the format; every role reads dpkg through them (package_facts is not used: its apt
  manager needs python3-apt in Ansible's interpreter and reads apt's whole cache).
- Debian versions: ``upstream_version`` ('1:580.95.05-0ubuntu1' -> '580.95.05'), and the one
  grammar of NVIDIA's NCCL package versions (``split_nccl_package_version``).
- The distributions NVIDIA's CUDA repository serves (``check_distro``).
"""

from __future__ import annotations

import re

SUPPORTED_DISTROS = ("debian12", "debian13", "ubuntu2204", "ubuntu2404", "ubuntu2604")
# dpkg-query's output format for parse_dpkg_status: name, status abbreviation, version.
DPKG_FORMAT = "-f=${Package} ${db:Status-Abbrev} ${Version}\n"
# NVIDIA's libnccl2/libnccl-dev versions: "<X.Y.Z>-<build>+cuda<A.B>" (checks.PIN_FORMATS uses it).
NCCL_PACKAGE_VERSION = r"(?P<version>\d+\.\d+\.\d+)-(?P<build>\d+)\+cuda(?P<cuda>\d+\.\d+)"
_NCCL_PACKAGE_VERSION = re.compile(NCCL_PACKAGE_VERSION)
_NCCL_RELEASE = re.compile(r"(?:\d+:)?(\d+\.\d+\.\d+)-.*")
# The system NCCL's packages (the nccl role installs them; preflight reads them).
NCCL_PACKAGES = ("libnccl2", "libnccl-dev")


class PackageError(ValueError):
    """Bad input: the message names the variable and the fix."""


def require_str(name: str, value, example: str) -> str:
    """``value`` when it is a string, else PackageError saying to quote it (YAML makes 580 a number)."""
    if not isinstance(value, str):
        raise PackageError(
            f"{name}={value!r} is a {type(value).__name__}, not a string: quote it in YAML, "
            f"e.g. {name}: {example}"
        )
    return value


def check_distro(distro: str) -> str:
    """A CUDA-repository distro name (wireup_node.cuda_repo_distro) wireup supports."""
    if distro not in SUPPORTED_DISTROS:
        raise PackageError(
            f"wireup_node.cuda_repo_distro={distro!r} is not supported: wireup installs NVIDIA "
            f"packages on {', '.join(SUPPORTED_DISTROS)} only (run preflight on a supported OS)"
        )
    return distro


def dpkg_query_argv(*patterns) -> list[str]:
    """dpkg-query's argv reading the packages ``patterns`` name, in the format parse_dpkg_status
    reads (rc 1 only says a pattern matched nothing)."""
    return ["dpkg-query", "-W", DPKG_FORMAT, *patterns]


def parse_dpkg_status(text: str) -> dict:
    """dpkg_query_argv's output -> {pkg: {'version': ..., 'held': bool}} for installed packages
    only (status 'ii' or 'hi'); an architecture suffix (':amd64') is dropped."""
    found = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in ("ii", "hi"):
            found[fields[0].split(":", 1)[0]] = {"version": fields[2], "held": fields[1] == "hi"}
    return found


def upstream_version(deb_version) -> str:
    """Debian version -> upstream part: '1:580.95.05-0ubuntu1' -> '580.95.05'."""
    version = str(deb_version or "").split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


def nccl_release(package_version) -> str:
    """The NCCL release of an installed libnccl2's version: '2.28.9-1+cuda13.0' -> '2.28.9' (a
    distribution's own '2.18.3-1' too); '' for anything else."""
    match = _NCCL_RELEASE.fullmatch(package_version) if isinstance(package_version, str) else None
    return match.group(1) if match else ""


def split_nccl_package_version(value) -> dict | None:
    """'2.28.9-1+cuda13.0' -> {'version': '2.28.9', 'build': '1', 'cuda': '13.0'}; None when
    ``value`` is not such a version (the callers say what that means for them)."""
    match = _NCCL_PACKAGE_VERSION.fullmatch(value) if isinstance(value, str) else None
    return match.groupdict() if match else None


def nccl_pin_errors(package_version, nccl_version, cuda_version, cuda_var="cuda_repo_version") -> list[str]:
    """The one rule of the NCCL pins' agreement (preflight's preflight.validate_pins, the nccl role's
    plan): nccl_package_version is the release nccl_version names, built for the CUDA the nodes get
    (``cuda_version``, from the variable ``cuda_var``). Formats are checked before this."""
    parsed = split_nccl_package_version(package_version)
    if parsed is None:
        return []
    errors = []
    if nccl_version and parsed["version"] != nccl_version:
        errors.append(
            f"nccl_package_version={package_version!r} does not match nccl_version={nccl_version!r}: "
            f"set both to the same NCCL release"
        )
    if cuda_version and parsed["cuda"] != cuda_version:
        errors.append(
            f"nccl_package_version={package_version!r} is built for another CUDA than "
            f"{cuda_var}={cuda_version!r}: use the '+cuda{cuda_version}' build of libnccl2"
        )
    return errors
