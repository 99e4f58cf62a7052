"""Hash-checked installs from a wheelhouse: the requirements file pip's --require-hashes mode reads.

    python3 plugins/module_utils/wireup/core/wheelhouse.py WHEELHOUSE > requirements-hashed.txt

Run it once, where the wheelhouse was vetted (`pip download` of torch and the extra packages);
keep the file; give it to the pytorch_venv role as pytorch_venv_requirements_file. Every node then
installs exactly those wheels, each checked against its sha256, and a wheel changed since (on the
file server, in transit) fails the install instead of being installed. Pure stdlib.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys

# name-version(-build)?-python-abi-platform.whl (PEP 427); the name's '_' stand for '-', '.', '_'.
_WHEEL = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


def normalise(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_wheel_name(filename: str):
    """(normalised name, version) of a wheel file name, or None when it is not one."""
    match = _WHEEL.fullmatch(os.path.basename(filename))
    if not match:
        return None
    return normalise(match.group("name")), match.group("version")


def requirements_text(hashes: dict) -> str:
    """The requirements file for {wheel file name: sha256 hex}: one `name==version` line per
    project, with the hash of every wheel of it (several platforms may sit in one wheelhouse).

    Raises ValueError for a file that is not a wheel, or two versions of one project (pip could
    install only one: the wheelhouse is not one consistent set)."""
    projects: dict[str, tuple[str, list[str]]] = {}
    for filename, digest in sorted(hashes.items()):
        parsed = parse_wheel_name(filename)
        if parsed is None:
            raise ValueError(f"{filename} is not a wheel file name (name-version-python-abi-platform.whl)")
        if not re.fullmatch(r"[0-9a-f]{64}", str(digest)):
            raise ValueError(f"{filename}: {digest!r} is not a sha256 hex digest")
        name, version = parsed
        have = projects.setdefault(name, (version, []))
        if have[0] != version:
            raise ValueError(
                f"the wheelhouse holds {name} {have[0]} and {version}: keep one version per project"
            )
        have[1].append(digest)
    if not projects:
        raise ValueError("no wheels found: the wheelhouse is empty")
    lines = []
    for name, (version, digests) in sorted(projects.items()):
        hashes_part = " ".join(f"--hash=sha256:{d}" for d in sorted(set(digests)))
        lines.append(f"{name}=={version} {hashes_part}")
    return "\n".join(lines) + "\n"


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def lock_directory(directory: str) -> str:
    """requirements_text() for every *.whl in `directory`."""
    names = sorted(n for n in os.listdir(directory) if n.endswith(".whl"))
    return requirements_text({n: sha256_of(os.path.join(directory, n)) for n in names})


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        sys.stderr.write(f"usage: python3 {__file__} WHEELHOUSE_DIR > requirements-hashed.txt\n")
        return 2
    try:
        sys.stdout.write(lock_directory(argv[0]))
    except ValueError as err:
        sys.stderr.write(f"wheelhouse {argv[0]}: {err}\n")
        return 1
    return 0


# A command-line entry point in module_utils: it writes and exits without print() and sys.exit(),
# which module code may not call (ansible-test sanity's pylint).
if __name__ == "__main__":
    raise SystemExit(main())
