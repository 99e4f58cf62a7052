#!/usr/bin/env bash
# One-off probe of the lent GPU machine: what preflight and the GPU roles will meet there.
# Usage (device run): . tests/gpu/env.sh; bash tests/gpu/probe.sh
set -o nounset
echo "== preflight (read-only)"; ansible-playbook -i inventory/local.yml site.yml 2>&1 | tail -8
for cmd in "id" "which lspci dmesg journalctl systemctl nvidia-persistenced nv-fabricmanager mpirun nvcc" \
  "dmesg --level=err,warn | tail -3" "ls /sys/class/infiniband" "cat /proc/net/route" \
  "nvidia-smi topo -p2p n" "nvidia-smi -q | grep -i -A3 fabric" "nvidia-smi nvlink -c | head -5" \
  "ls /opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib /opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/include" \
  "python3 -m pip list 2>/dev/null | grep -i -E '^(torch|torchinfo|numpy|matplotlib|jinja2|pyyaml|packaging) '" \
  "df -h /opt /tmp" "lspci -vvv 2>/dev/null | grep -c ACSCtl" "cat /etc/os-release | head -3" "uname -r"; do
  echo "== $cmd"; bash -c "$cmd" 2>&1 | head -20
done
