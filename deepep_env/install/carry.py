"""A carry: one archive holding what a machine without network needs to install environments from
their lock (``deepep-env carry ENV... --to FILE``; issue 53, after pixi-pack).

The archive is a gzip'd tar whose bytes depend on its content only: members sorted by name, owner
and group 0 with no names, mtime 0, modes 0644 (0755 for an executable file), gzip without a name or
a time. Its first member, ``carry.json`` (format ``deepep-env/carry/v1``), names the envs and the
digest of each one's lock section, and every other member by sha256 and size (a link by target):

    carry.json                      the manifest
    lock/pixi.lock                  the lock the envs were carried from
    pkgs/<subdir>/<file>.conda      each locked package this machine has (a URL's file, the project's
                                    channel, the store, the verified download cache, a mirror), checked
                                    against the lock's sha256
    sources/trees/<hex>/...         else the pinned sources to rebuild a package of ours from (the
    sources/patches/<hex>           source cache's entries, by content)
    wheels/<file>.whl               deepep-env's runtime dependencies (data/carry-requirements.txt, each by
                                    sha256) and deepep-env itself, as a wheel built here deterministically

Nothing in it names a path of the machine that made it, so two clones at different paths, with
their own state folders, make the same bytes from the same lock and the same upstream trees.
:func:`check_carry` verifies an archive against its manifest; :func:`unpack_carry` puts it where an
install reads it (packages as the mirror of their channels, sources into the source cache).
"""
from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Iterator, Optional, Sequence
from urllib.parse import urlsplit

import deepep_env
from deepep_env.base.channels.urls import MIRRORS_ENV, channel_mirrors, channel_url, url_to_path
from deepep_env.base.errors import UserError
from deepep_env.base.hashing import file_sha256, tree_sha256
from deepep_env.builder.plan import plan as build_plan
from deepep_env.envspec import load_resolved
from deepep_env.formats.lockfile import LockData, LockedPackage, build_id_of, read_lock
from deepep_env.install.fetch import cache_root, parse_mirrors
from deepep_env.install.installer import InstallResult, install_env
from deepep_env.lock.digest import env_digests
from deepep_env.sources import SourceCache, wants_for_nodes

if TYPE_CHECKING:  # annotations only: no import at run time
    from deepep_env.base.project import Project
    from deepep_env.builder.build import Progress

FORMAT = "deepep-env/carry/v1"
MANIFEST = "carry.json"
REQUIREMENTS = Path(deepep_env.__file__).resolve().parent / "data" / "carry-requirements.txt"
HOST_DEBS = Path(deepep_env.__file__).resolve().parent / "data" / "carry-host.txt"
# The GPU image's python (CPython 3.12, x86_64): the wheels pip downloads for it.
PIP_PLATFORM = ("--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:",
                "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_5_x86_64",
                "--platform", "manylinux1_x86_64", "--platform", "linux_x86_64")
WHEEL_DATE = (1980, 1, 1, 0, 0, 0)


@dataclass
class Member:
    """One file (or link) of the carry: its archive name and its bytes (or target)."""

    name: str
    data: bytes = b""
    executable: bool = False
    link: Optional[str] = None
    path: Optional[Path] = None     # the bytes are this file's, streamed when written (packages are large)
    sha: Optional[str] = None       # hex, when known already (a package checked against the lock)

    def digest(self) -> str:
        if self.sha is None:
            self.sha = file_sha256(self.path)[7:] if self.path is not None else hashlib.sha256(self.data).hexdigest()
        return self.sha

    def size(self) -> int:
        return self.path.stat().st_size if self.path is not None else len(self.data)

    def stream(self) -> IO[bytes]:
        return open(self.path, "rb") if self.path is not None else io.BytesIO(self.data)

    def entry(self) -> dict[str, object]:
        if self.link is not None:
            return {"link": self.link}
        entry: dict[str, object] = {"sha256": self.digest(), "size": self.size()}
        if self.executable:
            entry["executable"] = True
        return entry


