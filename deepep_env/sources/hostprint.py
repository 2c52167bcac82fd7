"""Host externals, fingerprinted: what a build reads from the machine, as facts that enter its id.

A host-mode build compiles against the machine's CUDA toolkit, host compiler, Python, PyTorch,
rdma-core headers and pip's NCCL/NVSHMEM (Spack's externals). Their *versions* are in the spec; the
bytes they put into a package (a compiler's patch release in ``.comment`` and DWARF, a header's
inline function, ``setuptools`` writing ``METADATA``) are not. So each external a node builds
against is fingerprinted here — tool versions as the tools print them, and the sha256 of the
headers and libraries the build reads — and the fingerprint is part of the build id
(docs/build-id.md §2): another host gives another id, never other bytes under the same one.

A fingerprint is a flat ``{fact: value}`` mapping, so two of them can be compared fact by fact
(:func:`differences`), and the lock's recorded one can name what this machine has changed.
A missing external is a fact too (``"missing: …"``): the fingerprint of a machine without CUDA.
"""
from __future__ import annotations

import functools
import glob
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from deepep_env.base.hashing import canonical_json, digest, file_sha256, tree_sha256
from deepep_env.base.run import run_child

SCHEME = "deepep-env/host-fingerprint/v1"
_TIMEOUT_S = 60

Facts = dict[str, str]


def _run(argv: list[str]) -> tuple[int, str]:
    r = run_child(argv, timeout=_TIMEOUT_S)
    return (127, r.why or "") if r.returncode is None else (r.returncode, r.stdout + r.stderr)


@functools.lru_cache(maxsize=None)
def _file_digest(path: str, size: int, mtime_ns: int, ino: int) -> str:
    return file_sha256(path)


