"""The preflight every rendered launch runs on each node before the test, and the record after it.

Each node: ``deepep-env admit ENV --json --no-write`` into the shared folder (``admit-<RANK>.json``: a
short DeepEP run judged against the floors of the env's records, docs/admit.md; ``--no-admit`` leaves
it out; a node whose admit gives no verdict stops there), ``deepep-env doctor ENV --json`` into it
(``node-<RANK>.json``), wait until
every node's report is there, ``deepep-env fleet report`` over all of them (every node computes the
same verdict from the same files; rank 0 prints it and writes ``fleet.html``), then the test only if
the fleet passed, its output teed to ``test-<RANK>.log``, then ``deepep-env record`` (the test record,
bound to the lock digest) whatever the test's exit status. The node's exit status is the test's, or
3 when the preflight stopped it; a node that stops also leaves ``preflight-stopped`` in the folder, so a
launcher that kills the other nodes first (Slurm's ``srun --kill-on-bad-exit``: they end with 143) can
still say 3 (issue 57).

The shared folder, one per run:
- ``shell``: ``${DEEPEP_ENV_PREFLIGHT_DIR:-<--shared-dir or ./deepep-preflight>}/${DEEPEP_ENV_RUN_ID:-<job name>}``;
- ``slurm``: ``<--shared-dir or $SLURM_SUBMIT_DIR/deepep-preflight>/$SLURM_JOB_ID`` (the submit dir is
  on the cluster's shared filesystem);
- ``k8s``: ``/deepep-env-shared/<the Job's uid>`` on the ReadWriteMany claim ``--shared-pvc``;
  without one, each pod checks itself alone (doctor must pass; uniformity is not checked).
"""
from __future__ import annotations

import shlex
from typing import Optional

PREFLIGHT_EXIT = 3
STOPPED_MARK = "preflight-stopped"   # in the shared folder: some node's preflight stopped the test
K8S_SHARED_MOUNT = "/deepep-env-shared"
K8S_RUN_ID_VAR = "DEEPEP_ENV_RUN_ID"
K8S_JOB_UID_FIELD = "metadata.labels['batch.kubernetes.io/controller-uid']"


def shared_dir(target: str, name: str, given: Optional[str], k8s_pvc: Optional[str]) -> str:
    """A shell expression (double-quote safe) for the run's shared folder."""
    if target == "slurm":
        base = given or "${SLURM_SUBMIT_DIR:-.}/deepep-preflight"
        return f"{base}/${{SLURM_JOB_ID:?run this through sbatch}}"
    if target == "k8s":
        if k8s_pvc:
            return f"{K8S_SHARED_MOUNT}/${{{K8S_RUN_ID_VAR}:?}}"
        return given or "/tmp/deepep-preflight"
    base = given or "./deepep-preflight"
    return f"${{DEEPEP_ENV_PREFLIGHT_DIR:-{base}}}/${{DEEPEP_ENV_RUN_ID:-{name}}}"


def admit_lines(t: str, e: str) -> list[str]:
    """The node's admission into ``$dir/admit-$rank.json`` (``fleet report`` shows it; a refusal fails
    the fleet). An admit with no floor to judge by (exit 3: the env has no passing record yet, the first
    run on a new cluster) is said and the job goes on: it is how the first records are made; anything
    else it cannot judge (a doctor error) is left to doctor, the next step."""
    return [
        f'{t} admit {e} --root "${{DEEPEP_ENV_HOST_ROOT:-/}}" --json --no-write > "$dir/.admit-$rank.json.tmp"; arc=$?',
        'if [ "$arc" != 3 ] && [ -s "$dir/.admit-$rank.json.tmp" ]; then mv -f "$dir/.admit-$rank.json.tmp" "$dir/admit-$rank.json" || stop',
        'else rm -f "$dir/.admit-$rank.json.tmp"; echo "deepep-env preflight: admit gave no verdict on this node (exit $arc; no floor yet: no passing record of this env to compare with); admission not checked" >&2; fi',
    ]


def node_script(*, env: str, test: str, test_args: tuple[str, ...], nodes: int, folder: str,
                tool: tuple[str, ...], timeout: int, admit: bool = True) -> str:
    """The bash script run on each node as ``bash -c SCRIPT deepep-node TEST_ARGV…``."""
    t = shlex.join(tool)
    e = shlex.quote(env)
    args = shlex.join(test_args)
    return "\n".join([
        "set -u",
        f'dir="{folder}"; n={nodes}; rank="${{RANK:?RANK is set per node}}"',
        'mkdir -p "$dir" || exit 3',
        f'stop() {{ : > "$dir/{STOPPED_MARK}"; exit 3; }}',
        *(admit_lines(t, e) if admit else []),
        f'{t} doctor {e} --root "${{DEEPEP_ENV_HOST_ROOT:-/}}" --json > "$dir/.node-$rank.json.tmp"',
        'mv -f "$dir/.node-$rank.json.tmp" "$dir/node-$rank.json" || stop',
        f"deadline=$((SECONDS + {int(timeout)}))",
        "while :; do",
        '  count=0; for f in "$dir"/node-*.json; do [ -e "$f" ] && count=$((count + 1)); done',
        '  [ "$count" -ge "$n" ] && break',
        '  if [ "$SECONDS" -ge "$deadline" ]; then',
        '    echo "deepep-env preflight: $count of $n nodes reported in $dir; the test was not started" >&2; stop',
        "  fi",
        "  sleep 1",
        "done",
        'if [ "$rank" = 0 ]; then',
        f'  {t} fleet report "$dir" --expect "$n" --html "$dir/fleet.html" >&2',
        "else",
        f'  {t} fleet report "$dir" --expect "$n" > /dev/null',
        "fi",
        'if [ $? -ne 0 ]; then',
        '  echo "deepep-env preflight: the fleet did not pass ($dir/fleet.html); the test was not started" >&2; stop',
        "fi",
        'log="$dir/test-$rank.log"',
        '"$@" 2>&1 | tee "$log"; rc=${PIPESTATUS[0]}',
        f'{t} record {e} --test {shlex.quote(test)} --exit-code "$rc" --log "$log"'
        + (f" -- {args}" if args else "")
        + ' >&2 || echo "deepep-env: warning: no test record written" >&2',
        'exit "$rc"',
    ])


def wrap(argv: tuple[str, ...], *, env: str, test: str, test_args: tuple[str, ...], nodes: int, folder: str,
         tool: tuple[str, ...], timeout: int, admit: bool = True) -> tuple[str, ...]:
    script = node_script(env=env, test=test, test_args=test_args, nodes=nodes, folder=folder, tool=tool,
                         timeout=timeout, admit=admit)
    return ("bash", "-c", script, "deepep-node", *argv)
