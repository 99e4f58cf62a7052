"""The store's index (issue 39, store/index.py) under the launch gate (record/gate.py): records
written by the real writers (host_record.store_run on the quick check's real answer, results.write_host
with the H200 x2 bench record and the lent H200's GPU trial records) and entered by the writer's
update (gate.index_run); a missing, damaged or stale index is noticed and rebuilt; the gate's
answer is the same with and without it; its reads stay constant with the records a host has."""

from __future__ import annotations

import copy
import json
import os
import pathlib
import shutil

import pytest
from test_gate import FULL, HEALTH, HOST, nvlink_fail, quick, trial_fail

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.capability import node_check
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import gate, host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.store import index, results

RUN = "20261201T{:02d}{:02d}00Z"


def run_id(n):
    return RUN.format(n // 60, n % 60)


def write(root, n, record, kind="bench", host=HOST):
    """One record written by results.write_host and entered in the index as the writer does."""
    rid = run_id(n)
    stored = dict(copy.deepcopy(record), host=host, run_id=rid)
    results.write_host(str(root), rid, host, stored, kind)
    gate.index_run(str(root), kind, rid, {host: stored})


def answer(root, hosts=(HOST,)):
    return gate.latest_verdicts(str(root), list(hosts))[0]


class Reads:
    """Counts the stored JSON documents read (records and indexes: results.read_strict_json)."""

    def __init__(self, monkeypatch):
        self.paths = []
        real = results.read_strict_json

        def counted(path):
            self.paths.append(str(path))
            return real(path)

        monkeypatch.setattr(results, "read_strict_json", counted)
        monkeypatch.setattr(index, "read_strict_json", counted)

    def records(self):
        return [p for p in self.paths if f"{os.sep}{index.INDEX_DIR}{os.sep}" not in p]


def no_stepcost(record):
    """A record of a run with bench_stepcost false: the capability stepcost never judged."""
    return dict(record, stepcost={})


def test_the_real_quick_writer_s_run_enters_the_index_and_the_gate_reads_nothing_else(tmp_path, monkeypatch):
    said = {
        h: {"verdict": "PASS", "line": f"wireup-check: PASS {h}: ok", "problems": []} for h in ("n1", "n2")
    }
    answers = {h: node_check.result(h, stdout=json.dumps(answer)) for h, answer in said.items()}
    nodes = {h: {"node_check": a, "thresholds": None} for h, a in answers.items()}
    rid, _dir, records = host_record.store_run(str(tmp_path), "20261201T000000Z", nodes, node_check.KIND)
    assert gate.index_run(str(tmp_path), node_check.KIND, rid, records) == 2
    entries = index.load(str(tmp_path), "n1", gate.summarizer())
    assert entries == {
        f"quick/{rid}": {
            "sig": index.signature(results.host_path(str(tmp_path), rid, "n1", "quick")),
            "summary": {"verdict": records["n1"]["verdict"], "caps": {"node_check": "PASS"}},
        }
    }
    reads = Reads(monkeypatch)
    assert answer(tmp_path, ["n1", "n2"]) == {}
    assert reads.records() == []  # the PASS walked past from the index alone


def scenario(root):
    """Real records of one host over six runs: a full PASS, an NVLink FAIL, a GPU trial FAIL, a
    health read, a quick PASS, a full run without the step benchmark."""
    write(root, 1, FULL)
    write(root, 2, nvlink_fail())
    write(root, 3, trial_fail())
    write(root, 4, HEALTH)
    write(root, 5, quick("PASS"), kind=node_check.KIND)
    write(root, 6, no_stepcost(FULL))


def test_the_gate_s_answer_is_the_same_with_the_index_without_it_and_rebuilt(tmp_path, monkeypatch):
    scenario(tmp_path)
    with_index = answer(tmp_path)
    assert with_index[HOST][0]["run_id"] == run_id(3)  # the trial FAIL: nothing newer judged it
    shutil.rmtree(tmp_path / index.INDEX_DIR)
    reads = Reads(monkeypatch)
    assert answer(tmp_path) == with_index  # without: every record up to the settling ones read
    first = len(reads.records())
    assert first == 6
    assert (tmp_path / index.INDEX_DIR / f"{HOST}.json").is_file()  # ... and the index rebuilt
    reads.paths.clear()
    assert answer(tmp_path) == with_index
    assert len(reads.records()) < first
    assert reads.records() == [str(results.host_path(str(tmp_path), run_id(3), HOST))]  # the FAIL's findings


@pytest.mark.parametrize(
    "damage",
    ["", "{not json", json.dumps({"schema": 1, "rules": "other rules", "records": {}}), json.dumps([1, 2])],
    ids=["empty", "not-json", "other-rules", "not-an-object"],
)
def test_a_damaged_index_or_one_of_other_rules_is_noticed_and_rebuilt(tmp_path, damage):
    scenario(tmp_path)
    expected = answer(tmp_path)
    path = tmp_path / index.INDEX_DIR / f"{HOST}.json"
    path.write_text(damage)
    assert index.load(str(tmp_path), HOST, gate.summarizer()) == {}
    assert answer(tmp_path) == expected
    assert json.loads(path.read_text())["rules"] == gate.summarizer().rules


def test_an_entry_that_says_pass_for_a_record_changed_since_is_not_believed(tmp_path):
    """A record rewritten after the index was made (same host, run and size or not): the index's
    PASS is stale (the file's signature changed) and the record read again."""
    write(tmp_path, 1, FULL)
    write(tmp_path, 2, FULL)
    assert answer(tmp_path) == {}
    path = pathlib.Path(results.host_path(str(tmp_path), run_id(2), HOST))
    path.unlink()
    results.write_host(str(tmp_path), run_id(2), HOST, dict(nvlink_fail(), host=HOST, run_id=run_id(2)))
    assert answer(tmp_path)[HOST][0]["run_id"] == run_id(2)


def test_a_record_written_without_the_index_is_read_and_entered(tmp_path, monkeypatch):
    write(tmp_path, 1, FULL)
    results.write_host(str(tmp_path), run_id(2), HOST, dict(nvlink_fail(), host=HOST, run_id=run_id(2)))
    assert answer(tmp_path)[HOST][0]["run_id"] == run_id(2)
    assert f"bench/{run_id(2)}" in index.load(str(tmp_path), HOST, gate.summarizer())


def test_a_summary_forged_in_the_index_is_never_a_pass_without_its_record(tmp_path):
    """An entry whose summary is not the gate's shape counts as stale; one with the record's
    current signature would be believed: only someone who may write the records can write it
    (docs/security.md)."""
    write(tmp_path, 1, nvlink_fail())
    path = tmp_path / index.INDEX_DIR / f"{HOST}.json"
    data = json.loads(path.read_text())
    data["records"][f"bench/{run_id(1)}"]["summary"] = {"verdict": "PASS", "caps": {"links": "MAYBE"}}
    path.write_text(json.dumps(data))
    assert answer(tmp_path)[HOST][0]["verdict"] == "FAIL"


@pytest.mark.parametrize("text", ["", "{cut off", '{"verdict": "MAYBE"}'])
def test_a_record_damaged_after_it_was_indexed_still_refuses(tmp_path, text):
    """The gate fails closed as without the index: the damaged file's signature is not its entry's."""
    write(tmp_path, 1, FULL)
    write(tmp_path, 2, FULL)
    pathlib.Path(results.host_path(str(tmp_path), run_id(2), HOST)).write_text(text)
    (failure,) = answer(tmp_path)[HOST]
    assert failure["verdict"] == "DAMAGED" and failure["run_id"] == run_id(2)


def test_a_fail_record_gone_unreadable_under_its_entry_refuses_as_damaged(tmp_path, monkeypatch):
    """The index holds a FAIL whose findings the gate reads: a record that cannot be read then
    (changed between the look and the read) refuses the host as DAMAGED, never passes it."""
    write(tmp_path, 1, nvlink_fail())
    real = results.read_record

    def broken(path, check):
        raise results.DamagedRecord(f"{path}: unreadable (gone bad between the look and the read)")

    monkeypatch.setattr("ansible_collections.wireup.cluster.plugins.module_utils.wireup.store.query.read_record",
                        broken)  # fmt: skip
    (failure,) = answer(tmp_path)[HOST]
    assert failure["verdict"] == "DAMAGED" and "between the look and the read" in failure["reason"]
    assert real is results.read_record


def test_a_record_removed_drops_out_of_the_index(tmp_path):
    write(tmp_path, 1, FULL)
    write(tmp_path, 2, nvlink_fail())
    shutil.rmtree(tmp_path / "bench" / run_id(2))
    assert answer(tmp_path) == {}
    assert list(index.load(str(tmp_path), HOST, gate.summarizer())) == [f"bench/{run_id(1)}"]


@pytest.mark.parametrize("days", [10, 100, 365])
def test_the_gate_s_reads_stay_constant_with_a_year_of_records(tmp_path, monkeypatch, days):
    """A host with ``days`` records: a GPU trial FAIL on the first day, then full runs without
    the GPU trial and the step benchmark (bench_stepcost false: stepcost never judged): the gate
    reads the host's index and the FAIL's record, whatever the number of records between (without
    the index it read every one of them)."""
    write(tmp_path, 0, trial_fail())
    for day in range(1, days):
        write(tmp_path, day, no_stepcost(FULL))
    reads = Reads(monkeypatch)
    (failure,) = answer(tmp_path)[HOST]
    assert (failure["run_id"], failure["capabilities"]) == (run_id(0), ["gpu_health", "gpu_trial"])
    assert len(reads.paths) == 2, reads.paths
    assert reads.records() == [results.host_path(str(tmp_path), run_id(0), HOST)]
