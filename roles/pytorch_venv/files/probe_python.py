"""Report, as JSON, what the pytorch_venv role needs to know about a node, in one run.

Run by ansible.builtin.script with the base interpreter. Prints one JSON object (last line): the
interpreter's version, whether it is itself a virtualenv, its site-packages directories, whether it
can create a venv with pip (Debian/Ubuntu split `ensurepip` into python3-venv), and, with the
argument `torch`, the torch it would import (version, CUDA build, path: from torch/version.py,
without importing it; by importing it only where that file says nothing), or why it cannot.

With the environment variable WIREUP_PROBE (a JSON object) it also reports the state the role
would otherwise ask for in a dozen separate tasks, so that a rerun on a converged node
starts none of them (issue 6, docs/performance.md):

- `user`: who runs the tasks; `owner_exists`: whether WIREUP_PROBE's `owner` is a user;
- `os_packages`: {package: installed?} from dpkg for WIREUP_PROBE's `packages` (null without dpkg);
- `venv`: for WIREUP_PROBE's `venv` folder: `dir` (owner, group, mode; null when absent),
  `python` (bin/python runs), `torchrun` (bin/torchrun's content), `system_site_packages`
  (pyvenv.cfg's include-system-site-packages, lower case; null when absent), `pth` (content of
  WIREUP_PROBE's `pth` file under site-packages; null when absent) and `installed` ({normalised
  name: version} read from the dist-info folders in the venv's own site-packages, without starting
  the venv's Python);
- `fact`: the content of WIREUP_PROBE's `fact` file (null when absent);
- `pip`: pip processes already installing into the venv when the probe started (an interrupted
  earlier run leaves them running on the node): `found` ([{pid, cmdline}]), `waited_s` (how long
  the probe waited for them, at most WIREUP_PROBE's `pip_wait` seconds, before reading the venv)
  and `running` (those still running then). Two pips in one venv corrupt it: the role waits
  rather than start a second one.

Reading only: the probe never writes anything.
"""

import grp
import importlib.util
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import time
import warnings


def main():
    # ansible.builtin.script mixes stderr into stdout: keep torch's warnings out of the JSON line,
    # which is printed last.
    warnings.simplefilter("ignore")
    paths = sysconfig.get_paths()
    site_dirs = []
    for key in ("purelib", "platlib"):
        if paths.get(key) and paths[key] not in site_dirs:
            site_dirs.append(paths[key])
    out = {
        "executable": sys.executable,
        "python_version": ".".join(str(n) for n in sys.version_info[:3]),
        "python_series": ".".join(str(n) for n in sys.version_info[:2]),
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "is_venv": sys.prefix != sys.base_prefix,
        "site_dirs": site_dirs,
        "has_venv": importlib.util.find_spec("venv") is not None,
        # Without ensurepip (Debian/Ubuntu without python3-venv, or a uv-made base venv) a venv can
        # still be made --without-pip; it then has no pip of its own.
        "has_ensurepip": importlib.util.find_spec("ensurepip") is not None,
        "torch": None,
    }
    if "torch" in sys.argv[1:]:
        out["torch"] = probe_torch()
    request = json.loads(os.environ.get("WIREUP_PROBE") or "{}")
    if request:
        out.update(probe_node(request))
    print(json.dumps(out, sort_keys=True))


def probe_torch():
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None:
        return {}
    # torch/version.py (written by torch's build) names the release and the CUDA build: reading it
    # costs nothing, where `import torch` of a CUDA build costs seconds of CPU on every run. The
    # role's verification imports the venv's torch anyway, and reports an import that fails.
    found = torch_from_version_file(spec.origin)
    if found:
        return found
    try:
        import torch
    except Exception as exc:  # a broken install must be reported, not crash the probe
        return {"version": "", "cuda": "", "path": "", "error": f"{type(exc).__name__}: {exc}"}
    return {
        "version": str(torch.__version__),
        "cuda": torch.version.cuda or "",
        "path": torch.__file__,
        "error": "",
    }


def torch_from_version_file(origin):
    text = _read(os.path.join(os.path.dirname(origin), "version.py")) if origin else None
    if not text:
        return None
    version = re.search(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*(?:None|['\"]([^'\"]*)['\"])\s*$", text, re.M)
    if not version or not cuda:
        return None
    return {"version": version.group(1), "cuda": cuda.group(1) or "", "path": origin, "error": ""}


def probe_node(request):
    out = {"user": _name(pwd.getpwuid, os.geteuid()), "owner_exists": None}
    if request.get("owner"):
        try:
            pwd.getpwnam(request["owner"])
            out["owner_exists"] = True
        except KeyError:
            out["owner_exists"] = False
    out["os_packages"] = dpkg_installed(request.get("packages") or [])
    if request.get("venv"):
        # Before reading the venv: what an earlier pip is still writing is not its state yet.
        out["pip"] = wait_for_pip(request["venv"], float(request.get("pip_wait") or 0))
        out["venv"] = probe_venv(request["venv"], request.get("pth") or "")
    if request.get("fact"):
        out["fact"] = _read(request["fact"])
    return out


def _name(lookup, ident):
    try:
        return lookup(ident)[0]
    except KeyError:  # an id without a name: report the number, as ls does
        return str(ident)


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError) as exc:  # unreadable: never equal to what the role wants
        return f"<unreadable: {exc}>"


def dpkg_installed(packages):
    """{package: installed?} from dpkg; None where there is no dpkg (the role then runs apt)."""
    if not packages:
        return {}
    if shutil.which("dpkg-query") is None:
        return None
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n", *packages],
        capture_output=True,
        text=True,
        env={**os.environ, "LC_ALL": "C"},
        check=False,
    )
    installed = {name: False for name in packages}
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1] in ("ii", "hi"):
            name = fields[0].split(":", 1)[0]
            if name in installed:
                installed[name] = True
    return installed


