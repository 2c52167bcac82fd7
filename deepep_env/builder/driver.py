"""Run rattler-build (py-rattler-build 0.73) on one build node.

Recipe inputs — the exact Jinja variables a recipe can use (docs/build-id.md §6 "recipe inputs").
They are passed as render context (``RenderConfig(extra_context=…)``); rattler-build keeps the ones
a recipe uses in ``info/recipe/variant_config.yaml`` of the package.

===========================  ===================================================================
``build_string``             ``h<10 hex of the build id>_0``; set ``build: string:`` to it, so a
                             package file and a lock name the id they came from
``build_id``                 the full id, ``sha256:<64 hex>`` (e.g. to record inside the package)
``version``                  the node's conda version (``node.version``)
``source_dir``               absolute path of the staged, patched primary source ("" if none);
                             use as ``source: {path: ${{ source_dir }}, use_gitignore: false}``
``source_dir_<name>``        the same for every source of the node, by source name
``dep_<pkg>``                exact pin of a graph dependency without its name:
                             ``==<version> <build_string>`` → ``- libnvshmem-static ${{ dep_nvshmem }}``
``dep_<pkg>_version``        that dependency's version; ``dep_<pkg>_build_string``: its build string;
                             short aliases ``<pkg>_version``/``<pkg>_build_string`` unless a
                             variant key has that name (``nvshmem_build_string``)
``cuda_prefix``              host CUDA toolkit root when CUDA is a host external; with a wheel
                             CUDA, the graph's toolkit unpacked beside the build
                             (builder/cuda_home.py); else ""
``python_executable``        host Python when Python is a host external, else ""; with a
                             wheel PyTorch, that interpreter wrapped to find the graph's
                             deepep-pytorch (unpacked beside the build) first
                             (builder/python_home.py)
``rdma_core_prefix``,        further ``BuildNode.meta`` paths, "" when the plan gives none
``gdrcopy_prefix``           (every str/int/bool ``meta`` value is passed under its own name)
``cuda_provider``, ``python_provider``, ``pytorch_provider``
                             ``host``/``pip`` when the node builds against a host-provided
                             component, ``wheel`` for a wheel CUDA or PyTorch (read like
                             ``host``), else ``conda``
``jobs``                     parallel jobs for make/ninja (not identity: never changes an id)
``source_date_epoch``        seconds since 1970, a function of the build id alone (for
                             ``SOURCE_DATE_EPOCH``: ``__DATE__``/``__TIME__``, archive times)
every ``node.variant`` key   e.g. ``cuda_version``, ``cuda_architectures``, ``ibgda``, ``gdrcopy``,
                             ``torch_cuda_arch_list``, ``revision``; lists are joined with ";"
                             (CMake list syntax), booleans are the strings "true"/"false"
===========================  ===================================================================

``<name>``/``<pkg>`` are the source/package names with every character outside ``[A-Za-z0-9_]``
replaced by ``_`` (``dep_deep_ep``). rattler-build's default STRICT environment isolation drops
host variables from build scripts (PATH is kept, appended), so anything a script needs goes
through ``build.script.env`` from these variables, e.g. ``CUDA_HOME: ${{ cuda_prefix }}``.

Channels: always an explicit list (never ``None``, which means conda-forge and fails offline
after a DNS timeout — field notes §5).
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import re
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional, Sequence

from deepep_env.base.atomic import write_text
from deepep_env.builder.normalize import epoch_for
from deepep_env.builder import buildroot, pkgcache, tools
from deepep_env.base.errors import SolveError, UserError
from deepep_env.builder.recipegraph import ident, parse_recipe, read_recipe

if TYPE_CHECKING:  # annotations only: no import at run time
    from rattler_build import RenderedVariant

    from deepep_env.builder.plan import BuildNode


EXTERNAL_PROVIDERS = ("cuda", "python", "pytorch")


def _value(v: Any) -> Any:
    # rattler-build variant values are strings; booleans become "true"/"false" so a recipe tests
    # them the same way whichever way they arrive (``${{ "ON" if ibgda == "true" else "OFF" }}``).
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        # An empty list is "[]", never "": rattler-build leaves a script variable with an empty value
        # unset, and a recipe running under `set -u` then stops (found building h20-roce, whose
        # spec requires no DeepEP feature: recipes/deep-ep/build.sh read $DEEPEP_REQUIRE). Not in any id
        # (the variant is), and no built package had an empty list: no bytes move.
        return ";".join(_value(x) if isinstance(x, bool) else str(x) for x in v) if v else "[]"
    if isinstance(v, (int, float, str)):
        return v
    if v is None:
        return ""
    return str(v)


# Keys rattler-build's compiler()/stdlib() functions read from the variant config (conda-provided CUDA).
VARIANT_CONFIG_KEYS = ("c_compiler", "c_compiler_version", "cxx_compiler", "cxx_compiler_version",
                       "cuda_compiler", "cuda_compiler_version", "c_stdlib", "c_stdlib_version")

# Optional prefixes a recipe may read; "" when the plan gives none (scripts fall back with ${X:-…}).
OPTIONAL_PREFIXES = ("cuda_prefix", "cuda_host_cxx", "python_executable", "rdma_core_prefix", "gdrcopy_prefix")


def recipe_context(node: BuildNode, *, source_dirs: Mapping[str, Path], deps: Sequence[BuildNode], jobs: int,
                   primary: Optional[str]) -> dict[str, Any]:
    """The render context of ``node``; ``deps``: the nodes it builds against."""
    ctx: dict[str, Any] = {k: _value(v) for k, v in node.variant.items()}
    if node.version:  # "" = the recipe computes its own version (recipe graphs)
        ctx.setdefault("version", node.version)
    ctx["build_string"] = node.build_string
    ctx["build_id"] = node.id or ""
    # A time that is a function of the inputs (docs/build-id.md §7): for __DATE__/__TIME__ and
    # anything else that honours SOURCE_DATE_EPOCH; the archive times use the same value.
    ctx["source_date_epoch"] = str(epoch_for(node.id)) if node.id else ""
    ctx["jobs"] = int(jobs)
    ctx["source_dir"] = str(source_dirs[primary]) if primary is not None and primary in source_dirs else ""
    for name, path in source_dirs.items():
        ctx[f"source_dir_{ident(name)}"] = str(path)
    for d in deps:
        k = ident(d.package)
        ctx[f"dep_{k}"] = f"=={d.version} {d.build_string}"
        ctx[f"dep_{k}_version"] = d.version
        ctx[f"dep_{k}_build_string"] = d.build_string
        # short aliases (``nvshmem_build_string``); a variant key of the same name wins
        ctx.setdefault(f"{k}_version", d.version)
        ctx.setdefault(f"{k}_build_string", d.build_string)
    for k in OPTIONAL_PREFIXES:
        ctx.setdefault(k, "")
    for ext in EXTERNAL_PROVIDERS:
        info = node.externals.get(ext)
        ctx[f"{ext}_provider"] = info.get("provider", "host") if isinstance(info, Mapping) else "conda"
    for k, v in node.meta.items():
        if isinstance(v, (str, int, float, bool)):
            ctx[ident(k)] = _value(v)
    return ctx


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for prefix in ("PyRattlerBuildError: ", "RattlerBuildError: "):
        text = text.replace(prefix, "")
    # rattler's render errors are one long Debug dump: keep the message, drop the spans
    m = re.search(r'message: "((?:[^"\\]|\\.)*)"', text)
    if m:
        text = m.group(1).replace('\\"', '"')
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:400]


_GENERIC = re.compile(r"^(Script failed|Script execution failed|Test failed|Build failed|Failed to run)", re.I)
_KEYWORDS = re.compile(r"error|failed|not found|no such file|undefined reference|cannot", re.I)


def _script_start(lines: Sequence[str], end: int) -> int:
    """Index of the first line the build script may have written: the line after rattler-build's last
    "✔" step before ``end`` ("✔ Successfully updated the host environment" comes right before the
    script), else its first xtrace line ("+ cmd": scripts run with ``set -x``; the script's stdout
    and the trace on stderr interleave, so the trace is the second choice), else 0."""
    steps = [i for i in range(end) if lines[i].lstrip().startswith("✔")]
    if steps:
        return steps[-1] + 1
    return next((i for i in range(end) if lines[i].lstrip().startswith("+ ")), 0)


def _failure_hint(lines: Sequence[str]) -> str:
    """The line of a build log most likely to name the cause: the last error-looking line the
    script printed before rattler-build's "Script failed with status N"."""
    keep = [ln.rstrip() for ln in lines if ln.strip()]
    status = ""
    end = len(keep)
    for i in range(len(keep) - 1, -1, -1):
        if keep[i].startswith("Script failed with status"):
            status, end = keep[i].rsplit(" ", 1)[-1], i
            break
    # rattler-build's own lines (resolving, "Finalized run dependencies", "✔ Successfully updated the
    # host environment", table borders) are never the cause: only what the script printed, after it
    # started, is a candidate.
    start = _script_start(keep, end)
    window = [ln.strip() for ln in keep[max(start, end - 60):end]
              if not ln.lstrip().startswith(("+ ", "✔", "│", "╭", "╰", "├", "╞", "┆"))]
    fallback = window[-1] if window else "the build script printed nothing before it failed; see the log"
    hint = next((ln for ln in reversed(window) if _KEYWORDS.search(ln)), fallback)
    return hint[:300] + (f" (exit {status})" if status else "")


