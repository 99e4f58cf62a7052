#!/usr/bin/env bash
# The quick node check (issue 26) on the GPU machine, without Ansible (no systemd, no Slurm there):
# build wireup-check from this checkout, take the node as its baseline by hand (a 1-GPU node gets no
# PASSing nccl-tests verdict to take one from), run the check three times (its seconds, exit code
# and line), then two faults: a stand-in (the baseline claims 18 active NVLinks on GPU0, as if they
# were lost since) and a real one (no nvidia-smi: the driver gone), and check every textfile it wrote
# with promtool. Two files come back (the device returns at most 8 files from $OUT, no more than 2
# folders deep): $OUT/quick/quick.txt (the summary) and $OUT/quick/quick-files.tgz (everything else:
# wireup-check, its settings, baseline, outputs, textfiles and the nvidia-smi captures).
# Usage (device run, repo root): bash tests/gpu/run.sh quick   (carry .promtool: tests/gpu/README.md)
set -o nounset -o pipefail
: "${OUT:=/tmp/wireup-gpu-out}"
mkdir -p "$OUT/quick"
Q=$(mktemp -d /tmp/wireup-quick.XXXXXX)
mkdir -p "$Q/textfile"
exec > >(tee "$OUT/quick/quick.txt") 2>&1
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
echo "== python for wireup-check: $PY ($("$PY" --version 2>&1))"
PYTHONPATH=plugins/module_utils "$PY" -m wireup.check.bundle "$Q/wireup-check" --python "$PY"
SMI=$(command -v nvidia-smi || echo /usr/local/nvidia/bin/nvidia-smi)
cat >"$Q/check.json" <<EOF
{"host": "$(hostname -s)", "baseline": "$Q/state/baseline.json", "textfile_dir": "$Q/textfile",
 "textfile": "always", "nvidia_smi": "$SMI"}
EOF
check() {  # check NAME [args]: one run, its seconds, exit code and line; the textfile kept as NAME.prom
  local name=$1; shift
  local t0 t1 rc
  t0=$(date +%s%N)
  "$Q/wireup-check" --config "$Q/check.json" "$@" >"$Q/$name.out" 2>"$Q/$name.err"
  rc=$?
  t1=$(date +%s%N)
  echo "== $name: rc=$rc in $(( (t1 - t0) / 1000000 )) ms: $(head -c 600 "$Q/$name.out")"
  [ -s "$Q/$name.err" ] && sed 's/^/   stderr: /' "$Q/$name.err" | head -5
  cp "$Q/textfile/wireup_check.prom" "$Q/$name.prom" 2>/dev/null
  return 0
}
# What the check reads, kept as captures (the fixtures of tests/fixtures/h200x1).
"$SMI" topo -m >"$Q/topo_m.txt" 2>&1
"$SMI" nvlink -s >"$Q/nvlink_s.txt" 2>&1
"$SMI" --query-gpu=index,name,uuid,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max --format=csv >"$Q/query_gpu.csv" 2>&1
check no-baseline
"$Q/wireup-check" --config "$Q/check.json" --write-baseline --manual
for i in 1 2 3; do check "healthy-$i"; done
check healthy-json --json
check healthy-bench --bench
echo "== the check's own seconds (healthy-json): $("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"])' "$Q/healthy-json.out")"
# Stand-in fault: the baseline says GPU0 had 18 active NVLinks (a 1-GPU VM has none to pull).
cp "$Q/state/baseline.json" "$Q/state/baseline.good"
"$PY" - "$Q/state/baseline.json" <<'EOF'
import json, sys
path = sys.argv[1]
doc = json.load(open(path))
if doc["node"]["gpus"]:
    doc["node"]["gpus"][0]["nvlink"] = {"active": 18, "speed_gbps": 26.562}
else:
    print("== no GPU in the baseline: the NVLink stand-in needs one")
json.dump(doc, open(path, "w"))
EOF
check fault-nvlink
cp "$Q/state/baseline.good" "$Q/state/baseline.json"
check fault-no-nvidia-smi --nvidia-smi /nonexistent/nvidia-smi
check healthy-again
PROMTOOL=$(command -v promtool || true)
if [ -z "$PROMTOOL" ] && [ -f .promtool/promtool.xz ]; then
  xz -dc .promtool/promtool.xz >/tmp/promtool && chmod +x /tmp/promtool && PROMTOOL=/tmp/promtool
fi
if [ -n "$PROMTOOL" ]; then
  for f in "$Q"/*.prom; do
    msg=$("$PROMTOOL" check metrics <"$f" 2>&1); rc=$?
    echo "== promtool check metrics $(basename "$f"): rc=$rc ${msg:-(no lint)}"
  done
else
  echo "== promtool: not found (carry .promtool/promtool.xz)"
fi
grep -h "^wireup_check_verdict" "$Q"/healthy-1.prom "$Q"/fault-nvlink.prom | grep ' 1$'
tar -czf "$OUT/quick/quick-files.tgz" -C "$Q" . && echo "== the rest packed: quick/quick-files.tgz"
rm -rf "$Q"
