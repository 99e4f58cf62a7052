"""tests/metrics.py: what the task YAML's lines are (issue 24's count, `make metrics`)."""

from __future__ import annotations

from tests import metrics

TASKS = """---
# A comment above a task.
- name: Bench | Plan the run
  ansible.builtin.set_fact:
    __bench_plan: >-
      {{ wireup_node | wireup.cluster.wireup_bench_plan(build, host, collectives=bench_collectives,
           min_bytes=bench_min_bytes, max_bytes=bench_max_bytes) }}

- name: Bench | Compare
  ansible.builtin.debug:
    msg: "{{ a == b }}"  # an == is no keyword argument
  when: x
"""


def test_line_kinds_counts_blank_comment_keyword_argument_and_other_lines():
    assert metrics.line_kinds(TASKS) == {"blank": 1, "comment": 1, "kwargs": 1, "rest": 9}
    assert sum(metrics.line_kinds(TASKS).values()) == len(TASKS.splitlines())


def test_the_repository_s_task_yaml_adds_up():
    lines, _whens = metrics.task_yaml()
    assert sum(metrics.line_kinds(metrics.task_text()).values()) == lines


# Issue 36: "the `when:` count stays at or under 100" (every when:, changed_when: and failed_when:
# of roles/*/tasks/*.yml, as `make metrics` counts them). A step that runs or not belongs in the
# role's plan (a list the task loops over), not in another guard.
MAX_WHENS = 100


def test_the_task_yaml_keeps_its_when_count_at_or_under_the_limit():
    _lines, whens = metrics.task_yaml()
    assert whens <= MAX_WHENS, (
        f"{whens} when: in roles/*/tasks/*.yml (at most {MAX_WHENS}): fold a guard into the plan"
    )


CONTRACTS = """[importlinter]
root_package = metrics_house
include_external_packages = False

[importlinter:contract:layers]
name = layers
type = layers
containers =
    metrics_house
layers =
    plans
    core
exhaustive = true

[importlinter:contract:acyclic]
name = no cycles
type = acyclic_siblings
ancestors =
    metrics_house
    metrics_house.*
"""


def small_house(tmp_path, monkeypatch):
    """A package with each fault the house figures count: core's a and b import each other, core's
    low imports plans (a layer up, and a cycle of the two packages with plans' top), long is 801 lines."""
    files = {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/a.py": "from . import b\n",
        "core/b.py": "from . import a\n",
        "core/low.py": "from ..plans import top\n",
        "core/long.py": "X = 1\n" * 801,
        "plans/__init__.py": "",
        "plans/top.py": "from ..core import a\n",
    }
    for name, text in files.items():
        path = tmp_path / "metrics_house" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (tmp_path / ".importlinter").write_text(CONTRACTS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / "metrics_house"


def test_the_house_figures_count_each_fault_of_a_small_package(tmp_path, monkeypatch):
    house = small_house(tmp_path, monkeypatch)
    assert metrics.modules_per_package(house) == {"core": 4, "plans": 1}
    assert metrics.long_modules(house) == [(801, "core/long.py")]
    module_cycles, package_cycles = metrics.import_cycles("metrics_house")
    assert module_cycles == [["metrics_house.core.a", "metrics_house.core.b"]]
    assert package_cycles == [["metrics_house.core", "metrics_house.plans"]]
    # core.low up to plans (a layer up), one import to drop for each cycle (packages, core's modules)
    assert metrics.contract_breaks(tmp_path / ".importlinter") == (3, 2, 2)


def test_cycles_counts_a_module_that_imports_itself_and_not_a_chain():
    assert metrics.cycles({"a": {"a"}, "b": {"c"}, "c": set()}) == [["a"]]


def test_the_package_has_no_cycle_and_keeps_its_contracts(monkeypatch):
    monkeypatch.syspath_prepend(str(metrics.COLLECTIONS))
    assert metrics.import_cycles() == ([], [])
    assert metrics.contract_breaks()[:2] == (0, 0)
    assert set(metrics.modules_per_package()) >= {"core", "probe", "judge", "plans", "check"}
