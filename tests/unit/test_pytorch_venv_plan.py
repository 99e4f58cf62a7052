"""pytorch_venv.plan: every decision and message of the pytorch_venv role, from the role's
variables, preflight's wireup_node and the probe, on captures from a testbed node
(tests/fixtures/testbed) and the lent 2x H200 (tests/fixtures/h200x2)."""

from __future__ import annotations

import copy
import json
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import pytorch_venv

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTBED = ROOT / "tests" / "fixtures" / "testbed"
H200 = ROOT / "tests" / "fixtures" / "h200x2"
DEFAULTS = yaml.safe_load((ROOT / "roles" / "pytorch_venv" / "defaults" / "main.yml").read_text())
WHEELS = "http://10.213.3.1:18003/wheels/"  # the testbed's wheelhouse URL


def _settings(**over):
    """The role's defaults as Ansible resolves them on the testbed (group_vars give wireup_venv_path
    /opt/wireup/venv and no nvidia_driver_branch), with the testbed's wheelhouse URL."""
    settings = dict(DEFAULTS)
    settings.update(
        pytorch_venv_path="/opt/wireup/venv",
        pytorch_venv_owner_home="/home/root",
        pytorch_venv_driver_branch="",
        pytorch_venv_wheelhouse_node_dir="/opt/wireup/wheelhouse",
        pytorch_venv_verify_env={},
        pytorch_venv_wheelhouse_url=WHEELS,
    )
    settings.update(over)
    assert not [k for k, v in settings.items() if "{{" in str(v)], "a default left unresolved"
    return settings


def _probe(name, **over):
    """A registered ansible.builtin.script result around a captured probe report."""
    report = json.loads((TESTBED / f"probe_{name}_debian12.json").read_text())
    for key, value in over.items():
        report[key] = value
    line = json.dumps(report)
    return {"rc": 0, "stdout": line + "\r\n", "stdout_lines": [line], "changed": False}


def _fresh(**over):
    """The fresh probe, for a task user and owner root (the capture asked for owner 'wireup')."""
    return _probe("fresh", owner_exists=True, **over)


def _node(**over):
    node = json.loads((TESTBED / "wireup_node_debian12.json").read_text())
    node.update(over)
    return node


def _h200_node():
    """wireup_node of the lent 2x H200 as preflight reports it (driver 580.159.04, CUDA 13.0)."""
    torch_v, cuda_v, nccl_v, count = (H200 / "torch_versions.txt").read_text().split()
    driver = re.search(r"x86_64\s+(\d+\.\d+\.\d+)", (H200 / "proc_driver_version.txt").read_text()).group(1)
    node = _node()
    node["gpu"] = {**node["gpu"], "present": True, "count": int(count)}
    node["driver"] = {
        "branch": driver.split(".")[0],
        "loaded": True,
        "version": driver,
        "kernel_module": "open",
    }
    node["cuda"] = {**node["cuda"], "version": "13.0"}
    node["os"] = {**node["os"], "id": "ubuntu"}
    return node, torch_v, cuda_v, nccl_v


def _fields(settings):
    """The plan's Settings from the role's variables (pytorch_venv_<field>: one each, by name)."""
    return {name: settings[f"pytorch_venv_{name}"] for name in pytorch_venv.SETTINGS}


def _plan(probe="converged", settings=None, node=None, check=False, controller=None):
    probe = _probe(probe) if isinstance(probe, str) else probe
    return pytorch_venv.plan(probe, _fields(settings or _settings()), node or _node(), check, controller)


