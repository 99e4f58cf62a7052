"""Import torch in the venv and report what it sees, as one JSON object.

Run by the pytorch_venv role with the venv's python (ansible.builtin.script). Never fails on its
own: the role compares the report with what preflight found (pytorch_venv.verify_problems) and
fails with a message naming what to change.
"""

import json
import sys
import warnings


def main():
    # ansible.builtin.script mixes stderr into stdout: keep torch's warnings out of the JSON line,
    # which is printed last.
    warnings.simplefilter("ignore")
    out = {"python": ".".join(str(n) for n in sys.version_info[:3]), "executable": sys.executable}
    try:
        import torch
    except Exception as exc:
        out["import_error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(out, sort_keys=True))
        return
    out["torch_version"] = str(torch.__version__)
    out["torch_file"] = torch.__file__
    out["cuda_version"] = torch.version.cuda or ""
    out["cuda_available"] = bool(torch.cuda.is_available())
    out["cuda_error"] = ""
    if out["cuda_version"] and not out["cuda_available"]:
        try:
            torch.cuda.init()  # raises with the driver's reason (too old, no device, ...)
        except Exception as exc:
            out["cuda_error"] = f"{type(exc).__name__}: {exc}"
    out["device_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
    out["devices"] = [torch.cuda.get_device_name(i) for i in range(out["device_count"])]
    out["nccl_version"] = nccl_version(torch) if out["cuda_version"] else ""
    print(json.dumps(out, sort_keys=True))


def nccl_version(torch):
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # a CUDA build without NCCL (or a ROCm build): report none
        return ""
    if isinstance(version, tuple):
        return ".".join(str(part) for part in version)
    # Old releases return an int like 2708 / 22809 (major*10000 + minor*100 + patch after 2.9).
    version = int(version)
    if version >= 10000:
        return f"{version // 10000}.{(version // 100) % 100}.{version % 100}"
    return f"{version // 1000}.{(version // 100) % 10}.{version % 100}"


if __name__ == "__main__":
    main()
