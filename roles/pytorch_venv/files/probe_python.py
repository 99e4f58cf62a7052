"""Report an interpreter's facts as JSON for the pytorch_venv role.

Run by ansible.builtin.script with the interpreter under test. Prints one JSON object: its
version, whether it is itself a virtualenv, its site-packages directories, whether it can create
a venv with pip (Debian/Ubuntu split `ensurepip` into python3-venv), and, with the argument
`torch`, the torch it imports (version, CUDA build, path) or why it cannot.
"""

import importlib.util
import json
import sys
import sysconfig
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
    print(json.dumps(out, sort_keys=True))


def probe_torch():
    if importlib.util.find_spec("torch") is None:
        return {}
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


if __name__ == "__main__":
    main()
