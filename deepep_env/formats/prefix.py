"""Find an installed env prefix and read the small JSON file the installer leaves in it.

``<prefix>/conda-meta/deepep-env`` (written by the install step; no ``.json`` extension, like pixi's
own ``conda-meta/pixi``: rattler's installer, and so pixi, reads every ``conda-meta/*.json`` as a
package record, so a tool's state there would break ``pixi install`` on the shared prefix)::

    {"env": "gcp-b200", "platforms": ["gcp-b200"],
     "python": {"provider": "host" | "conda", "version": "3.12", "executable": "/opt/…/python3"},
     "spec_env": {"NVSHMEM_QP_DEPTH": "1024"}}

``python.executable`` is optional. Unknown keys are ignored (a newer installer may add some).
:class:`PrefixMarker` is the marker's one type: its one reader (``read``, lenient; ``load``,
checked; the legacy ``conda-meta/deepep-env.json`` still read) and its one writer (``write``);
:class:`PrefixMeta` is the checked view of it that activation reads.

Where the prefix is, in order: ``--prefix``; ``$DEEPEP_ENV_PREFIX`` (the prefix itself); else where
``deepep-env install`` and pixi put it: ``<project>/.pixi/envs/<ENV>`` (deepep_env/base/project.py).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

from deepep_env.base.atomic import write_text
from deepep_env.base.errors import UserError
from deepep_env.formats.stamps import PREFIX_MARKER
from deepep_env.base.project import envs_dir, nearest_root, pixi_env_name
from deepep_env.base.readfile import MAX_CONFIG_BYTES, read_json, read_regular

META_RELPATH = os.path.join("conda-meta", "deepep-env")
# Where deepep-env < 0.3 wrote it: still read (and removed by the next install), never written.
LEGACY_RELPATH = os.path.join("conda-meta", "deepep-env.json")


def marker_path(prefix: "str | os.PathLike[str]") -> Path:
    """The one place that says where a prefix's deepep-env marker is (written)."""
    return Path(prefix) / META_RELPATH


def existing_marker(prefix: "str | os.PathLike[str]") -> Optional[Path]:
    """The marker a prefix has: the current name, else the legacy ``deepep-env.json``, else None."""
    for rel in (META_RELPATH, LEGACY_RELPATH):
        p = Path(prefix) / rel
        if p.is_file():
            return p
    return None


def has_marker(prefix: "str | os.PathLike[str]") -> bool:
    return existing_marker(prefix) is not None or (recover_swap(prefix) and existing_marker(prefix) is not None)


# What an install leaves beside a prefix NAME while it runs, each named by the installer's pid:
# .NAME.staging-PID-…, .NAME.pkgs-PID-… (deepep_env.install.installer._staging) and .NAME.old-PID, the
# previous prefix parked between the two renames of a swap (deepep_env.install.installer._swap).
_OWNER = re.compile(r"\.(?:staging|pkgs|old)-(\d+)(?:-|$)")


def owner_pid(name: str) -> Optional[int]:
    """The pid of the installer that made a leftover ``name``; None when the name carries none."""
    m = _OWNER.search(name)
    return int(m.group(1)) if m else None


def pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return False   # this process is not in the middle of another swap of the prefix
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True    # another user's process (EPERM): alive
    return True


def recover_swap(prefix: "str | os.PathLike[str]") -> bool:
    """Roll back a swap killed between its two renames: no prefix, the previous one parked as
    ``.NAME.old-PID`` by an installer that is gone → the parked one is renamed back. True when a
    prefix was restored. Every reader of a prefix calls this, so the prefix is never missing."""
    pfx = os.path.abspath(os.fspath(prefix))
    parent, name = os.path.split(pfx)
    if os.path.lexists(pfx):
        return False
    try:
        parked = [n for n in os.listdir(parent) if n.startswith(f".{name}.old-")]
    except OSError:
        return False
    for n in sorted(parked, key=lambda n: _mtime(os.path.join(parent, n)), reverse=True):
        pid = owner_pid(n)
        if pid is not None and pid_alive(pid):
            continue   # that swap is under way right now
        try:
            os.rename(os.path.join(parent, n), pfx)
            return True
        except OSError:
            continue   # another reader restored it first, or it went
    return False


def _mtime(path: str) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0


