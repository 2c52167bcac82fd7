"""Check a launch request and turn it into a :class:`LaunchPlan` (pure: no I/O, no host probing).

The per-node command is the same word list on every node and every target::

    deepep-env run ENV -- bash -c 'exec python "${CONDA_PREFIX:?…}/share/deep-ep/tests/test_X.py" "$@"' deepep-X ARGS…

- ``deepep-env run ENV`` detects the host it runs on and applies that node's overlay (NICs, GID
  index, GPU→NIC map differ per node), then execs the rest: the overlay is never computed on the
  machine that renders the launch.
- ``bash -c SCRIPT NAME ARGS…`` lets ``$CONDA_PREFIX`` (set by ``run``) be expanded on the node,
  while the test arguments travel as separate words (``"$@"``): they are never re-parsed by a
  shell, whatever quotes, spaces or ``$`` they hold.
- ``run`` stays generic (it runs any command); the launcher alone knows where DeepEP's tests live.
"""
from __future__ import annotations

import re
import shlex
from typing import Iterable

from deepep_env.base.errors import UserError
from deepep_env.launch import checks
from deepep_env.launch.preflight import shared_dir, wrap
from deepep_env.launch.model import (
    DEFAULT_RUNNER, DEFAULT_TESTS_DIR, TARGETS, TESTS, EnvInfo, LaunchOptions, LaunchPlan,
)

# Set by the launcher per node; an export or spec variable with one of these names would fight it.
LAUNCHER_VARS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A Job/Service name: DNS-1035 label (Services need a leading letter). 52 characters at most so
# that the Indexed Job's pod hostnames `<name>-<index>` stay within a 63-character label.
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_NAME = 52


def default_name(env: str, test: str) -> str:
    raw = f"deepep-{env}-{test}".lower()
    name = re.sub(r"[^a-z0-9-]+", "-", raw)
    name = re.sub(r"-{2,}", "-", name).strip("-")
    return name[:MAX_NAME].rstrip("-")


def _check_name(name: str) -> str:
    if len(name) > MAX_NAME or not NAME_RE.match(name):
        raise UserError(f"not a usable job name: {name!r}", field="--name",
                        accepted=f"lower-case letters, digits and '-', starting with a letter, at most {MAX_NAME} characters")
    return name


def _check_exports(pairs: Iterable[tuple[str, str]], source: str) -> tuple[tuple[str, str], ...]:
    out: dict[str, str] = {}
    for key, value in pairs:
        if not ENV_NAME_RE.match(key):
            raise UserError(f"not an environment variable name: {key!r}", field=source,
                            accepted="NAME=VALUE with NAME like NVSHMEM_IB_GID_INDEX")
        if key in LAUNCHER_VARS:
            raise UserError(f"{key} is set by the launcher per node", field=source,
                            accepted="--master-addr / --master-port / --nodes instead")
        if "\0" in value:
            raise UserError(f"value of {key} holds a NUL byte", field=source)
        out[key] = value
    return tuple(out.items())


def runner_words(options: LaunchOptions, env: str) -> tuple[str, ...]:
    words = DEFAULT_RUNNER if options.runner is None else options.runner
    return tuple(w.replace("{env}", env) for w in words)


def program_expr(options: LaunchOptions, script: str) -> str:
    """The test program as a shell word for the inner ``bash -c`` script."""
    if options.program:
        return shlex.quote(options.program)
    return f'"{DEFAULT_TESTS_DIR}/{script}"'


