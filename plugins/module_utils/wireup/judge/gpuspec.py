"""What a GPU model should reach: its datasheet peaks (dense, no sparsity) and the fraction of them a
healthy GPU measures with wireup's fingerprint (roles/gpu_trial/files/gpu_fingerprint.py).

Figures are in base units (FLOP/s, bytes per second). expected = peak x efficiency; the spec
verdict compares the measured median with it (gpujudge); the raw ratio (measured / peak) is shown
beside it, as the link verdicts show "of expected" and "of raw link".

Peaks: NVIDIA's datasheets, DENSE Tensor Core figures (the datasheets print "with sparsity",
twice the dense rate, for bf16/fp16/tf32/fp8: the dense figure is half of it). bf16/fp16 are the
figures with fp32 accumulate (what torch.matmul uses; GeForce cards run them at half their fp16-
accumulate rate). "pcie" is not a model property: the host link's raw speed comes from the GPU's
PCIe generation and width (bandwidth.pcie_gbps, the link verdicts' rule).

Sources (accessed 2026-12):
- H100 SXM5 / PCIe / NVL: https://www.nvidia.com/en-us/data-center/h100/ (datasheet table):
  bf16/fp16 1,979 / 1,513 / 1,671 TFLOPS sparse; tf32 989 / 756 / 835 sparse; fp8 3,958 / 3,026 /
  3,341 sparse; memory 3.35 / 2.0 / 3.9 TB/s.
- H200 SXM / NVL: https://www.nvidia.com/en-us/data-center/h200/: the H100 SXM's compute (NVL: the
  H100 NVL's), 4.8 TB/s HBM3e.
- B200 (HGX B200, per GPU): https://www.nvidia.com/en-us/data-center/hgx/ : fp8 9 PFLOPS sparse,
  bf16 4.5 sparse, tf32 2.2 sparse, 7.7 TB/s (62 TB/s per 8-GPU board).
- A100 SXM4 / PCIe (40 and 80 GB): https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/
  a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf: bf16/fp16 624 sparse (312 dense),
  tf32 312 sparse; 1,555 GB/s (40 GB), 2,039 GB/s (80 GB SXM), 1,935 GB/s (80 GB PCIe); no fp8.
- L40S: https://www.nvidia.com/en-us/data-center/l40s/: bf16/fp16 362.05 dense (733 sparse), tf32
  366 sparse, fp8 1,466 sparse, 864 GB/s.
- L4: https://www.nvidia.com/en-us/data-center/l4/: bf16 242 sparse, tf32 120 sparse, fp8 485
  sparse, 300 GB/s.
- RTX-class (Ada), NVIDIA Ada GPU architecture whitepaper (v2.1, appendix tables):
  https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf :
  GeForce RTX 4090 fp16/bf16 with fp32 accumulate 165.2 dense, tf32 82.6 dense, fp8 with fp32
  accumulate 330.3 dense, 1,008 GB/s; RTX 6000 Ada 364.2 / 182.1 / 728.5 dense, 960 GB/s.
- A10: https://www.nvidia.com/en-us/data-center/products/a10-gpu/: bf16 250 sparse, tf32 125
  sparse, 600 GB/s.

Efficiency (the fraction of the dense peak a healthy GPU reaches in the fingerprint; overridable
with gpu_trial_efficiency). Measured references, each factor a little below the lower of them:
- gemm bf16 0.66, fp16 0.65, tf32 0.68: torch.matmul 8192^3 on an H100 80GB HBM3 (SXM), torch
  2.7 / CUDA 12.8: bf16 797.5, fp16 736.2, tf32 372.1 TFLOPS = 0.81, 0.74, 0.75 of 989/989/495
  (github.com/zzc0721/torch-performance-test-data/issues/79); wireup's fingerprint on the lent
  H200 (one GPU of a VM, driver 580.159.04, torch 2.11.0+cu130, 2026-12-02, its power capped by
  software for a third of the window): bf16 679.4, fp16 666.6, tf32 353.0 TFLOPS = 0.687, 0.674,
  0.714 (docs/example-h200x1/gpu-trial-2026-12-02/, with the command).
- gemm fp8 0.60: the same H200, torch._scaled_mm with tensor-wise scales: 1,225.3 TFLOPS = 0.619.
- hbm copy 0.85: the same H200, a device-to-device copy counted as read + write (BabelStream's
  convention): 4,223.6 GB/s = 0.880 of 4.8 TB/s (an independent CUDA runtime copy: 4,242.9).
- pcie 0.80 of the link's raw speed: the same H200 at Gen5 x16 (63.0 GB/s raw): 55.1 GB/s
  host-to-device, 55.0 device-to-host = 0.87; DCGM's PCIe test on a Tesla T4 at Gen3 x16 (15.75
  GB/s raw) measured 13.11 / 13.15 GB/s = 0.83 (microsoft/VirtualClient, tests' DCGMIDiag_r2_results.json,
  in tests/fixtures/gpuhealth/).
The same factors for every model: a model-specific one is set with gpu_trial_efficiency once a
healthy run of yours shows it.
"""

import re

from ..core import checks

TERA = 1e12
GIGA = 1e9

