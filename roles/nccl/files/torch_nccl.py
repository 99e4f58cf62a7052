"""Print the NCCL version the venv's torch uses (None for CPU builds); run by the venv's python.

Package metadata first: importing torch costs seconds of CPU on every run.
"""

import importlib.metadata as md

try:
    local = md.version("torch").partition("+")[2]
except md.PackageNotFoundError:
    local = ""
wheel = next(
    (
        d.version
        for d in md.distributions()
        if (d.metadata["Name"] or "").lower().replace("_", "-").startswith("nvidia-nccl-cu")
    ),
    None,
)
if local == "cpu":
    print(None)  # CPU builds carry no NCCL
elif wheel:
    print(wheel)  # CUDA wheels load the libnccl.so.2 of the nvidia-nccl-cuXX wheel they depend on
else:  # other builds (NCCL linked in, a source build): ask torch itself
    import torch

    try:
        version = torch.cuda.nccl.version()
    except Exception:  # no NCCL in this build
        version = None
    print(".".join(map(str, version)) if isinstance(version, tuple) else version)
