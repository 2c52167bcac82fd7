#!/bin/sh
# Install nginx (with the WebDAV module) for tests/publish/test_publish_nginx.py: the private-channel tests
# start their own nginx on 127.0.0.1 with a config under the test's tmp dir, so all this script
# does is make the binary available. Idempotent and fast when nginx is already there.
#
# Debian's nginx-light carries http_dav_module (PUT/DELETE/MKCOL), which is all the tests need;
# fall back to the full `nginx` package where -light is not available (Debian ≥ 13 dropped it).
set -eu

has_dav() {
    for bin in nginx /usr/sbin/nginx; do
        if command -v "$bin" >/dev/null 2>&1 && "$bin" -V 2>&1 | grep -q http_dav_module; then
            return 0
        fi
    done
    return 1
}

if has_dav; then
    exit 0
fi

# root or sudo, a quiet apt, and no system daemon started by a postinst
. "$(dirname "$0")/quiet-apt.sh"
pick() {
    for pkg in "$@"; do
        if apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
            echo "$pkg"
            return 0
        fi
    done
    return 1
}
PKG=$(pick nginx-light nginx || true)
if [ -z "$PKG" ]; then
    $SUDO apt-get update -qq
    PKG=$(pick nginx-light nginx || true)
fi
if [ -z "$PKG" ]; then
    echo "setup-nginx: neither nginx-light nor nginx is installable from apt" >&2
    exit 1
fi
$SUDO apt-get install -y -qq --no-install-recommends "$PKG" >/dev/null

if ! has_dav; then
    echo "setup-nginx: installed $PKG but nginx has no http_dav_module" >&2
    exit 1
fi
