"""What every check reads: host facts, the effective environment with provenance, a path view.

The *effective* environment is what a process started by ``deepep-env run ENV`` sees: the current
environment with the env's overlay applied (prefix activation + host rules + the spec's ``[env]``).
Without ENV it is the current environment alone, and the host overlay is kept only to say, in a
fix, what ``deepep-env activate`` would set. Every value carries where it came from, so a finding
can say "NVSHMEM_IBGDA_NIC_HANDLER=cpu [environment]" or "[overlay rule nic-handler-gpu …]".

Paths: a host path (``/usr/local/nvidia/lib64``, ``/opt/deepep/nvshmem``) is looked up under
``--root`` through :class:`~deepep_env.platform.rootfs.RootFS` (symlinks stay inside the root);
paths inside the env prefix and the local Python are read on this machine.
"""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, TypeVar

from deepep_env.doctor.model import Evidence, Finding, one_line
from deepep_env.host.context import HostContext
from deepep_env.overlay.changes import Overlay, PrependPath, Set, Source, Unset
from deepep_env.platform.facts import Nic
from deepep_env.platform.rootfs import RootFS
from deepep_env.base.readfile import open_regular

# Top-level directories that hold installed software. A captured tree with none of them (the real
# H200 capture has only etc/, proc/, sys/) says nothing about /usr/local/cuda: a path the
# environment names is then "not captured", not "missing" (no false alarm on captures).
SOFTWARE_DIRS = ("usr", "opt", "home", "srv", "nix", "apps", "sw", "lib", "lib64", "root", "scratch", "data")

# The dynamic loader's trusted directories (ld.so(8)), after /etc/ld.so.conf's.
DEFAULT_LIB_DIRS = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
)

UNSET = "(unset)"
T = TypeVar("T")


@dataclass(frozen=True)
class EnvView:
    """Environment values and, for each, where it came from."""

    values: Mapping[str, str]
    origins: Mapping[str, str]
    label: str = "effective"  # "effective" | "current"

    def get(self, name: str) -> Optional[str]:
        return self.values.get(name)

    def origin(self, name: str) -> str:
        return self.origins.get(name, "not set")

    def evidence(self, name: str, value: Optional[str] = None) -> Evidence:
        v = self.values.get(name) if value is None else value
        return Evidence(value=one_line(v if v is not None else UNSET, 600), var=name, source=one_line(self.origin(name), 300))

    def split(self, name: str, seps: str = ":") -> list[str]:
        raw = self.values.get(name) or ""
        for s in seps[1:]:
            raw = raw.replace(s, seps[0])
        return [p for p in raw.split(seps[0]) if p]


def _origin_of(change: Any) -> str:
    return f"overlay rule {change.rule}: {one_line(change.fact, 160)}"


def effective_environment(environ: Mapping[str, str], overlay: Optional[Overlay]) -> EnvView:
    """``environ`` with ``overlay`` applied (activation scripts skipped), with provenance."""
    values = dict(environ)
    origins = {k: "environment" for k in values}
    if overlay is None:
        return EnvView(values, origins, "current")
    for c in overlay.changes:
        if isinstance(c, Source):
            continue
        if isinstance(c, Set):
            c.apply(values)
            origins[c.name] = _origin_of(c)
        elif isinstance(c, Unset):
            c.apply(values)
            origins[c.name] = f"unset by {_origin_of(c)}"
        elif isinstance(c, PrependPath):
            had = c.name in values and origins.get(c.name) == "environment"
            c.apply(values)
            prev = origins.get(c.name)
            mine = f"{c.value} prepended by {_origin_of(c)}"
            if had:
                origins[c.name] = f"{mine}; the rest from the environment"
            elif prev and prev != "environment" and not prev.startswith("unset"):
                origins[c.name] = f"{mine}; {prev}"
            else:
                origins[c.name] = mine
    return EnvView(values, origins, "effective")


def under(path: str, top: str) -> bool:
    top = top.rstrip("/") or "/"
    return path == top or path.startswith(top + "/") or top == "/"


