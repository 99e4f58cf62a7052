"""Static check of every task file under roles/ (issue 23, item 7): a task whose output would show a
secret-bearing value hides it (no_log), and a loop over env mappings labels its items.

The YAML is loaded and walked (blocks, rescue, always), not grepped. "Secret-bearing" is a variable
that holds environment values or index URLs, or a plan field that carries them (SOURCES). What a
task shows is its module arguments, vars and loop; its name, when, environment (passed to the
process, not printed below -vvv) and control keywords are not. Include/import tasks print nothing
of their vars. A template task renders secrets into a file (shown by --diff) when its role's
templates reference a source."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import torchrun_launch

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"
SOURCES = re.compile(
    r"\b(wireup_job_env|bench_env|torchrun_launch_env|pytorch_venv_extra_index_url"
    r"|pytorch_venv_index_base_url|pytorch_venv_wheelhouse_url|pytorch_venv_verify_env"
    r"|__pytorch_venv_settings)\b"
    r"|__bench_plan\.(env|env_default|nccl_env|torch_env_given|compare\.envs)\b"
    r"|__bench_fabric_plan\.env\b"
    r"|__pytorch_venv_plan\.(verify_env|pip\.(installs|env|extras_env))\b"
    r"|\bjson_file\b"  # nccl-tests' -J JSON holds the process environment
)
NOT_SHOWN = {
    "name", "when", "no_log", "environment", "tags", "register", "changed_when", "failed_when",
    "loop_control", "delegate_to", "become", "become_user", "run_once", "check_mode", "until", "retries",
    "delay", "any_errors_fatal", "ignore_errors", "notify", "listen", "args",
}  # fmt: skip
SILENT = {"include_role", "import_role", "include_tasks", "import_tasks"}
# Tasks that take a source but show no value of it, each with the test that shows it.
HOLD_NO_VALUE = {
    ("torchrun_launch/tasks/plan.yml", "Launch | Plan the job once, on its planner"):
        "test_launch_plan_holds_no_env_value",
}  # fmt: skip


def _tasks(items):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        if "block" in task:
            for part in ("block", "rescue", "always"):
                yield from _tasks(task.get(part))
        else:
            yield task


def _action(task):
    keys = [k for k in task if k not in NOT_SHOWN and k != "vars" and not k.startswith(("loop", "with_"))]
    return next((k.rsplit(".", 1)[-1] for k in keys), "")


def _text(value):
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 20)


def problems(task, *, renders_secrets=False):
    """What is wrong with one task (empty: nothing)."""
    action = _action(task)
    if action in SILENT:
        return []
    out = []
    shown = {k: v for k, v in task.items() if k not in NOT_SHOWN}
    if SOURCES.search(_text(shown)) and "no_log" not in task:
        out.append("shows a secret-bearing value without no_log")
    if action == "template" and renders_secrets and "no_log" not in task:
        out.append("renders a template holding secret values (shown by --diff) without no_log")
    loop = {k: v for k, v in task.items() if k == "loop" or k.startswith("with_")}
    env_items = SOURCES.search(_text(loop)) or "item" in _text(task.get("environment", ""))
    if loop and env_items:
        label = str((task.get("loop_control") or {}).get("label", ""))
        if not label or re.fullmatch(r"\{\{\s*item\s*\}\}", label.strip()) or SOURCES.search(label):
            out.append("loops over env mappings without a loop_control.label that hides them")
    return out


def _files():
    return sorted(ROLES.glob("*/tasks/*.yml"))


def _renders_secrets(role):
    return any(SOURCES.search(p.read_text()) for p in (ROLES / role / "templates").rglob("*.j2"))


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROLES)))
def test_tasks_hide_secret_values(path):
    role = path.relative_to(ROLES).parts[0]
    renders = _renders_secrets(role)
    found = []
    for task in _tasks(yaml.safe_load(path.read_text())):
        key = (str(path.relative_to(ROLES)), task.get("name", ""))
        for problem in problems(task, renders_secrets=renders):
            if key in HOLD_NO_VALUE and problem.startswith("shows"):
                continue
            found.append(f"{task.get('name')}: {problem}")
    assert found == []


def test_the_check_finds_what_it_looks_for():
    """The checker itself: each leak shape is found, each fixed shape passes."""
    compare = {"name": "x", "ansible.builtin.command": {"argv": ["a"]}, "environment": "{{ item }}",
               "loop": "{{ __bench_plan.compare.envs }}"}  # fmt: skip
    assert problems(compare) == [
        "shows a secret-bearing value without no_log",
        "loops over env mappings without a loop_control.label that hides them",
    ]
    fixed = dict(compare, no_log="{{ true }}", loop_control={"label": "{{ __bench_plan.compare.tried[i] }}"})
    assert problems(fixed) == []
    plan = {"name": "p", "ansible.builtin.set_fact": {"x": "{{ s }}"}, "vars": {"s": "{{ wireup_job_env }}"}}
    assert problems(plan) == ["shows a secret-bearing value without no_log"]
    assert problems({"name": "i", "ansible.builtin.include_role": {"name": "r"},
                     "vars": {"torchrun_launch_env": "{{ bench_env }}"}}) == []  # fmt: skip
    assert problems({"name": "e", "ansible.builtin.command": {"argv": ["a"]},
                     "environment": "{{ __bench_plan.nccl_env }}"}) == []  # fmt: skip
    template = {"name": "t", "ansible.builtin.template": {"src": "a.j2", "dest": "/a"}}
    assert problems(template, renders_secrets=True) == [
        "renders a template holding secret values (shown by --diff) without no_log"
    ]
    nested = [{"block": [{"block": [], "always": []}], "rescue": [plan]}]
    assert [t["name"] for t in _tasks(nested)] == ["p"]
    assert _renders_secrets("torchrun_launch")  # job_env.sh.j2 exports wireup_job_env


def test_launch_plan_holds_no_env_value():
    """The launch plan checks the env mappings' form and holds none of their values (so its task
    needs no no_log: HOLD_NO_VALUE)."""
    nodes = {
        "n1": {"wireup_node": {"hostname": "n1", "gpu": {"present": False, "count": 0}, "cpus": 2,
                               "address": "10.0.0.1", "interface": "eth0", "ib_hca": ""}},
    }  # fmt: skip
    plan = torchrun_launch.job_plan(
        ["n1"],
        nodes,
        job="it",
        program="/opt/x.py",
        base_dir="/opt/wireup",
        venv_path="/opt/wireup/venv",
        results_dir="/r",
        group="g",
        env={"HF_TOKEN": "hf_launchsecret"},
        job_env={"WANDB_API_KEY": "wandb_launchsecret"},
        run_id="20261201T000000Z-0001",
    )
    text = repr(plan)
    assert "hf_launchsecret" not in text and "wandb_launchsecret" not in text