@dataclass
class CarryPlan:
    """What :func:`make_carry` writes, before it is written."""

    envs: dict[str, dict[str, str]]                     # env → platform → lock section digest
    members: list[Member] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)   # pkgs/ members
    rebuild: list[str] = field(default_factory=list)    # locked packages carried as sources instead
    wheels: list[str] = field(default_factory=list)
    made_here: dict[str, int] = field(default_factory=dict)   # channel URL → packages the target makes itself
    sources_here: dict[str, str] = field(default_factory=dict)   # source digest → its label, left to the target
    leave: tuple[str, ...] = ()                                  # --source-here: source names or digests
    left: set[str] = field(default_factory=set)                  # those of ``leave`` a rebuild reads
    prefer_built: tuple[str, ...] = ()   # with ``sources``: these packages as built when this machine has them


# --- making ------------------------------------------------------------------------------------

def _file_member(name: str, path: Path) -> Member:
    return Member(name, path=path, executable=bool(path.stat().st_mode & stat.S_IXUSR))


def _package_file(q: LockedPackage, project: Project) -> Optional[Path]:
    """This machine's copy of a locked package with the lock's sha256, or None."""
    name = q.file_name or Path(urlsplit(q.url).path).name
    want = f"sha256:{q.sha256}"
    cands: list[Path] = []
    if q.url.startswith("file://"):
        cands.append(url_to_path(q.url))
    for url, d in channel_mirrors().items():
        if q.url.startswith(url):
            cands.append(d / q.url[len(url):])
    cands += sorted(Path(project.channel).glob(f"*/{name}"))
    if hex10 := build_id_of(q.build):
        cands += sorted(Path(project.store).glob(f"{hex10}*/*/{name}"))
    cands.append(cache_root() / "deepep-env-verified" / f"{q.sha256}-{name}")
    return next((c for c in cands if c.is_file() and file_sha256(c) == want), None)


def _closure(packages: Sequence[str], nodes: Sequence) -> list:
    by = {n.package: n for n in nodes}
    want: set[str] = set()
    stack = list(packages)
    while stack:
        p = stack.pop()
        if p not in want and p in by:
            want.add(p)
            stack += list(by[p].deps) + list(by[p].run_deps)
    return [n for n in nodes if n.package in want]


def _tree_members(root: Path, prefix: str) -> Iterator[Member]:
    for p in sorted(root.rglob("*")):
        rel = f"{prefix}/{p.relative_to(root).as_posix()}"
        if p.is_symlink():
            yield Member(rel, link=os.readlink(p))
        elif p.is_file():
            yield _file_member(rel, p)


def _sources_for(env: str, project: Project, builds: Sequence[str], missing: Sequence[str],
                 plan: CarryPlan) -> list[Member]:
    """The source cache's entries a rebuild of the locked ``builds`` reads (but those ``plan.leave``
    names: recorded in ``plan.sources_here``); a refusal naming the first one the cache lacks."""
    nodes = list(build_plan(load_resolved(env, project), project).nodes)
    planned = {n.build_string for n in nodes}
    if not_here := [m for m, b in zip(missing, builds) if b not in planned]:
        raise UserError(f"{', '.join(not_here)} is in no channel, store or cache here, and this machine "
                        f"plans other build ids for it (the spec, recipes or host moved since the lock)", field=env,
                        accepted=f"carry from the machine that built it, or `deepep-env lock {env} --check` here")
    closure = _closure([n.package for n in nodes if n.build_string in builds], nodes)
    cache = SourceCache(Path(project.source_cache).resolve())
    out: list[Member] = []
    for w in wants_for_nodes([n for n in closure if not n.meta.get("local_source")]):
        if w.digest and (w.name in plan.leave or w.digest in plan.leave):
            plan.sources_here[w.digest] = w.label
            plan.left.add(w.name if w.name in plan.leave else w.digest)
            continue
        found = (cache.tree(w.digest) if w.kind == "source" else cache.patch(w.digest)) if w.digest else None
        if found is None:
            raise UserError(f"{', '.join(missing)} is in no channel, store or cache here, and the source "
                            f"{w.label} ({w.digest or 'unpinned'}) it is rebuilt from is not in the source cache",
                            field=env,
                            accepted=f"`deepep-env install {env}` or `deepep-env fetch {env}` first")
        hexd = w.digest.split(":", 1)[-1] if w.digest else ""
        got = tree_sha256(found) if w.kind == "source" else file_sha256(found)
        if got != w.digest:
            raise UserError(f"the source cache's {w.label} hashes to {got[7:23]}…, its pin is {hexd[:16]}…",
                            file=found, field=w.name, accepted="a source cache filled by `deepep-env fetch`, unmodified")
        out += (list(_tree_members(found, f"sources/trees/{hexd}")) if w.kind == "source"
                else [Member(f"sources/patches/{hexd}", found.read_bytes())])
    return out