def test_converged_testbed_node_needs_nothing_but_the_verification():
    plan = _plan()
    assert plan["errors"] == []
    assert plan["apt"] == []
    assert plan["pip"]["run"] is False and plan["pip"]["torch"] == [] and plan["pip"]["extras"] == []
    assert plan["pip"]["copies"] == []
    assert plan["verify"] is True and plan["venv_ready"] is True
    assert plan["become"] is False  # root runs the tasks and owns the venv
    assert plan["venv_argv"] == ["/usr/bin/python3", "-m", "venv", "/opt/wireup/venv"]
    assert plan["pyvenv_flag"] == "false"
    assert plan["pth"] == {
        "path": "/opt/wireup/venv/lib/python3.11/site-packages/wireup-base-site.pth",
        "content": None,  # a stale link is removed
    }
    assert plan["torchrun"] == ""
    # The build writes nothing and removes a stale .pth, but a converged rerun includes no step.
    assert plan["files"] == [] and plan["stale"] == [plan["pth"]["path"]]
    assert plan["steps"] == []
    assert plan["choice"]["requirement"] == "torch==2.13.0+cpu"
    assert plan["fact_path"] == "/etc/ansible/facts.d/wireup_torch.fact"
    assert [d["path"] for d in plan["dirs"]] == ["/opt/wireup/venv", "/etc/ansible/facts.d"]
    assert plan["notes"] == []


def test_fresh_node_installs_torch_and_extras_from_the_wheelhouse_url():
    plan = _plan(_fresh(), _settings(pytorch_venv_owner="root"))
    assert plan["errors"] == []
    pip = plan["pip"]
    assert pip["torch"] == ["torch==2.13.0+cpu"]
    assert pip["extras"] == DEFAULTS["pytorch_venv_extra_packages"]
    assert pip["env"]["PIP_NO_INDEX"] == "1" and pip["env"]["PIP_FIND_LINKS"] == WHEELS
    assert pip["env"]["PIP_TRUSTED_HOST"] == "10.213.3.1"  # plain http: pip must be told to trust it
    assert pip["extras_env"] == pip["env"]
    assert "PIP_INDEX_URL" not in pip["env"]
    assert pip["copies"] == [] and pip["hashed"] is False
    # A real run makes the venv first, then verifies it.
    assert plan["venv_ready"] is True and plan["verify"] is True
    assert plan["steps"] == ["build", "pip"]


def test_check_mode_on_a_fresh_node_plans_the_changes_and_skips_the_verification():
    plan = _plan(_fresh(), _settings(pytorch_venv_owner="root"), check=True)
    assert plan["errors"] == []
    assert plan["pip"]["run"] is True  # pip's own check mode reports the change
    assert plan["venv_ready"] is False and plan["verify"] is False
    assert plan["pth"]["content"] is None and plan["torchrun"] == ""
    assert plan["files"] == [] and plan["steps"] == ["build", "pip"]
    assert "check mode" in plan["skip_verify"] and "/opt/wireup/venv" in plan["skip_verify"]
    verified = pytorch_venv.verified({"skipped": True}, plan, "/opt/wireup/venv", "node1")
    assert verified["problems"] == [] and verified["info"] == {}
    assert verified["summary"].startswith("pytorch_venv on node1: check mode")


def test_check_mode_on_a_converged_node_verifies_for_real():
    plan = _plan(check=True)
    assert plan["verify"] is True and plan["pip"]["run"] is False


def test_apt_brings_venv_support_without_a_second_probe():
    """A node without python3-venv (no ensurepip): the plan installs it and counts on what it
    brings, so the venv is made with pip and no probe runs again after apt."""
    probe = _fresh(has_ensurepip=False, dpkg="python3-packaging ii  23.0-1\n")
    plan = _plan(probe, _settings(pytorch_venv_owner="root"))
    assert plan["errors"] == []
    assert plan["apt"] == ["python3-venv"]
    assert "--without-pip" not in plan["venv_argv"]
    # Debian/Ubuntu's system interpreter only: another OS or interpreter gets no apt.
    assert _plan(probe, _settings(pytorch_venv_owner="root"), _node(os={"id": "rocky"}))["apt"] == []
    # dpkg's "un" line (known, not installed) counts as missing.
    assert _plan(_fresh(), _settings(pytorch_venv_os_packages=["python3-dev"]))["apt"] == ["python3-dev"]


