"""Where every build runs, and what that does to ids.

Builds run under a fixed root, ``/tmp/deepep-env-build/<10 hex of the id>-<package>/`` (Nix's fixed
``/build``): compilers write the paths they are given into what they produce (``__FILE__`` in
NVSHMEM's and DeepEP's libraries, the staged source path in ``info/recipe``), so two machines make
the same package only under the same root. ``$DEEPEP_ENV_BUILD_ROOT`` moves it; a moved root is then
part of every build id (:func:`moved`), as Nix's store directory is part of every store path: the
same id always means the same bytes, and a build under another root gets another id instead of other
bytes under the lock's.

The root is one user's alone (issue 39.1): a build runs and packages what is in it, and a folder
first on PATH (``builder/tools.py``) lives there, so a root another user owns or can write is refused
in one line naming ``$DEEPEP_ENV_BUILD_ROOT``. The path cannot be made per user instead (it is in
the bytes), so a second user of one machine builds under a root of their own, with other ids
(docs/build-id.md, "The build root is private")."""
from __future__ import annotations

import contextlib
import grp
import os
import pwd
import re
import stat
from pathlib import Path
from typing import NoReturn, Optional

from deepep_env.base.atomic import try_create_in
from deepep_env.base.errors import UserError

DEFAULT_BUILD_ROOT = "/tmp/deepep-env-build"
ENV_VAR = "DEEPEP_ENV_BUILD_ROOT"
_SAFE = re.compile(r"[A-Za-z0-9._+/-]+")


def configured() -> Path:
    """``$DEEPEP_ENV_BUILD_ROOT``, else the default; refused in one line when not absolute. Reads only."""
    raw = os.environ.get(ENV_VAR) or DEFAULT_BUILD_ROOT
    accepted = f"an absolute directory below /, of letters, digits and . _ + - / only, e.g. {DEFAULT_BUILD_ROOT}"
    if not raw.startswith("/"):
        raise UserError(f"{ENV_VAR} must be an absolute path, not {raw!r}", field=ENV_VAR, accepted=accepted)
    if not _SAFE.fullmatch(raw):
        # the root is written into compiler flags and build scripts' paths: a space or a quote breaks them
        raise UserError(f"{ENV_VAR}={raw!r} has characters build scripts do not quote", field=ENV_VAR,
                        accepted=accepted)
    root = "/" + os.path.normpath(raw).lstrip("/")          # one spelling per folder: //a/./b/ is /a/b
    if root == "/":
        raise UserError(f"{ENV_VAR} must not be / (builds make and remove folders in it)", field=ENV_VAR,
                        accepted=accepted)
    return Path(root)


def moved() -> Optional[str]:
    """The configured root when it is not the default (it goes into every build id), else None
    (no field: the ids of every build under the default root stay what they were)."""
    root = str(configured())
    return None if root == DEFAULT_BUILD_ROOT else root


def ensure() -> Path:
    """The build root, this user's alone (:func:`_check_above`, :func:`_check_root`), made ``0755`` with
    the folders above it when missing; one line when it cannot be made, is not private or cannot be
    written. Every folder that exists is checked before anything is made or changed (issue 52.1): the
    mode of a folder this tool did not make is never changed."""
    root = configured()
    try:
        _check_above(root)
        if os.path.lexists(root):
            _check_root(root)
        for folder in (*reversed(root.parents), root):
            if not os.path.lexists(folder):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(folder, 0o755)     # not Path.mkdir(parents=True): its parents get the umask's mode
        _check_above(root)
        _check_root(root)
        try_create_in(root)
    except OSError as exc:
        raise UserError(f"build root {root} is not writable ({exc.strerror or exc})", field=ENV_VAR,
                        accepted=f"a writable absolute directory (set {ENV_VAR}; a moved root moves every build id)") \
            from None
    return root


def private_folder(root: Path, name: str) -> Path:
    """``root/name`` (``.locks``, ``.tools``): made ``0700`` when missing; an existing one must be a
    directory (not a link) of this user's that nobody else can write, else one line (issue 52.7).
    Its mode is never changed."""
    d = root / name
    with contextlib.suppress(FileExistsError):
        os.mkdir(d, 0o700)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode):
        _refuse(root, f"{name} in it is not a directory")
    if st.st_uid != os.geteuid():
        _refuse(root, f"{name} in it belongs to {_owner(st.st_uid)}")
    if _others_can_write(st):
        _refuse(root, f"other users can write {name} in it (mode {stat.S_IMODE(st.st_mode):04o}; "
                      f"chmod go-w {d} if it is yours)")
    return d


def _check_above(root: Path) -> None:
    """The folders above the root are root's or ours and, where others can write them, sticky (as /tmp
    is): else another user could rename the root away and put theirs in its place."""
    me = os.geteuid()
    for above in reversed(root.parents):
        if not os.path.lexists(above):
            return                                # made by ensure, 0755, this user's
        st = os.stat(above)
        if st.st_uid not in (0, me):
            _refuse(root, f"{above} above it belongs to {_owner(st.st_uid)}")
        if _others_can_write(st) and not st.st_mode & stat.S_ISVTX:
            _refuse(root, f"other users can write {above} above it, and so replace the root")


def _check_root(root: Path) -> None:
    """The root is ours (a link to it too), others cannot write it, and so is every entry directly in
    it. A root others can write (a shared folder such as ``/tmp``, or a root deepep-env made ``1777``
    until issue 39) is refused in one line and left as it is (issue 52.1: it was narrowed in place)."""
    me = os.geteuid()
    link, st = os.lstat(root), os.stat(root)
    if not stat.S_ISDIR(st.st_mode):
        raise UserError(f"build root {root} is not a directory", field=ENV_VAR, accepted=_ACCEPTED)
    if link.st_uid not in (0, me) or st.st_uid != me:
        _refuse(root, f"it belongs to {_owner(st.st_uid if st.st_uid != me else link.st_uid)}")
    if _others_can_write(st):
        _refuse(root, f"other users can write it (mode {stat.S_IMODE(st.st_mode):04o}; a shared folder is never "
                      f"changed: chmod go-w,-t {root} if it is yours alone)")
    for entry in os.scandir(root):
        if (uid := entry.stat(follow_symlinks=False).st_uid) != me:
            _refuse(root, f"{entry.name} in it belongs to {_owner(uid)} (left from when the root was shared; remove it)")


def _others_can_write(st: os.stat_result) -> bool:
    """Write for all, or for a group that is not this user's own: a user-private group (umask 002, the
    group named like the user, no other member listed) holds only this user."""
    if st.st_mode & 0o002:
        return True
    if not st.st_mode & 0o020:
        return False
    try:
        group, me = grp.getgrgid(st.st_gid), pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return True
    return not (st.st_gid == os.getegid() and group.gr_name == me and set(group.gr_mem) <= {me})


_ACCEPTED = f"a folder of your own that no other user can write, e.g. {ENV_VAR}=/tmp/deepep-env-build-$USER " \
            "(a moved root moves every build id: install substitutes the lock's packages instead of rebuilding them)"


def _refuse(root: Path, why: str) -> NoReturn:
    raise UserError(f"build root {root} is not this user's alone: {why}; builds there could be changed by another "
                    "user", field=ENV_VAR, accepted=_ACCEPTED)


def _owner(uid: int) -> str:
    """``uid 1001 (alice)``."""
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"
