"""`deepep-env --version`: the tool's version, the activation it puts into environments (the `deepep-env`
package this checkout builds: base/layers.py ACTIVATION, issue 50), and the tools it drives."""
from __future__ import annotations

import importlib.metadata


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def tool_build() -> str:
    """This checkout's build of the environments' ``deepep-env`` package — the activation, the build string
    `lock --only deepep-env` locks — else (outside a project with recipes/deepep-env, or when the id cannot
    be computed here) the tree hash of the activation's modules, which that build id is made from."""
    from deepep_env.base.errors import UserError
    from deepep_env.base.project import find_project
    from deepep_env.builder.toolpkg import tool_source
    from deepep_env.lock.tool import this_checkout_tool

    try:
        node = this_checkout_tool(find_project(None))
    except (UserError, OSError):
        node = None
    if node is not None and node.build_string:
        return f"activation {node.build_string}"
    return f"activation tree {tool_source()[1]}"


def version_lines() -> list[str]:
    from deepep_env import __version__

    return [f"deepep-env {__version__} (the environments' {tool_build()})",
            f"rattler-build {_dist_version('py-rattler-build')} (py-rattler-build)",
            f"py-rattler {_dist_version('py-rattler')}"]


def print_version() -> None:
    print("\n".join(version_lines()))