def test_an_interpreter_without_ensurepip_is_refused_unless_no_pip_is_needed():
    probe = _fresh(has_ensurepip=False)
    settings = _settings(pytorch_venv_owner="root", pytorch_venv_base_python="/opt/py/bin/python3")
    errors = _plan(probe, settings)["errors"]
    assert len(errors) == 1 and "lacks the venv/ensurepip modules: install python3-venv" in errors[0]
    assert "pytorch_venv_base_python" in errors[0]


def test_reuse_of_a_base_venv_torch_links_it_and_provides_torchrun():
    settings = _settings(
        pytorch_venv_base_python="/opt/wireup/venv/bin/python3",
        pytorch_venv_system_site_packages=True,
        pytorch_venv_path="/opt/wireup/reuse",
        pytorch_venv_fact_dir="/opt/wireup/reuse-facts",
    )
    plan = _plan("base_venv", settings)
    assert plan["errors"] == []
    assert plan["preinstalled"]["use"] is True and plan["pip"]["torch"] == []
    assert plan["pip"]["extras"] == DEFAULTS["pytorch_venv_extra_packages"]  # the venv is new
    assert plan["venv_argv"][-2:] == ["--system-site-packages", "/opt/wireup/reuse"]
    assert plan["pyvenv_flag"] == "true"
    assert plan["pth"]["content"] == "/opt/wireup/venv/lib/python3.11/site-packages\n"
    assert plan["torchrun"].startswith("#!/opt/wireup/reuse/bin/python\n")
    assert "from torch.distributed.run import main" in plan["torchrun"]
    # One copy task writes both (torchrun executable), and no stale .pth is removed.
    assert [(f["key"], f["dest"], f["mode"]) for f in plan["files"]] == [
        ("pth", plan["pth"]["path"], "0644"),
        ("torchrun", "/opt/wireup/reuse/bin/torchrun", "0755"),
    ]
    assert [f["content"] for f in plan["files"]] == [plan["pth"]["content"], plan["torchrun"]]
    assert plan["stale"] == []
    assert "2.13.0+cpu" in plan["notes"][0] and "reusing it" in plan["notes"][0]
    assert plan["fact_path"] == "/opt/wireup/reuse-facts/wireup_torch.fact"
    # Outside the accepted range: torch is installed after all, and the report says why.
    plan = _plan("base_venv", {**settings, "pytorch_venv_accept_preinstalled": ">=2.14"})
    assert plan["pip"]["torch"] == ["torch==2.13.0+cpu"] and plan["torchrun"] == ""
    assert (
        "outside pytorch_venv_accept_preinstalled '>=2.14'; installing torch==2.13.0+cpu" in plan["notes"][0]
    )


def test_a_reuse_rerun_starts_no_pip_for_extras_the_base_interpreter_has():
    """The reuse layout (torch and the extras in the base venv, linked): the extras are visible to
    the venv's pip, which would only say "already satisfied"; the rerun does not start it."""
    settings = _settings(
        pytorch_venv_base_python="/opt/wireup/venv/bin/python3",
        pytorch_venv_system_site_packages=True,
        pytorch_venv_path="/opt/wireup/reuse",
    )
    extras = {"torchinfo": "1.8.0", "numpy": "2.3.5", "nvidia-ml-py": "13.615.71"}
    venv = {"installed": {"pip": "23.0.1"}, "pth": None, "python": True, "system_site_packages": True}
    probe = _probe(
        "base_venv", site_installed={**extras, "torch": "2.13.0+cpu"}, venv={**venv, "torchrun": True}
    )
    plan = _plan(probe, settings)
    assert plan["errors"] == [] and plan["preinstalled"]["use"] is True
    assert plan["pip"]["extras"] == [] and plan["pip"]["torch"] == [] and plan["pip"]["run"] is False
    assert "pip" not in plan["steps"]
    # A pin the base holds at another version, or shadowed by the venv's own copy, is still installed.
    probe = _probe(
        "base_venv",
        site_installed={**extras, "numpy": "1.26.4"},
        venv={**venv, "installed": {"torchinfo": "1.7.0"}, "torchrun": True},
    )
    assert _plan(probe, settings)["pip"]["extras"] == ["torchinfo==1.8.0", "numpy==2.3.5"]
    # Without system site packages the venv sees none of the base's.
    probe = _probe("converged", site_installed=extras)
    assert _plan(probe)["pip"]["extras"] == _plan("converged")["pip"]["extras"]


