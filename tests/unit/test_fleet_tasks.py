"""Fleet scale (issue 39): no task that runs once per node reads the whole group.

A task that runs on every node and whose arguments, loop, ``when:`` or ``vars:`` read every host
(``map('extract', hostvars, ...)``, ``groups[...]``, ``ansible_play_hosts``) costs the controller
N reads per node, N^2 in all: at 1,024 nodes a plan of the whole job on every node (13.5 MB each)
or a name lookup per name per node (1M module runs). Such a computation runs once instead: on one
host with ``run_once`` (its facts reach every host of the play), in a play on the controller, or
once per job on the job's master (``when: inventory_hostname == __plan.master``), and each node
reads its own key. Reading one other host (``hostvars[__plan.master]``) is no group read.

The walk: every task of roles/*/tasks, roles/*/handlers and the playbooks' plays, with the
``run_once`` and ``when:`` of the blocks around it. Files that only plays on the controller import
(``CONTROLLER_FILES``; the test checks that no node play imports them) may read the group.
"""

from __future__ import annotations

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Task files imported only by plays on localhost (checked below against the playbooks).
CONTROLLER_FILES = {
    "roles/preflight/tasks/inventory.yml",
    "roles/bench_report/tasks/main.yml",
    "roles/bench_report/tasks/quick.yml",
    "roles/bench_report/tasks/store.yml",
    "roles/bench_report/tasks/verdict.yml",
    "roles/gpu_trial/tasks/report.yml",
}
GROUP_READS = re.compile(
    r"map\('extract',\s*hostvars|hostvars\s*[,)]|\bgroups\s*(\[|\.get\(|\|)|\bansible_play_hosts(_all)?\b"
    r"|\bplay_hosts\b|\bansible_play_batch\b"
)
# The group's size is no read of its hosts.
GROUP_SIZE = re.compile(r"\bgroups\[[^\]]*\]\s*\|\s*length\b")
# Once per job: on its master, or on its planner (plan.yml: the first host of the job's group in
# the play, torchrun_launch.job_planners).
ONCE_PER_JOB = ("inventory_hostname == __plan.master", "inventory_hostname == __torchrun_launch_planner")
TASK_KEYS_SKIPPED = {"name", "block", "rescue", "always", "tags", "no_log"}


def _once(task: dict, outer_once: bool) -> bool:
    when = task.get("when")
    whens = when if isinstance(when, list) else [when]
    return (
        outer_once or bool(task.get("run_once")) or any(o in str(w) for w in whens if w for o in ONCE_PER_JOB)
    )


def _walk(tasks, path: str, outer_once: bool = False):
    """(path, task name, the text it templates) of every task that runs on every host."""
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        once = _once(task, outer_once)
        own = {k: v for k, v in task.items() if k not in TASK_KEYS_SKIPPED}
        if not once:
            yield path, task.get("name", "?"), GROUP_SIZE.sub("", yaml.safe_dump(own, width=10_000))
        for key in ("block", "rescue", "always"):
            yield from _walk(task.get(key), path, once)


def _task_files():
    for pattern in ("roles/*/tasks/*.yml", "roles/*/handlers/*.yml"):
        for path in sorted(ROOT.glob(pattern)):
            rel = str(path.relative_to(ROOT))
            if rel not in CONTROLLER_FILES:
                yield rel, yaml.safe_load(path.read_text()) or []


def _node_plays():
    """(playbook, play) of every play that targets the node group."""
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(path.read_text()) or []:
            if "hosts" in play and play["hosts"] != "localhost":
                yield str(path.relative_to(ROOT)), play


def group_reads_per_node() -> list[tuple[str, str, str]]:
    """(file, task, what it reads) of every per-node task that reads the whole group."""
    found = []
    sources = list(_task_files())
    for playbook, play in _node_plays():
        for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
            sources.append((f"{playbook}: {play.get('name')}", play.get(section) or []))
    for path, tasks in sources:
        for where, name, text in _walk(tasks, path):
            reads = sorted({m.group(0) for m in GROUP_READS.finditer(text)})
            if reads:
                found.append((where, name, ", ".join(reads)))
    return found


