"""The repository as the collection wireup.cluster: one code path (every own role, module, filter
and the action plugin called by FQCN, loaded through .collections as from an installed
collection), imports by the collection's name, and an artifact that holds the collection only."""

import ast
import configparser
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

from tests import busy

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
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=busy.HANG_S,
    )  # fmt: skip
    [built] = out.glob("wireup-cluster-*.tar.gz")
    return built


def test_the_artifact_holds_the_collection_only(artifact):
    with tarfile.open(artifact) as tar:
        names = [m.name for m in tar.getmembers() if not m.isdir()]
    assert {n.split("/")[0] for n in names} == {
        "MANIFEST.json", "FILES.json", "README.md", "CHANGELOG.md", "changelogs", "files", "group_vars",
        "inventory", "meta", "playbooks", "plugins", "roles", "tests",
    }  # fmt: skip
    assert {n for n in names if n.startswith("tests/")} == {
        "tests/config.yml",
        "tests/sanity/ignore-2.19.txt",
        "tests/sanity/ignore-2.20.txt",
        "tests/sanity/ignore-2.21.txt",
    }
    assert {"changelogs/changelog.yaml", "changelogs/config.yaml"} <= set(names)
    assert not [n for n in names if "/." in "/" + n or "__pycache__" in n]
    assert {f"plugins/modules/{m}.py" for m in MODULES} <= set(names)
    assert {f"roles/{r}/meta/argument_specs.yml" for r in ROLES} <= set(names)
    # 0.38 MB on 2026-12-02; with docs/ (its captures and pictures) it would be 1.9 MB.
    assert artifact.stat().st_size < 1_000_000


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path):
    """{name: version} of a requirements or constraints file, following its -r includes."""
    pins = {}
    for text in path.read_text().splitlines():
        line = text.split("#", 1)[0].strip()
        if line.startswith("-r "):
            pins |= _pins(path.parent / line[3:].strip())
        elif line:
            name, version = re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.+!-]+)", line).groups()
            pins[_canonical(name)] = version
    return pins