def test_the_base_interpreter_torch_never_stands_for_the_pinned_one():
    """A base torch the plan did not accept (outside pytorch_venv_accept_preinstalled) is installed
    into the venv even where the base's site-packages hold the pinned version's name."""
    settings = _settings(
        pytorch_venv_base_python="/opt/wireup/venv/bin/python3",
        pytorch_venv_system_site_packages=True,
        pytorch_venv_accept_preinstalled=">=2.14",
    )
    plan = _plan(_probe("base_venv", site_installed={"torch": "2.13.0+cpu"}), settings)
    assert plan["preinstalled"]["use"] is False and plan["pip"]["torch"] == ["torch==2.13.0+cpu"]


def test_h200_node_reuses_its_cuda_torch():
    node, torch_v, cuda_v, _ = _h200_node()
    probe = _probe("base_venv", torch={"version": torch_v, "cuda": cuda_v, "path": "/x", "error": ""})
    settings = _settings(
        pytorch_venv_base_python="/opt/torch/.venv/bin/python3", pytorch_venv_system_site_packages=True
    )
    plan = _plan(probe, settings, node)
    assert plan["errors"] == []
    assert plan["choice"]["variant"] == "cu130"
    assert plan["preinstalled"]["use"] is True and plan["gpu"] == {"present": True, "count": 2}


@pytest.mark.parametrize(
    ("over", "needles"),
    [
        ({"pytorch_venv_path": "opt/venv"}, ["pytorch_venv_path='opt/venv' must be an absolute path"]),
        ({"pytorch_venv_wheelhouse_dir": "/srv/wheels"}, ["at most one of pytorch_venv_wheelhouse_url"]),
        ({"pytorch_venv_wheelhouse_url": "ftp://x/"}, ["pytorch_venv_wheelhouse_url='ftp://x/'"]),
        (
            {"pytorch_venv_wheelhouse_url": "", "pytorch_venv_wheelhouse_dir": "/nonexistent/wheels"},
            ["pytorch_venv_wheelhouse_dir='/nonexistent/wheels' is not a directory"],
        ),
        ({"pytorch_venv_owner": ""}, ["pytorch_venv_owner and pytorch_venv_group must not be empty"]),
        (
            {"pytorch_venv_wheelhouse_url": "", "pytorch_venv_requirements_file": "/r.txt"},
            ["pytorch_venv_requirements_file=/r.txt needs a wheelhouse", "core/wheelhouse.py WHEELHOUSE"],
        ),
        ({"pytorch_venv_extra_packages": ["torchinfo"]}, ["pytorch_venv_extra_packages", "fix: torchinfo"]),
        (
            {"pytorch_venv_system_site_packages": True, "pytorch_venv_accept_preinstalled": "2.11"},
            ["pytorch_venv_accept_preinstalled='2.11' is not a version range"],
        ),
        (
            {"pytorch_venv_torch_version": "2.99.0"},
            ["pytorch_venv_torch_variants", "pytorch_venv_cuda_variant"],
        ),
    ],
)
def test_bad_inputs_are_named_with_their_fix(over, needles):
    errors = _plan(settings=_settings(**over))["errors"]
    assert errors, over
    for needle in needles:
        assert any(needle in e for e in errors), (needle, errors)


def test_inputs_are_all_reported_at_once():
    settings = _settings(pytorch_venv_path="venv", pytorch_venv_extra_packages=["numpy"])
    assert len(_plan(settings=settings)["errors"]) == 2


