#!/usr/bin/env bash
# Real outputs of the tools wireup parses, healthy and failing, taken on the lent GPU machine for
# the unit tests' fixtures (tests/fixtures/h200x1/, tests/fixtures/ncclinfo/). From the repository
# root, in a device call with carry [".src"]:
#   bash tests/gpu/capture.sh           -> $OUT/captures.tgz (every file, and index.txt: each command and its exit code)
# It builds nccl-tests (the carried archive of the pinned tag, sm_90 only) against torch's NCCL in
# /tmp, runs nccl-tests in the shapes below and tests/gpu/nccl_scenarios.py (two-rank NCCL INFO
# logs), each bounded by `timeout`. Nothing is installed; nothing but loopback is contacted.
set -o nounset -o pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
: "${OUT:=/tmp/wireup-capture-out}"
CAP=/tmp/wireup-captures
rm -rf "$CAP" && mkdir -p "$CAP"
INDEX=$CAP/index.txt
version=$(sed -n 's/^nccl_tests_version: *"\{0,1\}\([^"]*\)"\{0,1\}.*/\1/p' group_vars/all.yml)

# One capture: NAME, then the command; stdout+stderr into NAME.txt, the exit code into the index.
cap() {
  local name=$1; shift
  local start=$SECONDS
  "$@" >"$CAP/$name.txt" 2>&1
  local rc=$?
  printf '%s rc=%s %ss: %s\n' "$name" "$rc" "$((SECONDS - start))" "$*" | tee -a "$INDEX"
}

nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null ||
  python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')
home=/tmp/nccl-home && mkdir -p $home/lib && ln -sfn "$nccl_dir/include" $home/include
ln -sf "$nccl_dir/lib/libnccl.so.2" $home/lib/libnccl.so.2 && ln -sf libnccl.so.2 $home/lib/libnccl.so
export LD_LIBRARY_PATH=$home/lib:${LD_LIBRARY_PATH:-}
echo "NCCL from $nccl_dir; nccl-tests $version" | tee -a "$INDEX"

build() {  # DIR MPI
  mkdir -p "$1" && tar -xzf ".src/nccl-tests-$version.tar.gz" -C "$1" --strip-components=1 &&
    make -C "$1" -j8 MPI="$2" ${3:+MPI_HOME=$3} NCCL_HOME=$home CUDA_HOME=/usr/local/cuda \
      NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90 >"$CAP/build_mpi$2.log" 2>&1
}
# nccl-tests' Makefile reads MPI_HOME/include and MPI_HOME/lib: Ubuntu keeps Open MPI's headers
# under /usr/lib/x86_64-linux-gnu/openmpi, so a folder of two links stands in for MPI_HOME.
mpi_home=/tmp/mpi-home && mkdir -p $mpi_home
mpi_h=$(find /usr/lib /usr/include /opt /usr/local -name mpi.h -print -quit 2>/dev/null)
libmpi=$(find /usr/lib /opt /usr/local -name 'libmpi.so' -print -quit 2>/dev/null)
[ -n "$mpi_h" ] && ln -sfn "$(dirname "$mpi_h")" $mpi_home/include
[ -n "$libmpi" ] && ln -sfn "$(dirname "$libmpi")" $mpi_home/lib
echo "mpi.h: ${mpi_h:-none}; libmpi.so: ${libmpi:-none}" | tee -a "$INDEX"
build /tmp/nt0 0 &
b0=$!
build /tmp/nt1 1 "$mpi_home" &
b1=$!
wait $b0; echo "build MPI=0 rc=$?" | tee -a "$INDEX"
wait $b1; mpi_rc=$?; echo "build MPI=1 ($mpi_home) rc=$mpi_rc" | tee -a "$INDEX"
B=/tmp/nt0/build
nvidia-smi -L >"$CAP/nvidia_smi_L.txt" 2>&1

# nccl-tests, one GPU.
cap nt_all_reduce_1gpu_healthy timeout 120 $B/all_reduce_perf -b 8 -e 1G -f 4 -g 1
cap nt_all_reduce_g2_on_1gpu timeout 60 $B/all_reduce_perf -b 8 -e 1M -f 4 -g 2
cap nt_all_reduce_min_bw_fail env NCCL_TESTS_MIN_BW=100000 timeout 60 $B/all_reduce_perf -b 1M -e 64M -f 4 -g 1
# Killed by a time limit in the middle of the table: line-buffered (as on a terminal or under
# stdbuf) and as a pipe or file gets it (block-buffered: what was not flushed is lost).
cap nt_all_reduce_killed_mid_table timeout -s TERM 2 stdbuf -oL $B/all_reduce_perf -b 8 -e 8G -f 2 -n 2000 -g 1
cap nt_all_reduce_killed_mid_table_buffered timeout -s TERM 2 $B/all_reduce_perf -b 8 -e 8G -f 2 -n 2000 -g 1
cap nt_all_reduce_json timeout 60 $B/all_reduce_perf -b 1M -e 16M -f 2 -g 1 -J "$CAP/nt_all_reduce_json.json"
cap nt_all_reduce_timestamps_cputime timeout 60 $B/all_reduce_perf -b 1K -e 16M -f 8 -g 1 -S 1 -C 1
cap nt_sendrecv_1gpu timeout 60 $B/sendrecv_perf -b 8 -e 16M -f 8 -g 1
cap nt_alltoall_1gpu_nccl_info env NCCL_DEBUG=INFO timeout 60 $B/alltoall_perf -b 8 -e 1M -f 8 -g 1
cap nt_all_reduce_check_blocking_graph timeout 60 $B/all_reduce_perf -b 1M -e 64M -f 4 -g 1 -c 1 -z 1 -G 5

# nccl-tests over two ranks that NCCL takes for two hosts: each rank in a UTS namespace of its own
# (its own hostname, so nccl-tests gives each GPU 0) with its own NCCL_HOSTID, on the one GPU.
if [ "$mpi_rc" = 0 ]; then
  cat >/tmp/nt-rank.sh <<'EOF'
#!/bin/bash
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
exec unshare --uts sh -c 'hostname "wireup-cap-$1"; shift; exec "$@"' sh "$r" env NCCL_HOSTID="wireup-cap-$r" "$@"
EOF
  chmod +x /tmp/nt-rank.sh
  mpirun_args=(--allow-run-as-root --oversubscribe -np 2 -x NCCL_DEBUG=INFO -x NCCL_SOCKET_IFNAME=lo -x LD_LIBRARY_PATH
    -x NCCL_NVLS_ENABLE)
  cap nt_mpi_twohost_socket_all_reduce timeout 120 mpirun "${mpirun_args[@]}" /tmp/nt-rank.sh /tmp/nt1/build/all_reduce_perf -b 8 -e 256M -f 4 -g 1
  cap nt_mpi_twohost_socket_tag_output timeout 120 mpirun --tag-output "${mpirun_args[@]}" /tmp/nt-rank.sh /tmp/nt1/build/all_gather_perf -b 1K -e 64M -f 8 -g 1
fi

# NCCL INFO of two-rank torch runs (tests/gpu/nccl_scenarios.py).
mkdir -p "$CAP/scenarios"
start=$SECONDS
timeout 540 python3 tests/gpu/nccl_scenarios.py "$CAP/scenarios" 2>&1 | tee "$CAP/scenarios.log"
echo "nccl_scenarios: $((SECONDS - start)) s" | tee -a "$INDEX"
python3 -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())' >"$CAP/torch_nccl_version.txt" 2>&1
mkdir -p "$OUT" && tar -czf "$OUT/captures.tgz" -C /tmp wireup-captures && ls -la "$OUT"
