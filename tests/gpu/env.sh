# Source on the lent GPU machine (by hand or from a device run), from the repository root:
#   . tests/gpu/env.sh
# It installs the carried ansible-core wheels (.whl/, made by ../shared/device/ansible-wheels.sh)
# into /tmp/site, since that machine reaches no registry, and sets the environment every process
# there must have: NVLink multicast off (it can take the host's shared GPUs down).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export ANSIBLE_FORCE_COLOR=0 PYTHONUNBUFFERED=1