def _env_members(env: str, data: LockData, project: Project, plan: CarryPlan, *, sources: bool = False) -> None:
    """ENV's locked packages into the plan: each this machine has, else (a build of ours) its sources;
    ``sources``: every build of ours as its sources (smaller; the offline machine rebuilds and checks it);
    a package of a ``plan.made_here`` channel is left to the offline machine (counted, not carried)."""
    le = data.env(env)
    if le is None:
        raise UserError(f"the lock has no environment {env!r}", file=data.path, accepted=f"`deepep-env lock {env}` first")
    missing: list[str] = []
    for subdir_pkgs in le.packages.values():
        for q in subdir_pkgs:
            if q.kind != "conda" or not q.sha256:
                raise UserError(f"{env}: {q.name} {q.version} is not a conda package with a sha256 in the lock",
                                field=q.name, accepted="a lock written by `deepep-env lock`")
            here = next((u for u in plan.made_here if q.url.startswith(u)), None)
            if here is not None:
                plan.made_here[here] += 1
                continue
            name = q.file_name or Path(urlsplit(q.url).path).name
            arc = f"pkgs/{q.subdir}/{name}"
            as_source = sources and build_id_of(q.build) and q.name not in plan.prefer_built
            path = None if as_source else _package_file(q, project)
            if path is not None:
                plan.members.append(Member(arc, path=path, sha=q.sha256))
                plan.packages.append(arc)
            elif build_id_of(q.build):
                missing.append(f"{q.name} {q.version} {q.build}")
            else:
                raise UserError(f"{env}: {q.name} {q.version} {q.build} (sha256 {q.sha256[:16]}…) is in no channel, "
                                f"store or download cache here, and it is not a package deepep-env rebuilds",
                                field=q.name, accepted=f"`deepep-env install {env}` once on this machine, then carry")
    if missing:
        builds = [m.rsplit(" ", 1)[1] for m in missing]
        plan.members += _sources_for(env, project, builds, missing, plan)
        plan.rebuild += missing


