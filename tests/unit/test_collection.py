"""The repository as the collection wireup.cluster: one code path (every own role, module, filter
and the action plugin called by FQCN, loaded through .collections as from an installed
collection), imports by the collection's name, and an artifact that holds the collection only."""

import ast
import configparser
import pathlib
import re
import subprocess
import sys
import tarfile
import types

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
FQCN = "wireup.cluster."


def _filter_names():
    names = set()
    for path in (ROOT / "plugins/filter").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "filters":
                for found in ast.walk(node):
                    if isinstance(found, ast.Dict):
                        names |= {k.value for k in found.keys if isinstance(k, ast.Constant)}
    return names


FILTERS = _filter_names()
MODULES = {path.stem for path in (ROOT / "plugins/modules").glob("*.py")}
ROLES = {path.name for path in (ROOT / "roles").iterdir() if path.is_dir()}


def _alternation(names):
    return "|".join(sorted(map(re.escape, names), key=len, reverse=True))


# A filter after a pipe or named in map()/select(); a module as a task's key; a role by name.
SHORT_FILTER = re.compile(r"(?:\|\s*|(?:map|select|reject)\(\s*['\"])(" + _alternation(FILTERS) + r")\b")
SHORT_MODULE = re.compile(r"^\s*(?:- )?(" + _alternation(MODULES) + r"):", re.M)
SHORT_ROLE = re.compile(r"^\s*(?:- )?(?:name|role): (" + _alternation(ROLES) + r")\s*(?:#.*)?$", re.M)


def _yaml_and_templates():
    listed = subprocess.run(
        ["git", "ls-files", "*.yml", "*.j2"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / p for p in listed if (ROOT / p).is_file() and not (ROOT / p).is_symlink()]


def short_names(text):
    """wireup's own filters, modules and roles called without wireup.cluster. in text."""
    return sorted({m.group(1) for rx in (SHORT_FILTER, SHORT_MODULE, SHORT_ROLE) for m in rx.finditer(text)})


def test_names_are_found():
    assert {"wireup_launch_plan", "wireup_node_summary", "wireup_secret_names"} <= FILTERS
    assert {"wireup_node_facts", "wireup_wait"} <= MODULES
    assert {"preflight", "gpu_topology", "bench"} <= ROLES


def test_the_short_name_check_finds_each_kind():
    text = (
        "- name: X\n  wireup_nic_facts:\n"
        "    a: \"{{ x | wireup_master(y) | map('wireup_node_summary', z) }}\"\n"
        "- ansible.builtin.import_role:\n    name: preflight\n"
        "  roles:\n    - role: gpu_topology\n"
    )
    assert short_names(text) == ["gpu_topology", "preflight", "wireup_master", "wireup_nic_facts",
                                 "wireup_node_summary"]  # fmt: skip
    fqcn = text.replace("wireup_", FQCN + "wireup_").replace(": preflight", ": wireup.cluster.preflight")
    assert short_names(fqcn.replace(": gpu_topology", ": wireup.cluster.gpu_topology")) == []


def test_playbooks_roles_and_templates_call_wireup_by_fqcn():
    """Ansible looks filters up by FQCN only, and ansible.cfg names no plugin or role path: a short
    name would fail at run time (a filter only when its task runs). One code path: the one an
    installed collection gives."""
    found = {str(p.relative_to(ROOT)): short_names(p.read_text()) for p in _yaml_and_templates()}
    assert {p: names for p, names in found.items() if names} == {}


def test_ansible_cfg_finds_wireup_as_a_collection_only():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "ansible.cfg")
    defaults = dict(cfg["defaults"])
    assert defaults["collections_path"] == ".collections"
    old = {"roles_path", "library", "module_utils", "filter_plugins", "action_plugins"}
    assert old.isdisjoint(defaults), "plugins and roles come from the collection (wireup.cluster.*)"


