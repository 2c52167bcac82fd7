"""The abstract env spec, exactly as a user writes it in ``env_specs/<name>.toml``.

Strict: unknown keys are errors (``extra="forbid"``), so a typo never silently means "default".
Versions here may be ranges (``">=3.3.9"``); :mod:`deepep_env.envspec.resolve` turns an
:class:`EnvSpec` into a :class:`~deepep_env.envspec.resolved.ResolvedSpec` where every value is concrete.

Which fields are *identity* (enter build ids) is decided by the build plan, not here: the spec is
input; ``docs/build-id.md`` lists what each package's id covers.
"""
from __future__ import annotations

import re
from typing import Literal, Optional
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from deepep_env.base.channels.auth import url_secret

# The format header every spec starts with. Readers accept every version listed here; a newer
# file is refused with a clear line rather than half-understood.
SPEC_FORMAT = 1
SUPPORTED_FORMATS = (1,)

NAME_RE = r"^[a-z0-9][a-z0-9._-]*$"
# A version token: segments joined by exactly one separator ('3.5.19', '2.11.0rc1', '3.5.19-1',
# '1.2.1+29d31c0'); '2..11', '3.4.5,' or a trailing '-' are typos, not versions. Each segment is
# delimited by a mandatory separator so the match is linear (no nested-quantifier backtracking).
_VTOKEN = r"[0-9][0-9A-Za-z]*(?:[.+_-][0-9A-Za-z]+)*"
_VOP = r"(?:==|>=|<=|>|<|~=|!=)"
VERSION_RANGE_RE = re.compile(rf"^{_VOP}?\s*{_VTOKEN}(?:\s*,\s*{_VOP}\s*{_VTOKEN})*$")
MAX_VERSION_LEN = 64
EXACT_VERSION_RE = r"^[0-9]+(\.[0-9]+)*$"
# CUDA toolkit versions are major.minor ('12.9', '13.0'): the lock pins cuda-version=<major.minor>
# and the pytorch-cuda-major rule compares majors as written, so '013.0' or '13' must not pass.
CUDA_VERSION_RE = r"^[1-9][0-9]?\.[0-9]{1,2}$"
ARCH_RE = r"^[0-9]{1,3}\.[0-9][a-z]?$"
# Compute capabilities nvcc knows (CUDA 12.8-13.x). An unknown one only fails minutes into the
# NVSHMEM build (nvcc: "Unsupported gpu architecture"), so refuse it here and list what works.
# 'a' (arch-specific, e.g. sm_90a) exists from 9.0 on, 'f' (family) from 10.0 on.
KNOWN_ARCHS = ("5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.8", "8.9",
               "9.0", "10.0", "10.1", "10.3", "11.0", "12.0", "12.1")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ITEM_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"  # patch names, features, platform profiles
CHANNEL_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$")
CHANNEL_SCHEMES = ("http", "https", "file", "s3", "gcs", "oci")
KMOD_RE = r"^[A-Za-z0-9_-]+$"
PARAM_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
PREPARE_MAX = 200
# An absolute path a shell script may interpolate: no whitespace or shell metacharacters.
ABS_PATH_RE = r"^/[^\s;&|$`'\"\\<>(){}*?!#~]*$"


def _unique(v: list, what: str) -> list:
    if len(set(v)) != len(v):
        dup = next(x for i, x in enumerate(v) if x in v[:i])
        raise ValueError(f"duplicate {what} {dup!r}")
    return v


def check_url(u: str, what: str) -> str:
    """A channel or publish URL as it will be written into a lock: no credentials of any form.

    The message never repeats the URL: it may be the secret (a token in a query or /t/<token>/).
    """
    try:
        parts = urlsplit(u)
        parts.port  # noqa: B018 - raises ValueError on a junk port
    except ValueError:
        raise ValueError(f"{what} is not a valid URL") from None
    if parts.scheme.lower() not in CHANNEL_SCHEMES:
        raise ValueError(f"{what} must be a URL with scheme {', '.join(CHANNEL_SCHEMES)}")
    if parts.scheme.lower() != "file" and not parts.hostname:
        raise ValueError(f"{what} has no host")
    secret = url_secret(u)   # the one decision, shared with lock channels and `publish --to`
    if secret is not None:
        raise ValueError(f"{what} carries {secret.carries}; a URL is written into locks and logs: "
                         f"use {secret.instead}")
    if parts.query or parts.fragment or "?" in u or "#" in u:
        # not a secret by name, but a channel URL has no query or fragment (and one may hide a token)
        raise ValueError(f"{what} carries a query string or fragment; tokens go in "
                         "DEEPEP_ENV_CHANNEL_TOKEN or RATTLER_AUTH_FILE, never in the URL")
    if any(seg == ".." for seg in parts.path.split("/")):
        raise ValueError(f"{what} must not contain '..' path segments")
    return u


