# deepep-env: put back every variable the activation overlay changed (see activate.d).
if [ -n "${_DEEPEP_ENV_UNDO:-}" ]; then eval "$_DEEPEP_ENV_UNDO"; fi