class PathView:
    """Existence and contents of paths as the checked process would see them."""

    def __init__(self, fs: RootFS, live: bool, local_roots: Iterable[str] = (), cwd: Optional[str] = None) -> None:
        self.fs = fs
        self.live = live
        self.local_roots = tuple(os.path.abspath(p) for p in local_roots if p)
        self.cwd = cwd or os.getcwd()
        self.captures_software = live or any(fs.is_dir(d) for d in SOFTWARE_DIRS)

    def absolute(self, path: str) -> str:
        return os.path.normpath(path if os.path.isabs(path) else os.path.join(self.cwd, path))

    def is_local(self, path: str) -> bool:
        p = self.absolute(path)
        return self.live or any(under(p, r) for r in self.local_roots)

    def covered(self, path: str) -> bool:
        """Whether the checked tree can say anything about ``path`` (see SOFTWARE_DIRS)."""
        return self.is_local(path) or self.captures_software

    def missing(self, path: str) -> Optional[bool]:
        """True when ``path`` is absent on the checked host; None when that cannot be said: the
        tree captures no software there, or the path exists on *this* machine but not under
        --root (the variable then describes the machine running doctor, not the probed tree)."""
        if not self.covered(path):
            return None
        if self.exists(path):
            return False
        if not self.live and not self.is_local(path) and os.path.exists(self.absolute(path)):
            return None
        return True

    def _rel(self, path: str) -> str:
        return self.absolute(path).lstrip("/")

    def exists(self, path: str) -> bool:
        if self.is_local(path):
            return os.path.exists(self.absolute(path))
        return self.fs.exists(self._rel(path))

    def is_file(self, path: str) -> bool:
        if self.is_local(path):
            return os.path.isfile(self.absolute(path))
        return self.fs.is_file(self._rel(path))

    def is_dir(self, path: str) -> bool:
        if self.is_local(path):
            return os.path.isdir(self.absolute(path))
        return self.fs.is_dir(self._rel(path))

    def is_symlink(self, path: str) -> bool:
        if self.is_local(path):
            return os.path.islink(self.absolute(path))
        return self.fs.is_symlink(self._rel(path))

    def listdir(self, path: str) -> list[str]:
        if self.is_local(path):
            try:
                return sorted(os.listdir(self.absolute(path)))
            except OSError:
                return []
        return self.fs.listdir(self._rel(path))

    def glob(self, pattern: str) -> list[str]:
        """Shell glob on the last component only (``dir/lib*.so``)."""
        import fnmatch

        d, _, pat = self.absolute(pattern).rpartition("/")
        d = d or "/"
        return [f"{d.rstrip('/')}/{n}" for n in self.listdir(d) if fnmatch.fnmatchcase(n, pat)]

    def realpath(self, path: str) -> Optional[str]:
        """A path that identifies the file (symlinks resolved), as a host path."""
        if self.is_local(path):
            return os.path.realpath(self.absolute(path))
        r = self.fs.realpath(self._rel(path))
        return None if r is None else "/" + r

    def read_bytes(self, path: str, limit: int = 1 << 20) -> Optional[bytes]:
        local = self.absolute(path) if self.is_local(path) else self.fs.local_path(self._rel(path))
        if local is None:
            return None
        try:
            with os.fdopen(open_regular(local), "rb") as fh:
                return fh.read(limit)
        except OSError:
            return None

    def read_text(self, path: str, limit: int = 1 << 20) -> Optional[str]:
        b = self.read_bytes(path, limit)
        return None if b is None else b.decode("utf-8", errors="replace")

    def open_local(self, path: str) -> Optional[str]:
        """The local filesystem path to open for ``path`` (resolved inside the root)."""
        if self.is_local(path):
            return self.absolute(path)
        return self.fs.local_path(self._rel(path))

    def readlink_name(self, path: str) -> Optional[str]:
        """Basename of the file a symlink chain ends at (``libibverbs.so.1`` → ``libibverbs.so.1.14.50.0``)."""
        r = self.realpath(path)
        return None if r is None else r.rsplit("/", 1)[-1]


