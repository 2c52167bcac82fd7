#!/usr/bin/env bash
# deepep-env as a conda package: the code, a launcher, and the activation scripts (see recipe.yaml).
set -euo pipefail
share="$PREFIX/share/deepep-env"
mkdir -p "$share/lib" "$PREFIX/bin" "$PREFIX/etc/conda/activate.d" "$PREFIX/etc/conda/deactivate.d"
cp -R "$SRC_DIR/deepep_env" "$share/lib/deepep_env"
find "$share/lib" -name '__pycache__' -prune -exec rm -rf {} +
install -m 0644 "$RECIPE_DIR/main.py" "$share/main.py"
install -m 0755 "$RECIPE_DIR/deepep-env" "$PREFIX/bin/deepep-env"
for d in activate deactivate; do
  install -m 0644 "$RECIPE_DIR/$d.sh" "$PREFIX/etc/conda/$d.d/deepep-env-overlay.sh"
  install -m 0644 "$RECIPE_DIR/$d.fish" "$PREFIX/etc/conda/$d.d/deepep-env-overlay.fish"
done
