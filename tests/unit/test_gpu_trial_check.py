"""tests/gpu/gpu_trial_check.py, the comparison of the fingerprint with tests/gpu/gpu_reference.cu
on the lent GPU machine (issue 25), on a record the store writes from our H200's health read."""

import json

from tests.gpu import gpu_trial_check as check
from tests.unit.test_gpurecord import H200, fact, store


def test_agreement_within_five_percent_and_the_line_that_says_it(tmp_path, capsys):
    run_id = "20261203T100000Z"
    store(tmp_path, run_id, {"localhost": fact(H200, run_id, "localhost")})
    reference = tmp_path / "reference.jsonl"
    reference.write_text(
        "\n".join(
            [
                "noise from the build",
                json.dumps(
                    {
                        "gpu": 0,
                        "figure": "h2d_bytes_per_second",
                        "median": 53.5e9,
                        "min": 1,
                        "max": 2,
                        "samples": 9,
                    }
                ),
                json.dumps({"gpu": 0, "figure": "gemm_bf16_flops", "median": 770e12}),
                json.dumps({"gpu": 1, "figure": "hbm_copy_bytes_per_second", "median": 3.8e12}),
                json.dumps({"gpu": 1, "figure": "gemm", "error": "built without cuBLAS"}),
            ]
        )
    )
    assert check.main([str(tmp_path), str(reference)]) == 0
    out = capsys.readouterr().out
    assert (
        "run 20261203T100000Z, localhost: verdict PASS, GPU verdict PASS (gpu_trial: health, fingerprint)"
        in out
    )
    assert "GPU0 gemm_bf16_flops: wireup 780.0 TFLOPS, reference 770.0 TFLOPS, ratio 1.013 ok" in out
    assert out.strip().endswith("gpu trial check: OK (3 figures within 5%)")

    reference.write_text(json.dumps({"gpu": 0, "figure": "h2d_bytes_per_second", "median": 60e9}))
    check.main([str(tmp_path), str(reference)])
    out = capsys.readouterr().out
    assert (
        "ratio 0.883 OFF BY MORE THAN 5%" in out and "gpu trial check: NOT OK (1 of 1 figures differ" in out
    )


def test_nothing_to_compare_says_so(tmp_path, capsys):
    assert check.main([str(tmp_path), str(tmp_path / "none.jsonl")]) == 2
    assert "no bench record with GPU figures" in capsys.readouterr().out
