"""Target ``slurm``: an sbatch script, one task per node, started with ``srun``.

- ``MASTER_ADDR`` = the first host of the allocation (``scontrol show hostnames`` prints them in
  node order, and srun's task on node 0 is that host), unless ``--master-addr`` was given.
- ``WORLD_SIZE`` = ``$SLURM_NNODES``; ``RANK`` = ``$SLURM_NODEID``, read *inside* each task (it
  differs per node), after checking it equals ``$SLURM_PROCID`` (= one task per node).
- Variables are exported in the batch step and reach the tasks through ``srun --export=ALL``.
"""
from __future__ import annotations

import shlex

from deepep_env.launch import checks
from deepep_env.launch.model import LaunchPlan, Rendering, SlurmOptions
from deepep_env.launch.plan import header_lines

# Runs inside each srun task. Kept free of single quotes: it is embedded in one.
TASK_WRAPPER = (
    'export RANK="$SLURM_NODEID"; '
    'if [ "${SLURM_PROCID:-}" != "$RANK" ]; then '
    'echo "deepep-env launch: expected one task per node (SLURM_PROCID=${SLURM_PROCID:-unset}, SLURM_NODEID=$RANK)" >&2; '
    'exit 2; fi; '
    'exec "$@"'
)


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
        + ("" if p.master_addr else "\nMASTER_ADDR is the allocation's first host; RANK is each task's SLURM_NODEID.")
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
        lines.append('MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)"')
        lines.append("export MASTER_ADDR")
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
    lines.append(_wrap(cmd, (len(srun), len(srun) + 4)))
    text = "\n".join(lines) + "\n"
    addr = p.master_addr or "first host of $SLURM_JOB_NODELIST"
    nodes = tuple(
        {"rank": r, "variables": {"MASTER_ADDR": addr, "MASTER_PORT": str(p.master_port), "WORLD_SIZE": str(n),
                                  "RANK": str(r), **dict(p.exports)},
         "command": shlex.join(p.command)}
        for r in range(n)
    )
    return Rendering(plan=p, filename=f"{p.name}.sbatch", text=text, nodes=nodes)


def _wrap(words: list[str], cuts: tuple[int, ...]) -> str:
    """``srun …``, the task wrapper and the per-node command, each on its own line."""
    bounds = (0, *cuts, len(words))
    parts = [shlex.join(words[a:b]) for a, b in zip(bounds, bounds[1:])]
    return " \\\n  ".join(parts)
