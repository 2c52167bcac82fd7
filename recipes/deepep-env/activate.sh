# deepep-env: the host overlay for this environment (GPU->HCA mapping, GID index, NVSHMEM and NCCL
# variables), computed from this machine at every activation; deactivate.d puts back what it
# changed. Silent on a host with nothing to set; never fails an activation.
# DEEPEP_ENV_NO_OVERLAY=1 skips it. Docs: docs/overlay.md "As conda activation".
if [ -z "${DEEPEP_ENV_NO_OVERLAY:-}" ] && [ -x "${CONDA_PREFIX:-}/bin/deepep-env" ]; then
  if [ -n "${_DEEPEP_ENV_UNDO:-}" ]; then eval "$_DEEPEP_ENV_UNDO"; fi
  if __deepep_env_hook=$("$CONDA_PREFIX/bin/deepep-env" hook --shell sh --prefix "$CONDA_PREFIX"); then
    eval "$__deepep_env_hook"
  fi
  unset __deepep_env_hook
fi
