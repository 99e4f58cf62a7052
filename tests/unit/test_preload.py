"""wireup_preload (plugins/vars/wireup_preload.py): after it ran, Ansible's own loaders find every
wireup filter and action plugin without importing anything more, which is what lets each task's
forked worker skip the imports (0.3-0.5 s a task before; docs/performance.md, issue 36). Each check
runs in a fresh interpreter, whose sys.modules holds only what it imported."""

from __future__ import annotations

import configparser
import json
import subprocess
import sys
from pathlib import Path

from tests import busy

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder(paths=[sys.argv[1]])._install()
from ansible.plugins.loader import action_loader, filter_loader, init_plugin_loader
init_plugin_loader([sys.argv[1]])
from ansible_collections.wireup.cluster.plugins.vars import wireup_preload

preload = sys.argv[2] == "preload"
failed = wireup_preload.preload() if preload else []
if preload:
    modules = wireup_preload.plugin_names("filter")
    filters = [n for m in modules for n in sys.modules[m].FilterModule().filters()]
    actions = [m.rsplit(".", 1)[1] for m in wireup_preload.plugin_names("action")]
else:  # the control: the last filter file in name order, as a task would ask for it
    filters, actions = ["wireup_pkg_nccl_plan"], []
before = set(sys.modules)
found = [filter_loader.get("wireup.cluster." + n) is not None for n in filters]
found += [action_loader.has_plugin("wireup.cluster." + n) for n in actions]
new = sorted(m for m in set(sys.modules) - before if m.startswith("ansible_collections.wireup"))
print(json.dumps({"failed": failed, "filters": len(filters), "actions": len(actions),
                  "found": all(found), "new": new}))
"""


def _run(mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(REPO / ".collections"), mode],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=busy.HANG_S,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_after_preload_ansible_finds_every_wireup_filter_and_action_without_importing_more():
    got = _run("preload")
    assert got["failed"] == []
    assert got["filters"] > 30 and got["actions"] >= 2  # every filter module's filters, both actions
    assert got["found"]
    assert got["new"] == [], f"Ansible's loaders imported {got['new']} although the preload ran"


def test_without_the_preload_one_filter_imports_the_collection_s_plugins_and_module_utils():
    got = _run("bare")
    assert got["found"]
    assert len(got["new"]) > 20, got["new"]  # what each task's worker paid before


def test_the_preload_imports_every_plugin_file_of_the_two_kinds():
    for kind in ("filter", "action"):
        on_disk = sorted(p.stem for p in (REPO / "plugins" / kind).glob("*.py"))
        script = (
            "import sys\n"
            "from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder\n"
            "_AnsibleCollectionFinder(paths=[sys.argv[1]])._install()\n"
            "from ansible_collections.wireup.cluster.plugins.vars import wireup_preload as p\n"
            f"print(' '.join(n.rsplit('.', 1)[1] for n in p.plugin_names({kind!r})))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", script, str(REPO / ".collections")],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
            timeout=busy.HANG_S,
        )
        assert sorted(out.stdout.split()) == on_disk


def test_ansible_cfg_enables_it_beside_ansible_s_own_vars_plugin():
    cfg = configparser.ConfigParser(inline_comment_prefixes=("#",))
    cfg.read(REPO / "ansible.cfg")
    enabled = [p.strip() for p in cfg["defaults"]["vars_plugins_enabled"].split(",")]
    assert enabled == ["ansible.builtin.host_group_vars", "wireup.cluster.wireup_preload"]
