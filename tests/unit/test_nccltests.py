"""nccl-tests output parser: real 2x H200 captures and the documented layouts."""

import pathlib

import pytest

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.probe import bench_output

FIX = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "nccltests"


def read(name):
    return (FIX / name).read_text()


def test_h200_all_reduce_text():
    out = bench_output.parse(read("h200x2_v2.19.6_all_reduce_perf.txt"))
    assert out["format"] == "text"
    assert out["program"] == "all_reduce_perf"
    assert out["collective"] == "all_reduce"
    assert out["version"] == "2.19.6"
    assert out["nccl_version"] == "2.28.9"
    assert out["nccl_headers_version"] == "2.28.9"
    assert out["config"]["ngpus"] == 2
    assert out["config"]["max_bytes"] == 8589934592
    assert out["config"]["iters"] == 20
    assert [d["bus_id"] for d in out["devices"]] == ["0000:00:06", "0000:00:07"]
    assert out["devices"][1]["name"] == "NVIDIA H200"
    assert len(out["rows"]) == 31
    last = out["rows"][-1]
    assert last["size"] == 8589934592
    assert last["count"] == 2147483648
    assert last["redop"] == "sum" and last["root"] == -1
    assert last["out_of_place"] == {
        "time_us": 24945.4,
        "algbw": 344.35,
        "busbw": 344.35,
        "wrong": 0,
        "error": None,
    }
    assert last["in_place"]["busbw"] == 347.66
    assert bench_output.best_busbw(last) == 347.66
    assert out["avg_busbw"] == pytest.approx(110.838)
    assert out["out_of_bounds"] == 0
    assert out["wrong_total"] == 0


def test_h200_all_reduce_json_matches_text():
    text = bench_output.parse(read("h200x2_v2.19.6_all_reduce_perf.txt"))
    js = bench_output.parse(read("h200x2_v2.19.6_all_reduce_perf.json"))
    assert js["format"] == "json"
    assert js["collective"] == "all_reduce"
    assert js["nccl_version"] == "2.28.9"
    assert js["config"]["ngpus"] == 2
    assert [r["size"] for r in js["rows"]] == [r["size"] for r in text["rows"]]
    for a, b in zip(js["rows"], text["rows"]):
        # The table rounds to 2 decimals (or fewer digits for wide values).
        assert a["out_of_place"]["busbw"] == pytest.approx(b["out_of_place"]["busbw"], abs=0.06)
        assert a["in_place"]["time_us"] == pytest.approx(b["in_place"]["time_us"], rel=1e-3, abs=0.01)
        assert a["out_of_place"]["wrong"] == 0
    assert js["avg_busbw"] == pytest.approx(110.838068)
    assert js["out_of_bounds"] == 0


@pytest.mark.parametrize(
    "name,collective,rows,last_busbw",
    [
        ("h200x2_v2.19.6_all_gather_perf.txt", "all_gather", 31, (301.31, 311.14)),
        ("h200x2_v2.19.6_reduce_scatter_perf.txt", "reduce_scatter", 31, (293.56, 298.52)),
        ("h200x2_v2.19.6_all_reduce_perf_p2p_disabled.txt", "all_reduce", 6, (27.87, 27.91)),
    ],
)
def test_h200_other_collectives(name, collective, rows, last_busbw):
    out = bench_output.parse(read(name))
    assert out["collective"] == collective
    assert len(out["rows"]) == rows
    last = out["rows"][-1]
    assert (last["out_of_place"]["busbw"], last["in_place"]["busbw"]) == last_busbw


def test_all_gather_zero_size_rows_are_kept():
    out = bench_output.parse(read("h200x2_v2.19.6_all_gather_perf.txt"))
    assert out["rows"][0]["size"] == 0 and out["rows"][0]["redop"] == "none"


def test_older_error_column():
    out = bench_output.parse(read("documented_v2.9_error_column.txt"))
    assert out["version"] == ""  # no version banner before 2.13
    assert out["program"] == "" and out["collective"] == ""
    assert out["config"]["ngpus"] == 8
    assert len(out["devices"]) == 8 and out["devices"][0]["group"] is None
    assert out["devices"][7]["bus_id"] == "0xbd"
    last = out["rows"][-1]
    assert last["size"] == 2147483648
    assert last["out_of_place"]["error"] == pytest.approx(5e-07)
    assert last["out_of_place"]["wrong"] is None
    assert last["out_of_place"]["time_us"] == 14876
    assert last["in_place"]["busbw"] == 252.75
    assert out["avg_busbw"] == pytest.approx(171.772)