# name [version [build]]: what a lock request and pixi.toml can both carry
PACKAGE_SPEC_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}( [A-Za-z0-9.*=<>!,|_+-]{1,64}( [A-Za-z0-9_.*+-]{1,64})?)?$")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, strict=True)


def _check_range(value: str) -> str:
    if len(value) > MAX_VERSION_LEN or not VERSION_RANGE_RE.match(value):
        raise ValueError(f"not a version or version range: {value!r} (e.g. '3.4.5' or '>=3.3.9,<3.6')")
    return value


def _items(v: list[str], what: str) -> list[str]:
    for x in v:
        if not re.match(ITEM_RE, x):
            raise ValueError(f"not a {what} name: {x[:40]!r} (letters, digits, '.', '_', '-')")
    return _unique(v, what)


Provider = Literal["host", "conda", "source"]
SpecSubdir = Literal["linux-64", "linux-aarch64"]


def _default_subdirs() -> list[SpecSubdir]:
    return ["linux-64"]


class CudaSpec(Strict):
    version: str = Field(pattern=CUDA_VERSION_RE, description="CUDA toolkit major.minor, e.g. '12.9'")
    architectures: list[str] = Field(min_length=1, description="compute capabilities, e.g. ['9.0'] or ['10.0']")
    # "wheel": NVIDIA's toolkit wheels from PyPI, pinned in recipes/cuda-wheel/sources.toml and repacked
    # into a package of the graph; builds get it unpacked beside them (envspec/cuda_wheels.py)
    provider: Literal["host", "conda", "wheel"] = "conda"
    prefix: Optional[str] = Field(None, pattern=ABS_PATH_RE,
                                  description="host toolkit root when provider = 'host' (default /usr/local/cuda)")

    @field_validator("architectures")
    @classmethod
    def _archs(cls, v: list[str]) -> list[str]:
        for a in v:
            m = re.match(r"^([0-9]{1,2}\.[0-9])([af]?)$", a)
            if not m:
                raise ValueError(f"not a compute capability: {a[:16]!r} (e.g. '9.0', '10.0', '9.0a')")
            base, suffix = m.groups()
            if base not in KNOWN_ARCHS:
                raise ValueError(f"unknown compute capability {a!r}; known: {', '.join(KNOWN_ARCHS)}")
            major = int(base.split(".")[0])
            if (suffix == "a" and major < 9) or (suffix == "f" and major < 10):
                raise ValueError(f"{a!r}: the 'a' suffix exists from 9.0, 'f' from 10.0")
        return _unique(v, "architecture")

    @model_validator(mode="after")
    def _prefix_only_for_host(self) -> "CudaSpec":
        if self.prefix is not None and self.provider != "host":
            raise ValueError("cuda.prefix is only for provider = 'host' (a conda or wheel CUDA is a package, not a path)")
        return self


class PythonSpec(Strict):
    version: str = Field(pattern=r"^3\.[0-9]{1,2}$")
    provider: Literal["host", "conda"] = "conda"
    executable: Optional[str] = Field(None, pattern=ABS_PATH_RE, description="host interpreter when provider = 'host'")

    @model_validator(mode="after")
    def _exe_only_for_host(self) -> "PythonSpec":
        if self.executable is not None and self.provider != "host":
            raise ValueError("python.executable is only for provider = 'host' (conda installs its own python)")
        return self


class PytorchSpec(Strict):
    version: str
    cuda: str = Field(pattern=CUDA_VERSION_RE, description="CUDA the PyTorch build targets, e.g. '12.9' (cu129)")
    # ``wheel``: pip's closure of torch from PyPI, pinned by sha256 in recipes/pytorch-wheel/sources.toml and
    # repacked into deepep-pytorch, a package of the env (envspec/torch_wheels.py)
    provider: Literal["host", "conda", "pip", "wheel"] = "conda"
    build: Optional[str] = Field(None, pattern=r"^[A-Za-z0-9_.+*]+$", max_length=MAX_VERSION_LEN,
                                 description="conda build-string glob, e.g. 'cuda129*'")

    _v = field_validator("version")(lambda cls, v: _check_range(v))

    # `build` with provider host/pip is ignored, not refused: moving PyTorch to the host by
    # flipping `provider` alone is a supported edit (tests/fixtures/lock/check/package-not-required).