@dataclass
class DriverResult:
    packages: list[Path]
    seconds: float
    log: list[str]
    notes: list[str] = field(default_factory=list)


def render(recipe_file: Path, context: Mapping[str, Any], *, package: str) -> list[RenderedVariant]:
    """Parse (:func:`deepep_env.builder.recipegraph.parse_recipe`, the one recipe parser) and render a
    recipe; one clear line on failure."""
    from rattler_build import RenderConfig, VariantConfig

    recipe = parse_recipe(recipe_file, package=package)
    # conda-forge's compiler keys are variant keys (compiler('cuda') reads cuda_compiler and
    # cuda_compiler_version from the variant config, not from the context).
    variant = {k: [str(context[k])] for k in VARIANT_CONFIG_KEYS if context.get(k) not in (None, "")}
    try:
        return recipe.render(VariantConfig(variant), RenderConfig(extra_context=dict(context)))
    except Exception as exc:  # noqa: BLE001
        msg = _first_line(exc)
        if "undefined" in msg:  # rattler does not say which name: find the names nothing defines
            unknown = _undefined_names(recipe_file, context)
            if unknown:
                msg += f" (undefined: {', '.join(unknown)})"
        raise UserError(f"package {package}: recipe does not render: {msg}", file=recipe_file) from None


