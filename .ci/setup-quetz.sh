#!/bin/sh
# A venv with quetz-server for tests/publish/test_publish_quetz.py, pinned by tests/fixtures/quetz-requirements.txt
# (the tests install nothing: without this venv they skip and say so). Where: $DEEPEP_ENV_QUETZ_VENV,
# default /tmp/deepep-env-quetz-venv. Idempotent: a venv made from the same pins is kept (about a
# minute to build otherwise). Never fails CI: where PyPI is unreachable the quetz tests skip.
set -u
cd "$(dirname "$0")/.."
req=tests/fixtures/quetz-requirements.txt
venv=${DEEPEP_ENV_QUETZ_VENV:-/tmp/deepep-env-quetz-venv}

if [ -x "$venv/bin/quetz" ] && cmp -s "$req" "$venv/requirements.txt"; then
    exit 0
fi
rm -rf "$venv"
if python3 -m venv "$venv" \
    && "$venv/bin/pip" install -q --retries 0 --timeout 15 -r "$req" >/dev/null 2>&1; then
    cp "$req" "$venv/requirements.txt"   # the stamp the tests compare with the pins
else
    rm -rf "$venv"
    echo "CI: quetz-server not installable (no PyPI?); tests/publish/test_publish_quetz.py will skip" >&2
fi
exit 0
