"""Fleet scale (issue 39): no play takes the node group one host at a time.

A play with ``serial: 1`` over the node group runs each node after the previous one (bench.yml's
node-alone torch play: 35-50 s a node, 10-14 hours at 1,024 nodes). Batches are a setting whose
default is the whole group.
"""

from __future__ import annotations

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


# Plays over a group a play made of a few nodes, not over the node group: their serial is fine.
NOT_THE_NODE_GROUP = {
    "wireup_repair_act": "repair.yml's remediation (issue 37): the drained nodes it acts on, in batches",
}


def _node_plays():
    """(playbook, play) of every play that targets the node group."""
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(path.read_text()) or []:
            if "hosts" in play and play["hosts"] != "localhost" and play["hosts"] not in NOT_THE_NODE_GROUP:
                yield str(path.relative_to(ROOT)), play


def _serial_one(serial) -> bool:
    """A play's ``serial`` that takes the node group one host at a time: 1, "1", [1, ...], or a
    template whose default is 1."""
    first = serial[0] if isinstance(serial, list) and serial else serial
    text = str(first).strip()
    return text == "1" or bool(re.search(r"default\(\s*['\"]?1['\"]?\s*\)", text))


def test_no_play_takes_the_node_group_one_host_at_a_time():
    """Issue 39: ``serial: 1`` over the node group is 35-50 s a node one after another (10-14 hours
    at 1,024 nodes); batches are a setting whose default is the whole group."""
    found = [(pb, play.get("name")) for pb, play in _node_plays() if _serial_one(play.get("serial"))]
    assert found == []


def test_the_node_alone_play_batches_by_the_bench_setting_and_its_default():
    plays = yaml.safe_load((ROOT / "playbooks/bench.yml").read_text())
    [single] = [p for p in plays if "alone" in p.get("name", "")]
    defaults = yaml.safe_load((ROOT / "roles/bench/defaults/main.yml").read_text())
    specs = yaml.safe_load((ROOT / "roles/bench/meta/argument_specs.yml").read_text())
    spec = specs["argument_specs"]["main"]["options"]["bench_single_serial"]
    assert single["serial"] == "{{ bench_single_serial | default('100%') }}"
    assert defaults["bench_single_serial"] == spec["default"] == "100%"


def test_serial_one_is_found_in_each_spelling():
    assert [
        _serial_one(s) for s in (1, "1", [1, "50%"], "{{ x | default(1) }}", "{{ x | default('1') }}")
    ] == [True] * 5
    assert [_serial_one(s) for s in (None, "100%", 10, "{{ x | default('100%') }}", [2])] == [False] * 5


def test_repairs_remediation_play_batches_only_the_nodes_it_acts_on():
    """Issue 37 item 2: the serial play is over the group remedy.yml fills with the nodes to act on
    (add_host from the plan's act list), never over the node group."""
    plays = yaml.safe_load((ROOT / "playbooks/repair.yml").read_text())
    [act] = [p for p in plays if p.get("hosts") == "wireup_repair_act"]
    assert act["serial"] == "{{ repair_batch | default(1) }}"
    remedy = yaml.safe_load((ROOT / "roles/repair/tasks/remedy.yml").read_text())
    [added] = [t for t in remedy if "ansible.builtin.add_host" in t]
    assert added["ansible.builtin.add_host"]["groups"] == ["wireup_repair_act"]
    assert added["loop"] == "{{ __repair_remedy.act }}"