def _named_digests(named_paths: Iterable[tuple[str, Path]]) -> dict[str, str]:
    """``{name: content sha256}`` for each (name, file) in order (symlinks resolved; a file that
    cannot be read is left out; a later file of the same name replaces an earlier one)."""
    named: dict[str, str] = {}
    for name, p in named_paths:
        try:
            st = p.stat()
        except OSError:
            continue
        named[name] = _file_digest(str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    return named


def files_digest(paths: list[Path]) -> str:
    """sha256 over ``{basename: content sha256}`` of the files (symlinks resolved); "none" when empty."""
    named = _named_digests((p.name, p) for p in sorted(set(paths)))
    return digest(canonical_json(named)) if named else "none"


@functools.lru_cache(maxsize=None)
def dir_digest(path: str) -> str:
    """tree_sha256 of a header folder (its real location: /usr/local/cuda/include is a link)."""
    real = Path(path).resolve()
    if not real.is_dir():
        return f"missing: {path}"
    return tree_sha256(real)


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


@functools.lru_cache(maxsize=None)
def compiler_version(cxx: str) -> str:
    """The compiler as it names itself (``g++ (Ubuntu 13.3.0-6ubuntu2~24.04.1) 13.3.0``): the
    distribution's patch release is in every object's ``.comment`` and DWARF producer."""
    rc, out = _run([cxx, "--version"])
    return _first_line(out) if rc == 0 else f"missing: {cxx}"


# The start files and runtime library a compiler driver links into every shared object it makes.
START_FILES = ("crt1.o", "crti.o", "crtn.o", "crtbeginS.o", "crtendS.o", "libgcc.a")


@functools.lru_cache(maxsize=None)
def start_files(cxx: str) -> tuple[Path, ...]:
    """Where ``cxx -print-file-name=X`` finds each of :data:`START_FILES` (absolute paths that exist;
    a driver prints the bare name for a file it does not have)."""
    found = []
    for name in START_FILES:
        rc, out = _run([cxx, f"-print-file-name={name}"])
        where = _last_line(out) if rc == 0 else ""
        if where and Path(where).is_absolute() and Path(where).is_file():
            found.append(Path(where))
    return tuple(found)


def start_files_digest(cxx: str) -> str:
    """:func:`files_digest` of a compiler's start files; "none" when it has none (or is missing)."""
    return files_digest(list(start_files(cxx)))


def _resolved_tool(cmd: str) -> str:
    where = shutil.which(cmd)
    return os.path.realpath(where) if where else cmd


# The build tools a host-mode CUDA build runs from PATH: NVSHMEM's CMake and Ninja, PyTorch's
# extension builder's Ninja, NCCL's make (conda mode takes them from the build environment, by
# sha256). A fact only when the tool is not the version every committed host-mode id was built with
# (the GPU image's: CMake and Ninja as the conda repack's wrappers name them, make as the image's
# `make --version` said in GPU round 6), so no id moved when they became facts; another CMake, Ninja
# or make gives another id.
BASELINE_BUILD_TOOLS = {"cmake": "4.4.3", "ninja": "1.13.2", "make": "4.3"}
_TOOL_VERSION = re.compile(r"(\d+\.\d+(\.\d+)?)")


@functools.lru_cache(maxsize=None)
def tool_version(tool: str) -> str:
    """``4.4.3`` from ``cmake version 4.4.3`` (the PATH's tool); ``missing`` when there is none."""
    where = shutil.which(tool)
    if not where:
        return "missing"
    rc, out = _run([where, "--version"])
    m = _TOOL_VERSION.search(_first_line(out)) if rc == 0 else None
    return m.group(1) if m else f"unknown: {_first_line(out)[:60]}"


def build_tool_facts() -> Facts:
    """``build_tool_<name>: version`` for each build tool that is not its baseline version."""
    return {f"build_tool_{t}": v for t, base in BASELINE_BUILD_TOOLS.items() if (v := tool_version(t)) != base}


def cuda_facts(meta: Mapping[str, Any]) -> Facts:
    """A host CUDA toolkit (``cuda_prefix``) and the host compiler nvcc drives; for a toolkit built
    from NVIDIA's wheels (``cuda_from = "wheel"``) see :func:`cuda_wheel_facts`."""
    if meta.get("cuda_from") == "wheel":
        return cuda_wheel_facts(meta)
    prefix = Path(str(meta.get("cuda_prefix") or "/usr/local/cuda"))
    nvcc = prefix / "bin" / "nvcc"
    rc, out = _run([str(nvcc), "--version"]) if nvcc.exists() else (127, "")
    real = prefix.resolve()
    static = [Path(p) for pat in ("lib64/*.a", "targets/*/lib/*.a") for p in glob.glob(str(real / pat))]
    return {
        "nvcc": _last_line(out) if rc == 0 else f"missing: {nvcc}",
        "headers": dir_digest(str(prefix / "include")),
        "static_libraries": files_digest(static),
        **host_compiler_facts(meta),
    }


def cuda_wheel_facts(meta: Mapping[str, Any]) -> Facts:
    """A toolkit from NVIDIA's wheels is a package of the graph (its id is a dependency of the node's),
    so only what the build still reads from this machine is a fact: the host compiler nvcc drives,
    and the headers of the CUDA libraries PyTorch's own headers include (cublas, cusparse, cusolver…),
    which come from the host Python's ``nvidia/cuNN/include`` (the wheels torch runs with) and are
    put beside the toolkit's (builder/cuda_home.py). With a wheel PyTorch those headers are its package's
    (a graph node, its id already an input), so nothing of them is read here."""
    if meta.get("torch_from") == "wheel":
        return {**host_compiler_facts(meta), "library_headers": "deepep-pytorch"}
    p = python_probe(str(meta.get("python_executable") or "python3"))
    where = p.get("cuda_libraries") or ""
    return {**host_compiler_facts(meta),
            "library_headers": dir_digest(str(Path(where) / "include")) if where else "none"}


def host_compiler_facts(meta: Mapping[str, Any]) -> Facts:
    host_cxx = str(meta.get("cuda_host_cxx") or "c++")
    facts = {
        "host_compiler": compiler_version(host_cxx),
        # crt1.o, crti.o, crtbeginS.o … are linked into every shared object: the system gcc's were in
        # deep-ep 1.2.1's extension while CUDAHOSTCXX named another g++ (docs/build-id.md §2)
        "host_compiler_start_files": start_files_digest(host_cxx),
        "system_compiler": compiler_version("c++"),
    }
    if _resolved_tool(host_cxx) != _resolved_tool("c++"):
        facts["system_compiler_start_files"] = start_files_digest("c++")
    return facts | build_tool_facts()


# Where a compiler looks last anyway: it ignores `-I` of these (so a prefix of /usr shadows nothing).
_SYSTEM_INCLUDE_DIRS = ("/usr/include", "/usr/local/include")


def headers_beside(include: Path, own: str) -> str:
    """sha256 over ``{relative path: content sha256}`` of every file under ``include`` outside its
    ``own`` folder; "" when there is none, or when ``include`` is a system include folder.

    The recipes put the whole ``include`` folder on the compiler's path, ahead of the toolkit's, so
    any header there (an ``nvml.h``, a ``cuda.h``) shadows the toolkit's own, and only ``infiniband/``
    was fingerprinted (found while tracing NVSHMEM's bytes, docs/build-id.md §2; not their cause)."""
    real = include.resolve()
    if not real.is_dir() or str(real) in _SYSTEM_INCLUDE_DIRS:
        return ""
    named = _named_digests((os.path.relpath(f, real), f) for f in _files_under(real, skip=own))
    return digest(canonical_json(named)) if named else ""


def _files_under(root: Path, skip: str) -> Iterator[Path]:
    """Every file under ``root`` but its top-level ``skip`` folder, linked folders followed once."""
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):   # a linked folder is read too
        here = os.path.realpath(dirpath)
        if here in seen:                                                   # a link loop: once
            dirnames[:] = []
            continue
        seen.add(here)
        if dirpath == str(root):
            dirnames[:] = [d for d in dirnames if d != skip]   # its own headers: the "headers" fact
        yield from (Path(dirpath, n) for n in filenames)


