#!/usr/bin/env bash
# deepep-env's activation as a conda package: the activation's modules, the hook's entry and the
# activation scripts (see recipe.yaml). No bin/: the deepep-env tool is installed beside the environment.
set -euo pipefail
share="$PREFIX/share/deepep-env"
mkdir -p "$share/lib" "$PREFIX/etc/conda/activate.d" "$PREFIX/etc/conda/deactivate.d"
cp -R "$SRC_DIR/deepep_env" "$share/lib/deepep_env"
find "$share/lib" -name '__pycache__' -prune -exec rm -rf {} +
install -m 0644 "$RECIPE_DIR/hook.py" "$share/hook.py"
for d in activate deactivate; do
  install -m 0644 "$RECIPE_DIR/$d.sh" "$PREFIX/etc/conda/$d.d/deepep-env-overlay.sh"
  install -m 0644 "$RECIPE_DIR/$d.fish" "$PREFIX/etc/conda/$d.d/deepep-env-overlay.fish"
done