# What rattler-build's Jinja defines itself (platform names in conditions, the build's paths).
_BUILTIN = frozenset({"target_platform", "build_platform", "host_platform", "linux", "osx", "win", "unix", "hash",
                      "x86_64", "aarch64", "arm64", "ppc64le", "s390x", "linux64", "win64", "osx64",
                      "PYTHON", "PREFIX", "RECIPE_DIR", "SRC_DIR", "BUILD_PREFIX", "environ", "true", "false",
                      "none", "True", "False", "None"})


def _undefined_names(recipe_file: Path, context: Mapping[str, Any]) -> list[str]:
    """The variables the recipe's templates and conditions read that neither ``context``, the
    recipe's own ``context:`` nor rattler-build defines (read by :func:`read_recipe`)."""
    try:
        info = read_recipe(recipe_file.parent, file=recipe_file)
    except UserError:
        return []
    return sorted(n for n in info.reads if n not in context and n not in info.context and n not in _BUILTIN)


def _check_staged_sources(variants: Sequence[RenderedVariant], staged: Sequence[Path], package: str,
                          recipe_file: Path) -> None:
    """A staged tree given to rattler-build must keep every file: by default a ``path:`` source
    honours the tree's own ``.gitignore`` and silently drops the files it lists (measured with
    py-rattler-build 0.73), which would build something other than the pinned, patched tree."""
    staged_s = {str(p) for p in staged}
    for v in variants:
        for src in v.recipe.sources:
            d = src.to_dict()
            if str(d.get("path", "")) in staged_s and d.get("use_gitignore", True) is not False:
                raise UserError(
                    f"package {package}: the path source {d.get('path')} must set `use_gitignore: false` "
                    "(rattler-build would drop files the source's own .gitignore lists)", file=recipe_file)