def plan_launch(env: EnvInfo, options: LaunchOptions) -> LaunchPlan:
    if options.test not in TESTS:
        raise UserError(f"unknown DeepEP test {options.test!r}", field="TEST", accepted=", ".join(TESTS))
    test = TESTS[options.test]
    if options.target not in TARGETS:
        raise UserError(f"unknown target {options.target!r}", field="--target", accepted=", ".join(TARGETS))
    n = options.nodes
    if n < test.min_nodes or (test.max_nodes is not None and n > test.max_nodes):
        want = f"{test.min_nodes}" if test.max_nodes == test.min_nodes else (
            f"{test.min_nodes} or more" if test.max_nodes is None else f"{test.min_nodes}..{test.max_nodes}")
        raise UserError(f"{test.name} cannot run on {n} node(s): {test.why}", field="--nodes", accepted=want)
    if not 1 <= options.master_port <= 65535:
        raise UserError(f"not a TCP port: {options.master_port}", field="--master-port", accepted="1..65535 (DeepEP's default 8361)")
    if options.gpus_per_node < 1:
        raise UserError(f"not a GPU count: {options.gpus_per_node}", field="--gpus-per-node", accepted="1 or more (8 on every seed platform)")
    checks.check("--master-addr", options.master_addr, what="host name or address")
    if any("\0" in a for a in options.test_args):
        raise UserError("a test argument holds a NUL byte", field="TEST_ARGS")

    platform = options.platform
    if platform is not None and platform not in env.platforms:
        raise UserError(f"env {env.name!r} does not target platform {platform!r}", field="--platform",
                        accepted=", ".join(env.platforms))
    if platform is None and env.platforms:
        platform = env.platforms[0]

    exports = _check_exports(env.env, f"env_specs/{env.name}.toml: env")
    extra = _check_exports(options.exports, "--export")
    merged = dict(exports)
    merged.update(extra)

    name = _check_name(options.name) if options.name else _check_name(default_name(env.name, test.name))
    prog = program_expr(options, test.script)
    script = f"exec {shlex.quote(options.python)} {prog} \"$@\""
    argv = (*runner_words(options, env.name), "bash", "-c", script, f"deepep-{test.name}", *options.test_args)
    node_argv: tuple[str, ...] = ()
    if options.preflight:
        if options.preflight_timeout < 1:
            raise UserError(f"not a timeout: {options.preflight_timeout}", field="--preflight-timeout",
                            accepted="seconds, 1 or more")
        pvc = options.k8s.shared_pvc
        checks.check("--shared-dir", options.shared_dir, what="folder")
        folder = shared_dir(options.target, name, options.shared_dir, pvc)
        per_node = 1 if options.target == "k8s" and not pvc else n
        node_argv = wrap(argv, env=env.name, test=test.name, test_args=options.test_args, nodes=per_node,
                         folder=folder, tool=options.tool, timeout=options.preflight_timeout, admit=options.admit)
    return LaunchPlan(
        env=env, test=test, target=options.target, nodes=n, name=name, platform=platform,
        master_addr=options.master_addr, master_port=options.master_port,
        gpus_per_node=options.gpus_per_node, exports=tuple(merged.items()), argv=argv, program=prog,
        options=options, node_argv=node_argv,
    )


def header_lines(plan: LaunchPlan, how: str) -> list[str]:
    """The explanation every rendering starts with (as comment text, without the '# ')."""
    p = plan
    runner = runner_words(p.options, p.env.name)
    lines = [
        f"deepep-env launch: DeepEP {p.test.script} on {p.nodes} node(s) x {p.gpus_per_node} GPUs, "
        f"env {p.env.name} {p.env.version}" + (f", platform {p.platform}" if p.platform else "") + f" (target: {p.target})",
        "",
        "DeepEP's tests read MASTER_ADDR, MASTER_PORT (default 8361), WORLD_SIZE = number of NODES and",
        "RANK = node index, and spawn one process per GPU themselves: start ONE command per node",
        "(these are not torchrun's meanings; do not wrap this in torchrun).",
    ]
    if runner[:2] == ("deepep-env", "run"):
        lines += [
            f"`{' '.join(runner[:3])}` detects each node and applies its overlay (NICs, GID index,",
            "GPU->NIC map) on that node at start; nothing host-specific was copied from the machine",
            "that rendered this file.",
        ]
    if p.node_argv:
        lines += [
            "Preflight (each node, before the test): " + ("`deepep-env admit` (a short DeepEP run against the "
            "env's records; --no-admit skips it) and " if p.options.admit else "") + "`deepep-env doctor` into a "
            "shared folder, wait for",
            "every node, `deepep-env fleet report` (rank 0 prints it and writes fleet.html there); the test",
            "starts only if the fleet passes (else exit 3); then `deepep-env record` writes its test record.",
        ]
    lines += how.splitlines()
    return lines