def test_node_errors_name_the_variable_and_the_fix():
    failed = {"rc": 127, "stdout": "/bin/sh: 1: /opt/nope/bin/python3: not found\r\n", "msg": "non-zero"}
    errors = _plan(failed, _settings(pytorch_venv_base_python="/opt/nope/bin/python3"))["errors"]
    assert errors == [
        "pytorch_venv_base_python /opt/nope/bin/python3 does not run (rc 127: /bin/sh: 1: "
        "/opt/nope/bin/python3: not found non-zero): point it at the Python the venv should be built from"
    ]
    # The fresh probe asked for owner 'wireup', who does not exist there.
    errors = _plan("fresh", _settings(pytorch_venv_owner="wireup"))["errors"]
    assert errors == [
        "pytorch_venv_owner 'wireup' does not exist on the node: create it, set "
        "pytorch_venv_create_owner: true, or pick an existing user"
    ]
    created = _plan("fresh", _settings(pytorch_venv_owner="wireup", pytorch_venv_create_owner=True))
    assert created["errors"] == [] and created["become"] is True  # pip runs as the owner
    old = _plan(_probe("converged", python_version="3.9.18"))["errors"]
    assert len(old) == 1 and "needs Python >= 3.10" in old[0] and "pytorch_venv_base_python" in old[0]


def test_a_pip_left_running_is_waited_for_then_reported_or_refused():
    pip = {"pid": 4242, "cmdline": "/opt/wireup/venv/bin/python3 /opt/wireup/venv/bin/pip install torch"}
    waited = _plan(_probe("converged", pip={"found": [pip], "running": [], "waited_s": 12}))
    assert waited["errors"] == []
    note = waited["notes"][0]
    assert (
        "(an interrupted earlier run?): 4242 (/opt/wireup/venv/bin/python3 /opt/wireup/venv/bin/pip" in note
    )
    assert "waited 12 s for it instead of starting a second pip, then read the venv it left" in note
    stuck = _plan(_probe("converged", pip={"found": [pip], "running": [pip], "waited_s": 0}))
    assert any("pytorch_venv_pip_wait_timeout" in e and "kill 4242" in e for e in stuck["errors"])


def test_controller_wheelhouse_is_shipped_only_when_pip_has_work_and_the_node_is_remote():
    settings = _settings(pytorch_venv_wheelhouse_url="", pytorch_venv_wheelhouse_dir="/srv/wheels//")
    controller = {"wheelhouse_dir": True}
    fresh = _plan(_fresh(), {**settings, "pytorch_venv_owner": "root"}, controller=controller)["pip"]
    assert fresh["copies"] == [{"src": "/srv/wheels/", "dest": "/opt/wireup/wheelhouse/"}]
    assert (
        fresh["env"]["PIP_FIND_LINKS"] == "/opt/wireup/wheelhouse" and "PIP_TRUSTED_HOST" not in fresh["env"]
    )
    local = _plan(
        _fresh(), {**settings, "pytorch_venv_owner": "root"}, _node(is_local=True), controller=controller
    )
    assert local["pip"]["copies"] == [] and local["pip"]["env"]["PIP_FIND_LINKS"] == "/srv/wheels//"
    assert _plan(settings=settings, controller=controller)["pip"]["copies"] == []  # converged