def is_conda_prefix(prefix: "str | os.PathLike[str]") -> bool:
    """A prefix some conda installer made (pixi, rattler, conda): package records in conda-meta/."""
    meta = Path(prefix) / "conda-meta"
    return meta.is_dir() and any(p.name != os.path.basename(LEGACY_RELPATH) for p in meta.glob("*.json"))
ENV_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
PREFIX_ENV_VAR = "DEEPEP_ENV_PREFIX"


class PrefixMeta(NamedTuple):
    env: str
    prefix: str
    platforms: tuple[str, ...]
    python_provider: str  # "host" | "conda"
    python_version: Optional[str]
    python_executable: Optional[str]
    spec_env: Mapping[str, str]

    def site_packages(self) -> Optional[str]:
        if not self.python_version:
            return None
        return os.path.join(self.prefix, "lib", f"python{self.python_version}", "site-packages")


def check_env_name(env: str) -> str:
    if not ENV_NAME_RE.match(env or ""):
        raise UserError(f"not an env name: {env!r}", field="ENV", accepted="letters, digits, '.', '_', '-' (no '/')")
    return env


def default_prefix(env: str, cwd: Optional[str] = None, environ: Optional[Mapping[str, str]] = None) -> Path:
    check_env_name(env)
    environ = os.environ if environ is None else environ
    if environ.get(PREFIX_ENV_VAR):
        return Path(environ[PREFIX_ENV_VAR])
    # Where install put it: Project.prefix_for, by the same rules (deepep_env.base.project): pixi's layout.
    here = Path(cwd or os.getcwd())
    return envs_dir(nearest_root(here, environ) or here) / pixi_env_name(env)


def find_prefix(
    env: str,
    prefix: Optional[str | os.PathLike[str]] = None,
    cwd: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> Path:
    check_env_name(env)
    return Path(prefix) if prefix is not None else default_prefix(env, cwd, environ)


@dataclass(frozen=True)
class PrefixMarker:
    """A prefix's install marker (``conda-meta/deepep-env``): the one type, with its one reader
    (:meth:`read`, lenient; :meth:`load`, strict) and its one writer (:meth:`write`).

    ``fields`` is the marker's JSON object, in the order it is written; :meth:`meta` is its checked
    view for activation (:class:`PrefixMeta`). ``path`` is the file it was read from, if any."""

    fields: Mapping[str, Any]
    path: str = ""

    @classmethod
    def read(cls, prefix: "str | os.PathLike[str]") -> "Optional[PrefixMarker]":
        """The marker of a complete install at ``prefix`` (else the legacy ``deepep-env.json``),
        or None: no marker, unreadable, or not a marker format this deepep-env reads."""
        p = existing_marker(prefix)
        if p is None:
            return None
        try:
            data = json.loads(read_regular(p, MAX_CONFIG_BYTES))
        except (OSError, ValueError):
            return None
        return cls(data, str(p)) if PREFIX_MARKER.accepts(data) else None

    @classmethod
    def load(cls, prefix: "str | os.PathLike[str]", env: Optional[str] = None) -> "PrefixMarker":
        """The marker of ``prefix``, checked (an interrupted swap recovered first); UserError when
        missing, malformed, or naming another env than ``env``."""
        prefix = os.path.abspath(os.fspath(prefix))
        found = existing_marker(prefix)
        if found is None:
            recover_swap(prefix)
            found = existing_marker(prefix)
        path = str(found or os.path.join(prefix, META_RELPATH))
        if not os.path.lexists(path):
            what = f"env {env!r} is not installed there" if env else "no deepep-env install there"
            raise UserError(f"{what} (no {META_RELPATH})", file=prefix, accepted=f"run `deepep-env install {env or 'ENV'}` first, or pass --prefix")
        data: Any = read_json(path, what="install marker", limit=MAX_CONFIG_BYTES)
        if not isinstance(data, dict):
            raise UserError("expected a JSON object", file=path)
        marker = cls(data, path)
        marker.meta(prefix, env)   # checked here: a marker that loads is one activation can use
        return marker

    def meta(self, prefix: "str | os.PathLike[str]", env: Optional[str] = None) -> PrefixMeta:
        """The checked fields activation reads (``path`` names the marker in messages)."""
        return parse_prefix_meta(dict(self.fields), self.path, os.fspath(prefix), env)

    def to_json(self) -> str:
        """The marker's bytes, as written."""
        return json.dumps(dict(self.fields), indent=2, sort_keys=False) + "\n"

    def write(self, prefix: "str | os.PathLike[str]") -> None:
        """The one writer: ``<prefix>/conda-meta/deepep-env``, atomically; the legacy .json goes away."""
        write_text(marker_path(prefix), self.to_json())
        with contextlib.suppress(FileNotFoundError):
            (Path(prefix) / LEGACY_RELPATH).unlink()

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]


