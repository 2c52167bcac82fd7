"""Target ``slurm``: an sbatch script, one task per node, started with ``srun``.

- ``MASTER_ADDR`` = the address of the allocation's first node (``scontrol show hostnames`` prints the
  node names in node order, and srun's task on node 0 runs there), unless ``--master-addr`` was given.
  A node's *name* need not resolve: Slurm reaches a node at its ``NodeAddr`` (which defaults to the
  name), so the script asks ``scontrol -o show node`` for it and falls back to the name if that is
  hidden (issue 57: on a real slurmctld, ``NodeName=n0 NodeAddr=127.0.0.1`` gave the test
  ``MASTER_ADDR=n0`` and node 1 could not resolve it).
- ``WORLD_SIZE`` = ``$SLURM_NNODES``; ``RANK`` = ``$SLURM_NODEID``, read *inside* each task (it
  differs per node), after checking it equals ``$SLURM_PROCID`` (= one task per node).
- Variables are exported in the batch step and reach the tasks through ``srun --export=ALL``.
"""
from __future__ import annotations

import shlex

from deepep_env.launch import checks
from deepep_env.launch.model import LaunchPlan, Rendering, SlurmOptions
from deepep_env.launch.plan import header_lines
from deepep_env.launch.preflight import PREFLIGHT_EXIT, STOPPED_MARK, shared_dir

# Runs inside each srun task. Kept free of single quotes: it is embedded in one.
TASK_WRAPPER = (
    'export RANK="$SLURM_NODEID"; '
    'if [ "${SLURM_PROCID:-}" != "$RANK" ]; then '
    'echo "deepep-env launch: expected one task per node (SLURM_PROCID=${SLURM_PROCID:-unset}, SLURM_NODEID=$RANK)" >&2; '
    'exit 2; fi; '
    'exec "$@"'
)


# MASTER_ADDR without --master-addr: node 0's NodeAddr, else its name (`set -euo pipefail` holds: `|| true`).
MASTER_ADDR_LINES = [
    'MASTER_NODE="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)"',
    'MASTER_ADDR="$(scontrol -o show node "$MASTER_NODE" 2>/dev/null'
    r" | sed -n 's/.* NodeAddr=\([^ ]*\).*/\1/p'" ' || true)"',
    'export MASTER_ADDR="${MASTER_ADDR:-$MASTER_NODE}"',
]


def check_options(o: SlurmOptions) -> None:
    """Each option is a whole ``#SBATCH`` line's value: sbatch reads it to the end of the line, so a
    newline in one would start a command of the script (issue 39.2)."""
    checks.check("--partition", o.partition, what="partition")
    checks.check("--account", o.account, what="account")
    checks.check("--time", o.time, what="time limit")


def render_slurm(plan: LaunchPlan) -> Rendering:
    p, n = plan, plan.nodes
    o = p.options.slurm
    check_options(o)
    how = (
        "\n"
        f"Submit with: sbatch {p.name}.sbatch"
        + ("" if p.master_addr
           else "\nMASTER_ADDR is the NodeAddr of the allocation's first node; RANK is each task's SLURM_NODEID.")
    )
    lines = ["#!/bin/bash"]
    lines += ["# " + line if line else "#" for line in header_lines(p, how)]
    sb = [f"--job-name={p.name}", f"--nodes={n}", "--ntasks-per-node=1", f"--gpus-per-node={p.gpus_per_node}",
          "--exclusive", f"--output={p.name}-%j.out"]
    if o.partition:
        sb.append(f"--partition={o.partition}")
    if o.account:
        sb.append(f"--account={o.account}")
    if o.time:
        sb.append(f"--time={o.time}")
    lines += [f"#SBATCH {s}" for s in sb]
    lines += [
        "set -euo pipefail",
        "",
        f'if [ "${{SLURM_NNODES:-}}" != "{n}" ]; then',
        f'  echo "deepep-env launch: this script needs {n} nodes, got ${{SLURM_NNODES:-none}} (submit it with sbatch)" >&2',
        "  exit 2",
        "fi",
    ]
    if p.master_addr:
        lines.append(f"export MASTER_ADDR={shlex.quote(p.master_addr)}")
    else:
        lines += MASTER_ADDR_LINES
    lines += [
        f"export MASTER_PORT={p.master_port}",
        'export WORLD_SIZE="$SLURM_NNODES"',
    ]
    if p.exports:
        lines.append(f"# [env] of env spec {p.env.name} and --export (the node's own overlay comes from `run`):")
    for k, v in p.exports:
        lines.append(f"export {k}={shlex.quote(v)}")
    lines.append(f'echo "deepep-env launch: {p.test.script} on $WORLD_SIZE nodes, rendezvous $MASTER_ADDR:$MASTER_PORT" >&2')
    lines.append("")
    srun = ["srun", f"--nodes={n}", f"--ntasks={n}", "--ntasks-per-node=1", "--kill-on-bad-exit=1", "--export=ALL"]
    cmd = [*srun, "bash", "-c", TASK_WRAPPER, "deepep-node", *p.command]
    if p.node_argv:
        lines.append(_wrap(cmd, (len(srun), len(srun) + 4)) + " && rc=0 || rc=$?")
        lines += _preflight_exit(shared_dir("slurm", p.name, p.options.shared_dir, None), p.options.tool, n)
    else:
        lines.append(_wrap(cmd, (len(srun), len(srun) + 4)))
    text = "\n".join(lines) + "\n"
    addr = p.master_addr or "NodeAddr of the first node of $SLURM_JOB_NODELIST"
    nodes = tuple(
        {"rank": r, "variables": {"MASTER_ADDR": addr, "MASTER_PORT": str(p.master_port), "WORLD_SIZE": str(n),
                                  "RANK": str(r), **dict(p.exports)},
         "command": shlex.join(p.command)}
        for r in range(n)
    )
    return Rendering(plan=p, filename=f"{p.name}.sbatch", text=text, nodes=nodes)


def _preflight_exit(folder: str, tool: tuple[str, ...], nodes: int) -> list[str]:
    """The job's status is 3 when a node's preflight stopped the test, and its output holds the fleet
    report. With ``--kill-on-bad-exit`` the first node to exit 3 gets the others killed, so on a real
    slurmctld (issue 57) the job ended ``ExitCode=143:0`` (srun reports the highest status; 143 =
    SIGTERM); when node 1 stopped first, node 0 was killed before it printed the report and wrote
    ``fleet.html``, and the stopping node's own last lines can be lost with the step. The stopped
    node's mark says 3; the batch step, on node 0 after srun has ended, reports the fleet once more."""
    return [
        f'if [ "$rc" -ne 0 ] && [ -e "{folder}/{STOPPED_MARK}" ]; then',
        f'  {shlex.join(tool)} fleet report "{folder}" --expect {nodes} --html "{folder}/fleet.html" >&2 || true',
        f'  echo "deepep-env launch: the preflight stopped the test ({folder}/fleet.html; srun exited $rc);'
        f' exit {PREFLIGHT_EXIT}" >&2',
        f"  exit {PREFLIGHT_EXIT}",
        "fi",
        'exit "$rc"',
    ]


def _wrap(words: list[str], cuts: tuple[int, ...]) -> str:
    """``srun …``, the task wrapper and the per-node command, each on its own line."""
    bounds = (0, *cuts, len(words))
    parts = [shlex.join(words[a:b]) for a, b in zip(bounds, bounds[1:])]
    return " \\\n  ".join(parts)
