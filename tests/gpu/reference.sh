#!/usr/bin/env bash
# Builds and runs tests/gpu/gpu_reference.cu (issue 25: an independent measurement of each GPU's
# copy and matmul rates, CUDA runtime + cuBLAS, no torch) with the machine's own nvcc.
# Usage (on the GPU machine, repo root): bash tests/gpu/reference.sh OUT_DIR [SECONDS]
# Writes OUT_DIR/reference.jsonl (one JSON line per GPU and figure) and OUT_DIR/reference-build.log.
set -o nounset -o pipefail
out=${1:?usage: reference.sh OUT_DIR [SECONDS]}
seconds=${2:-3}
mkdir -p "$out"
log="$out/reference-build.log"
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
[ -x "$nvcc" ] || nvcc=$(command -v nvcc || true)
if [ -z "$nvcc" ]; then echo "== reference: no nvcc (looked at /usr/local/cuda/bin and PATH)"; exit 0; fi
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n1 | tr -d ' .')
bin=/tmp/wireup-gpu-reference
# cuBLAS: the toolkit's, else the one torch's wheels installed (nvidia/cu13 or nvidia/cublas), whose
# headers are linked alone into a folder of their own so they never shadow the toolkit's.
blas=()
cuda_home=$(dirname "$(dirname "$nvcc")")
if [ -f "$cuda_home/include/cublas_v2.h" ] && ls "$cuda_home"/lib64/libcublas.so* >/dev/null 2>&1; then
  blas=(-DWITH_CUBLAS -lcublas)
else
  read -r -a sites <<<"$(python3 -c 'import site, sys; print(" ".join(site.getsitepackages() + [p for p in sys.path if p.endswith("site-packages")]))' 2>/dev/null)"
  header=$(find -L "${sites[@]}" -path '*/nvidia/*' -name cublas_v2.h 2>/dev/null | head -n1)
  lib=$(find -L "${sites[@]}" -path '*/nvidia/*' -name 'libcublas.so.*' 2>/dev/null | head -n1)
  if [ -n "$header" ] && [ -n "$lib" ]; then
    inc=/tmp/wireup-cublas-include
    rm -rf "$inc" && mkdir -p "$inc"
    for h in "$(dirname "$header")"/cublas*.h; do ln -s "$h" "$inc/"; done
    blas=(-DWITH_CUBLAS -I"$inc" -L"$(dirname "$lib")" -l:"$(basename "$lib")" -Xlinker -rpath="$(dirname "$lib")")
  fi
fi
echo "== reference: $nvcc ($("$nvcc" --version | tail -n1)), sm_$cc, cuBLAS: ${blas[*]:-none}" | tee "$log"
start=$SECONDS
if ! "$nvcc" -O2 -std=c++17 -arch="sm_$cc" -o "$bin" tests/gpu/gpu_reference.cu "${blas[@]}" >>"$log" 2>&1; then
  echo "== reference: the cuBLAS build failed (see reference-build.log); building the copies alone" | tee -a "$log"
  "$nvcc" -O2 -std=c++17 -arch="sm_$cc" -o "$bin" tests/gpu/gpu_reference.cu >>"$log" 2>&1 || { echo "== reference: build failed"; tail -n 20 "$log"; exit 0; }
fi
echo "== reference: built in $((SECONDS - start)) s"
start=$SECONDS
"$bin" "$seconds" >"$out/reference.jsonl" 2>>"$log"
echo "== reference: rc=$? in $((SECONDS - start)) s"
cat "$out/reference.jsonl"