class NcclSpec(Strict):
    """``source``: built by recipes/nccl from NVIDIA's source (version exact or a range, resolved
    against recipes/nccl/sources.toml), for the spec's CUDA architectures only. ``wheel``: the
    nvidia-nccl-cuNN wheel of a wheel-provided PyTorch's closure (torch pins it exactly), inside deepep-pytorch."""

    version: str
    provider: Literal["host", "conda", "pip", "source", "wheel"] = "conda"

    _v = field_validator("version")(lambda cls, v: _check_range(v))


class NvshmemSpec(Strict):
    """``pip``: the nvidia-nvshmem-cu1X wheel in the host Python's site-packages (the one pip PyTorch
    depends on and loads), found by DeepEP 2.x's own deep_ep/utils/find_pkgs.py. ``wheel``: NVIDIA's
    binary wheel of that exact version, pinned by sha256 in recipes/nvshmem-wheel/sources.toml, repacked
    by recipes/nvshmem-wheel into our deepep-nvshmem package (what DeepEP builds against)."""

    version: str
    provider: Literal["host", "conda", "source", "pip", "wheel"] = "source"
    ibgda: bool = True
    gdrcopy: bool = False
    nic_handler: Literal["gpu", "cpu", "auto"] = "auto"
    patches: list[str] = Field(default_factory=list, description="patch names from recipes/nvshmem/sources.toml")

    _v = field_validator("version")(lambda cls, v: _check_range(v))
    _p = field_validator("patches")(lambda cls, v: _items(v, "patch"))


class GdrcopySpec(Strict):
    version: str = Field(pattern=EXACT_VERSION_RE)


class DeepEPSpec(Strict):
    revision: str = Field(pattern=r"^[0-9a-f]{7,40}$", description="upstream git revision")
    patches: list[str] = Field(default_factory=list, description="patch names from recipes/deep-ep/sources.toml")
    require: list[str] = Field(
        default_factory=list,
        description="features the installed module must have, e.g. 'pr-466' (checked by the recipe test and doctor)",
    )
    aggressive_ptx: bool = Field(False, description="DISABLE_AGGRESSIVE_PTX_INSTRS=0; only for a 9.0-only build")

    _p = field_validator("patches")(lambda cls, v: _items(v, "patch"))
    _r = field_validator("require")(lambda cls, v: _items(v, "feature"))


class HostSpec(Strict):
    """What the machine must provide (checked by doctor, never built)."""

    driver: Optional[str] = Field(None, description="minimum NVIDIA driver, e.g. '>=575'")
    doca_ofed: Optional[str] = Field(None, description="minimum DOCA-OFED/MLNX_OFED, e.g. '>=3.2.1'")
    rdma_core: Optional[str] = None
    kernel_modules: list[str] = Field(default_factory=list)
    driver_params: dict[str, int] = Field(default_factory=dict, description="e.g. {PeerMappingOverride = 1}")
    prepare: Optional[str] = Field(None, description="the command that makes this spec's host externals (provider = "
                                   "'host' paths) on a new machine, e.g. 'bash env_specs/prepare/pypi-stack.sh': "
                                   "named by install, plan and doctor where they are missing; never run by deepep-env")

    _d = field_validator("driver", "doca_ofed", "rdma_core")(lambda cls, v: v if v is None else _check_range(v))

    @field_validator("prepare")
    @classmethod
    def _prepare(cls, v: Optional[str]) -> Optional[str]:
        # printed inside one-line errors and plan's table: one printable line, bounded
        if v is not None and (not v.strip() or len(v) > PREPARE_MAX or not v.isprintable()):
            raise ValueError(f"prepare must be one printable line of 1 to {PREPARE_MAX} characters "
                             "(a command such as 'bash env_specs/prepare/pypi-stack.sh')")
        return v

    @field_validator("kernel_modules")
    @classmethod
    def _kmods(cls, v: list[str]) -> list[str]:
        for m in v:
            if not re.match(KMOD_RE, m):
                raise ValueError(f"not a kernel module name: {m[:40]!r} (e.g. 'nvidia_peermem')")
        return _unique(v, "kernel module")

    @field_validator("driver_params")
    @classmethod
    def _params(cls, v: dict[str, int]) -> dict[str, int]:
        # NVreg_* parameters are 32-bit unsigned (modinfo nvidia): doctor compares them with
        # /proc/driver/nvidia/params, where a negative or 2**64 value can never match.
        for k, val in v.items():
            if not PARAM_NAME_RE.match(k):
                raise ValueError(f"not a driver parameter name: {k[:40]!r} (e.g. 'PeerMappingOverride')")
            if not 0 <= val <= 0xFFFFFFFF:
                raise ValueError(f"{k} = {str(val)[:24]} is out of range for an NVreg parameter (0 to 4294967295)")
        return v