FIGURES = (
    "gemm_bf16_flops",
    "gemm_fp16_flops",
    "gemm_tf32_flops",
    "gemm_fp8_flops",
    "hbm_copy_bytes_per_second",
    "h2d_bytes_per_second",
    "d2h_bytes_per_second",
    "h2d_concurrent_bytes_per_second",
    "d2h_concurrent_bytes_per_second",
)
# Which peak each figure is judged against: a model's compute or memory, or the host link.
PEAK_OF = {
    "gemm_bf16_flops": "bf16",
    "gemm_fp16_flops": "fp16",
    "gemm_tf32_flops": "tf32",
    "gemm_fp8_flops": "fp8",
    "hbm_copy_bytes_per_second": "memory",
    "h2d_bytes_per_second": "pcie",
    "d2h_bytes_per_second": "pcie",
}
EFFICIENCY = {
    "gemm_bf16_flops": 0.66,
    "gemm_fp16_flops": 0.65,
    "gemm_tf32_flops": 0.68,
    "gemm_fp8_flops": 0.60,
    "hbm_copy_bytes_per_second": 0.85,
    "h2d_bytes_per_second": 0.80,
    "d2h_bytes_per_second": 0.80,
}
# A figure above this many times its raw peak is a measurement error, never a result (and never a
# baseline): the raw peak is the most the hardware can do, 1.15 leaves room for boost clocks above
# the datasheet's and rounding of the peaks.
PLAUSIBLE_FACTOR = 1.15

# model: (name pattern on nvidia-smi's / torch's product name, dense TFLOPS bf16, fp16, tf32, fp8
# (None: no fp8), memory GB/s). First match wins: the more specific patterns come first.
MODELS = {
    "H100 NVL": (r"\bH100 NVL\b", 835.5, 835.5, 417.5, 1670.5, 3900),
    "H100 PCIe": (r"\bH100 PCIe\b", 756.5, 756.5, 378.0, 1513.0, 2000),
    "H100 SXM": (r"\bH100\b.*\bHBM3\b|\bH100 SXM", 989.4, 989.4, 494.7, 1978.9, 3350),
    "H200 NVL": (r"\bH200 NVL\b", 835.5, 835.5, 417.5, 1670.5, 4800),
    "H200": (r"\bH200\b", 989.4, 989.4, 494.7, 1978.9, 4800),
    "B200": (r"\bB200\b", 2250.0, 2250.0, 1100.0, 4500.0, 7700),
    "A100 SXM4 80GB": (r"\bA100-SXM4-80GB\b", 312.0, 312.0, 156.0, None, 2039),
    "A100 SXM4 40GB": (r"\bA100-SXM4-40GB\b", 312.0, 312.0, 156.0, None, 1555),
    "A100 PCIe 80GB": (r"\bA100 80GB PCIe\b", 312.0, 312.0, 156.0, None, 1935),
    "A100 PCIe 40GB": (r"\bA100-PCIE-40GB\b", 312.0, 312.0, 156.0, None, 1555),
    "L40S": (r"\bL40S\b", 362.05, 362.05, 183.0, 733.0, 864),
    "L4": (r"\bL4\b", 121.0, 121.0, 60.0, 242.5, 300),
    "RTX 6000 Ada": (r"\bRTX 6000 Ada\b", 364.2, 364.2, 182.1, 728.5, 960),
    "GeForce RTX 4090": (r"\bRTX 4090\b", 165.2, 165.2, 82.6, 330.3, 1008),
    "A10": (r"\bA10\b", 125.0, 125.0, 62.5, None, 600),
}
_COMPILED = {model: re.compile(entry[0]) for model, entry in MODELS.items()}


def model_of(name):
    """The MODELS key of a product name ('NVIDIA H200' -> 'H200'); None for an unknown model."""
    for model, pattern in _COMPILED.items():
        if pattern.search(str(name or "")):
            return model
    return None


def peaks(model):
    """{bf16, fp16, tf32, fp8, memory} of a known model in base units (FLOP/s, bytes/s); None where
    the model has no such unit (fp8 before Ada/Hopper)."""
    _pattern, bf16, fp16, tf32, fp8, memory = MODELS[model]
    return {
        "bf16": bf16 * TERA,
        "fp16": fp16 * TERA,
        "tf32": tf32 * TERA,
        "fp8": fp8 * TERA if fp8 else None,
        "memory": memory * GIGA,
    }


def efficiency(figure, overrides=None):
    """The efficiency of a figure (EFFICIENCY, or gpu_trial_efficiency's value for it)."""
    value = (overrides or {}).get(figure, EFFICIENCY.get(figure))
    if value is not None and not (isinstance(value, (int, float)) and 0 < value <= 1):
        raise ValueError(f"gpu_trial_efficiency.{figure} must be a fraction in (0, 1], got {value!r}")
    return value


def efficiency_errors(overrides):
    """What is wrong with gpu_trial_efficiency (preflight's rule): unknown figures, values
    outside (0, 1]."""
    if not isinstance(overrides, dict):
        return [f"gpu_trial_efficiency must be a mapping of figure -> fraction, got {overrides!r}"]
    errors = []
    for figure, value in sorted(overrides.items()):
        if figure not in EFFICIENCY:
            errors.append(
                f"gpu_trial_efficiency.{figure}: not a judged figure (one of {', '.join(EFFICIENCY)})"
            )
        elif not checks.is_number(value) or not 0 < value <= 1:
            errors.append(f"gpu_trial_efficiency.{figure} must be a fraction in (0, 1], got {value!r}")
    return errors
