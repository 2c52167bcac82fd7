"""Read a host tree under a root directory, resolving symlinks *inside* that root.

sysfs is a forest of relative symlinks (``sys/bus/pci/devices/<bdf> -> ../../../devices/pci…``,
``sys/class/infiniband/<hca>/device -> ../../../<bdf>``). Probing a captured host (``--root DIR``)
must follow them the way the kernel would if DIR were ``/``: an absolute target is re-rooted at
DIR and ``..`` stops at DIR. So nothing under a hostile or broken tree can make a probe read a file
of the machine running the tool (archspec's habit: detection is a pure function of one root).

Only this module touches the filesystem for ``platform/``; everything else asks it for text.
"""
from __future__ import annotations

import os
import stat
from typing import Optional

from deepep_env.base.readfile import open_regular, read_fd

MAX_SYMLINK_HOPS = 40  # Linux's own limit (MAXSYMLINKS) before ELOOP


# A host file is a sysfs attribute, a /proc table or dpkg's status (a few MB on a full system):
# the cap only stops /dev/zero planted in a captured tree.
HOST_FILE_LIMIT = 32 << 20


def is_live_root(root: "str | os.PathLike[str]") -> bool:
    """Whether ``root`` is this machine's own ``/`` (the one place that decides it): only then do
    the caller's environment variables, virtualenv and home directory describe the probed host."""
    return os.path.realpath(os.fspath(root)) == "/"


class RootFS:
    """A read-only view of ``root`` as if it were ``/``."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        # The root itself is trusted (the user named it); links *below* it are not.
        given = os.path.abspath(os.fspath(root))
        self.root = os.path.realpath(given)
        # Absolute link targets that already name a path inside the root, as this machine spells
        # it (a tree built or copied with `ln -s "$PWD/sys/devices/…"`), point into the root:
        # strip the prefix instead of re-rooting it a second time. Both spellings of the root
        # count (the one given and its realpath: /tmp vs /private/tmp).
        self._own_prefixes = tuple(
            sorted({p.rstrip("/") + "/" for p in (given, self.root) if p.rstrip("/")}, key=len, reverse=True)
        )
        self._lstat_cache: dict[str, Optional[os.stat_result]] = {}
        self._link_cache: dict[str, str] = {}
        self._resolved: dict[str, str] = {}

    @property
    def live(self) -> bool:
        """This machine's own ``/`` (see :func:`is_live_root`)."""
        return is_live_root(self.root)

    # -- path resolution -------------------------------------------------------------------
    def _lstat(self, rel: str) -> Optional[os.stat_result]:
        try:
            return self._lstat_cache[rel]
        except KeyError:
            pass
        try:
            st: Optional[os.stat_result] = os.lstat(self._abs(rel))
        except OSError:
            st = None
        self._lstat_cache[rel] = st
        return st

    def _abs(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    def resolve(self, rel: str) -> Optional[str]:
        """Resolve ``rel`` (relative to the root, or absolute meaning "under the root") to a
        normalised relative path with no symlink in it; ``None`` on a symlink loop.

        A component that does not exist is kept lexically, so the caller's open() fails with
        ENOENT, which the probes turn into a partial fact. Directory prefixes are memoised:
        probing reads hundreds of files in a few dozen directories.
        """
        rel = rel.strip("/")
        cached = self._resolved.get(rel)
        if cached is not None:
            return cached
        head, _, tail = rel.rpartition("/")
        base = self.resolve(head) if head else ""
        if base is None:
            return None
        out = self._walk(base, tail)
        if out is not None:
            self._resolved[rel] = out
        return out

    def _walk(self, base: str, rel: str) -> Optional[str]:
        pending = [p for p in reversed(rel.split("/")) if p]
        out: list[str] = base.split("/") if base else []
        hops = 0
        while pending:
            part = pending.pop()
            if part == ".":
                continue
            if part == "..":
                if out:  # ".." at the root stays at the root, as in a chroot
                    out.pop()
                continue
            cand = "/".join(out + [part]) if out else part
            st = self._lstat(cand)
            if st is not None and stat.S_ISLNK(st.st_mode):
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    return None
                target = self._link_cache.get(cand)
                if target is None:
                    try:
                        target = os.readlink(self._abs(cand))
                    except OSError:
                        return None
                    self._link_cache[cand] = target
                if target.startswith("/"):
                    out = []
                    for prefix in self._own_prefixes:
                        if target.startswith(prefix):
                            target = target[len(prefix):]
                            break
                pending.extend(p for p in reversed(target.split("/")) if p)
                continue
            out.append(part)
        return "/".join(out)

    # -- reads -----------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        r = self.resolve(rel)
        return r is not None and self._lstat(r) is not None

    def is_dir(self, rel: str) -> bool:
        r = self.resolve(rel)
        st = self._lstat(r) if r is not None else None
        return st is not None and stat.S_ISDIR(st.st_mode)

    def is_file(self, rel: str) -> bool:
        r = self.resolve(rel)
        st = self._lstat(r) if r is not None else None
        return st is not None and stat.S_ISREG(st.st_mode)

    def is_symlink(self, rel: str) -> bool:
        """Whether the last component of ``rel`` is itself a symlink (parents resolved)."""
        head, _, tail = rel.rstrip("/").rpartition("/")
        parent = self.resolve(head) if head else ""
        if parent is None:
            return False
        st = self._lstat(f"{parent}/{tail}" if parent else tail)
        return st is not None and stat.S_ISLNK(st.st_mode)

    def read_text(self, rel: str) -> str:
        """Text of a file under the root. Raises OSError (ENOENT, EISDIR, EACCES, ELOOP)."""
        rel = rel.strip("/")
        head, _, tail = rel.rpartition("/")
        base = self.resolve(head) if head else ""
        if base is None:
            raise OSError(40, "too many levels of symbolic links", rel)
        path = self._abs(f"{base}/{tail}" if base else tail)
        try:
            # Fast path: the directory is resolved; O_NOFOLLOW refuses a final symlink (ELOOP)
            # instead of following it out of the root. Probes never block: a FIFO, socket or device
            # planted in a captured tree (or left on a host) is refused like a missing file.
            fd = open_regular(path, os.O_NOFOLLOW)
        except OSError as exc:
            if exc.errno != 40:  # ELOOP: the file itself is a symlink, resolve it in the root
                raise
            r = self.resolve(rel)
            if r is None:
                raise
            fd = open_regular(self._abs(r), os.O_NOFOLLOW)
        raw = read_fd(fd, HOST_FILE_LIMIT, rel)
        return raw.decode("utf-8", errors="replace")

    def read_attr(self, rel: str) -> Optional[str]:
        """A one-value sysfs attribute, stripped; ``None`` when absent or unreadable."""
        try:
            return self.read_text(rel).strip()
        except (OSError, ValueError):
            return None

    def listdir(self, rel: str) -> list[str]:
        """Sorted entries of a directory under the root; [] when absent or not a directory."""
        r = self.resolve(rel)
        if r is None:
            return []
        try:
            return sorted(os.listdir(self._abs(r)))
        except OSError:
            return []

    def realpath(self, rel: str) -> Optional[str]:
        """The resolved relative path (what ``readlink -f`` gives, minus the root)."""
        return self.resolve(rel)

    def host_path(self, rel: str) -> str:
        """The absolute path this file has *on the probed host* (``/`` + rel)."""
        return "/" + rel.strip("/")

    def local_path(self, rel: str) -> Optional[str]:
        """The absolute local path of ``rel`` after resolution inside the root."""
        r = self.resolve(rel)
        return None if r is None else self._abs(r)