def staging_rebuild_notes(variants: Sequence[RenderedVariant], package: str) -> list[str]:
    """py-rattler-build (0.73; unchanged upstream as of 0.74) builds each output in a folder named
    after that output, and its staging-cache key hashes the prefix path, so a staging output that
    feeds several outputs is built again for each one (measured: NVSHMEM compiled twice). Say so,
    once per recipe, instead of letting the build quietly take twice as long."""
    feeds: dict[str, list[str]] = {}
    for v in variants:
        try:
            d = v.recipe.to_dict()
        except Exception:  # noqa: BLE001 - a binding without to_dict: nothing to say
            continue
        cache = (d.get("inherits_from") or {}).get("cache_name")
        if cache:
            feeds.setdefault(str(cache), []).append(str((d.get("package") or {}).get("name", "?")))
    return [f"package {package}: staging output {cache!r} feeds {len(outs)} outputs ({', '.join(outs)}); "
            f"py-rattler-build runs it once per output, so its build script runs {len(outs)} times "
            "(one output, or one staging per output, avoids that)"
            for cache, outs in sorted(feeds.items()) if len(outs) > 1]


_PROCESS_CACHE: Optional[Path] = None


def _empty(d: Path) -> None:
    for p in d.iterdir() if d.is_dir() else ():
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)


