"""Issue 36: a capability is declared once, in capability/registry.py, and every list that named
the capabilities reads it. A toy capability registered in a copy of the registry (the worked
example of docs/DEVELOPING.md, "Adding a capability") is seen by build_record (its section),
record_problem (its problem check and its part's type), write_report (its report part and plot),
gate.capability_verdicts (its gate rule and its part's verdict), preflight.host_errors (its
settings rule) and preflight.variable_prefixes (its prefix); the default registry does not know
it. Each test fails if its consumer stops reading the registry it is given."""

import pathlib
import re

import pytest
from test_report import good_node

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import registry
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import preflight
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe.health import finding
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import gate, host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.render import markdown
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import assemble

RUN = "20261207T100000Z"
_LINE = re.compile(r"toy: (PASS|FAIL) ([0-9]+) widgets")


# ---------------------------------------------------------------- the toy capability's own module
def toy_section(node, record, ctx):
    """The record's toy part from the node's 'toy' line; a FAIL line fails the host."""
    found = _LINE.fullmatch(node.get("toy") or "")
    if not found:
        return {}, [], []
    verdict, widgets = found.group(1), int(found.group(2))
    findings = (
        [finding("critical", "toy_failed", f"toy: {widgets} widgets", source="toy")]
        if verdict == "FAIL"
        else []
    )
    return {"verdict": verdict, "widgets": widgets}, findings, [verdict]


def toy_problem(record):
    widgets = (record.get("toy") or {}).get("widgets", 0)
    return (
        ""
        if isinstance(widgets, int) and not isinstance(widgets, bool)
        else "toy.widgets is not a whole number"
    )


def toy_report(records, plots):
    rows = [
        [host, r["toy"]["verdict"], r["toy"]["widgets"]]
        for host, r in sorted(records.items())
        if r.get("toy")
    ]
    if not rows:
        return []
    out = [("h", (2, "Toy widgets")), ("table", (["host", "verdict", "widgets"], rows))]
    return out + ([("img", (plots[("toy", None)], "toy widgets"))] if plots.get(("toy", None)) else [])


def toy_plots(plt, records, run_dir):
    fig, ax = plt.subplots(figsize=(3, 2), dpi=50)
    ax.bar([0], [sum((r.get("toy") or {}).get("widgets", 0) for r in records.values())])
    markdown.save_figure(plt, fig, str(pathlib.Path(run_dir) / "toy.png"))
    return {("toy", None): "toy.png"}


def toy_errors(values):
    level = values.get("toy_level", 1)
    return [] if level in (1, 2, 3) else [f"toy_level must be 1, 2 or 3, got {level!r}"]


TOY = registry.Capability(
    name="toy",
    part="toy",
    section=toy_section,
    problem=toy_problem,
    report=toy_report,
    plots=toy_plots,
    measured=lambda record, kind: kind == "bench" and bool(record.get("toy")),
    verdict=lambda record: (record.get("toy") or {}).get("verdict"),
    preflight=toy_errors,
    prefix="toy_",
)
WITH_TOY = (*registry.CAPABILITIES, TOY)


def toy_record(line="toy: PASS 12 widgets", capabilities=WITH_TOY):
    """A host record of the 2x H200 captures with the toy's line, built by the real producer."""
    return host_record.build_record("gpu-a01", RUN, dict(good_node(), toy=line), registry=capabilities)


# ---------------------------------------------------------------- what each consumer sees
def test_build_record_runs_a_registered_section_and_counts_its_verdict():
    rec = toy_record()
    assert rec["toy"] == {"verdict": "PASS", "widgets": 12} and rec["verdict"] == "PASS"
    failed = toy_record("toy: FAIL 3 widgets")
    assert failed["verdict"] == "FAIL" and [f["code"] for f in failed["findings"]][-1] == "toy_failed"
    assert "toy" not in toy_record(capabilities=registry.CAPABILITIES)


def test_record_problem_runs_a_registered_check_and_types_its_part():
    rec = toy_record()
    assert host_record.record_problem(rec, registry=WITH_TOY) == ""
    broken = dict(rec, toy=dict(rec["toy"], widgets="many"))
    assert host_record.record_problem(broken, registry=WITH_TOY) == "toy.widgets is not a whole number"
    assert host_record.record_problem(dict(rec, toy=[]), registry=WITH_TOY) == "toy is a list, not an object"
    assert host_record.record_problem(broken) == ""  # the default registry knows no toy


@pytest.mark.skipif(markdown.pyplot() is None, reason="matplotlib is not installed")
def test_write_report_has_a_registered_part_and_its_plot_before_the_findings(tmp_path):
    paths = assemble.write_report(str(tmp_path), RUN, {"gpu-a01": toy_record()}, registry=WITH_TOY)
    md = pathlib.Path(paths["md"]).read_text()
    assert "| gpu-a01 | PASS | 12 |" in md and "![toy widgets](toy.png)" in md
    assert md.index("## Toy widgets") < md.index("## Findings")
    assert str(tmp_path / "toy.png") in paths["pngs"]
    other = tmp_path / "default"
    other.mkdir()
    assert (
        "Toy widgets"
        not in pathlib.Path(
            assemble.write_report(str(other), RUN, {"gpu-a01": toy_record()})["md"]
        ).read_text()
    )


def test_the_gate_judges_a_registered_capability_by_its_rule_and_its_parts_verdict():
    rec = toy_record()
    assert gate.measured(rec, "bench", registry=WITH_TOY)[-1] == "toy"
    assert gate.capability_verdicts(rec, "bench", registry=WITH_TOY)["toy"] == "PASS"
    # The part's own verdict, not the record's: the links passed, the toy failed.
    own = dict(rec, toy={"verdict": "WARN", "widgets": 2})
    assert gate.capability_verdicts(own, "bench", registry=WITH_TOY)["toy"] == "WARN"
    assert gate.capability_verdicts(rec, "quick", registry=WITH_TOY) == {"node_check": "PASS"}
    assert "toy" not in gate.capability_verdicts(rec, "bench")
    # A FAIL record that shows no part counts for every capability, the toy's too.
    assert gate.measured({"verdict": "FAIL"}, "bench", registry=WITH_TOY)[-1] == "toy"


def test_preflight_runs_a_registered_rule_on_its_variables_and_knows_its_prefix():
    assert preflight.host_errors({"toy_level": 9}, registry=WITH_TOY) == [
        "toy_level must be 1, 2 or 3, got 9"
    ]
    assert preflight.host_errors({"toy_level": 2}, registry=WITH_TOY) == []
    assert preflight.host_errors({"toy_level": 9}) == []
    assert "toy_" in preflight.variable_prefixes(["bench"], registry=WITH_TOY)
    assert "toy_" not in preflight.variable_prefixes(["bench"])
    # A variable of its prefix is wireup's: undocumented, it is named (with the nearest documented).
    unknown = preflight.unknown_variables({"toy_levle"}, {"toy_level"}, ["bench"], registry=WITH_TOY)
    assert list(unknown) == ["toy_levle"] and "toy_level" in unknown["toy_levle"]
    assert preflight.unknown_variables({"toy_levle"}, {"toy_level"}, ["bench"]) == {}  # another tool's
