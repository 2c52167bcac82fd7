# Sourced by .ci/setup-*.sh before they install Debian packages: root or sudo ($SUDO), a non-interactive apt,
# and no package's postinst starts a system daemon (the tests start their own, on 127.0.0.1). A policy-rc.d
# that exits 101 is Debian's documented way to say "no service starts" (invoke-rc.d(8)); one is added only
# where none exists and removed when the sourcing script exits.
SUDO=""
if [ "$(id -u)" != "0" ]; then
    SUDO="sudo"
fi
POLICY=/usr/sbin/policy-rc.d
ADDED_POLICY=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod 755 "$POLICY"
    ADDED_POLICY=1
fi
cleanup_policy() {
    if [ "$ADDED_POLICY" = 1 ]; then
        $SUDO rm -f "$POLICY"
    fi
}
trap cleanup_policy EXIT
export DEBIAN_FRONTEND=noninteractive
