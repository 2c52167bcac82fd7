# deepep-env: the host overlay for this environment (GPU->HCA mapping, GID index, NVSHMEM and NCCL
# variables), computed from this machine at every activation by this package's own code; deactivate.d
# puts back what it changed. Silent on a host with nothing to set; never fails an activation.
# The interpreter: $DEEPEP_ENV_PYTHON, else the environment's own python, else python3 from PATH.
# DEEPEP_ENV_NO_OVERLAY=1 skips it. Docs: docs/overlay.md "As conda activation".
if [ -z "${DEEPEP_ENV_NO_OVERLAY:-}" ] && [ -f "${CONDA_PREFIX:-}/share/deepep-env/hook.py" ]; then
  if [ -n "${_DEEPEP_ENV_UNDO:-}" ]; then eval "$_DEEPEP_ENV_UNDO"; fi
  __deepep_env_py=${DEEPEP_ENV_PYTHON:-}
  if [ -z "$__deepep_env_py" ]; then
    for __deepep_env_c in "$CONDA_PREFIX/bin/python3" "$CONDA_PREFIX/bin/python"; do
      if [ -x "$__deepep_env_c" ]; then __deepep_env_py=$__deepep_env_c; break; fi
    done
  fi
  [ -n "$__deepep_env_py" ] || __deepep_env_py=$(command -v python3 2>/dev/null) || __deepep_env_py=
  if [ -n "$__deepep_env_py" ] && __deepep_env_hook=$("$__deepep_env_py" "$CONDA_PREFIX/share/deepep-env/hook.py" --shell sh --prefix "$CONDA_PREFIX"); then
    eval "$__deepep_env_hook"
  fi
  unset __deepep_env_hook __deepep_env_py __deepep_env_c
fi