def rdma_core_facts(meta: Mapping[str, Any]) -> Facts:
    prefix = Path(str(meta.get("rdma_core_prefix") or "/usr"))
    libs = [Path(p) for pat in ("lib/libmlx5.so*", "lib/libibverbs.so*", "lib/*/libmlx5.so*", "lib/*/libibverbs.so*")
            for p in glob.glob(str(prefix / pat))]
    facts = {"headers": dir_digest(str(prefix / "include" / "infiniband")), "libraries": files_digest(libs)}
    # Absent when rdma-core's include folder holds only infiniband/ (no committed id moves for it).
    if other := headers_beside(prefix / "include", "infiniband"):
        facts["other_headers"] = other
    return facts


# Run by the host Python: what the build reads from it, PyTorch and pip's NVIDIA packages.
_PY_PROBE = r"""
import json, sys, sysconfig, importlib.util, importlib.metadata as md
def ver(d):
    try: return md.version(d)
    except Exception: return "missing"
def pkgdir(mod):
    try:
        s = importlib.util.find_spec(mod)
    except Exception:
        return ""
    return (list(s.submodule_search_locations or []) or [""])[0] if s else ""
import os
# setuptools' build_ext puts a venv's own include folder on every extension's -I (ahead of Python's):
# a header there shadows the interpreter's and torch's
venv_inc = os.path.join(sys.exec_prefix, "include") if sys.exec_prefix != sys.base_exec_prefix else ""
out = {"version": sys.version.split()[0], "include": sysconfig.get_paths().get("include", ""), "venv_include": venv_inc,
       "flags": {k: sysconfig.get_config_var(k) or "" for k in ("CFLAGS", "LDSHARED", "EXT_SUFFIX", "CC", "CXX")},
       "tools": {d: ver(d) for d in ("pip", "setuptools", "wheel", "packaging")},
       "torch": pkgdir("torch"), "nccl": pkgdir("nvidia.nccl"), "nvshmem": pkgdir("nvidia.nvshmem"),
       # NVIDIA's CUDA 13 wheels share one folder (nvidia/cu13: cublas, cusparse, … headers and libraries)
       "cuda_libraries": pkgdir("nvidia.cu13")}
try:
    import torch
    out["torch_facts"] = {"version": torch.__version__, "cuda": str(torch.version.cuda),
                          "cxx11_abi": str(torch._C._GLIBCXX_USE_CXX11_ABI)}
except Exception as e:
    out["torch_facts"] = {"version": "missing: " + type(e).__name__}
print(PROBE_MARK + json.dumps(out))
"""
# The probe's result line starts with this; anything else the interpreter prints (torch's NumPy warning
# on a venv without NumPy goes to stderr, after the result) is not the result. Taking the last line of
# the output read that warning as the result, so every fact of such a Python read "missing" and a
# build against it had no Python or PyTorch facts in its id (issue 40, found 2026-11-28).
PROBE_MARK = "deepep-env-probe: "


@functools.lru_cache(maxsize=None)
def python_probe(executable: str) -> dict[str, Any]:
    rc, out = _run([executable, "-I", "-c", f"PROBE_MARK = {PROBE_MARK!r}\n" + _PY_PROBE])
    if rc != 0:
        return {"missing": f"missing: {executable}"}
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith(PROBE_MARK)), "")
    try:
        return json.loads(line[len(PROBE_MARK):])
    except ValueError:
        return {"missing": f"missing: {executable} printed no probe result"}


