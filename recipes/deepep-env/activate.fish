# deepep-env: the host overlay for this environment, computed at every activation; deactivate.d
# puts back what it changed. DEEPEP_ENV_NO_OVERLAY=1 skips it. Docs: docs/overlay.md.
if not set -q DEEPEP_ENV_NO_OVERLAY; and test -x "$CONDA_PREFIX/bin/deepep-env"
    if set -q _DEEPEP_ENV_UNDO
        eval $_DEEPEP_ENV_UNDO
    end
    "$CONDA_PREFIX/bin/deepep-env" hook --shell fish --prefix "$CONDA_PREFIX" | source
end