def _build_pkgs_dir() -> Path:
    """Where builds keep extracted dependencies: ``$DEEPEP_ENV_BUILD_PKGS_DIR``, else the user's
    cache (``$DEEPEP_ENV_CACHE_DIR``/``$XDG_CACHE_HOME``/~/.cache, ``deepep-env/build-pkgs``)."""
    if os.environ.get("DEEPEP_ENV_BUILD_PKGS_DIR"):
        return Path(os.environ["DEEPEP_ENV_BUILD_PKGS_DIR"])
    base = os.environ.get("DEEPEP_ENV_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deepep-env" / "build-pkgs"


@contextlib.contextmanager
def private_package_cache(say: Callable[[str], None] = lambda _line: None, *, check: bool = True) -> Iterator[None]:
    """The package cache a build extracts its dependencies into (``RATTLER_CACHE_DIR``, which
    rattler-build reads once per process — measured — hence one path per process).

    rattler-build links dependencies from it with hard links, so a build script that writes into a
    file a dependency ships rewrites the cached copy (field notes §3b). Extractions are kept across
    builds and trusted only after a check (:mod:`deepep_env.builder.pkgcache`): verified against
    their own paths.json when first seen, then by size and mtime before and after every build; one a
    build wrote into is removed and extracted again by the next build. Builds that share the cache
    take turns (a file lock). ``DEEPEP_ENV_BUILD_PKGS=private``: a cache of this process's own,
    emptied before and after every build (every dependency extracted afresh). ``say`` gets each
    check's one-line summary (the build log's record of what isolation cost). ``check=False`` (a
    resolution: it solves, runs no script, so nothing writes through a link): the cache and its
    lock without the checks; the build that follows checks before it reads."""
    global _PROCESS_CACHE
    private = os.environ.get("DEEPEP_ENV_BUILD_PKGS") == "private"
    if _PROCESS_CACHE is None:
        if private:
            _PROCESS_CACHE = Path(tempfile.mkdtemp(prefix="deepep-env-pkgs-"))
            atexit.register(shutil.rmtree, _PROCESS_CACHE, True)
        else:
            _PROCESS_CACHE = _build_pkgs_dir()
            _PROCESS_CACHE.mkdir(parents=True, exist_ok=True)
        os.environ["RATTLER_CACHE_DIR"] = str(_PROCESS_CACHE)
    if _PROCESS_CACHE.name.startswith("deepep-env-pkgs-"):   # this process's own: emptied around every build
        _empty(_PROCESS_CACHE)
        try:
            yield
        finally:
            _empty(_PROCESS_CACHE)
        return
    with open(_PROCESS_CACHE / ".deepep-env-build.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            if check:
                say(f"deepep-env: before the build, {pkgcache.check_report(_PROCESS_CACHE).summary()}")
            try:
                yield
            finally:
                if check:
                    say(f"deepep-env: after the build, {pkgcache.check_report(_PROCESS_CACHE).summary()}")
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def live_log(log_path: Path) -> Path:
    """Where a build's log is written line by line, timestamped, as it happens (``<log>.live``)."""
    return log_path.with_name(log_path.name + ".live")


def note_in_live_log(log_path: Path, text: str) -> None:
    """One timestamped line added to a build's live log, after rattler-build's (what the builder did next)."""
    live = _LiveLog(live_log(log_path))
    live.write(text)
    live.close()


class _LiveLog:
    """rattler-build progress callback that appends each log line, timestamped, to ``<log>.live`` as
    it happens: a build killed midway (a time limit, a lost machine) still leaves its story."""

    def __init__(self, path: Path, on_line: Optional[Callable[[str], None]] = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(path, "a", buffering=1, encoding="utf-8", errors="replace")
        self._on_line = on_line

    def write(self, text: str) -> None:
        self._fh.write(f"[{time.strftime('%H:%M:%S')}] {text}\n")
        if self._on_line is not None:
            self._on_line(text)

    def on_download_start(self, event: Any) -> None:  # noqa: D102 - protocol methods
        pass

    def on_download_progress(self, event: Any) -> None:  # noqa: D102
        pass

    def on_download_complete(self, event: Any) -> None:  # noqa: D102
        pass

    def on_build_step(self, event: Any) -> None:  # noqa: D102
        self.write(f"step: {getattr(event, 'step_name', None) or getattr(event, 'message', None) or event}")

    def on_log(self, event: Any) -> None:  # noqa: D102
        self.write(str(getattr(event, "message", event)))

    def close(self) -> None:
        self._fh.close()


_UNSOLVABLE = "Failed to resolve dependencies"   # rattler-build's words for an unsolvable build/host env

# rattler's virtual-package overrides (rattler_virtual_packages: CONDA_OVERRIDE_*), one per package a
# build is told about; "" for __cuda means "no CUDA" (a noarch or CPU package).
_OVERRIDE_VARS = {"__linux": "CONDA_OVERRIDE_LINUX", "__glibc": "CONDA_OVERRIDE_GLIBC",
                  "__archspec": "CONDA_OVERRIDE_ARCHSPEC", "__cuda": "CONDA_OVERRIDE_CUDA"}
# __cuda_arch: rattler detects the build machine's GPU (compute capability) beside __cuda and
# rattler-build writes it into every CUDA package's info/recipe/rendered_recipe.yaml, so one id gave
# two packages: built on an sm_90 GPU machine and on a machine with no GPU (issue 40, 2026-11-28:
# deepep-nvshmem 3.4.5 h19da9e74e4_0, 079424… on H100/H200, f0d823… on the CPU machine; that one
# line was the only difference). The build is told one fixed value instead, whatever the machine has:
# 9.0, the value every locked package was built with, so every committed id keeps its bytes and now
# has them on any machine. A constant of the builder, not an input: changing it changes the bytes of
# every CUDA package and so needs new ids (docs/build-id.md). No CUDA declared, no __cuda_arch.
BUILD_CUDA_ARCH = "9.0"


@contextlib.contextmanager
def declared_virtual_packages(vps: Mapping[str, str]) -> Iterator[None]:
    """The build sees ``vps`` instead of the machine's (rattler-build runs in this process)."""
    if not vps:
        yield
        return
    want = {var: vps.get(name, "") for name, var in _OVERRIDE_VARS.items()}
    want["CONDA_OVERRIDE_CUDA_ARCH"] = BUILD_CUDA_ARCH if vps.get("__cuda") else ""
    saved = {k: os.environ.get(k) for k in want}
    os.environ.update(want)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run(recipe_file: Path, context: Mapping[str, Any], *, package: str, output_dir: Path,
        channels: Sequence[str], log_path: Path, staged: Sequence[Path] = (), test: bool = True,
        on_line: Optional[Callable[[str], None]] = None,
        virtual_packages: Optional[Mapping[str, str]] = None) -> DriverResult:
    """Render and build every output of ``recipe_file`` into ``output_dir``; keep the log at
    ``log_path``. Raises :class:`UserError` (one line, naming the log) on failure."""
    from rattler_build import ToolConfiguration

    if not channels:
        raise ValueError("channels must be explicit (None means conda-forge)")
    started = time.monotonic()
    variants = render(recipe_file, context, package=package)
    _check_staged_sources(variants, staged, package, recipe_file)
    notes = staging_rebuild_notes(variants, package)
    # Compress with every core at a fast zstd level (packaging + recipe test of NVSHMEM: 2 s on
    # 4xH200). The payload, and so the build id, does not depend on it; DEEPEP_ENV_PACKAGE_FORMAT
    # overrides (e.g. "conda:19" for a release).
    tool = ToolConfiguration(test_strategy="native" if test else "skip", compression_threads=os.cpu_count() or 1)
    package_format = os.environ.get("DEEPEP_ENV_PACKAGE_FORMAT", "conda:3")
    log: list[str] = []
    packages: list[Path] = []
    output_dir.mkdir(parents=True, exist_ok=True)
    live = _LiveLog(live_log(log_path), on_line)
    for n in notes:
        live.write(f"deepep-env note: {n}")
        log.append(f"deepep-env note: {n}")
    for v in variants:
        try:
            # no_build_id: rattler-build's work folder is `rattler-build_<name>`, not
            # `rattler-build_<name>_<unix time>` — its path ends up inside the package (__FILE__,
            # rendered recipe), so a timestamped name makes every build's bytes different.
            with private_package_cache(live.write), declared_virtual_packages(virtual_packages or {}), \
                    tools.first_on_path(buildroot.ensure()):
                res = v.run_build(tool_config=tool, output_dir=output_dir, channels=list(channels),
                                  package_format=package_format, progress_callback=live, no_build_id=True)
        except Exception as exc:  # noqa: BLE001
            log += list(getattr(exc, "log", None) or [])
            log.append(f"ERROR: {exc}")
            write_text(log_path, "\n".join(log) + "\n")
            # rattler-build raises one BuildError for everything: classified here, at the boundary,
            # so callers catch types (SolveError), never message text.
            stage = "recipe test failed" if "Test failed" in str(exc) else "build failed"
            msg = _first_line(exc)
            if _GENERIC.search(msg) and len(log) > 1:  # "Script failed": the cause is in the log
                msg = _failure_hint(log[:-1])
            kind = SolveError if _UNSOLVABLE in str(exc) else UserError
            raise kind(f"package {package}: {stage}: {msg}; log: {log_path}") from None
        log += list(res.log)
        packages += [Path(p) for p in res.packages]
    live.close()
    write_text(log_path, "\n".join(log) + "\n")
    return DriverResult(packages, time.monotonic() - started, log, notes)