def python_facts(meta: Mapping[str, Any]) -> Facts:
    p = python_probe(str(meta.get("python_executable") or "python3"))
    if "missing" in p:
        return {"python": p["missing"]}
    facts = {"python": p["version"], "headers": dir_digest(p["include"]) if p["include"] else "none",
             "build_flags": digest(canonical_json(p["flags"])),
             **{f"tool_{k}": v for k, v in sorted(p["tools"].items())}}
    # Absent while a venv's include folder holds no file (what `python -m venv` makes): no committed id moves.
    if venv := headers_beside(Path(p["venv_include"]), "") if p.get("venv_include") else "":
        facts["venv_headers"] = venv
    return facts


_TORCH_LIBS = ("libc10.so", "libc10_cuda.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so", "libtorch_python.so")


def pytorch_facts(meta: Mapping[str, Any]) -> Facts:
    if meta.get("torch_from") == "wheel":   # the graph's deepep-pytorch: its id is the node's input, not this machine
        return {}
    p = python_probe(str(meta.get("python_executable") or "python3"))
    if "missing" in p or not p.get("torch"):
        return {"torch": p.get("missing") or "missing: torch"}
    root = Path(p["torch"])
    return {**{f"torch_{k}": v for k, v in p["torch_facts"].items()},
            "headers": dir_digest(str(root / "include")),
            "libraries": files_digest([root / "lib" / n for n in _TORCH_LIBS])}


def _pip_nvidia_facts(meta: Mapping[str, Any], comp: str) -> Facts:
    p = python_probe(str(meta.get("python_executable") or "python3"))
    where = p.get(comp) or ""
    if not where:
        return {comp: f"missing: nvidia.{comp} for {meta.get('python_executable') or 'python3'}"}
    root = Path(where)
    return {"headers": dir_digest(str(root / "include")),
            "libraries": files_digest([Path(x) for x in glob.glob(str(root / "lib" / "*.so*"))])}


def c_compiler_facts(meta: Mapping[str, Any]) -> Facts:
    """The C compiler and linker a repack runs for a link stub (recipes/cuda-wheel's libcuda.so):
    their versions are in the stub's ``.comment`` and layout."""
    rc, out = _run(["ld", "--version"])
    return {"c_compiler": compiler_version("cc"), "linker": _first_line(out) if rc == 0 else "missing: ld"}


PROBES: dict[str, Callable[[Mapping[str, Any]], Facts]] = {
    "cuda": cuda_facts,
    "c_compiler": c_compiler_facts,
    "python": python_facts,
    "pytorch": pytorch_facts,
    "rdma_core": rdma_core_facts,
    "nccl": lambda m: _pip_nvidia_facts(m, "nccl"),
    "nvshmem": lambda m: _pip_nvidia_facts(m, "nvshmem"),
}


def fingerprint(component: str, meta: Mapping[str, Any]) -> Facts:
    """This machine's facts for one host external of a node (``meta``: the node's paths)."""
    probe = PROBES.get(component)
    return dict(sorted(probe(meta).items())) if probe else {}


def differences(recorded: Mapping[str, Any], live: Mapping[str, Any]) -> list[str]:
    """``fact: recorded → this machine`` for every fact that differs."""
    out = []
    for k in sorted(set(recorded) | set(live)):
        a, b = recorded.get(k, _absent(k)), live.get(k, _absent(k))
        if a != b:
            out.append(f"{k}: {_short(a)} in the lock, {_short(b)} here")
    return out


