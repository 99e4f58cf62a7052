#!/usr/bin/env bash
# Runs wireup's playbooks on the lent GPU machine and keeps the logs under $OUT.
# Usage (device run, repo root): bash tests/gpu/run.sh STEP...   with STEP one of
#   site      site.yml twice (the second must report changed=0); site-once: once
#   bench     bench.yml (the baseline)
#   degraded  bench.yml with NCCL_P2P_DISABLE=1 injected through bench_env (must FAIL)
#   verdicts  bench.yml on broadcast+alltoall (factor check)
#   bench-env bench.yml, then -e bench_nccl_tune=true, then plain again; bench_env_check.py then
#             checks that every figure names its env and the plain runs measured default NCCL
#   minbw     bench.yml with NCCL_TESTS_MIN_BW far above the machine (via bench_env): must end FAIL
#   launch    launch.yml, waited: Example 2 with NCCL on the GPUs
#   jobs      a detached Example 2 (long loop) on the GPUs: jobs.yml status while it runs, logs,
#             stop, list; then no process of it may be left
#   stepcost  the DDP step benchmark (issue 16) on every GPU, two model sizes (200M, 1G): by hand
#             with torchrun (JSON lines in $OUT), then bench.yml --tags stepcost (report, chart),
#             each healthy and with NCCL_P2P_DISABLE=1 (traffic through host memory)
#   fabric    the fabric bench and launch Example 2 across two inventory hosts on this one machine
#             (tests/gpu/fabric_two_hosts.py: ssh on loopback, one GPU each, distinct NCCL_HOSTID)
#   netns     the fabric bench across 4 simulated hosts in network namespaces (veth NICs on a
#             bridge, sshd in each), healthy and then one host's link shaped with tc tbf; launch.yml
#             refused, then on_failed=skip on the others (tests/gpu/fabric_netns.py; needs .sshbin)
#   results   pack results/ into $OUT/results.tgz
set -o nounset -o pipefail
# shellcheck source=tests/gpu/env.sh
. tests/gpu/env.sh
: "${OUT:=/tmp/wireup-gpu-out}"
mkdir -p "$OUT"
INV=tests/gpu/inventory.yml
play() {
  local name=$1; shift
  local start=$SECONDS
  ansible-playbook -i "$INV" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc in $((SECONDS - start)) s"
  grep -A4 "PLAY RECAP" "$OUT/$name.log" | grep -v '^--$'
  return 0
}
for step in "$@"; do
  case $step in
    site) play site1 site.yml; play site2 site.yml ;;
    site-once) play site1 site.yml ;;
    bench) play bench bench.yml -e bench_nccl_tune=true ;;
    degraded) play degraded bench.yml -e bench_max_bytes=1G -e '{"bench_env": {"NCCL_P2P_DISABLE": "1"}}' ;;
    verdicts)
      play verdicts-bcast bench.yml -e '{"bench_collectives": ["broadcast", "alltoall"]}' ;;
    bench-env)
      play bench-plain1 bench.yml -e bench_fail_on_fail=false
      play bench-tune bench.yml -e bench_nccl_tune=true -e bench_fail_on_fail=false
      play bench-plain2 bench.yml -e bench_fail_on_fail=false
      grep -h "bench: \|bench tuning\|tuned env" "$OUT"/bench-plain1.log "$OUT"/bench-tune.log "$OUT"/bench-plain2.log | head -40
      python3 tests/gpu/bench_env_check.py results 2>&1 | tee "$OUT/bench-env-check.txt" ;;
    minbw)
      play minbw bench.yml -e bench_torch=false -e '{"bench_env": {"NCCL_TESTS_MIN_BW": "100000"}}'
      grep -E "FAIL|N/A" "$OUT/minbw.log" | tail -8 ;;
    # The degraded and minbw steps leave a FAIL verdict on purpose: launch.yml would refuse the node.
    launch) play launch launch.yml -e torchrun_launch_wait=true -e wireup_launch_refuse_failed=false ;;
    jobs)
      job=(-e torchrun_launch_job=gpu-detached -e wireup_launch_refuse_failed=false)
      play jobs-start launch.yml "${job[@]}" -e '{"torchrun_launch_args": ["--steps", "1000000", "--sleep", "0.01"]}'
      sed -n '/Say how to follow/,/PLAY RECAP/p' "$OUT/jobs-start.log" | head -n 20
      sleep 30
      play jobs-status jobs.yml "${job[@]}"
      sed -n '/Show this node.s part/,/PLAY RECAP/p' "$OUT/jobs-status.log" | grep -v RECAP
      play jobs-logs jobs.yml "${job[@]}" -e torchrun_launch_action=logs
      ls -l results/jobs/gpu-detached-*/
      play jobs-stop jobs.yml "${job[@]}" -e torchrun_launch_action=stop
      sed -n '/Say how the run stands/,/PLAY RECAP/p' "$OUT/jobs-stop.log" | grep -v RECAP
      play jobs-list jobs.yml -e torchrun_launch_action=list
      sed -n '/Show the runs/,/PLAY RECAP/p' "$OUT/jobs-list.log" | grep -v RECAP
      echo "== processes of ddp_multinode.py left: $(pgrep -fc ddp_multinode.py || true)"
      echo "== GPU compute processes left: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -c . || true)"
      ;;
    stepcost)
      gpus=$(nvidia-smi -L | grep -c '^GPU')
      sizes='["200M", "1G"]'
      for case in healthy p2p-off; do
        p2p=(); [ "$case" = p2p-off ] && p2p=(env NCCL_P2P_DISABLE=1)
        start=$SECONDS
        "${p2p[@]}" timeout 600 python3 -m torch.distributed.run --standalone --nproc-per-node "$gpus" files/bench/ddp_step.py \
          --params 200M,1G --out "$OUT/stepcost-$case.jsonl" >"$OUT/stepcost-$case-torchrun.log" 2>&1
        echo "== stepcost $case by hand ($gpus GPUs): rc=$? in $((SECONDS - start)) s"
        env=''; [ "$case" = p2p-off ] && env=', "bench_env": {"NCCL_P2P_DISABLE": "1"}'
        play "stepcost-$case" bench.yml --tags stepcost -e bench_fail_on_fail=false \
          -e "{\"bench_stepcost_params\": $sizes$env}"
        grep -o "DDP step single_node [^;']*" "$OUT/stepcost-$case.log" | head -4
      done
      python3 - "$OUT" <<'PY'
