#!/bin/sh
# Install Debian's Slurm (slurmctld, slurmd, client commands) and munge for tests/launch/test_launch_slurm.py.
# The tests write their own slurm.conf, start munged, slurmctld and slurmd on 127.0.0.1 in a private temp
# folder, and stop them; all this script does is make the binaries available. Idempotent and quiet; fast
# when they are already there. No daemon is started here (policy-rc.d says "no service starts").
set -eu

have() {
    for b in slurmctld slurmd sbatch munged; do
        command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || return 1
    done
}
if have; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" != "0" ]; then
    SUDO="sudo"
fi

# Keep the packages' postinst from starting system daemons (invoke-rc.d(8): policy-rc.d exiting 101).
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
PKGS="slurmctld slurmd slurm-client munge"
install() {
    $SUDO apt-get install -y -qq --no-install-recommends $PKGS >/dev/null 2>&1
}
if ! install; then
    $SUDO apt-get update -qq >/dev/null 2>&1 || true
    if ! install; then
        echo "setup-slurm: could not install $PKGS from apt" >&2
        exit 1
    fi
fi
if ! have; then
    echo "setup-slurm: installed $PKGS but slurmctld/slurmd/sbatch/munged are not on PATH" >&2
    exit 1
fi