def test_online_install_uses_the_variant_index_and_the_extra_index():
    settings = _settings(pytorch_venv_wheelhouse_url="", pytorch_venv_owner="root")
    pip = _plan(_fresh(), settings)["pip"]
    assert pip["env"]["PIP_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    assert "PIP_INDEX_URL" not in pip["extras_env"]  # pip's own configuration (PyPI)
    mirror = _plan(_fresh(), {**settings, "pytorch_venv_extra_index_url": "https://pypi.local/simple"})
    assert mirror["pip"]["extras_env"]["PIP_INDEX_URL"] == "https://pypi.local/simple"


def test_hash_checked_requirements_replace_the_torch_and_extra_steps():
    settings = _settings(pytorch_venv_owner="root", pytorch_venv_requirements_file="/srv/req.txt")
    controller = {"requirements_file": True}
    pip = _plan(_fresh(), settings, controller=controller)["pip"]
    assert pip["torch"] == [] and pip["extras"] == [] and pip["hashed"] is True
    assert pip["copies"] == [
        {"src": "/srv/req.txt", "dest": "/opt/wireup/venv/wireup-requirements-hashed.txt"}
    ]
    # In check mode the file would be shipped, but pip cannot read it yet.
    assert [(i["key"], i["requirements"], i["extra_args"]) for i in pip["installs"]] == [
        ("hashed", "/opt/wireup/venv/wireup-requirements-hashed.txt", "--require-hashes")
    ]
    checked = _plan(_fresh(), settings, check=True, controller=controller)["pip"]
    assert checked["hashed"] is False and checked["copies"] and checked["run"] is True
    assert checked["installs"] == []
    assert _plan(settings=settings, controller=controller)["pip"]["run"] is False  # converged


def _pip_failure(key, stderr_file):
    """A failed item of the looped pip task (its item's key says which install it was)."""
    stderr = (TESTBED / stderr_file).read_text()
    return {
        "failed": True,
        "cmd": "/opt/wireup/venv/bin/pip3 install ...",
        "msg": f"stdout: \n\n:stderr: {stderr}",
        "stderr": stderr,
        "stdout": "",
        "item": {"key": key},
    }


def test_pip_installs_are_the_one_looped_task_s_items_torch_then_extras():
    plan = _plan(_fresh(), _settings(pytorch_venv_owner="root"))
    installs = plan["pip"]["installs"]
    assert [i["key"] for i in installs] == ["torch", "extras"]
    assert installs[0]["name"] == plan["pip"]["torch"] and installs[0]["env"] == plan["pip"]["env"]
    assert installs[1]["name"] == plan["pip"]["extras"] and installs[1]["env"] == plan["pip"]["extras_env"]
    assert all("requirements" not in i for i in installs)
    assert _plan(settings=_settings(pytorch_venv_owner="root"))["pip"]["installs"] == []  # converged


def test_pip_failure_of_the_looped_task_names_the_failed_item():
    plan = _plan(_fresh(), _settings(pytorch_venv_owner="root"))
    torch_ok = {"changed": True, "item": plan["pip"]["installs"][0], "invocation": {"module_args": {}}}
    extras_failed = {
        **_pip_failure("extras", "pip_cannot_install_torch_pip23.0.1.txt"),
        "item": plan["pip"]["installs"][1],
    }
    looped = {"failed": True, "msg": "One or more items failed", "results": [torch_ok, extras_failed]}
    msg = pytorch_venv.pip_failure(looped, plan, "node1")
    assert "pytorch_venv_extra_packages" in msg and "ResolutionImpossible" in msg
    assert "One or more items failed" not in msg


def test_pip_failures_say_which_install_failed_and_the_fix():
    plan = _plan(_fresh(), _settings(pytorch_venv_owner="root"))
    torch_failed = _pip_failure("torch", "pip_cannot_install_torch_pip23.0.1.txt")
    msg = pytorch_venv.pip_failure(torch_failed, plan, "node1")
    assert msg.startswith("pytorch_venv on node1: pip could not install torch==2.13.0+cpu (no NVIDIA GPU")
    assert f"from wheelhouse {WHEELS}: ERROR: ResolutionImpossible" in msg
    assert "pytorch_venv_torch_version" in msg and "{error}" not in msg
    extras_failed = _pip_failure("extras", "pip_cannot_install_torch_pip23.0.1.txt")
    assert "pytorch_venv_extra_packages" in pytorch_venv.pip_failure(extras_failed, plan, "node1")
    hashed_failed = _pip_failure("hashed", "pip_hash_mismatch_pip23.0.1.txt")
    msg = pytorch_venv.pip_failure(hashed_failed, plan, "node1")
    assert "hash-checked requirements" in msg and "Expected sha256 0000" in msg and "Got" in msg
    assert "make the file again" in msg


def test_verified_reads_the_real_verification_script():
    """verify_torch.py run here (no torch on the controller): the plan's verification fails with
    the import error; an H200 report passes and becomes the fact and the report line."""
    plan = _plan()
    out = subprocess.run(
        [sys.executable, str(ROOT / "roles/pytorch_venv/files/verify_torch.py")],
        capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": "/none"},
    )  # fmt: skip
    result = {"rc": 0, "stdout": out.stdout, "stdout_lines": out.stdout.splitlines()}
    verified = pytorch_venv.verified(result, plan, "/opt/wireup/venv", "node1")
    if "torch_version" in json.loads(out.stdout):
        pytest.skip("torch is importable here")
    assert verified["problems"][0].startswith(
        "torch does not import in /opt/wireup/venv: ModuleNotFoundError"
    )
    garbled = pytorch_venv.verified({"rc": 1, "stdout": "Segmentation fault\r\n"}, plan, "/opt/wireup/venv")
    assert "printed no report (rc 1): Segmentation fault" in garbled["problems"][0]

    node, torch_v, cuda_v, nccl_v = _h200_node()
    probe = _probe("base_venv", torch={"version": torch_v, "cuda": cuda_v, "path": "/x", "error": ""})
    settings = _settings(
        pytorch_venv_base_python="/opt/torch/.venv/bin/python3", pytorch_venv_system_site_packages=True
    )
    plan = _plan(probe, settings, node)
    report = {
        "python": "3.12.3", "torch_version": torch_v, "cuda_version": cuda_v, "nccl_version": nccl_v,
        "cuda_available": True, "device_count": 2, "devices": ["NVIDIA H200"] * 2,
        "torch_file": "/opt/torch/.venv/lib/python3.12/site-packages/torch/__init__.py",
    }  # fmt: skip
    line = json.dumps(report)
    verified = pytorch_venv.verified(
        {"rc": 0, "stdout_lines": ["a warning", line]}, plan, "/opt/wireup/venv", "h200"
    )
    assert verified["problems"] == []
    assert verified["info"] == {
        "venv": "/opt/wireup/venv",
        "python": "3.12.3",
        "torch_version": "2.11.0+cu130",
        "torch_path": "/opt/torch/.venv/lib/python3.12/site-packages/torch/__init__.py",
        "cuda_version": "13.0",
        "nccl_version": "2.28.9",
        "cuda_available": True,
        "device_count": 2,
        "variant": "cu130",
        "preinstalled": True,
        "base_python": "/opt/torch/.venv/bin/python3",
    }
    assert verified["summary"].startswith(
        "pytorch_venv on h200: torch 2.11.0+cu130 (preinstalled, from /opt/torch"
    )
    assert "reusing it" in verified["summary"]
    one_gpu = copy.deepcopy(report) | {"device_count": 1}
    verified = pytorch_venv.verified(
        {"rc": 0, "stdout_lines": [json.dumps(one_gpu)]}, plan, "/opt/wireup/venv"
    )
    assert "torch sees 1 GPU(s) in /opt/wireup/venv, preflight found 2" in verified["problems"][0]


def test_the_build_runs_only_for_what_the_probe_finds_the_venv_lacking():
    """The probe says what the venv is (its python, pyvenv.cfg's flag, the .pth's folders,
    torchrun, the local fact); the build's one include runs only for a difference. Folders' modes
    and owners are not read: the file task keeps the venv's on every run (issue 24: no second idempotency
    model)."""
    converged = _plan()
    assert converged["changes"] == [] and converged["pip"]["run"] is False
    venv = json.loads(_probe("converged")["stdout_lines"][0])["venv"]
    pth = converged["pth"]["path"]
    for change, named in (
        ({"python": False}, "the venv's python"),
        ({"system_site_packages": True}, "pyvenv.cfg include-system-site-packages"),
        ({"pth": ["/elsewhere"]}, pth),  # a stale link to a base virtualenv
    ):
        plan = _plan(_probe("converged", venv={**venv, **change}))
        assert plan["changes"] == [named], (change, plan["changes"])
        assert plan["steps"] == ["build", *(["pip"] if plan["pip"]["run"] else [])], (
            change
        )  # a new venv: pip too
    apt = _plan(settings=_settings(pytorch_venv_os_packages=["python3-dev"]))
    assert apt["changes"] == ["apt packages python3-dev"]
    # The local fact: written when the verification's info differs from the one the probe read.
    info = json.loads(_probe("converged")["stdout_lines"][0])["fact"]
    assert converged["fact_now"] == info
    report = {"python": "3.11.2", "torch_version": "2.13.0+cpu", "cuda_version": "", "nccl_version": "",
              "cuda_available": False, "device_count": 0,
              "torch_file": "/opt/wireup/venv/lib/python3.11/site-packages/torch/__init__.py"}  # fmt: skip
    result = {"rc": 0, "stdout_lines": [json.dumps(report)]}
    assert pytorch_venv.verified(result, converged, "/opt/wireup/venv")["write_fact"] is False
    gone = _plan(_probe("converged", fact=None))
    assert pytorch_venv.verified(result, gone, "/opt/wireup/venv")["write_fact"] is True


def test_pip_failure_names_the_cause_without_an_index_url_s_credentials():
    settings = _settings(
        pytorch_venv_owner="root",
        pytorch_venv_wheelhouse_url="",
        pytorch_venv_extra_index_url="https://me:pw123@pypi.corp.example/simple",
        pytorch_venv_index_base_url="https://__token__:tok456@download.corp.example/whl",
    )
    plan = _plan(_fresh(), settings)
    assert plan["pip"]["extras_env"]["PIP_INDEX_URL"] == "https://me:pw123@pypi.corp.example/simple"  # pip's
    assert all("tok456" not in text and "pw123" not in text for text in plan["pip"]["failures"].values())
    stderr = (
        "Looking in indexes: https://me:pw123@pypi.corp.example/simple\n"
        "ERROR: Could not find a version that satisfies the requirement foo (from versions: none)\n"
        "ERROR: No matching distribution found for foo (from https://me:pw123@pypi.corp.example/simple)\n"
    )
    msgs = []
    for key, words in (("extras", "pytorch_venv_extra_packages"), ("torch", "pytorch_venv_torch_version")):
        failed = dict(_pip_failure(key, "pip_cannot_install_torch_pip23.0.1.txt"), stderr=stderr)
        msgs.append(pytorch_venv.pip_failure(failed, plan, "node1"))
        assert "pw123" not in msgs[-1] and "tok456" not in msgs[-1] and "me:" not in msgs[-1], msgs[-1]
        assert "No matching distribution found for foo" in msgs[-1] and words in msgs[-1], msgs[-1]
    assert "from https://***@pypi.corp.example/simple: ERROR: No matching distribution" in msgs[0]


def test_the_probe_request_asks_for_the_base_s_torch_and_distributions_only_for_the_reuse_layout():
    request = pytorch_venv.probe_request(_fields(_settings()))
    assert request == {
        "owner": "root",
        "packages": request["packages"],
        "dpkg": request["dpkg"],
        "venv": "/opt/wireup/venv",
        "pip_wait": DEFAULTS["pytorch_venv_pip_wait_timeout"],
        "torch": False,
        "site": False,
        "pth": pytorch_venv.PTH_NAME,
        "fact": f"{DEFAULTS['pytorch_venv_fact_dir']}/{pytorch_venv.FACT_NAME}",
    }
    reuse = pytorch_venv.probe_request(_fields(_settings(pytorch_venv_system_site_packages=True)))
    assert (reuse["torch"], reuse["site"]) == (True, True)
