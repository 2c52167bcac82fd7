"""Target ``shell``: the exact command for each node, one block per node, for clusters with no
scheduler (seed 000 §3 exports these variables by hand on each node)."""
from __future__ import annotations

import shlex

from deepep_env.launch.model import LaunchPlan, Rendering
from deepep_env.launch.plan import header_lines

# Used when --master-addr was not given: the block then needs MASTER_ADDR exported on the node and
# says so instead of running with DeepEP's default 127.0.0.1 (which would split the nodes apart).
MASTER_ADDR_REQUIRED = "${MASTER_ADDR:?export MASTER_ADDR=<address of node 0> first}"

BLOCK_MARK = "# ---- node {rank} of {nodes}"


def node_variables(plan: LaunchPlan, rank: int) -> list[tuple[str, str]]:
    addr = plan.master_addr if plan.master_addr is not None else MASTER_ADDR_REQUIRED
    return [("MASTER_ADDR", addr), ("MASTER_PORT", str(plan.master_port)),
            ("WORLD_SIZE", str(plan.world_size)), ("RANK", str(rank)), *plan.exports]


def _assign(key: str, value: str) -> str:
    if value == MASTER_ADDR_REQUIRED:
        return f'{key}="{value}"'  # must expand on the node
    return f"{key}={shlex.quote(value)}"


def node_command(plan: LaunchPlan, rank: int) -> str:
    """The command to type on node ``rank`` (variable assignments, then the runner)."""
    variables = node_variables(plan, rank)
    launcher = " ".join(_assign(k, v) for k, v in variables[:4])
    lines = [launcher]
    if variables[4:]:
        lines.append(" ".join(_assign(k, v) for k, v in variables[4:]))
    lines.append("  " + shlex.join(plan.command))
    return " \\\n".join(lines)


def render_shell(plan: LaunchPlan) -> Rendering:
    n = plan.nodes
    where = plan.master_addr or "an address of node 0 (export MASTER_ADDR on every node first)"
    how = (
        "\n"
        f"Run block i on node i (i = 0..{n - 1}) at about the same time: each node waits at the rendezvous\n"
        f"until all {n} have joined. Node 0 hosts the rendezvous on TCP port {plan.master_port}:\n"
        f"MASTER_ADDR = {where}, reachable from every node."
    )
    out = ["# " + line if line else "#" for line in header_lines(plan, how)]
    nodes = []
    for rank in range(n):
        role = " (rendezvous host, MASTER_ADDR points here)" if rank == 0 else ""
        cmd = node_command(plan, rank)
        out += ["", BLOCK_MARK.format(rank=rank, nodes=n) + f": RANK={rank}{role} ----", cmd]
        nodes.append({"rank": rank, "variables": dict(node_variables(plan, rank)), "command": cmd})
    text = "\n".join(out) + "\n"
    notes = []
    if plan.master_addr is None:
        notes.append("--master-addr not given: each block needs MASTER_ADDR exported on its node")
    return Rendering(plan=plan, filename=f"{plan.name}.sh", text=text, notes=tuple(notes), nodes=tuple(nodes))