# Packages the tool puts in every env itself (lock/request.py, builder/plan.py), with the spec section that
# sets them: a `packages` entry naming one would be ignored or would contradict that section.
PINNED_BY_TOOL = {"deep-ep": "[deepep]", "nvshmem": "[nvshmem]", "libnvshmem3": "[nvshmem]", "gdrcopy": "[gdrcopy]",
                  "python": "[python]", "cuda-version": "[cuda]", "pytorch": "[pytorch]", "nccl": "[nccl]",
                  "deepep-env": "the tool's own package"}


class ToolchainSpec(Strict):
    """The conda compilers a build uses when CUDA comes from conda (conda-forge's variant keys
    ``c_compiler_version``/``cxx_compiler_version`` and ``c_stdlib_version``). Host builds use the
    machine's compilers and ignore this table."""

    gcc: str = Field("14", pattern=r"^[0-9]{1,2}$",
                     description="gcc_linux-64/gxx_linux-64 major version (conda-forge's default for CUDA 12.9/13.0: 14)")
    sysroot: str = Field("2.28", pattern=r"^2\.[0-9]{1,2}$",
                         description="sysroot_linux-64 (glibc) version the build links against (conda-forge: 2.28)")


class VerifySpec(Strict):
    """What a test record must show to verify this env (``deepep-env verified``, ``plan``); metadata,
    never part of a build id. DeepEP's tests run one rank (process) per GPU."""

    ranks: Optional[int] = Field(None, ge=1, le=1 << 20,
                                 description="the fewest ranks a passing record must have used (8: a whole 8-GPU "
                                 "node); doctor also expects that many ranks")
    trust: Optional[str] = Field(None, min_length=1, max_length=4096, pattern=r"^[^\x00]+$",
                                 description="a trust file (relative to the project root): a record verifies only "
                                 "with a valid signature from one of its keys (docs/verified.md)")


class AdmitSpec(Strict):
    """Floors ``deepep-env admit`` holds a node's short DeepEP run to (docs/admit.md); metadata, never
    part of a build id. Without ``floors``, a figure's floor comes from the env's passing records."""

    ratio: float = Field(0.8, gt=0, le=1, description="a figure must reach ratio x the median of the passing "
                         "records (a time: at most the median / ratio)")
    rank_ratio: float = Field(0.9, gt=0, le=1, description="the slowest rank must reach rank_ratio x the median "
                              "rank of the same run")
    floors: dict[str, float] = Field(default_factory=dict, description="per-figure absolute floors (a *_us "
                                     "figure: a ceiling), e.g. dispatch_bf16_gbps = 300; they replace the records' floor")

    @field_validator("floors")
    @classmethod
    def _floors(cls, v: dict[str, float]) -> dict[str, float]:
        for k, x in v.items():
            if not re.match(r"^[a-z][a-z0-9_]{0,63}_(gbps|us)$", k):
                raise ValueError(f"not a figure name: {k!r} (a name ending in _gbps or _us, e.g. ll_dispatch_gbps)")
            if not (x > 0 and x < float("inf")):
                raise ValueError(f"floor {k} = {x!r} is not a positive finite number")
        return v


class TestsSpec(Strict):
    """What DeepEP's test scripts import beyond torch and deep_ep (numpy): PyPI projects whose wheels, pinned
    for the spec's Python in recipes/test-wheels/sources.toml, are repacked into one package of the env,
    deepep-test-wheels (recipes/test-wheels). Never part of another node's build id."""

    wheels: list[str] = Field(default_factory=list, description="PyPI project names, e.g. numpy; each must be "
                              "pinned in recipes/test-wheels/sources.toml for the spec's Python and subdir")

    @field_validator("wheels")
    @classmethod
    def _wheels(cls, v: list[str]) -> list[str]:
        for w in v:
            if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$", w):
                raise ValueError(f"not a PyPI project name: {w!r}")
        if len(set(v)) != len(v):
            raise ValueError("a project is named twice")
        return v


