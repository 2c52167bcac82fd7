"""Overlay rules for a prefix holding DeepEP 2.x (EPv2): which NCCL loads, where the JIT caches.

Both rules look at the prefix (the deep_ep build record, ``lib/libnccl.so.2``) and stay quiet, with
a note, for every other env — so every profile lists them. Stdlib only: activation imports this.

- ``nccl-preload``: DeepEP 2.x aborts its import unless exactly one libnccl is mapped and it is
  byte-identical to the one it linked (deep_ep/__init__.py check_nccl_so(): "Duplicate NCCL runtime",
  "Invalid NCCL versions"), and hands PyTorch's communicator to its own NCCL (deep_ep/utils/comm.py,
  EP_REUSE_NCCL_COMM). pip PyTorch dlopens ``<sys.path entry>/nvidia/nccl/lib/libnccl.so.*`` by path
  (torch/__init__.py _preload_cuda_deps); the deep-ep package links that name to the env's NCCL in its
  own site-packages (first on PYTHONPATH), and this rule preloads the env's NCCL so a library that
  needs libnccl.so.2 before that (through its own RPATH) reuses it by soname.
- ``deepep-jit-cache``: the JIT writes kernels to ``$EP_JIT_CACHE_DIR``, default ``$HOME/.deep_ep``
  (csrc/jit/compiler.hpp) — a relative ``.deep_ep`` in the working directory when HOME is unset — and
  keys them by DeepEP's own headers and flags but not by NCCL's headers (csrc/jit/include_parser.hpp
  hashes ``<deep_ep/...>`` includes only), so a rebuilt NCCL at the same path would reuse stale
  cubins. The cache goes to ``$XDG_CACHE_HOME`` (else ``$HOME/.cache``)``/deepep-env/jit/<deep-ep build
  string>``: per user, outside the env (never the package's files), one per build id (which covers NCCL's).
- ``no-gin-transport``: ``ElasticBuffer`` on more than one rank asserts that NCCL has a Gin transport
  unless ``EP_DISABLE_GIN`` is set (csrc/kernels/backend/nccl.cu:87, ``(allow_hybrid_mode ?
  props.railedGinType : props.ginType) != NCCL_GIN_TYPE_NONE``). NCCL's Gin runs over RDMA NICs (GDAKI
  or its proxy over IB verbs) or, on EFA, over aws-ofi-nccl's plugin (type 5); a host with neither has
  none, and every rank dies there (measured on 4xH200 without RDMA NICs: ``test_ep.py --num-processes
  4`` fails in every rank, passes with EP_DISABLE_GIN=1, over NVLink). Such a host gets
  ``EP_DISABLE_GIN=1``; a host with ACTIVE RDMA ports never does (internode kernels need Gin).
"""
from __future__ import annotations

import glob
import json
import os
from typing import Iterable, Iterator, Mapping, Optional

from deepep_env.base.engines import Engine, engine_of_record
from deepep_env.overlay.rulebase import RuleContext, rule
from deepep_env.overlay.rules_efa import OFI_NCCL_LIB
from deepep_env.base.readfile import MAX_CONFIG_BYTES, read_regular
from deepep_env.platform.facts import HostFacts
from deepep_env.platform.profiles import efa_nics

NCCL_LIB = "libnccl.so.2"
# Where pip's NCCL wheels put the library (nvidia-nccl-cu12/13; CUDA 13 wheels may use nvidia/cu13).
COMPETING_NCCL = ("nvidia/nccl/lib", "nvidia/cu12/lib", "nvidia/cu13/lib")
BUILD_RECORD = "_deepep_env_build.json"


