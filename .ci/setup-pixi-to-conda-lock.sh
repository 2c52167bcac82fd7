#!/bin/sh
# pixi-to-conda-lock in a venv of its own for tests/lock/test_pixi_lock.py (the tests install nothing: without
# this venv the test skips and names this script). It cannot be a test extra: pixi-to-conda-lock 0.4.5
# requires py-rattler <0.25, which the project's own py-rattler pin excludes. Where: the path the test
# reads, ~/.cache/deepep-env-tests/pixi-to-conda-lock-0.4.5. Idempotent; never fails CI (no PyPI: skip).
set -u
spec="pixi-to-conda-lock==0.4.5"
home="${HOME}/.cache/deepep-env-tests/pixi-to-conda-lock-0.4.5"
[ -x "$home/bin/pixi-to-conda-lock" ] && exit 0
tmp="$home.tmp"
rm -rf "$tmp"
if python3 -m venv "$tmp" && "$tmp/bin/pip" install -q --retries 0 --timeout 15 "$spec" >/dev/null 2>&1; then
    rm -rf "$home"
    # venv scripts name their interpreter by path: re-point them after the move
    for f in "$tmp"/bin/*; do
        [ -f "$f" ] && head -c 2 "$f" | grep -q '#!' && sed -i "s|$tmp|$home|g" "$f"
    done
    mv "$tmp" "$home"
else
    rm -rf "$tmp"
    echo "CI: $spec not installable (no PyPI?); tests/lock/test_pixi_lock.py's conda-lock round trip will skip" >&2
fi
exit 0