def externals_differences(recorded: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    """``component.fact: …`` for every fact that differs between two nodes' fingerprinted externals
    (a build id's ``externals``: the lock's record against this machine's)."""
    out: list[str] = []
    for comp, ident in sorted(recorded.items()):
        fp = ident.get("fingerprint") if isinstance(ident, Mapping) else None
        live = (here.get(comp) or {}).get("fingerprint")
        if isinstance(fp, Mapping) and isinstance(live, Mapping):
            out += [f"{comp}.{d}" for d in differences(fp, live)]
    return out


def missing_externals(recorded: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    """``component: what`` for each external this machine lacks and the recorded build had (a fact that
    reads ``missing: …`` here and not in ``recorded``): one entry a component (a toolkit without its
    folder misses its headers and its nvcc), and one a missing interpreter (a node's ``python``,
    ``pytorch`` and ``nccl`` facts all name it)."""
    out: list[str] = []
    seen: set[str] = set()
    for comp, ident in sorted(here.items()):
        fp = ident.get("fingerprint") if isinstance(ident, Mapping) else None
        rec = (recorded.get(comp) or {}).get("fingerprint") if isinstance(recorded.get(comp), Mapping) else None
        lacking = [str(v).removeprefix("missing: ") for k, v in (fp.items() if isinstance(fp, Mapping) else ())
                   if str(v).startswith("missing: ")
                   and not (isinstance(rec, Mapping) and str(rec.get(k, "")).startswith("missing: "))]
        if lacking and (key := lacking[0].split(" for ", 1)[-1]) not in seen:
            seen.add(key)
            out.append(f"{comp}: {lacking[0]}")
    return out


# Where a build reads each host external from, and what chooses that place (issue 51.4): a fact that
# differs from the lock's is named with the path this shell reads and the variable that moves it.
# component -> (the node meta key holding the path, the variable that sets it or None, the default)
READ_FROM: dict[str, tuple[str, "str | None", str]] = {
    "rdma_core": ("rdma_core_prefix", "DEEPEP_ENV_RDMA_CORE", "/usr"),
    "cuda": ("cuda_prefix", None, "/usr/local/cuda"),
    "python": ("python_executable", None, "python3"),
}
HOW_TO_MATCH = {
    "rdma_core": "export DEEPEP_ENV_RDMA_CORE=<the rdma-core prefix (holding include/infiniband) the lock was built with>",
    "cuda": "use the CUDA toolkit the lock was built with (the spec's cuda.prefix; CUDAHOSTCXX as it was)",
    "python": "use the interpreter the lock was built with (the spec's python.executable, with the same pip/setuptools)",
    "pytorch": "install the PyTorch the lock was built with into the spec's python",
}


def where_read(component: str, meta: Mapping[str, Any], environ: "Mapping[str, str] | None" = None) -> str:
    """How this shell locates ``component``: ``rdma_core read from /usr (DEEPEP_ENV_RDMA_CORE unset)``."""
    environ = os.environ if environ is None else environ
    key, var, default = READ_FROM.get(component, ("", None, ""))
    place = str(meta.get(key) or default) if key else ""
    if not place:
        return component
    if var is None:
        return f"{component} read from {place}"
    state = f"{var}={environ[var]}" if environ.get(var) else f"{var} unset"
    return f"{component} read from {place} ({state})"


def with_read_note(lacks: Iterable[str], meta: Mapping[str, Any], environ: "Mapping[str, str] | None" = None) -> list[str]:
    """``missing_externals``' entries with what chose the path, where a variable does:
    ``rdma_core: /usr/include/infiniband (DEEPEP_ENV_RDMA_CORE unset → /usr)``."""
    environ = os.environ if environ is None else environ
    out = []
    for entry in lacks:
        comp = entry.split(":", 1)[0]
        key, var, default = READ_FROM.get(comp, ("", None, ""))
        if var is not None:
            entry += f" ({var}={environ[var]})" if environ.get(var) else f" ({var} unset → {default})"
        out.append(entry)
    return out


def moved_externals(recorded: Mapping[str, Any], here: Mapping[str, Any], meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(component, sentence) for each fingerprinted external whose facts differ between the lock's
    record and this machine: where this shell reads it, then each fact as the lock has it and as here."""
    out: list[tuple[str, str]] = []
    for comp, ident in sorted(recorded.items()):
        fp = ident.get("fingerprint") if isinstance(ident, Mapping) else None
        live = (here.get(comp) or {}).get("fingerprint") if isinstance(here.get(comp), Mapping) else None
        if isinstance(fp, Mapping) and isinstance(live, Mapping) and (diffs := differences(fp, live)):
            out.append((comp, f"{where_read(comp, meta)}: {'; '.join(f'{comp}.{d}' for d in diffs[:3])}"))
    return out


def _absent(fact: str) -> str:
    """How a fact reads where a fingerprint does not have it (a build tool: its baseline version)."""
    base = BASELINE_BUILD_TOOLS.get(fact.removeprefix("build_tool_")) if fact.startswith("build_tool_") else None
    return f"{base} (the baseline)" if base else "(none)"


def _short(v: Any) -> str:
    s = str(v)
    return s[:19] + "…" if s.startswith("sha256:") else s


def clear_caches() -> None:
    """Forget probe results (tests change a fake external between two plans)."""
    for f in (_file_digest, dir_digest, compiler_version, start_files, python_probe, tool_version):
        f.cache_clear()


__all__ = ["SCHEME", "fingerprint", "differences", "externals_differences", "missing_externals", "clear_caches"]