def test_the_collection_folder_links_to_the_collection_s_parts():
    """A folder of links, not one link to the repository root: a tool that follows links would loop."""
    folder = ROOT / ".collections/ansible_collections/wireup/cluster"
    assert folder.is_dir() and not folder.is_symlink()
    links = {p.name: p for p in folder.iterdir()}
    assert set(links) == {"galaxy.yml", "meta", "plugins", "roles", "files", "playbooks"}
    for name, link in links.items():
        assert link.is_symlink() and str(link.readlink()) == f"../../../../{name}"
        assert link.resolve() == ROOT / name


def test_no_link_points_at_a_folder_above_it():
    """Tools that follow links never loop (ansible-lint's file discovery took 17 min walking a link
    to the repository root before it stopped)."""
    tracked = subprocess.run(
        ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    links = [ROOT / line.split("\t", 1)[1] for line in tracked if line.startswith("120000 ")]
    assert len(links) >= 7
    loops = [str(p.relative_to(ROOT)) for p in links if p.parent.resolve().is_relative_to(p.resolve())]
    assert loops == []


def _python_files(*folders):
    return [p for folder in folders for p in (ROOT / folder).rglob("*.py")]


def test_plugins_and_tests_import_wireup_by_the_collection_s_name():
    old = re.compile(
        r"^\s*(from wireup(\.\w+)? import|import wireup\b|from wireup_plugin import)"
        r"|ansible\.module_utils\.wireup|sys\.path\.insert\(.*module_utils",
        re.M,
    )
    files = _python_files("plugins", "tests", "docs", ".ci")
    assert len(files) > 100
    assert [str(p.relative_to(ROOT)) for p in files if old.search(p.read_text())] == []


def test_the_wireup_package_imports_only_itself_and_the_standard_library_at_the_top():
    """plugins/module_utils/wireup runs on nodes as a plain package too: relative imports only, and
    no Ansible or third-party import at module level (ansible-test's import test)."""
    allowed = set(sys.stdlib_module_names)
    paths = sorted((ROOT / "plugins/module_utils/wireup").rglob("*.py"))
    assert len(paths) > 40
    for path in paths:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom):
                assert node.level > 0 or node.module.split(".")[0] in allowed, (path.name, node.module)
            elif isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] in allowed for a in node.names), (path.name, node.lineno)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    out = tmp_path_factory.mktemp("collection")
    subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(out), str(ROOT)],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    [built] = out.glob("wireup-cluster-*.tar.gz")
    return built


def test_the_artifact_holds_the_collection_only(artifact):
    with tarfile.open(artifact) as tar:
        names = [m.name for m in tar.getmembers() if not m.isdir()]
    assert {n.split("/")[0] for n in names} == {
        "MANIFEST.json", "FILES.json", "README.md", "CHANGELOG.md", "files", "group_vars", "inventory",
        "meta", "playbooks", "plugins", "roles", "tests",
    }  # fmt: skip
    assert {n for n in names if n.startswith("tests/")} == {
        "tests/config.yml",
        "tests/sanity/ignore-2.19.txt",
    }
    assert not [n for n in names if "/." in "/" + n or "__pycache__" in n]
    assert {f"plugins/modules/{m}.py" for m in MODULES} <= set(names)
    assert {f"roles/{r}/meta/argument_specs.yml" for r in ROLES} <= set(names)
    # 0.38 MB on 2026-12-02; with docs/ (its captures and pictures) it would be 1.9 MB.
    assert artifact.stat().st_size < 1_000_000


def test_the_makefile_s_pip_is_ansible_test_s():
    """make sanity puts .ci/get_pip.py where ansible-test looks for its pip's bootstrap script."""
    from ansible_test._internal.python_requirements import get_venv_packages

    pinned = re.search(r"^ANSIBLE_TEST_PIP := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned and pinned.group(1) == get_venv_packages(types.SimpleNamespace(version="3.11"))["pip"]


def test_runtime_requires_the_pinned_ansible_core():
    runtime = yaml.safe_load((ROOT / "meta/runtime.yml").read_text())
    group_vars = yaml.safe_load((ROOT / "group_vars/all.yml").read_text())
    assert runtime["requires_ansible"] == group_vars["wireup_ansible_core_range"]
    pin = re.search(r"^ansible-core==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import checks

    assert checks.check_version_range(pin, runtime["requires_ansible"])
