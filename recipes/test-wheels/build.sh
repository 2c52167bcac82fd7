#!/usr/bin/env bash
# Install the test wheels (each verified by sha256 before it was staged under wheels/<part>/) into
# $PREFIX/lib/python<X.Y>/site-packages as pip would, with pytorch-wheel's installer (install_wheels.py is
# a link to it), and carry every wheel's METADATA and licence.
set -euo pipefail
site="$PREFIX/lib/python${DEEPEP_PY_VERSION}/site-packages"
python3 "$RECIPE_DIR/install_wheels.py" wheels "$site" "$PREFIX/share/doc/deepep-test-wheels"
[ -n "$(ls -A "$site" 2>/dev/null)" ] || { echo "deepep-env: the test wheels gave nothing in $site" >&2; exit 1; }
