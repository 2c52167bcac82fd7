"""Why this machine's build id of a package is not the lock's (issue 51.4): the pre-image the lock
recorded (lockfiles/build-inputs.json) against this machine's, naming the host external that
differs, where this shell reads it (``DEEPEP_ENV_RDMA_CORE`` unset → /usr) and how to make it match.

`lock`, `install` and `plan` compare a plan made with this machine's facts to the lock's ids; a
package whose id moved only because a shell lacks a variable used to end in rattler's bare
"No candidates were found for deep-ep ==1.2.1 hf8c2404fc1_0".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from deepep_env.base.errors import UserError
from deepep_env.formats.build_inputs import read_inputs
from deepep_env.sources.hostprint import HOW_TO_MATCH, moved_externals

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.base.project import Project
    from deepep_env.builder.plan import BuildNode


@dataclass(frozen=True)
class MovedId:
    package: str
    lock_build: str       # the lock's build string
    here_build: str       # this machine's
    why: str              # what differs, one line
    fixes: tuple[str, ...]

    def line(self) -> str:
        return (f"{self.package}: this machine plans {self.here_build}, the lock's build is {self.lock_build} "
                f"because {self.why}")

    def fix(self, prepare: Optional[str] = None) -> str:
        steps = list(self.fixes)
        if prepare and any("DEEPEP_ENV_" in f for f in steps):
            steps.append(f"the spec's [host] prepare makes it: `{prepare}`")
        return "; ".join(steps) or "relock here: `deepep-env build ENV && deepep-env lock ENV`"


def _why(node: BuildNode, rec: Mapping[str, Any], moved: Mapping[str, MovedId]) -> tuple[str, tuple[str, ...]]:
    pre: Mapping[str, Any] = rec.get("preimage") or {}
    mine: Mapping[str, Any] = node.preimage or {}
    keys = sorted(k for k in set(pre) | set(mine) if pre.get(k) != mine.get(k))
    parts: list[str] = []
    fixes: list[str] = []
    if "externals" in keys:
        for comp, text in moved_externals(pre.get("externals") or {}, mine.get("externals") or {}, node.meta):
            parts.append(f"a host external differs: {text}")
            fixes.append(HOW_TO_MATCH.get(comp, f"make {comp} match the lock's"))
    deps = [d for d in node.deps if d in moved]
    if "dependencies" in keys and deps:
        parts.append(f"it depends on {', '.join(deps)}, whose id moved")
        fixes += [f for d in deps for f in moved[d].fixes if f not in fixes]
    rest = [k for k in keys if k not in ("externals", "dependencies")]
    if rest or not parts:
        parts.append(f"its {', '.join(rest or keys) or 'pre-image'} differ(s) from the lock's record "
                     "(recipes or spec changed since the lock: `deepep-env lock ENV --check` says what)")
    return "; ".join(parts), tuple(dict.fromkeys(fixes))


def moved_ids(project: Project, env: str, nodes: Sequence[BuildNode]) -> list[MovedId]:
    """Each node (planned with this machine's facts, in dependency order) whose id is not the one
    the lock recorded for its package, with why; empty where the lock has no record."""
    record = read_inputs(project).get(env) or {}
    out: dict[str, MovedId] = {}
    for n in nodes:
        rec = record.get(n.package)
        if not rec or not n.id or rec.get("id") == n.id:
            continue
        why, fixes = _why(n, rec, out)
        out[n.package] = MovedId(n.package, str(rec.get("build")), n.build_string, why, fixes)
    return list(out.values())


def moved_refusal(env: str, moved: Sequence[MovedId], cause: str, prepare: Optional[str] = None) -> UserError:
    """The one-line refusal of a lock whose build ids moved on this machine: which package, why (the host
    external that differs), and how to make it match — never the bare cause (issue 51.4: "No candidates",
    or a missing build in the local channel)."""
    return UserError(f"cannot lock {env}: {'; '.join(m.line() for m in moved)}; {cause}", field=moved[0].package,
                     accepted=f"{moved[0].fix(prepare)}, then lock again; or build it here "
                              f"(`deepep-env build {env}`) and relock under the new id")
