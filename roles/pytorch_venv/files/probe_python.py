"""Report, as JSON, what the pytorch_venv role needs to know about a node that no Ansible module
reports cheaply, in one run.

Run by ansible.builtin.script with the base interpreter. Prints one JSON object (last line): the
interpreter's version, whether it is itself a virtualenv, its site-packages directories and, when
WIREUP_PROBE's `site` is true (pytorch_venv_system_site_packages: a venv made with it sees them), the
distributions in them (`site_installed`, as `installed` below; else {}), whether it can create a venv with
pip (Debian/Ubuntu split `ensurepip` into python3-venv), and, when
WIREUP_PROBE's `torch` is true, the torch it would import (version, CUDA build, path: from
torch/version.py, without importing it; by importing it only where that file says nothing).

From WIREUP_PROBE (a JSON object; pytorch_venv.probe_request writes it) it also reports:

- `user`: who runs the tasks; `owner_exists`: whether WIREUP_PROBE's `owner` is a user;
- `dpkg`: the output of WIREUP_PROBE's `dpkg` argv (apt.dpkg_query_argv for its `packages`), unparsed,
  as wireup.core.apt.parse_dpkg_status reads it on the controller (null without dpkg-query). Not
  package_facts: that loads apt's whole cache on every run (0.75 s on a testbed node against
  0.05 s for dpkg-query), the cost a rerun must not pay;
- `pip`: pip processes already installing into WIREUP_PROBE's `venv` when the probe started (an
  interrupted earlier run leaves them running on the node): `found` ([{pid, cmdline}]),
  `waited_s` (how long the probe waited for them, at most `pip_wait` seconds, before reading the
  venv) and `running` (those still running then). Two pips in one venv corrupt it: the role waits
  rather than start a second one;
- `venv`: what the venv is, read without starting its Python: `python` (bin/python exists),
  `installed` ({normalised name: version} from the dist-info folders in its own site-packages, so a
  rerun starts pip only for a pin the venv lacks), `system_site_packages` (pyvenv.cfg's
  include-system-site-packages, null without one), `pth` (the lines of WIREUP_PROBE's `pth` file in
  its site-packages, null without one) and `torchrun` (bin/torchrun exists);
- `fact`: the local fact file WIREUP_PROBE's `fact` names, as JSON (null when missing or not JSON).

The venv's folders' modes and owners and the files' contents are not compared here: the builtin
modules (file, lineinfile, copy) that keep them do that for themselves whenever they run. Reading
only: the probe never writes anything.
"""

import importlib.util
import json
import os
import pwd
import re
import shutil
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
    request = json.loads(os.environ.get("WIREUP_PROBE") or "{}")
    # What those folders hold, asked for only where the venv will see them: pip need not start for
    # an extra the base has (pytorch_venv._visible).
    out["site_installed"] = site_distributions(site_dirs) if request.get("site") else {}
    if request.get("torch") or "torch" in sys.argv[1:]:
        out["torch"] = probe_torch()
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
    out["dpkg"] = dpkg_lines(request.get("dpkg") or [])
    if request.get("venv"):
        # Before reading the venv: what an earlier pip is still writing is not its state yet.
        out["pip"] = wait_for_pip(request["venv"], float(request.get("pip_wait") or 0))
        out["venv"] = probe_venv(request["venv"], request.get("pth") or "")
    if request.get("fact"):
        out["fact"] = read_json(request["fact"])
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


def dpkg_lines(argv):
    """The output of dpkg-query's `argv` (what parse_dpkg_status reads); None without dpkg."""
    if not argv:
        return ""
    if shutil.which(argv[0]) is None:
        return None
    result = subprocess.run(
        argv, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"}, check=False
    )
    return result.stdout


def read_json(path):
    """The JSON a file holds, or None when it is missing or not JSON."""
    try:
        return json.loads(_read(path) or "null")
    except ValueError:
        return None


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
        return os.path.dirname(path) == bindir and pattern.fullmatch(os.path.basename(path))

    if not argv:
        return False
    if in_bin(argv[0], _PIP):
        return True
    # The kernel runs a script as `INTERPRETER SCRIPT ARGS` (its #! line): not `grep .../bin/pip`.
    if _INTERPRETER.fullmatch(os.path.basename(argv[0])) and len(argv) > 1 and in_bin(argv[1], _PIP):
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


def probe_venv(venv, pth_name=""):
    python = os.path.join(venv, "bin", "python")
    series = ".".join(str(n) for n in sys.version_info[:2])
    site = os.path.join(venv, "lib", f"python{series}", "site-packages")
    pth = _read(os.path.join(site, pth_name)) if pth_name else None
    return {
        "python": os.path.isfile(python) and os.access(python, os.X_OK),
        "installed": installed_distributions(site),
        "system_site_packages": pyvenv_flag(_read(os.path.join(venv, "pyvenv.cfg"))),
        "pth": pth.splitlines() if pth is not None else None,
        "torchrun": os.path.isfile(os.path.join(venv, "bin", "torchrun")),
    }


def pyvenv_flag(text):
    """pyvenv.cfg's include-system-site-packages as a bool (None without the file or the key)."""
    match = re.search(r"(?m)^include-system-site-packages\s*=\s*(\S+)", text or "")
    return match.group(1).lower() == "true" if match else None


def site_distributions(site_dirs):
    """{normalised name: version} over several site-packages folders, the first one's winning."""
    found = {}
    for site in reversed(site_dirs):
        found.update(installed_distributions(site))
    return found


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
