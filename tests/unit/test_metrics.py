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