def test_oldest_layout_without_root_and_na():
    out = bench_output.parse(read("documented_v2.0_no_root.txt"))
    assert len(out["rows"]) == 9
    row = out["rows"][-1]
    assert row["root"] is None and row["redop"] == "sum" and row["type"] == "float"
    assert row["out_of_place"] == {
        "time_us": 18811.0,
        "algbw": 7.14,
        "busbw": 10.70,
        "wrong": None,
        "error": None,
    }


def test_mpirun_prefixes_and_noise():
    out = bench_output.parse(read("documented_mpirun_prefix.txt"))
    assert out["program"] == "all_reduce_perf_mpi"
    assert out["collective"] == "all_reduce"
    assert out["version"] == "2.17.1"
    assert out["nccl_version"] == "2.27.3"
    assert len(out["devices"]) == 16
    assert {d["host"] for d in out["devices"]} == {"node-a", "node-b"}
    assert [r["size"] for r in out["rows"]] == [2**k for k in range(27, 33)]
    assert out["rows"][-1]["in_place"]["busbw"] == 249.82


def test_per_iteration_cputime_timestamp():
    out = bench_output.parse(read("documented_per_iter_timestamp.txt"))
    assert out["collective"] == "alltoall"
    assert len(out["rows"]) == 2
    row = out["rows"][1]
    assert row["out_of_place"]["time_us"] == 7902.6
    assert row["out_of_place"]["busbw"] == 135.87
    assert row["out_of_place"]["wrong"] is None  # N/A: validation off
    assert row["out_of_place"]["i_p99_us"] == 4049.9
    assert row["in_place"]["busbw"] == 135.87
    assert out["wrong_total"] == 0


def test_wrong_elements_are_counted():
    text = read("h200x2_v2.19.6_all_reduce_perf_p2p_disabled.txt").replace(
        "27.87       0  38477.6", "27.87      12  38477.6"
    )
    assert "      12  38477.6" in text
    out = bench_output.parse(text)
    assert out["wrong_total"] == 12


def test_torch_lines():
    out = bench_output.parse(read("torch_allreduce_gloo_3ranks.txt"))
    assert out["format"] == "torch"
    assert out["collective"] == "all_reduce"
    assert out["config"]["world_size"] == 3
    assert out["config"]["backend"] == "gloo"
    assert out["torch_version"] == "2.13.0+cpu"
    assert [r["size"] for r in out["rows"]] == [64 << 10, 256 << 10, 1 << 20, 4 << 20]
    for row in out["rows"]:
        sec = row["in_place"]
        assert sec["wrong"] == 0
        assert sec["busbw"] == pytest.approx(sec["algbw"] * 2 * 2 / 3, abs=2e-4)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "bash: all_reduce_perf: command not found\n",
        "# nccl-tests version 2.19.6\n# Collective test starting: x\n"
        "Failed: Cuda error common.cu:1 'no CUDA-capable device'\n",
    ],
)
def test_no_rows_is_an_error(text):
    with pytest.raises(ValueError, match="no nccl-tests result rows"):
        bench_output.parse(text)


@pytest.mark.parametrize(
    "code,expected", [(22809, "2.28.9"), (21803, "2.18.3"), (2406, "2.4.6"), (0, ""), (None, "")]
)
def test_nccl_version_code(code, expected):
    assert bench_output.nccl_version_string(code) == expected


def test_row_at_or_above():
    rows = bench_output.parse(read("h200x2_v2.19.6_all_reduce_perf.txt"))["rows"]
    assert bench_output.row_at_or_above(rows, 1 << 30)["size"] == 8 << 30
    small = [r for r in rows if r["size"] < (1 << 30)]
    assert bench_output.row_at_or_above(small, 1 << 30) is None


NCCL_H = """#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 22809
"""


def test_nccl_header_version():
    assert bench_output.nccl_header_version(NCCL_H) == "2.28.9"
    assert bench_output.nccl_header_version("#define NCCL_MAJOR 2\n") == ""


@pytest.mark.parametrize(
    "caps,flags,arch",
    [
        (["9.0"], "-gencode=arch=compute_90,code=sm_90", "90"),
        (["9.0", "9.0"], "-gencode=arch=compute_90,code=sm_90", "90"),
        (
            ["10.0", "8.0"],
            "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_100,code=sm_100",
            "80,100",
        ),
    ],
)
def test_gencode(caps, flags, arch):
    assert bench_output.gencode(caps) == {"flags": flags, "arch": arch}


