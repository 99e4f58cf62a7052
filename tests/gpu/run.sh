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
#   trial     the GPU trial (issue 25): site.yml --tags pytorch_venv (nvidia-ml-py into the venv from
#             the carried wheelhouse), bench.yml --tags gpu_health, bench.yml --tags gpu_trial with
#             windows of GPU_TRIAL_SECONDS (default 10) per figure set, then tests/gpu/reference.sh
#             (an independent CUDA runtime + cuBLAS measurement, GPU_REFERENCE_SECONDS per figure,
#             default 3) and tests/gpu/gpu_trial_check.py: both must agree within 5%. Within
#             GPU_TRIAL_BUDGET seconds (default 240: each part is stopped at what is left). Three
#             files come back: $OUT/trial-check.txt, $OUT/trial-summary.txt and $OUT/trial.tgz (the
#             logs, the reference's output, the step's bench runs: records, reports, plots)
#   quick     the quick node check (issue 26) without Ansible: build wireup-check, a baseline by hand,
#             the check's seconds, exit codes and lines, two faults, promtool on its textfiles
#             (tests/gpu/quick.sh; carry .promtool)
#   results   pack results/ into $OUT/results.tgz
set -o nounset -o pipefail
# shellcheck source=tests/gpu/env.sh
. tests/gpu/env.sh
: "${OUT:=/tmp/wireup-gpu-out}"
mkdir -p "$OUT"
INV=tests/gpu/inventory.yml
# play NAME ARGS...: ansible-playbook into ${LOGS:-$OUT}/NAME.log, stopped (SIGINT) after PLAY_LIMIT
# seconds where that is set.
play() {
  local name=$1; shift
  local start=$SECONDS log="${LOGS:-$OUT}/$name.log" limit=()
  [ -n "${PLAY_LIMIT:-}" ] && limit=(timeout -s INT "$PLAY_LIMIT")
  "${limit[@]}" ansible-playbook -i "$INV" "$@" >"$log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc in $((SECONDS - start)) s"
  grep -A4 "PLAY RECAP" "$log" | grep -v '^--$'
  return 0
}
# The GPU trial (issue 25), within GPU_TRIAL_BUDGET seconds: its logs, the reference's output and
# the bench runs it made go into ONE archive, $OUT/trial.tgz (the device returns at most 8 files);
# the check's output is $OUT/trial-check.txt; what it prints is kept as $OUT/trial-summary.txt.
trial() {
  local t0=$SECONDS budget=${GPU_TRIAL_BUDGET:-240} secs=${GPU_TRIAL_SECONDS:-10}
  local LOGS work runs
  work=$(mktemp -d /tmp/wireup-trial.XXXXXX) && LOGS=$work && touch "$work/.start"
  left() {  # left CAP: CAP seconds, or what is left of the budget (at least 5)
    local rest=$((budget - (SECONDS - t0)))
    echo $((rest < $1 ? (rest < 5 ? 5 : rest) : $1))
  }
  PLAY_LIMIT=$(left 100) play trial-venv site.yml --tags pytorch_venv
  PLAY_LIMIT=$(left 60) play trial-health bench.yml --tags gpu_health -e bench_fail_on_fail=false
  PLAY_LIMIT=$(left 150) play trial bench.yml --tags gpu_trial -e bench_fail_on_fail=false -e "gpu_trial_seconds=$secs"
  grep -h -E "gpu_trial [a-z]|: (PASS|WARN|FAIL|N/A) - |bench report:" "$work/trial-health.log" "$work/trial.log" | cut -c1-400
  timeout -s INT "$(left 90)" bash tests/gpu/reference.sh "$work" "${GPU_REFERENCE_SECONDS:-3}" >"$work/reference.txt" 2>&1
  echo "== reference: rc=$?"; grep '^== reference' "$work/reference.txt"
  python3 tests/gpu/gpu_trial_check.py results "$work/reference.jsonl" >"$OUT/trial-check.txt" 2>&1
  cp "$OUT/trial-check.txt" "$work/" && tail -n 12 "$OUT/trial-check.txt"
  runs=$(find results/bench -mindepth 1 -maxdepth 1 -type d -newer "$work/.start" -printf 'bench/%f\n' 2>/dev/null | sort)
  # shellcheck disable=SC2086  # run folders are results.RUN_ID_RE names: no spaces
  tar -czf "$OUT/trial.tgz" --exclude=.start -C "$work" . -C "$PWD/results" $runs
  echo "== trial: $(tar -tzf "$OUT/trial.tgz" | grep -c .) entries, $(du -k "$OUT/trial.tgz" | cut -f1) KiB in trial.tgz (runs: ${runs//$'\n'/ }); $((SECONDS - t0)) s in all"
  rm -rf "$work"
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
        fig = ddp_step.figure(json.loads(line))
        hooks = ", ".join(f"{h} {e['step_ms']:.1f} ms" for h, e in fig["hooks"].items() if e.get("step_ms"))
        print(f"== {path.stem} {ddp_step.human_count(fig['params'])}: compute {fig['compute_ms']:.1f} ms; {hooks}")
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
    trial) trial 2>&1 | tee "$OUT/trial-summary.txt" ;;
    quick) bash tests/gpu/quick.sh ;;
    results) tar -czf "$OUT/results.tgz" results && echo "== results packed" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
