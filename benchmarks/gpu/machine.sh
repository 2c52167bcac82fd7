# The GPU machines' scaffolding, sourced by prove_round.sh and research.sh from the repo root (no network there,
# 64 MiB a call, .gpu/ made by gpu_site.sh and `deepep-env carry ... --to .gpu/envs.carry.tgz`):
#   - the tool's python site from .gpu/pysite (the carry's wheels are too big for the transfer);
#   - rdma-core's headers at /tmp/deepep-rdma/usr, the path the lock's packages were built with (it is in their
#     rendered recipe), from the carry's debs;
#   - NVIDIA's NVSHMEM wheel rebuilt from its skeleton into /tmp/whl (the carry leaves it: --source-here);
#   - h20-roce's interpreter /opt/deepep-cu130: the image's torch 2.11.0+cu130 venv (its spec's prepare would
#     pip-install that release; there is no network);
#   - NVLink multicast off (the machines are shared: the device README).
# Sets DE (the CLI) and exports what the commands read; each step once per machine.
export PYTHONUNBUFFERED=1 DEEPEP_ENV_STATE=${DEEPEP_ENV_STATE:-$PWD/.deepep-env}
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
[ -f /tmp/deepep-site/.extracted ] || { mkdir -p /tmp/deepep-site && tar -xJf .gpu/pysite/*.tar.xz -C /tmp/deepep-site \
  && touch /tmp/deepep-site/.extracted; }
export PYTHONPATH=/tmp/deepep-site:$PWD
DE="python3 -m deepep_env.cli.main"
$DE carry --check .gpu/envs.carry.tgz || exit 1
$DE carry --unpack .gpu/envs.carry.tgz > /dev/null || exit 1
if [ ! -f /tmp/deepep-rdma/.extracted ]; then
  mkdir -p /tmp/deepep-rdma && for d in "$DEEPEP_ENV_STATE"/carry/*/host/debs/*.deb; do dpkg -x "$d" /tmp/deepep-rdma; done
  touch /tmp/deepep-rdma/.extracted
fi
export DEEPEP_ENV_RDMA_CORE=/tmp/deepep-rdma/usr
TORCH_SITE=$(/opt/torch/.venv/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p /tmp/whl && for s in .gpu/skeletons/*.skel; do
  w=$(python3 benchmarks/gpu/wheel_skeleton.py info "$s" | sed -n '1s/^wheel=\([^ ]*\).*/\1/p')
  [ -f "/tmp/whl/$w" ] || python3 benchmarks/gpu/wheel_skeleton.py rebuild "$s" "$TORCH_SITE" "/tmp/whl/$w" > /dev/null || exit 1
done
[ -e /opt/deepep-cu130 ] || ln -s /opt/torch/.venv /opt/deepep-cu130
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; echo "cores=$(nproc) $($DE --version | head -1)"