@pytest.mark.parametrize("caps", [[], None, ["sm_90"]])
def test_gencode_refuses(caps):
    with pytest.raises(ValueError, match="compute"):
        bench_output.gencode(caps)


@pytest.mark.parametrize(
    "version,expected",
    [("v2.19.6", True), ("2.18.0", True), ("v2.17.1", False), ("", False), ("master", False)],
)
def test_supports_json(version, expected):
    assert bench_output.supports_json(version) is expected


# ---------------------------------------------------------------- runs nccl-tests itself failed
PUB = FIX.parent / "public"


def test_min_bw_failure_text_rc7():
    # Real: NCCL_TESTS_MIN_BW set on 1x H200; nccl-tests prints FAILED and exits 7.
    run = bench_output.assess(read("h200x1_v2.19.6_minbw_fail.txt"), 7)
    assert len(run["parsed"]["rows"]) == 6
    assert run["parsed"]["avg_status"] == "FAILED" and run["parsed"]["complete"]
    assert run["problems"] == [
        "exit code 7: testNumResults: wrong results or the NCCL_TESTS_MIN_BW average check failed",
        '"Avg bus bandwidth : 0 FAILED" (below NCCL_TESTS_MIN_BW x 0.9)',
        '".. vm pid 1210: Test failure common.cu:1454"',
    ]


def test_min_bw_failure_json_alone_says_failed():
    # The -J file of the same kind of run (okay: "false"), read without its exit code.
    run = bench_output.assess(
        read("h200x1_v2.19.6_minbw_fail_json.txt"), None, read("h200x1_v2.19.6_minbw_fail.json")
    )
    assert run["parsed"]["format"] == "json"
    assert '"Avg bus bandwidth : 0 FAILED" (below NCCL_TESTS_MIN_BW x 0.9)' in run["problems"]
    assert '".. vm pid 1222: Test failure common.cu:1454"' in run["problems"]


def test_killed_run_stops_mid_table():
    text = read("h200x1_v2.19.6_truncated.txt")
    run = bench_output.assess(text, 137)
    assert run["problems"][0] == "exit code 137: killed by SIGKILL (out of memory, or `timeout -s KILL`)"
    assert "output stops mid-table after the 1073741824 B row" in run["problems"][1]
    # Cut earlier, with only small rows and no exit code known: still a problem, never silence.
    small = "\n".join(text.splitlines()[:20]) + "\n      16777216   4194304   float"
    run = bench_output.assess(small, None)
    assert len(run["parsed"]["rows"]) == 10
    assert run["problems"] == [
        "output stops mid-table after the 4096 B row, cut in the middle of "
        "'16777216   4194304   float': no 'Avg bus bandwidth' footer"
    ]


