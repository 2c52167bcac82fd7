"""Multi-node launches of DeepEP's tests: Kubernetes Indexed Job, Slurm sbatch, plain per-node shell.

Pure renderers over one :class:`~deepep_env.launch.model.LaunchPlan`; ``docs/launch.md`` explains
the choices. The one entry point the CLI calls is :func:`launch`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from deepep_env.launch.model import (
    DEFAULT_MASTER_PORT, TARGETS, TESTS, EnvInfo, K8sOptions, LaunchOptions, LaunchPlan, Rendering,
    SlurmOptions,
)
from deepep_env.launch.plan import plan_launch
from deepep_env.launch.shell import render_shell
from deepep_env.launch.slurm import render_slurm

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.base.project import Project


def render(plan: LaunchPlan) -> Rendering:
    """Render ``plan`` for its target (pure: same plan, same bytes)."""
    if plan.target == "k8s":
        from deepep_env.launch.k8s import render_k8s   # lazy: yaml, for this target only

        return render_k8s(plan)
    if plan.target == "slurm":
        return render_slurm(plan)
    return render_shell(plan)


def launch(env: str, options: LaunchOptions, project: Optional[Project] = None) -> Rendering:
    """Resolve env spec ``env`` (name or path) and render the launch ``options`` describe."""
    from deepep_env.envspec import load_resolved   # lazy: pydantic; the renderers are used without a spec

    spec = load_resolved(env, project)
    return render(plan_launch(EnvInfo.from_resolved(spec), options))


def not_installable(env: str, project: Optional[Project] = None) -> Optional[str]:
    """Why ``env`` cannot be installed from this checkout, with the step that moves it on, or None when
    it is locked (issue 56: a launch of an unlocked env fails on every node's preflight)."""
    from deepep_env.base.project import find_project   # lazy: the spec and the lock, only for this check
    from deepep_env.envspec import load_resolved   # lazy: pydantic
    from deepep_env.lock.next_step import next_step   # lazy: the lock and the build plan

    proj = project or find_project(None)
    name = load_resolved(env, proj).name
    step = next_step(proj, name)
    if step.state == "locked":
        return None
    return (f"{name} is {step.why}: every node's install and preflight would fail; "
            f"next: `{step.command}`{step.note()}, {step.then_install(name)}")


__all__ = [
    "DEFAULT_MASTER_PORT", "TARGETS", "TESTS", "EnvInfo", "K8sOptions", "LaunchOptions", "LaunchPlan",
    "Rendering", "SlurmOptions", "launch", "not_installable", "plan_launch", "render",
]
