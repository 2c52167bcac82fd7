# deepep-env: the host overlay for this environment, computed at every activation by this package's own
# code; deactivate.d puts back what it changed. DEEPEP_ENV_NO_OVERLAY=1 skips it. Docs: docs/overlay.md.
if not set -q DEEPEP_ENV_NO_OVERLAY; and test -f "$CONDA_PREFIX/share/deepep-env/hook.py"
    if set -q _DEEPEP_ENV_UNDO
        eval $_DEEPEP_ENV_UNDO
    end
    set -l __deepep_env_py $DEEPEP_ENV_PYTHON
    if test -z "$__deepep_env_py"
        for c in "$CONDA_PREFIX/bin/python3" "$CONDA_PREFIX/bin/python"
            if test -x "$c"
                set __deepep_env_py $c
                break
            end
        end
    end
    if test -z "$__deepep_env_py"
        set __deepep_env_py (command -v python3)
    end
    if test -n "$__deepep_env_py"
        "$__deepep_env_py" "$CONDA_PREFIX/share/deepep-env/hook.py" --shell fish --prefix "$CONDA_PREFIX" | source
    end
end
