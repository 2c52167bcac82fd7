#!/usr/bin/env bash
# Install PyTorch's wheels (each verified by sha256 before it was staged under wheels/<part>/) into
# $PREFIX/lib/python<X.Y>/site-packages as pip would, and carry every wheel's METADATA and licence.
set -euo pipefail
site="$PREFIX/lib/python${DEEPEP_PY_VERSION}/site-packages"
python3 "$RECIPE_DIR/install_wheels.py" wheels "$site" "$PREFIX/share/doc/deepep-pytorch"
[ -f "$site/torch/__init__.py" ] || { echo "deepep-env: the wheels gave no torch/__init__.py in $site" >&2; exit 1; }