# What is left: nothing. The launch plan, its pre-check's "who left the play" and its verdict were
# the last (issue 39): each is one computation now (plan.yml's planner, start.yml's and wait.yml's
# run_once), and each node reads its own slice. This list only shrinks: a new per-node group read
# fails the test.
LEFT: list[str] = []


def test_no_task_on_every_node_reads_the_whole_group():
    found = group_reads_per_node()
    new = [f"{w}: {name!r} reads {reads}" for w, name, reads in found if f"{w}: {name}" not in LEFT]
    assert new == [], "\n".join(new)
    assert sorted(f"{where}: {name}" for where, name, _reads in found) == LEFT  # fixed ones leave LEFT


def _imported(play) -> set[str]:
    """The role task files a play imports or includes by name (role + tasks_from)."""
    out = set()
    for task in play.get("tasks") or []:
        for key in ("ansible.builtin.import_role", "ansible.builtin.include_role"):
            if key in task:
                role = task[key]["name"].rsplit(".", 1)[-1]
                out.add(f"roles/{role}/tasks/{task[key].get('tasks_from', 'main')}.yml")
    for role in play.get("roles") or []:
        name = role["role"] if isinstance(role, dict) else role
        out.add(f"roles/{name.rsplit('.', 1)[-1]}/tasks/main.yml")
    return out


def test_the_controller_files_are_imported_by_controller_plays_only():
    for playbook, play in _node_plays():
        assert not (_imported(play) & CONTROLLER_FILES), (playbook, play.get("name"))
    # ... and each of them by some play on localhost (or a file that is), so the table is not stale.
    controller = set()
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(path.read_text()) or []:
            if play.get("hosts") == "localhost":
                controller |= _imported(play)
    texts = {f: (ROOT / f).read_text() for f in controller if (ROOT / f).exists()}
    for rel in CONTROLLER_FILES:
        name = pathlib.Path(rel).name
        assert rel in controller or any(name in t for t in texts.values()), rel


def test_the_walk_finds_a_group_read_and_lets_once_and_per_job_pass():
    tasks = [
        {"name": "per node", "ansible.builtin.debug": {"msg": "{{ groups['g'] | first }}"}},
        {"name": "once", "ansible.builtin.debug": {"msg": "{{ groups['g'] }}"}, "run_once": True},
        {
            "name": "per job",
            "ansible.builtin.debug": {"msg": "{{ ansible_play_hosts }}"},
            "when": ONCE_PER_JOB[0],
        },
        {
            "name": "per planner",
            "ansible.builtin.debug": {"msg": "{{ groups['g'] | map('extract', hostvars) }}"},
            "when": ONCE_PER_JOB[1],
        },
        {"name": "one host", "ansible.builtin.debug": {"msg": "{{ hostvars[__plan.master].x }}"}},
        {
            "name": "outer",
            "run_once": True,
            "block": [{"name": "inner", "ansible.builtin.debug": {"msg": "{{ hostvars | length }}"}}],
        },
        {"name": "own groups", "ansible.builtin.debug": {"msg": "{{ group_names }}"}},
        {"name": "size", "ansible.builtin.debug": {}, "when": "groups[wireup_node_group] | length >= 2"},
        {"name": "vars", "ansible.builtin.debug": {}, "vars": {"x": "{{ ansible_play_hosts_all }}"}},
    ]
    found = [(name, GROUP_READS.findall(text) != []) for _path, name, text in _walk(tasks, "t.yml")]
    assert [n for n, hit in found if hit] == ["per node", "vars"]


# The tasks fixed so far (issue 39).
FIXED = {
    "roles/preflight/tasks/main.yml",
    "roles/torchrun_launch/tasks/main.yml",
    "roles/torchrun_launch/tasks/plan.yml",
    "roles/torchrun_launch/tasks/start.yml",
    "roles/torchrun_launch/tasks/wait.yml",
}


def test_preflight_and_the_launch_probe_read_no_group_per_node():
    found = [f for f in group_reads_per_node() if f[0] in FIXED]
    assert found == [], found