def test_cut_json_falls_back_to_the_text():
    js = read("h200x1_v2.19.6_minbw_fail.json")
    run = bench_output.assess(read("h200x1_v2.19.6_minbw_fail_json.txt"), 7, js[: len(js) // 2])
    assert run["parsed"]["format"] == "text" and len(run["parsed"]["rows"]) == 4


def test_test_nccl_failure_lines_are_quoted_first():
    # Public: github.com/NVIDIA/nccl-tests/issues/322 (an mpirun job whose ranks failed).
    run = bench_output.assess((PUB / "hca_nccl-tests-322_test_nccl_failure.txt").read_text(), 3)
    assert run["parsed"] is None
    assert run["problems"][:2] == [
        "exit code 3: testNcclError",
        "\"HCA-14: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO "
        "for details) / '\"",
    ]
    assert run["problems"][-1] == "no result rows"


def test_out_of_bounds_failed_in_an_old_pasted_table():
    # Public: github.com/NVIDIA/nccl-tests/issues/37 (headers and footer pasted without "#").
    run = bench_output.assess((PUB / "v100x8_nccl-tests-37_all_gather_oob_failed.txt").read_text())
    assert run["parsed"]["rows"][0]["out_of_place"]["error"] == 1.0
    assert run["problems"] == ['"Out of bounds values : 2 FAILED"']


def test_healthy_runs_have_no_problems():
    for name in (
        "h200x2_v2.19.6_all_reduce_perf.txt",
        "h200x1_v2.19.6_alltoall.txt",
        "h200x1_v2.19.6_sendrecv.txt",
    ):
        assert bench_output.assess(read(name), 0)["problems"] == []
    assert (
        bench_output.assess(read("h200x1_v2.19.6_alltoall.txt"), 0, read("h200x1_v2.19.6_alltoall.json"))[
            "problems"
        ]
        == []
    )


def test_old_error_column_is_judged_by_nccl_tests_tolerance():
    # 8 ranks, float: nccl-tests < 2.13 counted a half wrong above 1e-5 x 7; 5e-07 is healthy.
    parsed = bench_output.parse(read("documented_v2.9_error_column.txt"))
    assert bench_output.data_errors(parsed, "all_reduce") == []
    bad = read("documented_v2.9_error_column.txt").replace("252.63  5e-07", "252.63  2e-03")
    assert bench_output.data_errors(bench_output.parse(bad), "all_reduce") == [
        (2147483648, "out_of_place", "max error 0.002 > 7e-05 allowed")
    ]


def test_old_alltoall_in_place_delta_is_not_judged():
    # Public: github.com/NVIDIA/nccl-tests/issues/78, 64 ranks, healthy: in-place error 1e+00 is
    # nccl-tests' own unsupported in-place alltoall, counted nowhere ("Out of bounds values : 0 OK").
    parsed = bench_output.parse((PUB / "v100x64_nccl-tests-78_alltoall_error_column.txt").read_text())
    assert parsed["rows"][0]["redop"] == "" and parsed["rows"][0]["in_place"]["error"] == 1.0
    parsed["config"] = {"ngpus": 64}
    assert bench_output.checked_halves("alltoall", parsed["rows"]) == ["out_of_place"]
    assert bench_output.data_errors(parsed, "alltoall") == []
    assert len(bench_output.data_errors(parsed, "all_gather")) == 2  # the same delta elsewhere is wrong
    reduce = bench_output.parse((PUB / "v100x64_nccl-tests-78_all_reduce_error_column.txt").read_text())
    reduce["config"] = {"ngpus": 64}
    assert bench_output.data_errors(reduce, "all_reduce") == []  # 2e-06 < 1e-5 x 63


@pytest.mark.parametrize(
    ("name", "collective", "halves"),
    [
        ("h200x1_v2.19.6_alltoall.txt", "alltoall", ["out_of_place"]),
        ("h200x1_v2.19.6_sendrecv.txt", "sendrecv", ["out_of_place"]),
        ("h200x1_v2.19.6_broadcast.txt", "broadcast", ["out_of_place", "in_place"]),
        ("h200x2_v2.19.6_all_reduce_perf.txt", "all_reduce", ["out_of_place", "in_place"]),
        ("../public/rtx5090x1_nccl-tests-287_alltoall.txt", "alltoall", ["out_of_place"]),
    ],
)
def test_checked_halves(name, collective, halves):
    assert bench_output.checked_halves(collective, bench_output.parse(read(name))["rows"]) == halves


# ---------------------------------------------------------------- NCCL's last error after the footer
# nccl-tests prints ncclGetLastError() after a finished run: NCCL saves the text of every WARN there,
# also when NCCL_DEBUG hides it and when NCCL recovered. The WARN text below is the one NCCL logs when
# an NVLS probe fails and it falls back (the same text as in test_public_captures'
# test_nccl_warn_lines_of_a_completed_run_are_not_failures).
LAST_WARN = "Cuda failure 1 'invalid argument'"


def test_last_error_echo_after_a_finished_run_is_not_a_failure():
    # 2.19 (src/util.cu writeErrors): "# error: TEXT" where the real capture has its empty line.
    real = read("h200x2_v2.19.6_all_reduce_perf.txt")
    assert real.endswith("# Collective test concluded: all_reduce_perf\n#\n\n")
    v219 = real[:-1] + f"# error: {LAST_WARN}\n"
    # 2.18: "# TEXT" where the real 2.18.3 capture (NVIDIA/nccl#2441) has its "# " line.
    real218 = (PUB / "h100nvlx4_nccl-2441_v2.18.3_step_bytes.txt").read_text()
    assert real218.endswith("# Collective test concluded: all_reduce_perf\n# \n")
    v218 = real218[: -len("# \n")] + f"# {LAST_WARN}\n"
    # 2.13-2.17 (common.cu): the text alone after the footer's "#"; a footer as old captures end.
    v217 = (PUB / "h100x16_a3mega-ztan-fork_all_reduce.txt").read_text() + f"#\n{LAST_WARN}\n"
    for text in (v219, v218, v217):
        run = bench_output.assess(text, 0)
        assert run["problems"] == []
        assert run["parsed"]["last_error"] == LAST_WARN
    assert bench_output.failure_lines(v219) == []


def test_a_failure_after_the_footer_is_still_a_failure():
    # nccl-tests' own line (a cleanup call that failed) and the shell's crash report stay failures.
    real = read("h200x2_v2.19.6_all_reduce_perf.txt")
    cleanup = real + "vm: Test NCCL failure common.cu:1219 'unhandled cuda error / '\n"
    run = bench_output.assess(cleanup, 3)
    assert "\"vm: Test NCCL failure common.cu:1219 'unhandled cuda error / '\"" in run["problems"]
    crash = real + "Segmentation fault (core dumped)\n"
    assert bench_output.failure_lines(crash) == ["Segmentation fault (core dumped)"]


def test_json_errors_entry_is_the_last_error_not_a_failure():
    # The -J file's "errors" holds the same ncclGetLastError() text ([""] in the real capture).
    js = read("h200x2_v2.19.6_all_reduce_perf.json")
    assert '"errors": [\n  ""\n ]' in js
    warned = js.replace('"errors": [\n  ""\n ]', f'"errors": [\n  "{LAST_WARN}"\n ]')
    run = bench_output.assess(read("h200x2_v2.19.6_all_reduce_perf.txt"), 0, warned)
    assert run["parsed"]["format"] == "json"
    assert run["parsed"]["last_error"] == LAST_WARN and run["parsed"]["failures"] == []
    assert run["problems"] == []


# ---------------------------------------------------------------- newer nccl-tests' failure lines
@pytest.mark.parametrize(
    "line",
    [
        # src/common.h CUCHECK (driver API calls), src/common.cu testStreamSynchronize (-T seconds),
        # src/util.cu writeDeviceReport (more GPUs asked for than the process sees).
        "fastmoe: Test CU failure common.cu:1376 'invalid device context'",
        "fastmoe: Test timeout (10s) common.cu:410",
        "Invalid number of GPUs: 8 requested but only 4 were found.",
    ],
)
def test_newer_failure_lines_are_quoted(line):
    # The header lines are real (NVIDIA/nccl#473, 4x RTX 2080 Ti); the failure line is written in the
    # format the nccl-tests source prints it.
    head = (PUB / "rtx2080tix4_nccl-473_test_nccl_failure.txt").read_text().split("fastmoe: Test")[0]
    run = bench_output.assess(head + line + "\n")
    assert f'"{line}"' in run["problems"]
    assert run["problems"][-1] == "no result rows"


@pytest.mark.parametrize(
    "rc,version,meaning",
    [
        (7, "2.19.6", "testNumResults: wrong results or the NCCL_TESTS_MIN_BW average check failed"),
        (6, "2.19.6", "testInvalidUsage"),
        (8, "2.19.6", None),
        # Newer builds moved wrong results to 8 and gave 6 and 7 to testSkipped and
        # testParameterizationError; a 2.20 banner does not tell which enum the build has.
        (
            7,
            "2.20.0",
            "testNumResults, wrong results or the NCCL_TESTS_MIN_BW average check (nccl-tests up to "
            "2.19), or testParameterizationError (newer builds)",
        ),
        (
            8,
            "",
            "testNumResults, wrong results or the NCCL_TESTS_MIN_BW average check (builds newer than 2.19)",
        ),
        (3, "2.20.0", "testNcclError"),
    ],
)
def test_exit_codes_by_nccl_tests_version(rc, version, meaning):
    text = read("h200x2_v2.19.6_all_reduce_perf.txt").replace("version 2.19.6", f"version {version}")
    if not version:
        text = "\n".join(line for line in text.splitlines() if "nccl-tests version" not in line)
    problems = bench_output.assess(text, rc)["problems"]
    assert problems[0] == f"exit code {rc}" + (f": {meaning}" if meaning else "")


# Real, 1x H200 (nccl-tests 2.19.6, NCCL 2.28.9), tests/gpu/capture.sh of 2026-12-01.
def test_real_timestamp_and_cputime_columns():
    # -S 1 -C 1: "cputime" in place of "time" in both halves and a timestamp column with a space in
    # its cells ("2026-12-01 19:40:08"); the rows must still read, and say their time is CPU time.
    run = bench_output.assess(read("h200x1_v2.19.6_all_reduce_S1_C1_timestamp_cputime.txt"), 0)
    parsed = run["parsed"]
    assert run["problems"] == [] and parsed["complete"]
    assert parsed["time_kind"] == "cputime"
    assert [r["size"] for r in parsed["rows"]] == [1024, 8192, 65536, 524288, 4194304]
    assert parsed["rows"][-1]["out_of_place"] == {
        "time_us": 7.38,
        "algbw": 534.25,
        "busbw": 0.0,
        "wrong": 0,
        "error": None,
    }
    assert parsed["rows"][-1]["in_place"]["algbw"] == 3568.9
    assert bench_output.assess(read("h200x1_v2.19.6_sendrecv.txt"), 0)["parsed"]["time_kind"] == "time"


def test_real_cuda_failure_glued_to_a_row():
    # -G 5 -z 1: CUDA graph capture with blocking collectives fails inside the first row; the
    # failure is printed onto that row ("... sum      -1vm: Test CUDA failure ..."): no row, the
    # failure quoted first after the exit code.
    run = bench_output.assess(read("h200x1_v2.19.6_all_reduce_G5_z1_cuda_failure_in_row.txt"), 2)
    assert run["parsed"] is None
    assert run["problems"][0] == "exit code 2: testCudaError"
    assert (
        "Test CUDA failure common.cu:502 'operation not permitted when stream is capturing'"
        in (run["problems"][1])
    )
    assert run["problems"][-1] == "no result rows"


def test_real_invalid_number_of_gpus():
    run = bench_output.assess(read("h200x1_v2.19.6_all_reduce_g2_on_1gpu_invalid_gpus.txt"), 5)
    assert run["parsed"] is None
    assert run["problems"][:2] == [
        "exit code 5: testNotImplemented",
        '"Invalid number of GPUs: 2 requested but only 1 were found."',
    ]
    assert "Invalid number of GPUs: 2 requested" in run["error"]


def test_real_nccl_debug_info_lines_between_header_and_rows():
    text = read("h200x1_v2.19.6_alltoall_nccl_debug_info.txt")
    assert text.count(" NCCL INFO ") > 20
    run = bench_output.assess(text, 0)
    assert run["problems"] == []
    assert [r["size"] for r in run["parsed"]["rows"]] == [0, 64, 512, 4096, 32768, 262144]
    assert run["parsed"]["rows"][-1]["out_of_place"]["algbw"] == 50.63


def test_real_two_host_mpirun_run_over_sockets():
    # Two ranks that NCCL takes for two hosts (own hostname, own NCCL_HOSTID), nccl-tests under
    # mpirun with NCCL INFO: both Rank lines, the table between the INFO lines, 1.86 GB/s at 128M.
    run = bench_output.assess(read("h200x1_v2.19.6_mpirun_two_hosts_socket_all_reduce_nccl_info.txt"), 0)
    parsed = run["parsed"]
    assert run["problems"] == [] and parsed["complete"] and parsed["avg_busbw"] == 0.463557
    assert [(d["rank"], d["host"]) for d in parsed["devices"]] == [(0, "wireup-cap-0"), (1, "wireup-cap-1")]
    assert (parsed["rows"][-1]["size"], parsed["rows"][-1]["out_of_place"]["busbw"]) == (134217728, 1.86)
    tagged = bench_output.assess(
        read("h200x1_v2.19.6_mpirun_tag_output_two_hosts_socket_all_gather_nccl_info.txt"), 0
    )
    assert tagged["problems"] == [] and tagged["parsed"]["collective"] == "all_gather"
    assert [r["size"] for r in tagged["parsed"]["rows"]] == [1024, 8192, 65536, 524288, 4194304, 33554432]
    assert len(tagged["parsed"]["devices"]) == 2


@pytest.mark.parametrize(
    "name",
    [
        "h200x1_v2.19.6_all_reduce_timeout_term_line_buffered.txt",
        "h200x1_v2.19.6_all_reduce_timeout_term_block_buffered.txt",
    ],
)
def test_real_run_stopped_by_timeout_mid_table(name):
    run = bench_output.assess(read(name), 124)
    assert run["problems"][0].startswith("exit code 124: stopped by `timeout`")
    assert "output stops mid-table after the 268435456 B row" in run["problems"][1]
    assert not run["parsed"]["complete"] and len(run["parsed"]["rows"]) == 26
