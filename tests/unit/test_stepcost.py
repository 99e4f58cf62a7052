"""The DDP step benchmark (issue 16): the arithmetic (exposed communication, share, clamping,
effective bandwidth, hook effect), the sentence, the stored JSON, the report section, and the
benchmark program's own pure helpers (files/bench/ddp_step.py imports torch only in main)."""

import copy
import importlib.util
import json
import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import ddp_step
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.record import host_record
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.render import markdown
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import assemble

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
CPU_LOG = FIXTURES / "stepcost" / "cpu-gloo-2ranks-torch2.13.log"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def load_program():
    spec = importlib.util.spec_from_file_location("ddp_step", ROOT / "files" / "bench" / "ddp_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cfg(median, p25=None, p75=None, **extra):
    return {
        "median_ms": median,
        "p25_ms": median if p25 is None else p25,
        "p75_ms": median if p75 is None else p75,
        "min_ms": median,
        "max_ms": median,
        "steps": 20,
        **extra,
    }


def gpu_result(
    *, compute=40.0, none=44.0, fp16=42.5, bf16=42.4, powersgd=41.0, world=2, params=1_000_000_000
):
    """A result line in ddp_step.py's shape (2 GPUs, bf16 autocast, fp32 gradients)."""
    return {
        "wireup_bench": "ddp_step",
        "params": params,
        "params_asked": params,
        "width": 4096,
        "layers": 60,
        "batch": 4096,
        "precision": "bf16-autocast",
        "grad_bytes": params * 4,
        "bucket_cap_mb": 25.0,
        "world_size": world,
        "nnodes": 1,
        "backend": "nccl",
        "device": "cuda",
        "warmup": 5,
        "iters": 20,
        "configs": {
            "compute": cfg(compute),
            "none": cfg(none),
            "fp16": cfg(fp16),
            "bf16": cfg(bf16),
            "powersgd": cfg(powersgd, rank=4),
        },
        "torch_version": "2.11.0+cu130",
        "nccl_version": "2.28.9",
    }


# ---------------------------------------------------------------- parsing the program's log
def test_parse_real_cpu_log_skips_torchrun_banner_and_env_line():
    found = ddp_step.parse_log(CPU_LOG.read_text())
    assert [r["params"] for r in found] == [525312, 2101248]
    first = found[0]
    assert first["backend"] == "gloo" and first["world_size"] == 2 and first["precision"] == "fp32"
    assert first["grad_bytes"] == first["params"] * 4
    # A missing hook on CPU says why instead of a time.
    assert "gloo" in first["configs"]["bf16"]["skipped"]
    assert set(first["configs"]) == {"compute", "none", "fp16", "bf16", "powersgd"}


def test_parse_survives_truncation_glued_stderr_and_odd_bytes():
    lines = CPU_LOG.read_text().splitlines()
    results_lines = [line for line in lines if '"ddp_step"' in line]
    text = "\n".join(
        [
            "\x1b[0mW1201 noise \xff\xfe",
            results_lines[0] + "[rank1]: Traceback (most recent call last):",  # stderr glued on
            results_lines[1][: len(results_lines[1]) // 2],  # killed mid-line
            '{"wireup_bench": "torch_allreduce", "size": 1}',  # the other benchmark's line
            "{not json",
        ]
    )
    found = ddp_step.parse_log(text)
    assert [r["params"] for r in found] == [525312]
    assert ddp_step.parse_log("") == [] and ddp_step.parse_log(None) == []


# ---------------------------------------------------------------- arithmetic
def test_exposed_share_and_effective_bandwidth():
    got = ddp_step.exposed(cfg(40.0), cfg(50.0), 2)
    assert got["exposed_ms"] == 10.0 and got["share"] == 0.2
    assert not got["clamped"] and not got["inconsistent"]
    # 4 GB of gradients in 10 ms exposed on 2 ranks: algbw 400 GB/s, busbw x 2(n-1)/n = 400.
    assert ddp_step.step_busbw(4e9, 10.0, 2) == {"algbw": 400.0, "busbw": 400.0}
    assert ddp_step.step_busbw(4e9, 10.0, 4)["busbw"] == 600.0
    # Nothing exposed, or one rank: no effective bandwidth.
    assert ddp_step.step_busbw(4e9, 0.0, 2) is None
    assert ddp_step.step_busbw(4e9, 10.0, 1) is None


def test_full_below_compute_within_noise_is_clamped_to_zero():
    # full 39.5 < compute 40.0; noise band: half IQRs 0.5 + 0.5 = 1.0 ms (> 2% of 40 = 0.8).
    got = ddp_step.exposed(cfg(40.0, 39.5, 40.5), cfg(39.5, 39.0, 40.0), 2)
    assert got["exposed_ms"] == 0.0 and got["share"] == 0.0
    assert got["clamped"] and not got["inconsistent"] and got["noise_ms"] == 1.0


def test_full_below_compute_beyond_noise_is_inconsistent():
    got = ddp_step.exposed(cfg(40.0), cfg(30.0), 2)
    assert got["exposed_ms"] == 0.0 and got["share"] == 0.0
    assert got["clamped"] and got["inconsistent"]
    # The floor of the noise band is 2% of compute: 0.5 ms under 40 ms is noise, not inconsistent.
    assert not ddp_step.exposed(cfg(40.0), cfg(39.5), 2)["inconsistent"]


def test_zero_comm_and_single_process():
    assert ddp_step.exposed(cfg(40.0), cfg(40.0), 2)["share"] == 0.0
    one = ddp_step.exposed(cfg(40.0), cfg(45.0), 1)
    assert one["exposed_ms"] == 0.0 and one["share"] == 0.0 and not one["inconsistent"]
    missing = ddp_step.exposed({}, cfg(45.0), 2)
    assert missing["share"] is None and missing["exposed_ms"] is None


@pytest.mark.parametrize(("compute", "full"), [(0.0, 5.0), (5.0, 0.0), (1.0, 1e9), (1e9, 1.0), (3.0, 3.0)])
def test_share_always_in_unit_interval(compute, full):
    got = ddp_step.exposed(cfg(compute), cfg(full), 8)
    assert got["share"] is None or 0.0 <= got["share"] <= 1.0


def test_reference_is_the_row_nearest_one_bucket():
    rows = [
        {"size": size, "in_place": {"busbw": float(size >> 20)}, "out_of_place": {"busbw": 1.0}}
        for size in (1 << 20, 16 << 20, 32 << 20, 1 << 30)
    ]
    # 4 GB of gradients: one 25 MiB bucket at a time -> 32 MiB is nearer than 16 MiB in log size.
    assert ddp_step.reference(rows, 4e9, 25.0) == {"size": 32 << 20, "busbw": 32.0}
    # 2 MiB of gradients: smaller than a bucket -> the row nearest 2 MiB.
    assert ddp_step.reference(rows, 2 << 20, 25.0)["size"] in (1 << 20, 16 << 20)
    assert ddp_step.reference([], 4e9) is None


def test_hook_effect_and_best_hook():
    fig = ddp_step.figure(gpu_result(compute=40.0, none=80.0, fp16=64.0, bf16=61.6, powersgd=70.0))
    assert fig["hooks"]["bf16"]["vs_none"] == pytest.approx(-0.23)
    assert fig["best_hook"] == "bf16" and fig["best_gain"] == pytest.approx(0.23)
    assert fig["share"] == 0.5
    assert fig["hooks"]["powersgd"]["label"] == "PowerSGD rank 4"


# ---------------------------------------------------------------- the sentence
def test_sentence_small_share_needs_no_hook():
    fig = ddp_step.figure(gpu_result(compute=40.0, none=41.6))
    assert fig["sentence"] == "Communication is 4% of a step here (1.60 of 41.6 ms); no hook needed."


def test_sentence_names_the_hook_that_cuts_the_step():
    fig = ddp_step.figure(gpu_result(compute=40.0, none=68.0, fp16=55.0, bf16=52.4, powersgd=60.0))
    assert fig["sentence"] == (
        "Communication is 41% of a step here (28.0 of 68.0 ms); bf16 compression cuts the step by 23%."
    )


def test_sentence_overlap_problem_against_the_nccl_tests_figure():
    # 4 GB exposed in 40 ms = 100 GB/s busbw on 2 ranks vs 345 GB/s nccl-tests: 29%.
    ref = {
        "source": "nccl-tests all_reduce",
        "run_id": "R",
        "rows": [{"size": 32 << 20, "in_place": {"busbw": 345.0}}],
    }
    fig = ddp_step.figure(gpu_result(compute=40.0, none=80.0, fp16=79.0, bf16=79.0, powersgd=79.5), ref)
    assert fig["effective"]["busbw"] == 100.0 and fig["effective"]["ratio"] == pytest.approx(
        100 / 345, abs=1e-4
    )
    assert fig["effective"]["reference"] == {
        "source": "nccl-tests all_reduce",
        "run_id": "R",
        "size": 32 << 20,
        "busbw": 345.0,
    }
    assert fig["sentence"] == (
        "Communication is 50% of a step here (40.0 of 80.0 ms); no comm hook cuts it by 5% or more; the "
        "step's all-reduce reaches only 29% of the 345.0 GB/s nccl-tests all_reduce figure, so overlap or "
        "bucket size (bucket_cap_mb), not the wire, is the problem."
    )


def test_sentence_wire_limit_when_the_step_reaches_the_wire():
    ref = {
        "source": "nccl-tests all_reduce",
        "run_id": "R",
        "rows": [{"size": 32 << 20, "in_place": {"busbw": 28.0}}],
    }
    fig = ddp_step.figure(gpu_result(compute=40.0, none=180.0, fp16=179.0, bf16=178.0, powersgd=177.0), ref)
    assert fig["effective"]["ratio"] > 1
    assert "the wire is the limit" in fig["sentence"] and fig["sentence"].startswith("Communication is 78%")


def test_sentence_single_process_and_inconsistent_and_no_step():
    one = ddp_step.figure(gpu_result(compute=40.0, none=40.3, world=1))
    assert one["sentence"].startswith(
        "One process: DDP has no gradient all-reduce, so communication costs nothing"
    )
    assert one["share"] == 0.0 and one["effective"] == {}
    odd = ddp_step.figure(gpu_result(compute=40.0, none=30.0))
    assert odd["sentence"].startswith(
        "The full DDP step (30.0 ms) measured faster than compute alone (40.0 ms)"
    )
    result = gpu_result()
    result["configs"]["none"] = {"skipped": "crashed"}
    assert "no full-step time" in ddp_step.figure(result)["sentence"]


def test_cpu_figure_without_bf16():
    [small, _] = [ddp_step.figure(r) for r in ddp_step.parse_log(CPU_LOG.read_text())]
    assert small["hooks"]["bf16"] == {
        "skipped": "bf16_compress needs NCCL (GPU): gloo has no bfloat16 all-reduce"
    }
    assert small["best_hook"] in ("fp16", "powersgd")
    assert 0.0 <= small["share"] <= 1.0
    assert small["compute_ms"] <= small["hooks"]["none"]["step_ms"]


# ---------------------------------------------------------------- record, history, JSON
def log_of(*items):
    return "W1201 torchrun banner\n" + "\n".join(json.dumps(i) for i in items) + "\n"


def test_record_json_history_and_verdict(tmp_path):
    node = {"stepcost": {"single_node": log_of(gpu_result(compute=40.0, none=41.6))}}
    first = host_record.build_record("gpu1", "20261201T010000Z", copy.deepcopy(node))
    assert json.loads(json.dumps(first))["stepcost"] == first["stepcost"]
    [fig] = first["stepcost"]["single_node"]
    assert fig["verdict"] == "PASS" and fig["baseline"] == {"run_id": None}
    # A run of the step benchmark alone adds no PASS: it stays N/A and is never a baseline.
    assert first["verdict"] == "N/A"
    base = dict(first, verdict="PASS")

    same = host_record.build_record(
        "gpu1", "20261201T020000Z", copy.deepcopy(node), ("20261201T010000Z", base)
    )
    [fig] = same["stepcost"]["single_node"]
    assert fig["verdict"] == "PASS" and fig["baseline"]["run_id"] == "20261201T010000Z"
    assert fig["baseline"]["change"] == 0.0

    slow = {"stepcost": {"single_node": log_of(gpu_result(compute=40.0, none=60.0))}}
    worse = host_record.build_record("gpu1", "20261201T030000Z", slow, ("20261201T010000Z", base))
    [fig] = worse["stepcost"]["single_node"]
    assert fig["verdict"] == "WARN" and worse["verdict"] == "WARN"
    [finding] = [f for f in worse["findings"] if f["code"] == "stepcost_slower"]
    assert finding["severity"] == "warning" and "44% slower than 41.6 ms" in finding["message"]
    assert "communication share 33% now, 4% then" in finding["message"]

    # Another model size or rank count is not compared.
    other = {"stepcost": {"single_node": log_of(gpu_result(compute=40.0, none=60.0, world=4))}}
    rec = host_record.build_record("gpu1", "20261201T040000Z", other, ("20261201T010000Z", base))
    assert rec["stepcost"]["single_node"][0]["baseline"] == {"run_id": None}


def test_record_reference_from_this_run_or_the_baseline():
    from test_report import good_node

    node = good_node()
    node["stepcost"] = {"single_node": log_of(gpu_result(compute=40.0, none=80.0))}
    rec = host_record.build_record("gpu-a01", "20261201T010000Z", node)
    ref = rec["stepcost"]["single_node"][0]["effective"]["reference"]
    assert ref["source"] == "nccl-tests all_reduce" and ref["run_id"] == "20261201T010000Z"
    assert ref["size"] == 32 << 20 and ref["busbw"] > 100
    # A stepcost-only run (--tags stepcost) takes the last passing run's nccl-tests figure.
    alone = {"topology": node["topology"], "stepcost": node["stepcost"]}
    later = host_record.build_record("gpu-a01", "20261201T020000Z", alone, ("20261201T010000Z", rec))
    assert later["stepcost"]["single_node"][0]["effective"]["reference"]["run_id"] == "20261201T010000Z"


def test_no_result_line_is_a_finding():
    rec = host_record.build_record("n1", "20261201T010000Z", {"stepcost": {"multi_node": "Traceback ...\n"}})
    assert rec["stepcost"] == {}
    assert [f["code"] for f in rec["findings"]] == ["stepcost_no_results"]


def test_spread_logs_gives_the_group_run_to_every_host():
    text = log_of(gpu_result(world=6))
    logs = {"a": {"multi_node": "rank 1 noise\n"}, "b": {"multi_node": text, "single_node": "x"}, "c": {}}
    spread = ddp_step.spread_logs(logs)
    assert spread["a"]["multi_node"] == text and spread["b"]["multi_node"] == text
    assert spread["b"]["single_node"] == "x" and spread["c"] == {}


# ---------------------------------------------------------------- report
def test_report_section_table_chart_and_summary(tmp_path):
    node = {
        "stepcost": {
            "single_node": log_of(gpu_result(compute=40.0, none=68.0, fp16=55.0, bf16=52.4, powersgd=60.0)),
            "multi_node": CPU_LOG.read_text(),
        }
    }
    records = {"gpu1": host_record.build_record("gpu1", "20261201T010000Z", node)}
    records["gpu2"] = copy.deepcopy(records["gpu1"]) | {"host": "gpu2"}
    paths = assemble.write_report(str(tmp_path), "20261201T010000Z", records)
    md = (tmp_path / "report.md").read_text()
    assert "## What communication costs a DDP step" in md
    assert (
        "### DDP step on gpu1 (one node, 2 ranks)" in md and "### DDP step on gpu2 (one node, 2 ranks)" in md
    )
    assert md.count("### DDP step on the group (1 node, 2 ranks)") == 1
    assert (
        "| 1G | nccl | bf16-autocast | bf16 compression | 40.00 | 52.40 | 52.40-52.40 | 12.40 | 24% | -23% |"
        in md
    )
    assert (
        "bf16 compression cuts the step by 23%. Gradient all-reduce as the step saw it: 4 GB of gradients in"
        in md
    )
    assert "| 525K | gloo | fp32 | bf16 |" in md and "gloo has no bfloat16 all-reduce" in md
    for name in ("stepcost_gpu1.png", "stepcost_gpu2.png", "stepcost_group.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)
        assert str(tmp_path / name) in paths["pngs"]
    line = assemble.summary_line(records["gpu1"])
    assert "DDP step single_node 1G (2 ranks): comm 41% of 68.0 ms, bf16 hook cuts the step by 23%" in line


# ---------------------------------------------------------------- the program's pure helpers
def test_program_helpers():
    prog = load_program()
    assert prog.parse_count("125M") == 125_000_000 and prog.parse_count("1G") == 10**9
    assert prog.parse_count("2.5k") == 2500 and prog.parse_count("5000") == 5000
    with pytest.raises(ValueError, match="not like"):
        prog.parse_count("lots")
    width, layers = prog.plan_model(10**9, 4096)
    assert width == 4096 and abs(layers * (width * width + width) - 10**9) < width * width
    # Fewer parameters than one layer of the asked width: the width shrinks.
    width, layers = prog.plan_model(1000, 512)
    assert layers == 1 and width * width + width <= 1000
    got = prog.spread([0.004, 0.001, 0.002, 0.003])
    assert got == {"median_ms": 2.5, "p25_ms": 1.75, "p75_ms": 3.25, "min_ms": 1.0, "max_ms": 4.0, "steps": 4}
    assert prog.hook_unavailable("bf16", "gloo") and not prog.hook_unavailable("bf16", "nccl")
    assert prog.parse_args(["--hooks", "none,powersgd"]).hook_list == ["none", "powersgd"]
    for bad in (["--hooks", "int8"], ["--warmup", "2"]):
        with pytest.raises(SystemExit):
            prog.parse_args(bad)


# ---------------------------------------------------------------- issue 38: no GPU advice from CPU runs
GPU_ONLY_ADVICE = (
    "bucket_cap_mb",
    "not the wire",
    "the wire is the limit",
    "faster links",
    "hook cuts",
    "cuts the step",
)


def test_a_cpu_run_over_gloo_draws_no_gpu_advice(tmp_path, monkeypatch):
    """The testbed's figure (the real CPU capture, the group's gloo all-reduce as its reference):
    what it shows is said, and nothing that holds only on GPUs over NCCL, in the record's sentences,
    the summary line and the report."""
    gloo = (FIXTURES / "nccltests" / "torch_allreduce_gloo_3ranks.txt").read_text()
    node = {
        "skipped": "no NVIDIA GPU: GPU benchmarks skipped",
        "torch": {"multi_node": gloo},
        "stepcost": {"multi_node": CPU_LOG.read_text()},
    }
    record = host_record.build_record("node1", "20261207T060000Z", node)
    figs = record["stepcost"]["multi_node"]
    assert [f["device"] for f in figs] == ["cpu", "cpu"] and all(f["effective"].get("ratio") for f in figs)
    for fig in figs:
        assert not ddp_step.advice_holds(fig)
        assert " on cpu over gloo: DDP's gradient all-reduce ran across the 2 ranks" in fig["sentence"]
        assert not [w for w in GPU_ONLY_ADVICE if w in fig["sentence"]], fig["sentence"]
    line = assemble.summary_line(record)
    assert not [w for w in GPU_ONLY_ADVICE if w in line], line
    monkeypatch.setattr(markdown, "pyplot", lambda: None)
    md = pathlib.Path(
        assemble.write_report(str(tmp_path), "20261207T060000Z", {"node1": record})["md"]
    ).read_text()
    assert not [w for w in GPU_ONLY_ADVICE if w in md.split("What communication costs a DDP step")[1]]


def test_the_same_figure_on_gpus_over_nccl_still_advises():
    fig = ddp_step.figure(gpu_result(compute=40.0, none=60.0, fp16=50.0))
    assert ddp_step.advice_holds(fig) and "cuts the step by" in fig["sentence"]
    cpu = ddp_step.figure(dict(gpu_result(compute=40.0, none=60.0, fp16=50.0), backend="gloo", device="cpu"))
    assert not ddp_step.advice_holds(cpu) and "cuts the step" not in cpu["sentence"]


def test_a_median_of_true_is_no_figure():
    """A node's answer that says ``"median_ms": true`` has no step time (it counted as 1 ms)."""
    run = ddp_step.parse_log(CPU_LOG.read_text())[0]
    compute, none = run["configs"]["compute"], dict(run["configs"]["none"], median_ms=True)
    assert ddp_step.exposed(compute, none, run["world_size"])["exposed_ms"] is None
