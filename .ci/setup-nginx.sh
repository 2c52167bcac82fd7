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

SUDO=""
if [ "$(id -u)" != "0" ]; then
    SUDO="sudo"
fi

# Do not let the package's postinst start a system nginx on port 80: the tests run their own.
# A policy-rc.d that exits 101 is Debian's documented way to say "no service starts"
# (invoke-rc.d(8)); only add one when none exists and remove it afterwards.
POLICY=/usr/sbin/policy-rc.d
ADDED_POLICY=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod 755 "$POLICY"
    ADDED_POLICY=1
fi
cleanup() {
    if [ "$ADDED_POLICY" = 1 ]; then
        $SUDO rm -f "$POLICY"
    fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
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