def read_prefix_meta(prefix: str | os.PathLike[str], env: Optional[str] = None) -> PrefixMeta:
    """Read ``<prefix>/conda-meta/deepep-env`` (else the legacy ``deepep-env.json``); UserError when
    missing, malformed, or naming another env than ``env``."""
    prefix = os.path.abspath(os.fspath(prefix))
    return PrefixMarker.load(prefix, env).meta(prefix, env)


def parse_prefix_meta(data: Any, path: str, prefix: str, env: Optional[str] = None) -> PrefixMeta:
    """A marker's fields, checked (``path`` names it in messages)."""
    if not isinstance(data, dict):
        raise UserError("expected a JSON object", file=path)
    PREFIX_MARKER.check(data, file=path, missing=1)   # markers before stamps had none: read as v1
    name = data.get("env")
    if not isinstance(name, str) or not ENV_NAME_RE.match(name):
        raise UserError("missing or invalid", file=path, field="env")
    if env is not None and name != env:
        raise UserError(f"this prefix holds env {name!r}, not {env!r}", file=path, field="env")
    platforms = data.get("platforms", [])
    if not isinstance(platforms, list) or not all(isinstance(p, str) for p in platforms):
        raise UserError("must be a list of platform names", file=path, field="platforms")
    py = data.get("python") or {}
    if not isinstance(py, dict):
        raise UserError("must be an object", file=path, field="python")
    provider = py.get("provider", "conda")
    if provider not in ("host", "conda"):
        raise UserError(f"unknown provider {provider!r}", file=path, field="python.provider", accepted="host, conda")
    version = py.get("version")
    if version is not None and not (isinstance(version, str) and re.match(r"^3\.\d+$", version)):
        raise UserError(f"not a Python major.minor: {version!r}", file=path, field="python.version")
    executable = py.get("executable")
    if executable is not None and not isinstance(executable, str):
        raise UserError("must be a path", file=path, field="python.executable")
    spec_env = data.get("spec_env") or {}
    if not isinstance(spec_env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in spec_env.items()):
        raise UserError("must map names to strings", file=path, field="spec_env")
    return PrefixMeta(
        env=name,
        prefix=prefix,
        platforms=tuple(platforms),
        python_provider=provider,
        python_version=version,
        python_executable=executable,
        spec_env=dict(spec_env),
    )


class NeedsProject(UserError):
    """A prefix with no marker of ours, in a project whose spec can say more: pixi installed it
    (``kind="unmarked"``: the spec stands in for the marker) or nothing is installed there
    (``kind="missing"``: the lock and the spec name the next step). The stdlib-only activation reads
    neither: it raises this, and the tool (``install/prefixes.py``) resolves or words it."""

    def __init__(self, err: UserError, *, env: str, prefix: str, root: Path, kind: str) -> None:
        self.env, self.prefix, self.root, self.kind, self.cause = env, prefix, root, kind, err
        super().__init__(err.message, file=err.file, field=err.field, accepted=err.accepted)


def marked_prefix_meta(env: str, pfx: "str | os.PathLike[str]", cwd: Optional[str] = None,
                       environ: Optional[Mapping[str, str]] = None) -> PrefixMeta:
    """The prefix's marker; :class:`NeedsProject` for a prefix with none in a project that has the spec."""
    root = None if has_marker(pfx) else nearest_root(Path(cwd or os.getcwd()), environ)
    if root is None or not (root / "env_specs" / f"{env}.toml").is_file():
        return read_prefix_meta(pfx, env)      # the one-line "not installed" refusal
    prefix = os.path.abspath(os.fspath(pfx))
    if not is_conda_prefix(pfx):
        try:
            return read_prefix_meta(pfx, env)
        except UserError as err:
            raise NeedsProject(err, env=env, prefix=prefix, root=root, kind="missing") from None
    raise NeedsProject(UserError(f"{prefix}: installed by pixi, no deepep-env marker"), env=env, prefix=prefix,
                       root=root, kind="unmarked")