_PIP = re.compile(r"^pip[0-9.]*$")
_PYTHON = re.compile(r"^python[0-9.]*$")
_INTERPRETER = re.compile(r"^(python[0-9.]*|sh|bash|dash)$")


def pip_processes(venv, proc="/proc"):
    """[{pid, cmdline}] of the processes running the venv's pip: `VENV/bin/pip ...` (the kernel
    runs it as `VENV/bin/python VENV/bin/pip ...`) or `VENV/bin/python -m pip ...`."""
    bindir = os.path.join(os.path.normpath(venv), "bin")
    found = []
    try:
        names = os.listdir(proc)
    except OSError:
        return found
    for name in names:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(os.path.join(proc, name, "cmdline"), "rb") as handle:
                raw = handle.read()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        argv = [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]
        if _runs_pip(argv, bindir):
            found.append({"pid": int(name), "cmdline": " ".join(argv)[:300]})
    return sorted(found, key=lambda item: item["pid"])


def _runs_pip(argv, bindir):
    def in_bin(arg, pattern):
        path = os.path.normpath(arg)
        return os.path.dirname(path) == bindir and pattern.match(os.path.basename(path))

    if not argv:
        return False
    if in_bin(argv[0], _PIP):
        return True
    # The kernel runs a script as `INTERPRETER SCRIPT ARGS` (its #! line): not `grep .../bin/pip`.
    if _INTERPRETER.match(os.path.basename(argv[0])) and len(argv) > 1 and in_bin(argv[1], _PIP):
        return True
    return bool(in_bin(argv[0], _PYTHON) and argv[1:3] == ["-m", "pip"])


def wait_for_pip(venv, timeout, poll=2.0, processes=pip_processes):
    """Wait up to `timeout` seconds for pip processes already installing into `venv` to end."""
    found = processes(venv)
    running, start = found, time.monotonic()
    while running and time.monotonic() - start < timeout:
        time.sleep(poll)
        running = processes(venv)
    waited = round(time.monotonic() - start) if found else 0
    return {"found": found, "waited_s": waited, "running": running}


def probe_venv(venv, pth_name):
    out = {
        "dir": None,
        "python": False,
        "system_site_packages": None,
        "pth": None,
        "torchrun": None,
        "installed": {},
    }
    try:
        info = os.stat(venv)
    except OSError:
        return out
    if not stat.S_ISDIR(info.st_mode):
        out["dir"] = {"owner": "", "group": "", "mode": "not a directory"}
        return out
    out["dir"] = {
        "owner": _name(pwd.getpwuid, info.st_uid),
        "group": _name(grp.getgrgid, info.st_gid),
        "mode": f"{stat.S_IMODE(info.st_mode):04o}",
    }
    python = os.path.join(venv, "bin", "python")
    out["python"] = os.path.isfile(python) and os.access(python, os.X_OK)
    out["torchrun"] = _read(os.path.join(venv, "bin", "torchrun"))
    cfg = _read(os.path.join(venv, "pyvenv.cfg"))
    for line in (cfg or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "include-system-site-packages":
            out["system_site_packages"] = value.strip().lower()
    series = ".".join(str(n) for n in sys.version_info[:2])
    site = os.path.join(venv, "lib", f"python{series}", "site-packages")
    if pth_name:
        out["pth"] = _read(os.path.join(site, pth_name))
    out["installed"] = installed_distributions(site)
    return out


def installed_distributions(site):
    """{normalised name: version} of the distributions installed in one site-packages folder."""
    found = {}
    try:
        entries = sorted(os.listdir(site))
    except OSError:
        return found
    for entry in entries:
        if not entry.endswith(".dist-info"):
            continue
        name = version = None
        meta = _read(os.path.join(site, entry, "METADATA")) or ""
        for line in meta.splitlines():
            if not line.strip():
                break  # headers end at the first blank line
            key, sep, value = line.partition(":")
            if sep and key == "Name" and name is None:
                name = value.strip()
            elif sep and key == "Version" and version is None:
                version = value.strip()
        if name and version:
            found[re.sub(r"[-_.]+", "-", name).lower()] = version
    return found


if __name__ == "__main__":
    main()
