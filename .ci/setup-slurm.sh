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

# root or sudo, a quiet apt, and no system daemon started by a postinst
. "$(dirname "$0")/quiet-apt.sh"
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