@dataclass
class DoctorContext:
    host: HostContext  # the host, read once (deepep_env.host.context)
    env: EnvView  # the effective environment
    current: EnvView  # the current environment alone
    overlay: Optional[Overlay]  # the overlay (applied when overlay_applied, else the host's, for fixes)
    overlay_applied: bool
    paths: PathView
    cwd: str
    env_name: Optional[str] = None
    spec: Any = None  # ResolvedSpec when the project and ENV are known
    meta: Any = None  # formats.prefix.PrefixMeta of the installed prefix
    prefix: Optional[str] = None
    setup_findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    confirmed: list[str] = field(default_factory=list)  # what was verified and is right (always shown)
    info: dict[str, Any] = field(default_factory=dict)  # what checks learned, for the report's context
    _cache: dict[str, Any] = field(default_factory=dict)

    def with_env(self, env: EnvView) -> "DoctorContext":
        return replace(self, env=env, notes=[], info={}, _cache={})

    def cached(self, key: str, compute: Callable[[], T]) -> T:
        """``compute()`` once per context: an analysis several checks read (the libibverbs scan)."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    # -- derived facts used by several checks ----------------------------------------------
    @property
    def profile_rules(self) -> tuple[str, ...]:
        return tuple(self.host.platform.profile.rules)

    def usable_nics(self) -> tuple[Nic, ...]:
        return self.host.facts.usable_nics()

    def rdma_relevant(self) -> bool:
        """Does a remote (RDMA/IBGDA) transport matter here? Not on the NVLink-only profile, not
        with NVSHMEM_REMOTE_TRANSPORT=none; yes with RDMA NICs or a platform that has them."""
        if (self.env.get("NVSHMEM_REMOTE_TRANSPORT") or "").strip().lower() == "none":
            return False
        if self.host.platform.name in ("nvlink", "none"):
            return False  # single node: no remote transport (the real H200 capture has EnableStreamMemOPs 0)
        return bool(self.usable_nics()) or "ibgda-transport" in self.profile_rules

    def overlay_value(self, name: str) -> Optional[str]:
        """What the overlay sets ``name`` to (for fix texts), or None."""
        if self.overlay is None:
            return None
        return self.overlay.env().get(name)

    def overlay_hint(self, name: str) -> str:
        v = self.overlay_value(name)
        if v is None:
            return ""
        if self.overlay_applied:
            return ""
        return f" (`deepep-env activate`/`run` sets {name}={v} on this host)"

    def spec_host(self) -> Any:
        return getattr(self.spec, "host", None)

    def lib_search_dirs(self, env: Optional[EnvView] = None) -> list[tuple[str, str]]:
        """(dir, why) in the dynamic loader's order: LD_LIBRARY_PATH, ld.so.conf, defaults."""
        env = env or self.env
        out: list[tuple[str, str]] = []
        seen: set[str] = set()

        def add(d: str, why: str) -> None:
            d = os.path.normpath(d) if d else d
            if d and d not in seen:
                seen.add(d)
                out.append((d, why))

        for d in env.split("LD_LIBRARY_PATH", ":;"):
            add(self.paths.absolute(d), "LD_LIBRARY_PATH")
        for d in self.ld_so_conf_dirs():
            add(d, "/etc/ld.so.conf")
        for d in DEFAULT_LIB_DIRS:
            add(d, "default loader path")
        return out

    def ld_so_conf_dirs(self) -> list[str]:
        if "ld_so_conf" in self._cache:
            return self._cache["ld_so_conf"]
        dirs: list[str] = []

        def read(rel: str, depth: int = 0) -> None:
            if depth > 4:
                return
            text = self.host.fs.read_attr(rel)
            if text is None:
                return
            for line in text.splitlines():
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                if line.startswith("include"):
                    pat = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
                    base = os.path.dirname("/" + rel)
                    pat = pat if pat.startswith("/") else os.path.join(base, pat)
                    d, _, fpat = pat.rpartition("/")
                    import fnmatch

                    for n in self.host.fs.listdir(d.lstrip("/")):
                        if fnmatch.fnmatchcase(n, fpat):
                            read(f"{d.lstrip('/')}/{n}", depth + 1)
                elif line.startswith("/"):
                    if line not in dirs:
                        dirs.append(line)

        read("etc/ld.so.conf")
        self._cache["ld_so_conf"] = dirs
        return dirs


def site_dirs_of_python(paths: PathView, executable: Optional[str]) -> list[str]:
    """site-packages of the interpreter at ``executable`` (a venv or a prefix: ``<dir>/lib/python3.*/site-packages``)."""
    if not executable:
        return []
    base = os.path.dirname(os.path.dirname(paths.absolute(executable)))
    out = []
    for lib in ("lib", "lib64"):
        for d in paths.glob(f"{base}/{lib}/python3*"):
            for sp in ("site-packages", "dist-packages"):
                cand = f"{d}/{sp}"
                if paths.is_dir(cand) and cand not in out:
                    out.append(cand)
    if base in ("/usr", "/usr/local"):
        for d in paths.glob("/usr/lib/python3"):
            cand = f"{d}/dist-packages"
            if paths.is_dir(cand) and cand not in out:
                out.append(cand)
    return out


def local_site_dirs(prefix: Optional[str]) -> list[str]:
    if not prefix:
        return []
    return sorted(d for d in glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages")) if os.path.isdir(d))


def nic_names(nics: Sequence[Nic]) -> str:
    names = [n.hca for n in nics]
    return ", ".join(names[:12]) + (", …" if len(names) > 12 else "")
