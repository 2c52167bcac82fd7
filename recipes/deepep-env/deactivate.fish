# deepep-env: put back every variable the activation overlay changed (see activate.d).
if set -q _DEEPEP_ENV_UNDO
    eval $_DEEPEP_ENV_UNDO
end
