"""The torch venv the integration tests' testbeds share (tests/testbed/cache.py): kept from a node
the role installed, copied whole to a later testbed's node, and never reused once the role, the
image or the wheels change (CI: issue 38)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.testbed import cache


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A repository with the role's files, a torch wheel and an empty cache, all under tmp_path."""
    repo = tmp_path / "repo"
    (repo / "roles/pytorch_venv/defaults").mkdir(parents=True)
    (repo / "roles/pytorch_venv/defaults/main.yml").write_text("pytorch_venv_extra_packages:\n  - numpy\n")
    (repo / "group_vars").mkdir()
    (repo / "group_vars/all.yml").write_text("pytorch_venv_torch_version: 2.13.0\n")
    wheel = tmp_path / "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"wheel")
    monkeypatch.setenv("WIREUP_TESTBED_TORCH_WHEEL", str(wheel))
    monkeypatch.setattr(cache, "REPO_ROOT", repo)
    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path / "cache")
    golden = tmp_path / "cache/golden-bookworm-0123456789abcdef"
    golden.mkdir(parents=True)
    return repo, golden


def a_venv(root: Path) -> Path:
    venv = root / "opt/wireup/venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/torchrun").write_text("#!/opt/wireup/venv/bin/python\n")
    (venv / "bin/torchrun").chmod(0o755)
    (venv / "bin/python").symlink_to("/usr/bin/python3")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return venv


def tree(root: Path) -> dict:
    """Every entry under root: its kind, mode and content or link target."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_dir():
            out[rel] = ("dir", path.stat().st_mode)
        else:
            out[rel] = ("file", path.stat().st_mode, path.read_bytes())
    return out


def test_nothing_is_copied_before_a_venv_is_kept(machine, tmp_path):
    _, golden = machine
    dest = tmp_path / "node2/opt/wireup/venv"
    assert cache.copy_kept_torch_venv(golden, "/opt/wireup", dest) is False
    assert not dest.exists()


def test_a_kept_venv_is_copied_whole_with_modes_and_links(machine, tmp_path):
    _, golden = machine
    made = a_venv(tmp_path / "node1")
    cache.keep_torch_venv(made, golden, "/opt/wireup", log=lambda _m: None)
    dest = tmp_path / "node2/opt/wireup/venv"
    assert cache.copy_kept_torch_venv(golden, "/opt/wireup", dest) is True
    assert tree(dest) == tree(made)
    assert os.access(dest / "bin/torchrun", os.X_OK)


@pytest.mark.parametrize(
    "change",
    ["role", "torch pin", "extra packages", "wheel", "path", "image"],
)
def test_the_kept_venv_is_not_reused_once_what_made_it_changes(machine, tmp_path, change):
    repo, golden = machine
    cache.keep_torch_venv(a_venv(tmp_path / "node1"), golden, "/opt/wireup", log=lambda _m: None)
    base = "/opt/wireup"
    if change == "role":
        (repo / "roles/pytorch_venv/tasks").mkdir()
        (repo / "roles/pytorch_venv/tasks/main.yml").write_text("---\n")
    elif change == "torch pin":
        (repo / "group_vars/all.yml").write_text("pytorch_venv_torch_version: 2.14.0\n")
    elif change == "extra packages":
        defaults = repo / "roles/pytorch_venv/defaults/main.yml"
        defaults.write_text("pytorch_venv_extra_packages:\n  - scipy\n")
    elif change == "wheel":
        Path(os.environ["WIREUP_TESTBED_TORCH_WHEEL"]).write_bytes(b"another wheel")
    elif change == "path":
        base = "/srv/wireup"
    else:
        golden = golden.with_name("golden-bookworm-fedcba9876543210")
    assert cache.copy_kept_torch_venv(golden, base, tmp_path / "node2/venv") is False


def test_keeping_a_new_venv_removes_the_earlier_keys_copy(machine, tmp_path):
    repo, golden = machine
    cache.keep_torch_venv(a_venv(tmp_path / "node1"), golden, "/opt/wireup", log=lambda _m: None)
    (repo / "group_vars/all.yml").write_text("pytorch_venv_torch_version: 2.14.0\n")
    cache.keep_torch_venv(a_venv(tmp_path / "node3"), golden, "/opt/wireup", log=lambda _m: None)
    kept = sorted(p.name for p in (tmp_path / "cache").glob("torch-venv-*") if p.is_dir())
    assert kept == [cache.torch_venv_cache(golden, "/opt/wireup").name]
