"""The PyTorch wheel choice (variant, index URL, pin), the preinstalled-torch rule and the
verification of an installed torch (plugins/module_utils/wireup/plans/pytorch_venv.py)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import pwd
import subprocess
import sys

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import apt as packages
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import pytorch_venv

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Captures from the lent 2x H200 machine, copied from ../shared/fixtures/h200x2.
H200_FIXTURES = ROOT / "tests" / "fixtures" / "h200x2"
VERIFY_SCRIPT = ROOT / "roles" / "pytorch_venv" / "files" / "verify_torch.py"
PROBE_SCRIPT = ROOT / "roles" / "pytorch_venv" / "files" / "probe_python.py"


def _choose(torch_version, arch, gpu, driver="", branch="", toolkit="", **kwargs):  # noqa: PLR0917
    return pytorch_venv.choose(
        torch_version,
        arch,
        gpu,
        driver_version=driver,
        driver_branch=branch,
        toolkit_version=toolkit,
        **kwargs,
    )


@pytest.mark.parametrize(
    ("torch_version", "arch", "gpu", "driver", "branch", "toolkit", "variant", "why"),
    [
        # The lent 2x H200: driver 580.159.04, toolkit 13.0.
        ("2.13.0", "x86_64", True, "580.159.04", "", "13.0", "cu130", "matches the node's CUDA toolkit 13.0"),
        ("2.11.0", "x86_64", True, "580.159.04", "", "13.0", "cu130", "matches"),
        # No toolkit: the newest variant the driver runs natively.
        ("2.13.0", "x86_64", True, "580.65.06", "", "", "cu130", "newest it runs"),
        ("2.11.0", "x86_64", True, "575.57.08", "", "", "cu128", "newest it runs"),
        ("2.8.0", "x86_64", True, "575.57.08", "", "", "cu129", "newest it runs"),
        ("2.8.0", "x86_64", True, "570.124.06", "", "", "cu128", "newest it runs"),
        # R595 runs 13.2; a 13.0 toolkit pulls the choice down to cu130 (extensions build cleanly).
        ("2.13.0", "x86_64", True, "595.45.04", "", "", "cu132", "newest it runs"),
        ("2.13.0", "x86_64", True, "595.45.04", "", "13.0", "cu130", "matches"),
        # Toolkit newer than anything torch ships: newest native, no toolkit match.
        ("2.13.0", "x86_64", True, "610.10", "", "13.5", "cu132", "newest it runs"),
        # 2.13 has no 12.8 wheel: an R570 driver (CUDA 12.8) gets cu126.
        ("2.13.0", "x86_64", True, "570.195.03", "", "12.8", "cu126", "newest it runs"),
        # R550 (CUDA 12.4) predates every 2.13 variant natively; 12.6 runs via minor-version compat.
        ("2.13.0", "x86_64", True, "550.163.01", "", "", "cu126", "minor-version compatibility"),
        # No driver loaded yet (reboot pending): the branch about to be installed decides.
        ("2.13.0", "x86_64", True, "", "580", "", "cu130", "pytorch_venv_driver_branch"),
        # Neither: the toolkit is the proxy.
        ("2.13.0", "x86_64", True, "", "", "12.6", "cu126", "CUDA toolkit"),
        # Arm servers (sbsa), arch spelled three ways.
        ("2.13.0", "aarch64", True, "580.82.07", "", "", "cu130", "newest"),
        ("2.7.1", "arm64", True, "580.82.07", "", "", "cu128", "newest"),
        ("2.12.1", "sbsa", True, "595.1", "", "", "cu132", "newest"),
        # GPU-less nodes get CPU wheels whatever the driver/toolkit say.
        ("2.13.0", "x86_64", False, "", "", "", "cpu", "no NVIDIA GPU"),
        ("2.13.0", "amd64", False, "580.1", "", "13.0", "cpu", "no NVIDIA GPU"),
        ("2.13.0", "aarch64", False, "", "", "", "cpu", "no NVIDIA GPU"),
    ],
)
def test_choice(torch_version, arch, gpu, driver, branch, toolkit, variant, why):  # noqa: PLR0917
    choice = _choose(torch_version, arch, gpu, driver, branch, toolkit)
    assert choice["ok"], choice["error"]
    assert choice["variant"] == variant
    assert why in choice["reason"]
    assert choice["index_url"] == f"https://download.pytorch.org/whl/{variant}"
    assert choice["requirement"] == f"torch=={torch_version}+{variant}"
    assert choice["cuda"] == ("" if variant == "cpu" else f"{variant[2:4]}.{variant[4:]}")


def test_driver_beats_toolkit():
    # An R535 driver with a 13.0 toolkit installed beside it: CUDA 13 wheels would not load.
    choice = _choose("2.13.0", "x86_64", True, "535.274.02", "", "13.0")
    assert choice["variant"] == "cu126"
    assert choice["driver"]["source"] == "loaded driver"


def test_loaded_driver_beats_expected_branch():
    choice = _choose("2.13.0", "x86_64", True, "570.1", "580", "")
    assert choice["variant"] == "cu126"


def test_toolkit_match_can_be_switched_off():
    choice = _choose("2.13.0", "x86_64", True, "595.45.04", "", "13.0", match_toolkit=False)
    assert choice["variant"] == "cu132"


def test_override_and_mirror_and_unpinned_variant():
    choice = _choose(
        "2.13.0", "x86_64", True, "580.1", override="cu126", index_base_url="http://mirror.local/torch/"
    )
    assert choice["variant"] == "cu126"
    assert choice["index_url"] == "http://mirror.local/torch/cu126"
    assert "pytorch_venv_cuda_variant=cu126" in choice["reason"]
    assert _choose("2.13.0", "x86_64", False, pin_variant=False)["requirement"] == "torch==2.13.0"
    # A version that already carries its label is used as is.
    assert _choose("2.13.0+cpu", "x86_64", False)["requirement"] == "torch==2.13.0+cpu"
    # An override outside the table is allowed (a private build) but said so.
    odd = _choose("2.13.0", "x86_64", True, "580.1", override="cu129")
    assert odd["ok"] and "not in the table" in odd["reason"]


def test_extra_variants_describe_a_new_release():
    unknown = _choose("2.15.0", "x86_64", True, "595.1")
    assert not unknown["ok"]
    assert "pytorch_venv_torch_variants" in unknown["error"]
    assert "pytorch_venv_cuda_variant" in unknown["error"]
    extra = {"2.15": {"x86_64": ["cpu", "cu130", "cu132"]}}
    assert _choose("2.15.0", "x86_64", True, "595.1", extra_variants=extra)["variant"] == "cu132"
    # Merged over the table, not replacing it.
    assert _choose("2.13.0", "x86_64", True, "580.1", extra_variants=extra)["variant"] == "cu130"


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        (
            {"torch_version": "2.13", "driver_version": "470.256.02"},
            ["nvidia_driver_branch", "pytorch_venv_torch_version"],
        ),
        ({"torch_version": "2.13.0"}, ["pytorch_venv_driver_branch", "pytorch_venv_cuda_variant"]),
        ({"torch_version": 2.13}, ["pytorch_venv_torch_version"]),
        ({"torch_version": "2.13.0", "override": "cuda13"}, ["pytorch_venv_cuda_variant"]),
        ({"torch_version": "2.13.0", "arch": "ppc64le"}, ["x86_64 and aarch64"]),
        ({"torch_version": "2.13.0", "driver_version": "garbage"}, ["580.159.04"]),
    ],
)
def test_choice_errors_name_the_variable(kwargs, names):
    args = {"arch": "x86_64", "gpu_present": True, **kwargs}
    choice = pytorch_venv.choose(**args)
    assert not choice["ok"]
    for name in names:
        assert name in choice["error"]


def test_variants_table_is_consistent():
    for series, per_arch in pytorch_venv.TORCH_VARIANTS.items():
        assert series in pytorch_venv.TORCH_MIN_PYTHON
        for arch, variants in per_arch.items():
            assert arch in ("x86_64", "aarch64")
            assert variants[0] == "cpu"
            cudas = [pytorch_venv.variant_cuda(v) for v in variants[1:]]
            assert cudas == sorted(cudas, key=lambda c: tuple(map(int, c.split("."))))
    branches = [b for b, _ in pytorch_venv.DRIVER_BRANCH_CUDA]
    assert branches == sorted(branches)


@pytest.mark.parametrize(
    ("branch", "cuda"),
    [
        (525, "12.0"),
        (535, "12.2"),
        (550, "12.4"),
        (570, "12.8"),
        (580, "13.0"),
        (585, "13.0"),
        (700, "13.2"),
        (440, ""),
    ],
)
def test_branch_native_cuda(branch, cuda):
    assert pytorch_venv.branch_native_cuda(branch) == cuda


@pytest.mark.parametrize(
    ("version", "spec", "expected"),
    [
        ("2.11.0+cu130", ">=2.11", True),
        ("2.10.1", ">=2.11", False),
        ("2.11.0", ">=2.11,<3", True),
        ("3.0.0", ">=2.11,<3", False),
        ("2.11.0a0+git1234", ">=2.11", True),
        ("2.11.3", "==2.11.*", True),
        ("2.12.0", "==2.11.*", False),
        ("2.12.0", "!=2.11.*", True),
        ("2.11.2", "~=2.11.0", True),
        ("2.12.0", "~=2.11.0", False),
        ("2.13.0", "~=2.11", True),
        ("2.13.0", "==2.13.0", True),
        ("2.13.0", "==2.13", True),
        ("2.13.1", ">2.13.0", True),
        ("2.13.0", "<=2.12", False),
    ],
)
def test_version_in_range(version, spec, expected):
    assert pytorch_venv.version_in_range(version, spec) is expected


@pytest.mark.parametrize("spec", ["", "2.11", ">=x", ">=2.11.*", None, ">=2.11;<3"])
def test_bad_spec(spec):
    assert "pytorch_venv_accept_preinstalled" in pytorch_venv.check_spec(spec)
    with pytest.raises(ValueError, match="pytorch_venv_accept_preinstalled"):
        pytorch_venv.version_in_range("2.11.0", spec)


def test_python_ok():
    assert pytorch_venv.python_ok("3.12.3", "2.13.0") == ""
    assert pytorch_venv.python_ok("3.11.2", "2.13.0") == ""
    assert "pytorch_venv_base_python" in pytorch_venv.python_ok("3.9.18", "2.13.0")
    assert pytorch_venv.python_ok("3.9.18", "2.8.0") == ""


def _h200_report():
    # "2.11.0+cu130 13.0 2.28.9 2": torch, CUDA, NCCL, device_count read off the lent machine.
    torch_v, cuda_v, nccl_v, count = (H200_FIXTURES / "torch_versions.txt").read_text().split()
    return {
        "python": "3.12.3",
        "torch_version": torch_v,
        "torch_file": "/opt/torch/.venv/lib/python3.12/site-packages/torch/__init__.py",
        "cuda_version": cuda_v,
        "nccl_version": nccl_v,
        "cuda_available": True,
        "device_count": int(count),
    }


def test_h200_preinstalled_torch_is_accepted_and_verified():
    choice = _choose("2.13.0", "x86_64", True, "580.159.04", "", "13.0")
    report = _h200_report()
    found = {"version": report["torch_version"], "cuda": "13.0"}
    decision = pytorch_venv.preinstalled(found, ">=2.11", True, choice)
    assert decision["use"], decision["reason"]
    assert "2.11.0+cu130" in decision["reason"]
    assert pytorch_venv.verify_problems(report, True, 2) == []
    info = pytorch_venv.fact(report, choice, decision, "/opt/wireup/venv", "/opt/torch/.venv/bin/python3")
    assert info["torch_version"] == "2.11.0+cu130"
    assert info["cuda_version"] == "13.0" and info["nccl_version"] == "2.28.9"
    assert info["device_count"] == 2 and info["preinstalled"]
    line = pytorch_venv.summary(info, "h200")
    assert "torch 2.11.0+cu130 (preinstalled, from /opt/torch/.venv/bin/python3)" in line
    assert "CUDA 13.0, NCCL 2.28.9, 2 GPU(s) visible" in line
    assert "\n" not in line


@pytest.mark.parametrize(
    ("found", "spec", "gpu", "driver", "use", "why"),
    [
        ({}, ">=2.11", True, "580.1", False, "no torch"),
        (None, ">=2.11", False, "", False, "no torch"),
        ({"version": "2.10.0+cu128", "cuda": "12.8"}, ">=2.11", True, "580.1", False, "outside"),
        ({"version": "2.11.0+cpu", "cuda": ""}, ">=2.11", True, "580.1", False, "CPU build on a GPU node"),
        ({"version": "2.11.0+cpu", "cuda": ""}, ">=2.11", False, "", True, "satisfies"),
        ({"version": "2.11.0+cu130", "cuda": "13.0"}, ">=2.11", True, "570.1", False, "newer driver"),
        ({"version": "2.11.0+cu128", "cuda": "12.8"}, ">=2.11", True, "550.1", True, "satisfies"),
    ],
)
def test_preinstalled(found, spec, gpu, driver, use, why):  # noqa: PLR0917
    choice = _choose("2.13.0", "x86_64", gpu, driver)
    decision = pytorch_venv.preinstalled(found, spec, gpu, choice)
    assert decision["use"] is use
    assert why in decision["reason"]


@pytest.mark.parametrize(
    ("change", "gpu", "count", "needle"),
    [
        ({"import_error": "ModuleNotFoundError: No module named 'torch'"}, True, 2, "does not import"),
        ({"cuda_version": ""}, True, 2, "CPU build"),
        ({"cuda_available": False, "cuda_error": "driver too old"}, True, 2, "is_available() is False"),
        ({"device_count": 1}, True, 2, "preflight found 2"),
    ],
)
def test_verify_problems(change, gpu, count, needle):
    report = {**_h200_report(), **change}
    problems = pytorch_venv.verify_problems(report, gpu, count, "/opt/wireup/venv")
    assert len(problems) == 1 and needle in problems[0] and "/opt/wireup/venv" in problems[0]


def test_verify_cpu_node():
    report = {"torch_version": "2.13.0+cpu", "cuda_version": "", "cuda_available": False, "device_count": 0}
    assert pytorch_venv.verify_problems(report, False, 0) == []


def _run(script, *args, env_path=None, probe=None):
    env = {"PATH": "/usr/bin:/bin"}
    if env_path:
        env["PYTHONPATH"] = str(env_path)
    if probe is not None:
        env["WIREUP_PROBE"] = json.dumps(probe)
    argv = [sys.executable, str(script), *args]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout)


def test_verify_script_without_torch(tmp_path):
    # The control node has no torch: the script must report the import error, not crash.
    report = _run(VERIFY_SCRIPT, env_path=tmp_path)
    if "torch_version" in report:
        pytest.skip("torch is importable here")
    assert "No module named 'torch'" in report["import_error"]
    assert pytorch_venv.verify_problems(report, False, 0)[0].startswith("torch does not import")


def test_probe_script_reports_this_interpreter(tmp_path):
    report = _run(PROBE_SCRIPT, "torch", env_path=tmp_path)
    assert report["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert report["has_venv"] is True
    assert isinstance(report["has_ensurepip"], bool)
    assert report["site_dirs"] and all(pathlib.Path(d).is_absolute() for d in report["site_dirs"])
    assert report["is_venv"] == (sys.prefix != sys.base_prefix)
    assert report["torch"] == {} or report["torch"]["version"]
    assert _run(PROBE_SCRIPT, env_path=tmp_path)["torch"] is None


def test_probe_lists_the_base_s_distributions_only_when_the_venv_will_see_them(tmp_path):
    """site_installed costs a listing and a METADATA read per distribution: asked for with
    pytorch_venv_system_site_packages only (probe_request's `site`)."""
    seen = _run(PROBE_SCRIPT, env_path=tmp_path, probe={"site": True})["site_installed"]
    assert seen.get("pytest") == importlib.metadata.version("pytest")
    assert _run(PROBE_SCRIPT, env_path=tmp_path, probe={"site": False})["site_installed"] == {}
    assert _run(PROBE_SCRIPT, env_path=tmp_path)["site_installed"] == {}


def _fake_venv(root, series, packages, cfg="include-system-site-packages = false\n"):
    """A venv folder as the probe reads it: bin/python, pyvenv.cfg, dist-info folders."""
    (root / "bin").mkdir(parents=True)
    python = root / "bin" / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    (root / "pyvenv.cfg").write_text(f"home = /usr/bin\n{cfg}version = {series}.0\n")
    site = root / "lib" / f"python{series}" / "site-packages"
    site.mkdir(parents=True)
    for folder, name, version in packages:
        (site / folder).mkdir()
        (site / folder / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: not-a-header\n"
        )
    (site / "broken-1.0.dist-info").mkdir()  # no METADATA: ignored
    return site


def test_probe_script_reports_the_venv_owner_and_dpkg(tmp_path):
    series = ".".join(map(str, sys.version_info[:2]))
    venv = tmp_path / "venv"
    _fake_venv(
        venv,
        series,
        [
            ("torch-2.13.0+cpu.dist-info", "torch", "2.13.0+cpu"),
            ("Typing_Extensions-4.12.2.dist-info", "Typing_Extensions", "4.12.2"),
            ("nvidia_nccl_cu13-2.28.9.dist-info", "nvidia-nccl-cu13", "2.28.9"),
        ],
    )
    me = pwd.getpwuid(os.geteuid()).pw_name
    site = venv / "lib" / f"python{series}" / "site-packages"
    (site / pytorch_venv.PTH_NAME).write_text("/opt/torch/.venv/lib/python3.12/site-packages\n")
    (tmp_path / "wireup_torch.fact").write_text('{"torch_version": "2.13.0+cpu"}\n')
    report = _run(
        PROBE_SCRIPT,
        env_path=tmp_path,
        probe={
            "owner": me,
            "dpkg": packages.dpkg_query_argv("wireup-no-such-package"),
            "venv": str(venv),
            "pth": pytorch_venv.PTH_NAME,
            "fact": str(tmp_path / "wireup_torch.fact"),
        },
    )
    assert report["user"] == me
    assert report["owner_exists"] is True
    # dpkg's own lines, parsed on the controller (none for an unknown package; null without dpkg)
    assert report["dpkg"] is None or packages.parse_dpkg_status(report["dpkg"]) == {}
    assert report["venv"] == {
        "python": True,
        "installed": {"torch": "2.13.0+cpu", "typing-extensions": "4.12.2", "nvidia-nccl-cu13": "2.28.9"},
        "system_site_packages": False,
        "pth": ["/opt/torch/.venv/lib/python3.12/site-packages"],
        "torchrun": False,
    }
    assert report["fact"] == {"torch_version": "2.13.0+cpu"}
    # What the venv is, not its folders' modes and owners: those are the file task's, run every time.
    assert set(report) >= {"python_version", "site_dirs", "has_venv", "has_ensurepip", "pip"}
    assert not {"mode", "owner", "group"} & {k for v in report.values() if isinstance(v, dict) for k in v}
    # What the role then decides from it: pip has nothing to do.
    installed = report["venv"]["installed"]
    assert pytorch_venv.pip_missing(["torch==2.13.0+cpu", "typing_extensions==4.12.2"], installed) == []


def test_probe_script_on_a_fresh_node(tmp_path):
    report = _run(
        PROBE_SCRIPT,
        env_path=tmp_path,
        probe={"owner": "wireup-no-such-user", "dpkg": [], "venv": str(tmp_path / "absent"), "pth": "x.pth"},
    )
    assert report["owner_exists"] is False
    assert report["dpkg"] == ""
    assert report["venv"] == {
        "python": False, "installed": {}, "system_site_packages": None, "pth": None, "torchrun": False,
    }  # fmt: skip
    assert report["torch"] is None
    assert "user" in report


@pytest.mark.parametrize(
    ("requirement", "installed", "met"),
    [
        ("torch==2.13.0+cpu", {"torch": "2.13.0+cpu"}, True),
        ("torch==2.13.0+cpu", {"torch": "2.13.0+cu130"}, False),  # another variant: pip replaces it
        ("torch==2.13.0", {"torch": "2.13.0+cu130"}, True),  # PEP 440: no local label in the pin
        ("torch==2.13", {"torch": "2.13.0"}, True),  # zero padding
        ("torch==2.13.0", {"torch": "2.13.1"}, False),
        ("torch==2.13.0", {"torch": "2.13.0rc1"}, False),
        ("torch==2.13.0", {}, False),
        ("Torch_Info==1.8.0", {"torch-info": "1.8.0"}, True),  # names compare normalised
        ("torchinfo==1.8.0", {"torchinfo": "1.8.0.post1"}, False),
        ("pkg[extra]==1.0", {"pkg": "1.0"}, False),  # extras: pip decides
        ("torch>=2.13", {"torch": "2.13.0"}, False),  # not a pin: pip decides
        ("torch==not-a-version", {"torch": "not-a-version"}, False),
    ],
)
def test_pip_satisfied(requirement, installed, met):
    assert pytorch_venv.pip_satisfied(requirement, installed) is met
    assert pytorch_venv.pip_missing([requirement], installed) == ([] if met else [requirement])


def test_pip_missing_accepts_one_requirement_and_no_probe():
    assert pytorch_venv.pip_missing("torch==2.13.0+cpu", {"torch": "2.13.0+cpu"}) == []
    assert pytorch_venv.pip_missing(["torchinfo==1.8.0"], None) == ["torchinfo==1.8.0"]
    assert pytorch_venv.pip_missing([], {}) == []


def test_probe_reads_torch_from_version_py_without_importing_it(tmp_path):
    """The probe names the base's torch from torch/version.py: a torch whose import would fail
    (here: raises) is not imported, so a rerun pays no `import torch` for it."""
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (pkg / "version.py").write_text(
        "from typing import Optional\n"
        "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']\n"
        "__version__ = '2.11.0+cu130'\n"
        "debug = False\n"
        "cuda: Optional[str] = '13.0'\n"
        "git_version = '70d99e998b5952dfe4f1ab2e5ed2a3b6bd0c6b3c'\n"
        "hip: Optional[str] = None\n"
    )
    report = _run(PROBE_SCRIPT, "torch", env_path=tmp_path)
    assert report["torch"] == {
        "version": "2.11.0+cu130",
        "cuda": "13.0",
        "path": str(pkg / "__init__.py"),
        "error": "",
    }
    (pkg / "version.py").write_text("__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\n")
    assert _run(PROBE_SCRIPT, "torch", env_path=tmp_path)["torch"]["cuda"] == ""
    # No usable version.py: the probe imports torch and reports why it failed.
    (pkg / "version.py").unlink()
    assert _run(PROBE_SCRIPT, "torch", env_path=tmp_path)["torch"]["error"] == "RuntimeError: imported"


# --- issue 12: a pip left running by an interrupted run is waited for, never doubled -----------
def _start_fake_pip(venv, seconds):
    """A process whose argv is what the kernel makes of `VENV/bin/pip install ...`."""
    import subprocess

    (venv / "bin").mkdir(parents=True, exist_ok=True)
    pip = venv / "bin" / "pip"
    pip.write_text(f"#!/bin/sh\nsleep {seconds}\n")
    pip.chmod(0o755)
    return subprocess.Popen([str(pip), "install", "torch"])


def test_probe_waits_for_an_earlier_pip_in_the_venv(tmp_path):
    venv = tmp_path / "venv"
    proc = _start_fake_pip(venv, 3)
    try:
        report = _run(PROBE_SCRIPT, env_path=tmp_path, probe={"venv": str(venv), "pip_wait": 30})
    finally:
        proc.kill()
        proc.wait()
    pip = report["pip"]
    assert [p["pid"] for p in pip["found"]] == [proc.pid]
    assert f"{venv}/bin/pip install torch" in pip["found"][0]["cmdline"]
    assert pip["running"] == [] and 1 <= pip["waited_s"] <= 10, pip


def test_probe_reports_a_pip_still_running_after_the_wait(tmp_path):
    venv = tmp_path / "venv"
    proc = _start_fake_pip(venv, 60)
    try:
        report = _run(PROBE_SCRIPT, env_path=tmp_path, probe={"venv": str(venv), "pip_wait": 0})
    finally:
        proc.kill()
        proc.wait()
    assert [p["pid"] for p in report["pip"]["running"]] == [proc.pid]
    # Another venv's pip is none of this venv's business.
    other = _run(PROBE_SCRIPT, env_path=tmp_path, probe={"venv": str(tmp_path / "other"), "pip_wait": 0})
    assert other["pip"] == {"found": [], "waited_s": 0, "running": []}


def test_pip_processes_recognises_the_ways_pip_runs(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("probe_python", PROBE_SCRIPT)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    proc = tmp_path / "proc"
    cases = {
        "101": ["/opt/v/bin/python3", "/opt/v/bin/pip", "install", "torch==2.13.0"],
        "102": ["/opt/v/bin/python", "-m", "pip", "install", "numpy"],
        "103": ["/opt/v/bin/pip3.11", "freeze"],
        "201": ["/opt/other/bin/python3", "/opt/other/bin/pip", "install", "x"],
        "202": ["/usr/bin/python3", "-m", "pip", "install", "x"],
        "203": ["/opt/v/bin/python3", "/opt/v/bin/torchrun", "train.py"],
        "204": ["grep", "/opt/v/bin/pip"],
    }
    for pid, argv in cases.items():
        (proc / pid).mkdir(parents=True)
        (proc / pid / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (proc / "self").mkdir()
    assert [p["pid"] for p in probe.pip_processes("/opt/v/", proc=str(proc))] == [101, 102, 103]


def _dist(site, name, version):
    meta = site / f"{name.replace('-', '_')}-{version}.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nbody\n")


def test_site_distributions_reads_every_folder_the_first_winning(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("probe_python", PROBE_SCRIPT)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    purelib, platlib = tmp_path / "purelib", tmp_path / "platlib"
    _dist(purelib, "numpy", "2.3.5")
    _dist(platlib, "numpy", "1.26.4")
    _dist(platlib, "nvidia-ml-py", "13.615.71")
    found = probe.site_distributions([str(purelib), str(platlib), str(tmp_path / "missing")])
    assert found == {"numpy": "2.3.5", "nvidia-ml-py": "13.615.71"}
    assert probe.site_distributions([]) == {}