def _supported_cores():
    """The ansible-core versions the Makefile makes venvs for (the first: .venv's) and their files."""
    cores = re.search(r"^ANSIBLE_CORES := (.+)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()
    return cores, {core: ROOT / ("requirements.txt" if i == 0 else f"requirements-{core}.txt")
                   for i, core in enumerate(cores)}  # fmt: skip


def test_runtime_requires_the_pinned_ansible_cores():
    """Every supported ansible-core has a venv pinned to one of its releases, inside requires_ansible
    (which preflight checks on the controller), and the range ends where the newest minor ends: a
    user of a later ansible-core is told it is not supported."""
    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import checks

    runtime = yaml.safe_load((ROOT / "meta/runtime.yml").read_text())
    group_vars = yaml.safe_load((ROOT / "group_vars/all.yml").read_text())
    assert runtime["requires_ansible"] == group_vars["wireup_ansible_core_range"]
    cores, files = _supported_cores()
    assert cores == ["2.19", "2.20", "2.21"]
    for core, path in files.items():
        pin = _pins(path)["ansible-core"]
        assert pin.startswith(core + "."), path
        assert checks.check_version_range(pin, runtime["requires_ansible"]), path
    major, minor = cores[-1].split(".")
    after = f"{major}.{int(minor) + 1}.0"
    assert runtime["requires_ansible"] == f">={cores[0]}.0,<{after}"
    assert not checks.check_version_range(after, runtime["requires_ansible"])


def test_every_tool_the_venv_holds_is_pinned():
    """A fresh `make venv` gives the venv the checks ran with: each distribution in the running venv
    (.venv, .venv-2.20 or .venv-2.21) is pinned at its version by its requirements or constraints.txt."""
    from importlib import metadata

    pins = _pins(ROOT / "constraints.txt") | _pins(ROOT / "requirements-tools.txt")
    _, files = _supported_cores()
    pins["ansible-core"] = _pins(files[metadata.version("ansible-core").rsplit(".", 1)[0]])["ansible-core"]
    installed = {_canonical(d.metadata["Name"]): d.version for d in metadata.distributions()}
    # What Python 3.11's own venv module puts into every venv; no pip command installs it.
    installed.pop("setuptools", None)
    assert {name: v for name, v in installed.items() if pins.get(name) != v} == {}


def test_the_importer_s_venv_is_pinned_whole():
    pins = _pins(ROOT / "requirements-importer.txt")
    newest = _pins(_supported_cores()[1]["2.21"])["ansible-core"]
    assert pins["galaxy-importer"] and pins["ansible-core"] == newest


def _filter_parameters():
    """{filter name: its function's parameter names (the first one is the value before the pipe)}."""
    import importlib
    import inspect

    out = {}
    for path in (ROOT / "plugins/filter").glob("*.py"):
        module = importlib.import_module(f"ansible_collections.wireup.cluster.plugins.filter.{path.stem}")
        for name, func in module.FilterModule().filters().items():
            params = inspect.signature(inspect.unwrap(func)).parameters.values()
            out[name] = [p.name for p in params if p.kind not in (p.VAR_KEYWORD,)]
    return out


def test_every_filter_is_documented_with_its_own_arguments():
    """ansible-core 2.21's ansible-doc fails on a filter without documentation, and so did
    galaxy-importer on the artifact (make importer): each filter has its sidecar YAML
    (plugins/filter/NAME.yml), whose options are the function's parameters."""
    parameters = _filter_parameters()
    assert set(FILTERS) == set(parameters)
    sidecars = {p.stem for p in (ROOT / "plugins/filter").glob("*.yml")}
    assert sidecars == set(parameters)
    for name, params in parameters.items():
        doc = yaml.safe_load((ROOT / "plugins/filter" / f"{name}.yml").read_text())
        assert doc["DOCUMENTATION"]["name"] == name and doc["RETURN"]["_value"]
        assert f"wireup.cluster.{name}" in doc["EXAMPLES"], name
        assert list(doc["DOCUMENTATION"]["options"]) == ["_input", *params[1:]], name


def test_ansible_doc_renders_every_filter_and_the_callback():
    names = [f"wireup.cluster.{name}" for name in sorted(FILTERS)]
    for kind, plugins in (("filter", names), ("callback", ["wireup.cluster.wireup_run"])):
        shown = subprocess.run(
            [str(BIN / "ansible-doc"), "-t", kind, "--json", *plugins],
            cwd=ROOT, capture_output=True, text=True, check=False, timeout=busy.HANG_S,
        )  # fmt: skip
        assert shown.returncode == 0 and "[ERROR]" not in shown.stderr, shown.stderr
        assert set(json.loads(shown.stdout)) == set(plugins)


def test_changelog_md_is_what_antsibull_changelog_makes_of_changelog_yaml(tmp_path):
    """The collection convention: a change is a fragment in changelogs/fragments/ (make lint runs
    antsibull-changelog lint on them); a release moves them into changelogs/changelog.yaml and writes
    CHANGELOG.md from it, so CHANGELOG.md is never edited by hand."""
    (tmp_path / "changelogs/fragments").mkdir(parents=True)
    for name in ("galaxy.yml", "changelogs/config.yaml", "changelogs/changelog.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    made = tmp_path / "CHANGELOG.md"
    subprocess.run(
        [str(BIN / "antsibull-changelog"), "generate", "--output", str(made), "--output-format", "md"],
        cwd=tmp_path, capture_output=True, text=True, check=True, timeout=busy.HANG_S,
    )  # fmt: skip
    assert (ROOT / "CHANGELOG.md").read_text() == made.read_text()


def test_every_change_since_the_release_is_a_fragment():
    fragments = sorted(p.name for p in (ROOT / "changelogs/fragments").glob("*.yml"))
    assert "38-ansible-core-2.21.yml" in fragments
    assert "## Unreleased" not in (ROOT / "CHANGELOG.md").read_text()


# ansible-core 2.20 deprecates reading a module's facts as top-level variables (INJECT_FACTS_AS_VARS,
# off by default from 2.24): wireup's roles must read wireup_node, wireup_master, gpu_topology_nics
# and gpu_topology_facts without it, by name and through hostvars, with no deprecation warning.
FACTS_PLAY = """\
- name: Preflight
  ansible.builtin.import_playbook: {repo}/playbooks/preflight.yml

- name: Read what preflight and gpu_topology found, as later roles do
  hosts: gpu_nodes
  gather_facts: false
  roles:
    - role: wireup.cluster.gpu_topology
  tasks:
    - name: Read them
      ansible.builtin.debug:
        msg: >-
          read {{{{ wireup_node.hostname == hostvars['node1'].wireup_node.hostname }}}}
          {{{{ wireup_master }}}} {{{{ gpu_topology_nics.keys() | sort | join(',') }}}}
          {{{{ gpu_topology_facts | default('none') }}}}
"""
FACTS_INVENTORY = {
    "gpu_nodes": {
        "hosts": {"node1": {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3"}},
        # A list-valued role variable, as the testbed's inventory sets: preflight checks it against
        # cuda_repo's argument_specs (ansible-core 2.21 warned when that copied Ansible's lazy list).
        "vars": {"cuda_repo_key_fingerprints": ["EB693B3035CD5710E231E123A4B469963BF863CC"]},
    }
}


@pytest.mark.parametrize("inject", ["False", "default"])
def test_roles_read_module_facts_without_injected_fact_variables(tmp_path, inject):
    """preflight and gpu_topology on this machine (read-only probes, connection local)."""
    (tmp_path / "group_vars").symlink_to(ROOT / "group_vars")
    (tmp_path / "play.yml").write_text(FACTS_PLAY.format(repo=ROOT))
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(FACTS_INVENTORY))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env |= {"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_DEPRECATION_WARNINGS": "True", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp")}  # fmt: skip
    if inject != "default":
        env["ANSIBLE_INJECT_FACT_VARS"] = inject
    run = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "inventory.yml", "play.yml"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=busy.HANG_S,
    )  # fmt: skip
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "read True node1 " in out and "ib_ports," in out, out[-3000:]
    assert "DEPRECATION" not in out, out[-3000:]


def test_every_supported_ansible_core_ignores_the_same_sanity_lines():
    """ignore-2.19/2.20/2.21 hold the same lines (what the production profile permits: the MIT
    header, node-side scripts' shebangs): a module added with its line in one file only passed
    sanity on that ansible-core and failed CI on the next (wireup_fetch.py, issue 35)."""
    files = sorted((ROOT / "tests/sanity").glob("ignore-2.*.txt"))
    assert len(files) == 3
    first = files[0].read_text()
    assert [f.name for f in files if f.read_text() != first] == []