class EnvSpec(Strict):
    format: int = Field(description="spec format version; this reader knows " + ", ".join(map(str, SUPPORTED_FORMATS)))
    name: str = Field(pattern=NAME_RE)
    # Dotted segments, none empty ("2026..0" and "2026.11." are refused, as docs/spec-format.md says).
    version: str = Field(pattern=r"^[0-9][0-9A-Za-z+_-]*(\.[0-9A-Za-z+_-]+)*$", max_length=64)
    description: str = ""
    platforms: list[str] = Field(min_length=1, description="platform profiles this env targets")
    subdirs: list[SpecSubdir] = Field(default_factory=_default_subdirs, min_length=1)
    channels: list[str] = Field(
        min_length=1,
        description="conda channels in priority order; 'local' is the builder's output channel",
    )
    publish_url: Optional[str] = Field(
        None,
        description="URL of the private channel this env's built packages are published to; locks name the "
        "'local' channel by this URL so they are valid on every machine",
    )
    python: PythonSpec
    cuda: CudaSpec
    pytorch: PytorchSpec
    nccl: NcclSpec
    nvshmem: NvshmemSpec
    gdrcopy: Optional[GdrcopySpec] = None
    deepep: DeepEPSpec
    toolchain: ToolchainSpec = Field(default_factory=ToolchainSpec)
    packages: list[str] = Field(default_factory=list, description="further conda packages of the env, as match "
                                "specs, e.g. 'numpy' (DeepEP's tests import it); solved and locked with the rest")
    host: HostSpec = Field(default_factory=HostSpec)
    verify: VerifySpec = Field(default_factory=VerifySpec)
    admit: AdmitSpec = Field(default_factory=AdmitSpec)
    tests: TestsSpec = Field(default_factory=TestsSpec)
    env: dict[str, str] = Field(default_factory=dict, description="extra runtime variables for the overlay")

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not ENV_NAME_RE.match(k):
                raise ValueError(f"not an environment variable name: {k!r}")
        return v

    @field_validator("packages")
    @classmethod
    def _packages(cls, v: list[str]) -> list[str]:
        for i, p in enumerate(v, 1):
            secret = url_secret(p.partition("::")[0]) if "://" in p else None
            if secret is not None:   # the credential refusal of channels: the entry is not repeated
                raise ValueError(f"package #{i} names a channel URL that carries {secret.carries}; a spec is "
                                 f"committed and its packages are written into locks: use {secret.instead}")
            if not PACKAGE_SPEC_RE.match(p):
                raise ValueError(f"not a conda match spec: {p[:60]!r} (e.g. 'numpy', 'numpy >=2', 'numpy ==2.1 py312*')")
            name = re.split(r"[\s=<>!~\[]", p.split("::")[-1], maxsplit=1)[0].lower()
            if name in PINNED_BY_TOOL:
                raise ValueError(f"{name!r} is a package deepep-env pins itself from {PINNED_BY_TOOL[name]}: "
                                 "listing it here would do nothing or fight that pin")
        return _unique(v, "package")

    @field_validator("toolchain")
    @classmethod
    def _toolchain_applies(cls, v: ToolchainSpec, info: ValidationInfo) -> ToolchainSpec:
        """Written only when given: a setting the build would ignore is refused, not dropped."""
        cuda = info.data.get("cuda")
        if cuda is not None and cuda.provider != "conda":
            raise ValueError("has no effect with cuda.provider = 'host' (host builds use the machine's compilers); "
                             "remove [toolchain], or set cuda.provider = 'conda'")
        return v

    _p = field_validator("platforms")(lambda cls, v: _items(v, "platform"))
    _s = field_validator("subdirs")(lambda cls, v: _unique(v, "subdir"))

    @field_validator("channels")
    @classmethod
    def _channels(cls, v: list[str]) -> list[str]:
        # Channels are written into locks and logs: a credential in any URL form (user:token@,
        # ?token=, /t/<token>/) is refused, and the message names the entry by position only.
        for i, c in enumerate(v, 1):
            if ":" in c or c.startswith("/"):
                check_url(c, f"channel #{i}")
            elif not CHANNEL_NAME_RE.match(c) or ".." in c.split("/"):
                raise ValueError(f"channel #{i} is neither a channel name (e.g. 'conda-forge', 'local') nor a URL")
        if len(set(v)) != len(v):
            raise ValueError("duplicate channels")
        return v

    @field_validator("publish_url")
    @classmethod
    def _publish(cls, v: Optional[str]) -> Optional[str]:
        return v if v is None else check_url(v, "publish_url")
