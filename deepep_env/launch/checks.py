"""The one check for every launch option that lands as text in a job script or manifest.

A rendered launch is a program (an sbatch script, a shell block, a pod's command): an option that
reaches it unchecked is code there. ``--partition $'p\\ntouch PW'`` put ``touch PW`` on a line of its
own in the sbatch script (issue 39.2); ``--shared-dir '$(touch PW)'`` ran a command on every node. So
every free-text option is matched whole against what its target accepts before anything is rendered:
quoting alone cannot help an ``#SBATCH`` line (sbatch reads it up to the end of the line) or a folder
that must stay open to ``$VAR`` expansion on the node.
"""
from __future__ import annotations

import re
from typing import Optional

from deepep_env.base.errors import UserError

_SLURM_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.+-]*"
# sbatch --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes,
# days-hours:minutes:seconds, or no limit
_SLURM_TIME = r"\d+(:\d{1,2}){0,2}|\d+-\d{1,2}(:\d{1,2}){0,2}|UNLIMITED|INFINITE|unlimited|infinite"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"

PATTERNS: dict[str, tuple[str, str]] = {
    # field: (the whole value must match, what would be accepted)
    "--partition": (fr"{_SLURM_NAME}(,{_SLURM_NAME})*", "a Slurm partition name or a comma-separated list, e.g. gpu or gpu,debug"),
    "--account": (_SLURM_NAME, "a Slurm account name: letters, digits, '_', '.', '+', '-'"),
    "--time": (_SLURM_TIME, "minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED, e.g. 02:00:00"),
    "--master-addr": (r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*",
                      "a host name, an IPv4 or an IPv6 address, e.g. node-0 or 10.0.0.1"),
    # a path, open to $NAME and ${NAME} on the node; no command substitution, quote or backslash
    "--shared-dir": (r"([^\x00-\x1f\x7f$\"`\\{}]|\$[A-Za-z_][A-Za-z0-9_]*|\$\{[A-Za-z_][A-Za-z0-9_]*\})+",
                     "a path every node shares; $NAME and ${NAME} expand on the node; no quotes, backslashes, "
                     "braces or $(…)"),
    "--shared-pvc": (fr"{_DNS_LABEL}(\.{_DNS_LABEL})*", "a PersistentVolumeClaim name: lower-case letters, digits, '-', '.'"),
    "--gke-gvnic-network": (_DNS_LABEL, "a GKE network name: lower-case letters, digits and '-', or none"),
    "--gke-rdma-network-prefix": (r"[a-z0-9][-a-z0-9]*", "lower-case letters, digits and '-', e.g. rdma-"),
    "--node-selector": (r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?", "a label value: letters, digits, '-', '_', "
                        "'.', at most 63, e.g. cloud.google.com/gke-nodepool=a4"),
}
_MAX = {"--node-selector": 63, "--shared-pvc": 253, "--gke-gvnic-network": 63, "--master-addr": 253}


def check(field: str, value: Optional[str], *, what: str = "value") -> None:
    """Refuse ``value`` of option ``field`` in one line unless it matches :data:`PATTERNS` whole (None:
    not given, nothing to check)."""
    if value is None:
        return
    pattern, accepted = PATTERNS[field]
    if not re.fullmatch(pattern, value) or len(value) > _MAX.get(field, 1024):
        raise UserError(f"not a usable {what}: {value!r}", field=field, accepted=accepted)
