"""The project's shape: entry playbooks import playbooks/, every entry sees group_vars/all.yml."""

import os
import pathlib
import re
import subprocess

import pytest
import yaml

from tests import busy

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin"
ENTRIES = ["site.yml", "bench.yml", "launch.yml"]


@pytest.mark.parametrize("entry", ENTRIES)
def test_entry_playbook_only_imports(entry):
    plays = yaml.safe_load((ROOT / entry).read_text())
    assert plays, entry
    for play in plays:
        assert set(play) <= {"name", "ansible.builtin.import_playbook"}, play
        assert (ROOT / play["ansible.builtin.import_playbook"]).is_file()


@pytest.mark.parametrize("entry", ENTRIES)
def test_entry_playbook_sees_group_vars(entry, tmp_path):
    """Run only the always-tagged preflight of each entry against this machine, read-only.

    Preflight asserts that group_vars/all.yml was loaded and prints the pinned master; a value set
    only in group_vars/all.yml (wireup_ansible_core_range) must be visible to every entry command.
    """
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "children": {
                        "gpu_nodes": {
                            "hosts": {
                                "localhost": {
                                    "ansible_connection": "local",
                                    "ansible_python_interpreter": str(BIN / "python"),
                                }
                            }
                        }
                    }
                }
            }
        )
    )
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    result = subprocess.run(
        [
            str(BIN / "ansible-playbook"),
            "-i",
            str(inventory),
            entry,
            "--tags",
            "wireup_layout_probe",
            "-e",
            "preflight_min_free_mb=0",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=busy.HANG_S,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Check the project's group_vars are loaded" in result.stdout
    assert "localhost                  : ok=" in result.stdout
    assert "failed=0" in result.stdout


def test_playbooks_group_vars_is_the_root_one():
    link = ROOT / "playbooks" / "group_vars"
    assert link.is_symlink()
    assert link.resolve() == (ROOT / "group_vars").resolve()


def test_every_role_has_its_documents():
    for role in sorted(p for p in (ROOT / "roles").iterdir() if p.is_dir()):
        for part in (
            "README.md",
            "defaults/main.yml",
            "meta/main.yml",
            "meta/argument_specs.yml",
            "tasks/main.yml",
        ):
            assert (role / part).is_file(), f"{role.name} lacks {part}"
        specs = yaml.safe_load((role / "meta/argument_specs.yml").read_text())
        options = {}  # a default may belong to another entry point (nccl's torch)
        for entry in specs["argument_specs"].values():
            options.update(entry.get("options") or {})
        assert "main" in specs["argument_specs"], f"{role.name}: no main entry point"
        defaults = yaml.safe_load((role / "defaults/main.yml").read_text()) or {}
        missing = sorted(set(defaults) - set(options))
        assert not missing, f"{role.name}: defaults without argument_specs entries: {missing}"


def _role_options():
    """{variable: {role: (its default, its argument spec)}} over every role."""
    out = {}
    for role in sorted(p for p in (ROOT / "roles").iterdir() if p.is_dir()):
        defaults = yaml.safe_load((role / "defaults/main.yml").read_text()) or {}
        specs = yaml.safe_load((role / "meta/argument_specs.yml").read_text())
        options = {}
        for entry in specs["argument_specs"].values():
            options.update(entry.get("options") or {})
        for name, value in defaults.items():
            spec = {k: v for k, v in (options.get(name) or {}).items() if k != "description"}
            out.setdefault(name, {})[role.name] = (value, spec)
    return out


def test_a_variable_several_roles_declare_has_one_default_and_one_type():
    """The bench family's shared settings (bench_env, bench_dir, bench_fail_on_fail) are declared by
    each role that reads them: the same default and type everywhere, so it cannot drift."""
    shared = {name: by_role for name, by_role in _role_options().items() if len(by_role) > 1}
    assert {name: sorted(by_role) for name, by_role in shared.items()} == {
        "bench_dir": ["bench", "bench_fabric"],
        "bench_env": ["bench", "bench_fabric"],
        "bench_fail_on_fail": ["bench_fabric", "bench_report"],
    }
    for name, by_role in shared.items():
        assert len({repr(v) for v in by_role.values()}) == 1, f"{name} differs between {sorted(by_role)}"


def _block_scalar_escapes(text):
    """(line number, line) of every Jinja '\\n', '\\t' or '\\\\' escape written inside a YAML block
    scalar (`>-`, `|`): there Jinja keeps the backslash (ansible-core 2.19), so '\\n' joins with a
    backslash and an n, and a regex '\\\\s' matches a backslash (a regex's single '\\s' is right).
    Double-quoted scalars turn the escape into the character first, so they are fine."""
    found, block_indent = [], None
    for number, line in enumerate(text.splitlines(), 1):
        indent = len(line) - len(line.lstrip())
        if block_indent is not None and line.strip() and indent <= block_indent:
            block_indent = None
        if block_indent is not None and re.search(r"\\[nt\\]", line):
            found.append((number, line.strip()))
        if line.rstrip().endswith((": >-", ": >", ": |", ": |-")):
            block_indent = indent
    return found


@pytest.mark.parametrize(
    "path",
    sorted(
        str(p.relative_to(ROOT)) for p in [*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("playbooks/*.yml")]
    ),
)
def test_no_backslash_escape_in_block_scalars(path):
    assert _block_scalar_escapes((ROOT / path).read_text()) == []


def test_block_scalar_escape_check_finds_one():
    text = "- set_fact:\n    x: >-\n      {{ a ~ '\\n' ~ b }}\n    y: \"{{ a ~ '\\n' }}\"\n"
    assert _block_scalar_escapes(text) == [(3, "{{ a ~ '\\n' ~ b }}")]