def tool_wheel() -> Member:
    """deepep-env itself as a pure-python wheel, the same bytes from any checkout of the same code:
    the ``deepep_env`` tree (no bytecode), fixed dates and modes, no Requires-Dist (the carry's pinned
    wheels are installed beside it with ``--no-deps``). The whole tool, not only the activation that
    the environments' own package holds (builder/toolpkg.py): the offline machine runs every command."""
    src = Path(deepep_env.__file__).resolve().parent
    ver = deepep_env.__version__
    dist = f"deepep_env-{ver}.dist-info"
    files: list[tuple[str, bytes]] = [(f"deepep_env/{p.relative_to(src).as_posix()}", p.read_bytes())
                                      for p in sorted(src.rglob("*"))
                                      if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    files += [(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: deepep-env\nVersion: {ver}\n".encode()),
              (f"{dist}/WHEEL", b"Wheel-Version: 1.0\nGenerator: deepep-env carry\nRoot-Is-Purelib: true\n"
                                b"Tag: py3-none-any\n"),
              (f"{dist}/entry_points.txt", b"[console_scripts]\ndeepep-env = deepep_env.cli.main:entry\n")]
    record = "".join(f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},"
                     f"{len(d)}\n" for n, d in files) + f"{dist}/RECORD,,\n"
    files.append((f"{dist}/RECORD", record.encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files:
            info = zipfile.ZipInfo(n, WHEEL_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, d)
    return Member(f"wheels/deepep_env-{ver}-py3-none-any.whl", buf.getvalue())


def pinned_wheels(wheels_dir: Optional[Path], cache: Path) -> list[Member]:
    """The wheels of :data:`REQUIREMENTS`, each by PyPI's sha256: from ``wheels_dir``, else downloaded
    (``pip download --require-hashes``) into ``cache`` (the state folder's, reused)."""
    pins = {}
    for line in REQUIREMENTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            pins[line.split("--hash=sha256:")[1].strip()] = line.split()[0]
    src = wheels_dir
    if src is None:
        cache.mkdir(parents=True, exist_ok=True)
        have = {file_sha256(p)[7:] for p in cache.glob("*.whl")}
        if set(pins) - have:
            cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--require-hashes", *PIP_PLATFORM,
                   "-d", str(cache), "-r", str(REQUIREMENTS)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                raise UserError(f"pip could not download the pinned wheels: {tail}", file=REQUIREMENTS,
                                accepted="network to PyPI, or --wheels DIR with those wheels")
        src = cache
    by_sha = {file_sha256(p)[7:]: p for p in sorted(Path(src).glob("*.whl"))}
    lacking = [req for sha, req in sorted(pins.items(), key=lambda kv: kv[1]) if sha not in by_sha]
    if lacking:
        raise UserError(f"{src} lacks the pinned wheels of {', '.join(lacking)} (by sha256)", file=REQUIREMENTS,
                        field="--wheels", accepted="a folder with the wheels data/carry-requirements.txt pins")
    return [Member(f"wheels/{by_sha[sha].name}", path=by_sha[sha], sha=sha) for sha in sorted(pins)]


def host_debs(debs_dir: Optional[Path], cache: Path) -> list[Member]:
    """The .debs :data:`HOST_DEBS` pins, each by sha256: from ``debs_dir``, else ``apt-get download``
    by version into ``cache`` (the state folder's, reused)."""
    pins = [ln.split() for ln in HOST_DEBS.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    src = debs_dir or cache
    if debs_dir is None and any(not (cache / f).is_file() or file_sha256(cache / f)[7:] != sha for _, sha, f in pins):
        cache.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["apt-get", "download", "-q=2", *[p for p, _, _ in pins]], cwd=cache,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise UserError(f"apt-get could not download the pinned debs: {tail}", file=HOST_DEBS,
                            accepted="Debian's archive (apt-get), or --debs DIR with those files")
    out = []
    for pkg, sha, name in pins:
        f = Path(src) / name
        if not f.is_file() or file_sha256(f)[7:] != sha:
            raise UserError(f"{src} lacks {name} ({pkg}) with sha256 {sha[:16]}…", file=HOST_DEBS, field="--debs",
                            accepted="a folder with the .debs data/carry-host.txt pins")
        out.append(Member(f"host/debs/{name}", path=f, sha=sha))
    return out


def extract_deb(deb: Path, dest: Path) -> None:
    """A .deb's files (its ``data.tar.*``, an ar member) under ``dest``, as ``dpkg -x`` would: stdlib only."""
    blob = deb.read_bytes()
    if not blob.startswith(b"!<arch>\n"):
        raise UserError(f"{deb.name} is not a .deb (no ar header)", file=deb, accepted="a Debian package")
    pos = 8
    while pos + 60 <= len(blob):
        name, size = blob[pos:pos + 16].decode().strip().rstrip("/"), int(blob[pos + 48:pos + 58].decode().strip())
        body = blob[pos + 60:pos + 60 + size]
        if name.startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tar:
                tar.extractall(dest, filter="data")
            return
        pos += 60 + size + (size & 1)
    raise UserError(f"{deb.name} has no data.tar member", file=deb, accepted="a Debian package")


def plan_carry(envs: Sequence[str], project: Project, *, wheels: bool = True,
               wheels_dir: Optional[Path] = None, debs: bool = False, debs_dir: Optional[Path] = None,
               sources: bool = False, made_here: Sequence[str] = (), source_here: Sequence[str] = (),
               prefer_built: Sequence[str] = ()) -> CarryPlan:
    """Everything :func:`make_carry` writes for ``envs`` (pixi environment names) of the project's lock.
    ``made_here``: channels (URL or name) whose packages the offline machine makes itself (`deepep-env
    repack`) and serves with ``$DEEPEP_ENV_MIRRORS``; install checks each against the lock all the same.
    ``source_here``: sources (a name or a ``sha256:`` digest) left out of the carry; the offline machine
    puts them in its source cache (``deepep-env fetch ENV --from DIR``), where each is checked by its pin.
    ``prefer_built``: with ``sources``, these packages (by name) go as built wherever this machine has the
    lock's bytes (a DeepEP built without a GPU, whose toolkit wheels are too big to carry), else as sources."""
    if not envs:
        raise UserError("name at least one environment", field="ENV", accepted=", ".join(project.spec_names()))
    lock_path = project.pixi_lock
    data = read_lock(lock_path)
    _check_options(envs, data, made_here, source_here, prefer_built)
    cp = CarryPlan(envs={e: env_digests(data, e) for e in sorted(set(envs))},
                   made_here={channel_url(c): 0 for c in made_here}, leave=tuple(source_here),
                   prefer_built=tuple(prefer_built))
    cp.members.append(Member("lock/pixi.lock", lock_path.read_bytes()))
    for env in sorted(set(envs)):
        _env_members(env, data, project, cp, sources=sources)
    cp.members.append(tool_wheel())
    if wheels:
        cp.members += pinned_wheels(wheels_dir, Path(project.state) / "carry" / "wheels")
    if debs or debs_dir is not None:
        cp.members += host_debs(debs_dir, Path(project.state) / "carry" / "debs")
    cp.wheels = sorted(m.name for m in cp.members if m.name.startswith("wheels/"))
    if unused_src := [s for s in source_here if s not in cp.left]:
        raise UserError(f"no carried rebuild reads a source {unused_src[0]!r}", field="--source-here",
                        accepted="a source name or sha256: digest of a package carried as its sources (--sources)")
    if unused := [u for u, n in cp.made_here.items() if n == 0]:
        raise UserError(f"no locked package of {', '.join(envs)} comes from {unused[0]}", field="--made-here",
                        accepted="a channel URL or name the lock's packages come from")
    return cp


def _check_options(envs: Sequence[str], data: LockData, made_here: Sequence[str], source_here: Sequence[str],
                   prefer_built: Sequence[str]) -> None:
    """The options' values, before anything is read or packed: one line for the first bad one."""
    for opt, vals, what in (("--made-here", made_here, "a channel URL or name"),
                            ("--source-here", source_here, "a source name or its sha256: digest"),
                            ("--prefer-built", prefer_built, "a locked package name")):
        if any(not v.strip() for v in vals):
            raise UserError("an empty value", field=opt, accepted=what)
    locked = {q.name for e in envs if (le := data.env(e)) for ps in le.packages.values() for q in ps}
    if unknown := [n for n in prefer_built if n not in locked]:
        raise UserError(f"no carried environment locks a package named {unknown[0]!r}", field="--prefer-built",
                        accepted=", ".join(sorted(locked)) or "a locked package name")


def manifest(cp: CarryPlan, members: Sequence[Member]) -> bytes:
    doc = {"format": FORMAT, "tool": deepep_env.__version__, "envs": cp.envs, "lock": "lock/pixi.lock",
           "packages": sorted(set(cp.packages)), "rebuild": sorted(set(cp.rebuild)), "wheels": cp.wheels,
           "members": {m.name: m.entry() for m in members}}
    if cp.made_here:   # only when used: a carry without them keeps the bytes it always had
        doc["made_here"] = sorted(cp.made_here)
    if cp.sources_here:
        doc["sources_here"] = dict(sorted(cp.sources_here.items()))
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


def _tarinfo(m: Member) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(m.name)
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    ti.mtime = 0
    if m.link is not None:
        ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, m.link, 0o777
    else:
        ti.size, ti.mode = m.size(), 0o755 if m.executable else 0o644
    return ti


def write_archive(members: Sequence[Member], out: Path) -> None:
    """The deterministic archive (module docstring), written beside ``out`` then renamed into place."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.part")
    try:
        with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                   compresslevel=6) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
                for m in members:
                    if m.link is not None:
                        tar.addfile(_tarinfo(m))
                        continue
                    with m.stream() as fh:
                        tar.addfile(_tarinfo(m), fh)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()


def make_carry(envs: Sequence[str], project: Project, out: Path, *, wheels: bool = True,
               wheels_dir: Optional[Path] = None, debs: bool = False,
               debs_dir: Optional[Path] = None, sources: bool = False,
               made_here: Sequence[str] = (), source_here: Sequence[str] = (),
               prefer_built: Sequence[str] = ()) -> tuple[CarryPlan, str]:
    """``deepep-env carry ENV... --to FILE``: returns the plan and the archive's sha256."""
    cp = plan_carry(envs, project, wheels=wheels, wheels_dir=wheels_dir, debs=debs, debs_dir=debs_dir,
                    sources=sources, made_here=made_here, source_here=source_here,
                    prefer_built=prefer_built)
    uniq: dict[str, Member] = {}
    for m in cp.members:   # a package two envs share is carried once; one name with two contents is refused
        if m.name in uniq and uniq[m.name].digest() != m.digest():
            raise UserError(f"two different files would be carried as {m.name} (two channels with one file name)",
                            field="ENV", accepted="carry those environments in separate archives")
        uniq.setdefault(m.name, m)
    members = [uniq[n] for n in sorted(uniq)]
    ordered = [Member(MANIFEST, manifest(cp, members)), *members]
    out.parent.mkdir(parents=True, exist_ok=True)
    write_archive(ordered, out)
    check_carry(out)   # a file that changed while it was packed is caught here, not on the offline machine
    return cp, file_sha256(out)


# --- checking and unpacking --------------------------------------------------------------------

@dataclass
class Carry:
    """A checked carry: its manifest (every member's sha256 and size, links by target)."""

    path: Path
    doc: dict
    links: dict[str, str]
    executables: set[str] = field(default_factory=set)

    @property
    def files(self) -> list[str]:
        return sorted(n for n, e in (self.doc.get("members") or {}).items() if "link" not in e)


MANIFEST_MAX = 64 << 20


def _refuse(path: Path, why: str) -> UserError:
    return UserError(f"not a good carry: {why}", file=path, exit_code=1,
                     accepted="an archive written by `deepep-env carry`, unmodified")


def _safe_name(name: str) -> bool:
    return not (name.startswith("/") or ".." in name.split("/") or "" in name.split("/"))


def _hash_stream(fh: IO[bytes], sink: Optional[IO[bytes]] = None) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    for block in iter(lambda: fh.read(1 << 20), b""):
        h.update(block)
        n += len(block)
        if sink is not None:
            sink.write(block)
    return h.hexdigest(), n


@contextlib.contextmanager
def _members(path: Path) -> Iterator[Iterator[tuple[tarfile.TarInfo, Optional[IO[bytes]]]]]:
    """The archive's members in order, each with its stream (None for a link); any damage to the
    archive itself is one refusal line."""
    def gen(tar: tarfile.TarFile) -> Iterator[tuple[tarfile.TarInfo, Optional[IO[bytes]]]]:
        for ti in tar:
            if not _safe_name(ti.name):
                raise _refuse(path, f"member {ti.name!r} leaves the archive's folder")
            if ti.issym():
                yield ti, None
            elif ti.isfile():
                yield ti, tar.extractfile(ti)
            else:
                raise _refuse(path, f"member {ti.name!r} is neither a file nor a link")
    try:
        with tarfile.open(path, "r|gz") as tar:
            yield gen(tar)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise _refuse(path, f"unreadable ({exc})") from None


def check_carry(path: Path) -> Carry:
    """Read ``path`` and check it against its manifest: every member there with its sha256, size and
    mode, nothing outside it, links only inside a source tree and nothing under a link; the first
    difference is one refusal line. Streams: a carry is never held in memory."""
    doc: Optional[dict] = None
    got: dict[str, tuple[str, int]] = {}
    links: dict[str, str] = {}
    exes: set[str] = set()
    with _members(path) as members:
        for ti, fh in members:
            if doc is None:
                if ti.name != MANIFEST or fh is None or ti.size > MANIFEST_MAX:
                    raise _refuse(path, f"its first member is not {MANIFEST}")
                try:
                    doc = json.loads(fh.read())
                except ValueError as exc:
                    raise _refuse(path, f"{MANIFEST} is not JSON ({exc})") from None
                if not isinstance(doc, dict) or doc.get("format") != FORMAT:
                    fmt = doc.get("format") if isinstance(doc, dict) else "?"
                    raise _refuse(path, f"{MANIFEST} is not {FORMAT} (format {fmt!r})")
                continue
            if ti.name in got or ti.name in links:
                raise _refuse(path, f"member {ti.name} is there twice")
            if fh is None:
                links[ti.name] = ti.linkname
            else:
                got[ti.name] = _hash_stream(fh)
                if ti.mode & 0o100:
                    exes.add(ti.name)
    if doc is None:
        raise _refuse(path, "it is empty")
    _compare(path, doc.get("members") or {}, got, links, exes)
    return Carry(path, doc, links, exes)


def _compare(path: Path, want: dict, got: dict[str, tuple[str, int]], links: dict[str, str], exes: set[str]) -> None:
    for name in sorted(set(got) | set(links)):
        if name not in want:
            raise _refuse(path, f"member {name} is not in its manifest")
    for name in sorted(links):
        parts = name.split("/")
        if parts[:2] != ["sources", "trees"] or len(parts) < 4:
            raise _refuse(path, f"link {name} is outside a source tree")
    for name in sorted(set(got) | set(links)):
        parents = ["/".join(name.split("/")[:i]) for i in range(1, name.count("/") + 1)]
        if any(p in links for p in parents):
            raise _refuse(path, f"member {name} lies under a link")
    for name, entry in sorted(want.items()):
        if "link" in entry:
            if links.get(name) != entry["link"]:
                raise _refuse(path, f"link {name} is missing or points elsewhere")
            continue
        if name not in got:
            raise _refuse(path, f"member {name} is missing")
        sha, size = got[name]
        if bool(entry.get("executable")) != (name in exes):
            raise _refuse(path, f"member {name} has another mode than its manifest says")
        if sha != entry.get("sha256") or size != entry.get("size"):
            raise _refuse(path, f"member {name} has sha256 {sha[:16]}… ({size} bytes), its manifest says "
                                f"{str(entry.get('sha256'))[:16]}… ({entry.get('size')} bytes)")


@dataclass
class Unpacked:
    root: Path                 # the carry's packages folder: pkgs/<subdir>/<file>
    envs: dict[str, dict[str, str]]
    made_here: list[str] = field(default_factory=list)   # channels this machine serves itself
    sources_here: dict[str, str] = field(default_factory=dict)   # sources it has in its cache (digest → label)
    sources: int = 0
    packages: int = 0
    rdma_core: Optional[Path] = None   # the carried rdma-core headers, unpacked: DEEPEP_ENV_RDMA_CORE


def unpack_carry(path: Path, project: Project) -> Unpacked:
    """Check the carry, then put its packages under the state folder (``carry/<sha16>/pkgs``), its
    sources into the project's source cache (each tree re-hashed: the cache is by content) and its
    rdma-core debs, extracted, beside them. Every file written is hashed as it is written and
    compared with the manifest again (the archive could change between the check and the copy)."""
    c = check_carry(path)
    want = c.doc.get("members") or {}
    root = Path(project.state) / "carry" / file_sha256(path)[7:23]
    cache = SourceCache(Path(project.source_cache).resolve())
    trees: dict[str, Optional[Path]] = {}
    up = Unpacked(root / "pkgs", c.doc.get("envs") or {}, list(c.doc.get("made_here") or []),
                  dict(c.doc.get("sources_here") or {}))
    with _members(path) as members:
        for ti, fh in members:
            parts = ti.name.split("/")
            if parts[:2] == ["sources", "trees"]:
                if parts[2] not in trees:   # None: the cache has that tree already
                    trees[parts[2]] = (None if cache.tree(f"sha256:{parts[2]}")
                                       else Path(tempfile.mkdtemp(prefix="carry-", dir=cache.scratch())))
                tmp = trees[parts[2]]
                if tmp is not None:
                    _place(c, ti, fh, tmp / "/".join(parts[3:]), want)
            elif parts[:2] == ["sources", "patches"] and fh is not None:
                blob = fh.read()
                if hashlib.sha256(blob).hexdigest() != parts[2] or parts[2] != want[ti.name]["sha256"]:
                    raise _refuse(path, f"patch {ti.name} does not hash to its name")
                cache.add_patch(blob, f"sha256:{parts[2]}")
                up.sources += 1
            elif parts[0] in ("pkgs", "host") and fh is not None:
                _place(c, ti, fh, root / ti.name, want)
                up.packages += parts[0] == "pkgs"
    for hexd, tmp in sorted(trees.items()):
        if tmp is not None:
            got = tree_sha256(tmp)
            if got != f"sha256:{hexd}":
                shutil.rmtree(tmp, ignore_errors=True)
                raise _refuse(path, f"source tree {hexd[:16]}… unpacks to {got[7:23]}…")
            cache.add_tree(tmp, digest=got, move=True)
        up.sources += 1
    debs = sorted(root / n for n in c.files if n.startswith("host/debs/"))
    if debs:   # rdma-core's headers beside /, never into it: DEEPEP_ENV_RDMA_CORE names them
        host = root / "host" / "rdma"
        if not (host / ".extracted").is_file():
            shutil.rmtree(host, ignore_errors=True)
            for deb in debs:
                extract_deb(deb, host)
            (host / ".extracted").write_text("")
        up.rdma_core = host / "usr"
    return up


def _place(c: Carry, ti: tarfile.TarInfo, fh: Optional[IO[bytes]], dst: Path, want: dict) -> None:
    """One member written to ``dst`` (a link as a link), its bytes checked against the manifest."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if fh is None:
        os.symlink(ti.linkname, dst)
        return
    part = dst.with_name(f".{dst.name}.{os.getpid()}.part")   # two installs may unpack one carry at once
    with open(part, "wb") as out:
        sha, _ = _hash_stream(fh, out)
    if sha != want[ti.name]["sha256"]:
        part.unlink()
        raise _refuse(c.path, f"member {ti.name} changed while it was unpacked")
    part.chmod(0o755 if ti.name in c.executables else 0o644)
    os.replace(part, dst)


def carry_mirrors(data: LockData, env: str, pkgs: Path, made_here: Sequence[str] = ()) -> list[str]:
    """``URL=DIR`` mirrors: every channel the env's locked packages come from, served by ``pkgs``, but
    the ``made_here`` channels (the offline machine's own mirrors serve those)."""
    le = data.env(env)
    out = set()
    for q in (q for ps in (le.packages.values() if le else ()) for q in ps):
        if any(q.url.startswith(u) for u in made_here):
            continue
        tail = f"{q.subdir}/{q.file_name or Path(urlsplit(q.url).path).name}"
        if q.url.endswith(tail) and "://" in q.url and not q.url.startswith("file://"):
            out.add(f"{q.url[:-len(tail)]}={pkgs}")
    return sorted(out)


def install_from_carry(env: str, project: Project, path: Path, *, prefix: Optional[str] = None,
                       mirrors: Sequence[str] = (), force: bool = False,
                       progress: Optional[Progress] = None) -> tuple[Unpacked, InstallResult]:
    """``deepep-env install ENV --from-carry FILE``: the carry checked and unpacked, then ENV installed
    from the project's lock with every channel it names served by the carry (each package checked
    against the lock's sha256 by the installer), a package of ours it lacks rebuilt from its sources."""
    up = unpack_carry(path, project)
    data = read_lock(project.pixi_lock)
    if env not in up.envs:
        raise UserError(f"{path} carries no environment {env!r}", file=path, field="ENV",
                        accepted=", ".join(sorted(up.envs)) or "none")
    if env_digests(data, env) != up.envs[env]:
        raise UserError(f"{env}: the project's lock section differs from the one {path} was carried from",
                        file=project.pixi_lock, field=env, accepted="the lock the carry was made from (lock/pixi.lock in it)")
    _check_made_here([u for u in up.made_here if _uses(data, env, u)], mirrors, path)
    _check_sources_here(up.sources_here, project, env, path)
    res = install_env(env, project, prefix=prefix, mirrors=[*mirrors, *carry_mirrors(data, env, up.root, up.made_here)],
                      force=force, progress=progress)
    return up, res


def _check_sources_here(sources_here: dict[str, str], project: Project, env: str, path: Path) -> None:
    """Each source the carry leaves to this machine must be in its source cache, before anything is built."""
    cache = SourceCache(Path(project.source_cache).resolve())
    for digest, label in sorted(sources_here.items()):
        if cache.tree(digest) is None and cache.patch(digest) is None:
            raise UserError(f"{path} leaves {label} ({digest[:23]}…) to this machine, and its source cache lacks it",
                            field="sources_here", accepted=f"`deepep-env fetch {env} --from DIR` with DIR holding it first")


def _uses(data: LockData, env: str, url: str) -> bool:
    le = data.env(env)
    return any(q.url.startswith(url) for ps in (le.packages.values() if le else ()) for q in ps)


def _check_made_here(made_here: Sequence[str], mirrors: Sequence[str], path: Path) -> None:
    """A channel the carry leaves to this machine must be mirrored here, before anything is installed."""
    have = set(channel_mirrors()) | set(parse_mirrors(mirrors))   # the installer's two sources, keyed as it keys them
    for url in made_here:
        if url not in have:
            raise UserError(f"{path} leaves the packages of {url} to this machine, and no mirror serves that channel here",
                            field=MIRRORS_ENV, accepted=f"{MIRRORS_ENV}='{url.rstrip('/')}=DIR' with DIR a folder "
                            "holding them (e.g. what `deepep-env repack DIR` wrote), or --mirror")


__all__ = ["install_from_carry", "FORMAT", "Carry", "CarryPlan", "Member", "Unpacked", "carry_mirrors", "check_carry", "make_carry",
           "plan_carry", "tool_wheel", "unpack_carry"]