def build_records(prefix: Optional[str]) -> Iterator[tuple[dict, Engine]]:
    """Each readable deep_ep build record of ``prefix`` that names a known engine, with that engine."""
    if not prefix:
        return
    for path in sorted(glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages", "deep_ep", BUILD_RECORD))):
        try:
            data = json.loads(read_regular(path, MAX_CONFIG_BYTES))
        except (OSError, ValueError, RecursionError):
            continue
        eng = engine_of_record(data)
        if eng is not None and isinstance(data, dict):
            yield data, eng


def rule_record(prefix: Optional[str], rule_name: str) -> Optional[dict]:
    """The deep_ep build record of ``prefix`` whose engine turns on overlay rule ``rule_name``
    (base/engines.py Engine.overlay_rules: DeepEP 2.x for the rules here), else None."""
    return next((data for data, eng in build_records(prefix) if rule_name in eng.overlay_rules), None)


def competing_nccl(site_dirs: Iterable[str], own: str) -> list[str]:
    """NCCL libraries pip wheels put in ``site_dirs`` that are not the file ``own`` (the env's)."""
    mine = os.path.realpath(own)
    found = []
    for d in site_dirs:
        for rel in COMPETING_NCCL:
            for p in sorted(glob.glob(os.path.join(d, rel, "libnccl.so.*"))):
                if os.path.realpath(p) != mine and p not in found:
                    found.append(p)
    return found


@rule("nccl-preload")
def nccl_preload(ctx: RuleContext) -> None:
    r = "nccl-preload"
    if ctx.prefix is None or rule_record(ctx.prefix, r) is None:
        ctx.note(r, "no DeepEP 2.x build record in the prefix", "not a DeepEP 2.x env: NCCL left to PyTorch")
        return
    target = os.path.join(ctx.prefix, "lib", NCCL_LIB)
    if not os.path.exists(target):
        ctx.note(r, f"{target} absent", "the env has no NCCL of its own (pip/host NCCL): LD_PRELOAD not set")
        return
    others = competing_nccl(ctx.site_dirs, target)
    if not others:
        ctx.note(r, "searched: " + (", ".join(ctx.site_dirs) or "no site-packages found"),
                 "no other NCCL can load first: LD_PRELOAD not needed")
        return
    ctx.prepend("LD_PRELOAD", [target], r,
                "DeepEP 2.x needs one NCCL per process (deep_ep/__init__.py check_nccl_so); another could load "
                "first: " + ", ".join(others[:3]))


def jit_cache_root(environ: Mapping[str, str]) -> Optional[str]:
    base = environ.get("XDG_CACHE_HOME") or (os.path.join(environ["HOME"], ".cache") if environ.get("HOME") else "")
    return base if base and os.path.isabs(base) else None


@rule("deepep-jit-cache")
def deepep_jit_cache(ctx: RuleContext) -> None:
    r = "deepep-jit-cache"
    rec = rule_record(ctx.prefix, r)
    if rec is None or ctx.prefix is None:
        ctx.note(r, "no DeepEP 2.x build record in the prefix", "not a DeepEP 2.x env: no JIT cache to place")
        return
    if "EP_JIT_CACHE_DIR" in ctx.spec_env:
        ctx.note(r, "env spec [env] sets EP_JIT_CACHE_DIR", "the spec's EP_JIT_CACHE_DIR is used")
        return
    if ctx.environ.get("EP_JIT_CACHE_DIR"):   # a team's shared cache, set on purpose: keep it
        ctx.note(r, "EP_JIT_CACHE_DIR is set in the environment", "the environment's EP_JIT_CACHE_DIR is kept")
        return
    base = jit_cache_root(ctx.environ)
    if base is None:
        ctx.note(r, "HOME and XDG_CACHE_HOME unset (or relative)",
                 "DeepEP's JIT would write ./.deep_ep in the working directory: set HOME, XDG_CACHE_HOME or "
                 "[env] EP_JIT_CACHE_DIR", "warning")
        return
    tag = str(rec.get("build_string") or "unknown")
    path = os.path.join(base, "deepep-env", "jit", "deep-ep-" + "".join(c for c in tag if c.isalnum() or c in "._-"))
    if os.path.realpath(path).startswith(os.path.realpath(ctx.prefix) + os.sep):
        ctx.note(r, f"{path} is inside the env prefix", "the JIT cache must not live in the env: not set", "warning")
        return
    ctx.set("EP_JIT_CACHE_DIR", path, r,
            f"DeepEP 2.x JIT cache of build {tag}: per user, outside the env, one per build id "
            "(csrc/jit/compiler.hpp defaults to $HOME/.deep_ep and keys kernels without NCCL's headers)")


GIN_ASSERTION = ("RuntimeError: Assertion exception (…/csrc/kernels/backend/nccl.cu:87): (allow_hybrid_mode ? "
                 "props.railedGinType : props.ginType) != NCCL_GIN_TYPE_NONE")


def gin_transport(facts: HostFacts) -> tuple[bool, str]:
    """Whether NCCL can have a Gin transport on this host, and the host fact that says so."""
    nics = facts.usable_nics()
    if not nics:
        return False, "no RDMA NIC with an ACTIVE port under /sys/class/infiniband: NCCL has no Gin transport"
    efa = efa_nics(facts)
    if len(efa) == len(nics) and not facts.paths.get(OFI_NCCL_LIB):
        return False, (f"{len(efa)} EFA device(s) and no aws-ofi-nccl ({OFI_NCCL_LIB}): NCCL has no Gin plugin "
                       "for EFA (its own Gin needs RC queue pairs, which EFA has not)")
    names = ", ".join(n.hca for n in nics[:4]) + (", …" if len(nics) > 4 else "")
    return True, f"{len(nics)} RDMA NIC(s) with an ACTIVE port ({names}): NCCL can set up Gin over them"


@rule("no-gin-transport")
def no_gin_transport(ctx: RuleContext) -> None:
    r = "no-gin-transport"
    if rule_record(ctx.prefix, r) is None:
        ctx.note(r, "no DeepEP 2.x build record in the prefix", "not a DeepEP 2.x env: EP_DISABLE_GIN not needed")
        return
    has_gin, fact = gin_transport(ctx.facts)
    if has_gin:
        ctx.note(r, fact, "EP_DISABLE_GIN left unset: ElasticBuffer's internode kernels need Gin")
        return
    if ctx.environ.get("EP_DISABLE_GIN"):   # the user's own value, set on purpose: keep it and say so (issue 52.9)
        ok = ctx.environ["EP_DISABLE_GIN"].strip() == "1"
        ctx.note(r, f"{fact}; EP_DISABLE_GIN is set in the environment",
                 "the environment's EP_DISABLE_GIN is kept" + ("" if ok else ": this host needs EP_DISABLE_GIN=1 for "
                 "ElasticBuffer on more than one rank (csrc/kernels/backend/nccl.cu:87)"), "info" if ok else "warning")
        return
    ctx.set("EP_DISABLE_GIN", "1", r,
            f"{fact}; DeepEP 2.x's ElasticBuffer on more than one rank asserts a Gin type unless EP_DISABLE_GIN "
            "(csrc/kernels/backend/nccl.cu:87): over NVLink it runs without Gin")