import json, pathlib, sys
sys.path.insert(0, ".collections")
from ansible_collections.wireup.cluster.plugins.module_utils.wireup import stepcost
for path in sorted(pathlib.Path(sys.argv[1]).glob("stepcost-*.jsonl")):
    for line in path.read_text().splitlines():
        fig = stepcost.figure(json.loads(line))
        hooks = ", ".join(f"{h} {e['step_ms']:.1f} ms" for h, e in fig["hooks"].items() if e.get("step_ms"))
        print(f"== {path.stem} {stepcost.human_count(fig['params'])}: compute {fig['compute_ms']:.1f} ms; {hooks}")
        print(f"   {fig['sentence']}")
PY
      ;;
    fabric)
      start=$SECONDS
      python3 -m tests.gpu.fabric_two_hosts >"$OUT/fabric.txt" 2>&1
      echo "== fabric: rc=$? in $((SECONDS - start)) s"
      tail -n 40 "$OUT/fabric.txt" ;;
    netns)
      start=$SECONDS
      timeout -s INT 540 python3 -m tests.gpu.fabric_netns --hosts 4 >"$OUT/fabric-netns.txt" 2>&1
      echo "== netns: rc=$? in $((SECONDS - start)) s"
      tail -n 60 "$OUT/fabric-netns.txt" ;;
    results) tar -czf "$OUT/results.tgz" results && echo "== results packed" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
