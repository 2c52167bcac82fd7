"""The abstract env spec, exactly as a user writes it in ``env_specs/<name>.toml``.

Strict: unknown keys are errors (``extra="forbid"``), so a typo never silently means "default".
Versions here may be ranges (``">=3.3.9"``); :mod:`deepep_env.spec.resolve` turns an
:class:`EnvSpec` into a :class:`~deepep_env.spec.resolved.ResolvedSpec` where every value is concrete.

Which fields are *identity* (enter build ids) is decided by the build plan, not here: the spec is
input; ``docs/build-id.md`` lists what each package's id covers.
"""
from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

# The format header every spec starts with. Readers accept every version listed here; a newer
# file is refused with a clear line rather than half-understood.
SPEC_FORMAT = 1
SUPPORTED_FORMATS = (1,)

NAME_RE = r"^[a-z0-9][a-z0-9._-]*$"
VERSION_RANGE_RE = re.compile(r"^(==|>=|<=|>|<|~=|!=)?\s*[0-9][0-9A-Za-z.+_-]*(\s*,\s*(==|>=|<=|>|<|!=)\s*[0-9][0-9A-Za-z.+_-]*)*$")
EXACT_VERSION_RE = r"^[0-9]+(\.[0-9]+)*$"
ARCH_RE = r"^[0-9]{1,3}\.[0-9][a-z]?$"
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, strict=True)


def _check_range(value: str) -> str:
    if not VERSION_RANGE_RE.match(value):
        raise ValueError(f"not a version or version range: {value!r} (e.g. '3.4.5' or '>=3.3.9,<3.6')")
    return value


class HostProvided(Strict):
    """Where a component comes from. ``host``: preinstalled on the machine (a Spack external);
    ``conda``: a package from the spec's channels; ``source``: built by our recipe."""


Provider = Literal["host", "conda", "source"]


class CudaSpec(Strict):
    version: str = Field(pattern=EXACT_VERSION_RE, description="CUDA toolkit major.minor, e.g. '12.9'")
    architectures: list[str] = Field(min_length=1, description="compute capabilities, e.g. ['9.0'] or ['10.0']")
    provider: Literal["host", "conda"] = "conda"
    prefix: Optional[str] = Field(None, description="host toolkit root when provider = 'host' (default /usr/local/cuda)")

    @field_validator("architectures")
    @classmethod
    def _archs(cls, v: list[str]) -> list[str]:
        for a in v:
            if not re.match(ARCH_RE, a):
                raise ValueError(f"not a compute capability: {a!r} (e.g. '9.0', '10.0', '9.0a')")
        if len(set(v)) != len(v):
            raise ValueError("duplicate architectures")
        return v


class PythonSpec(Strict):
    version: str = Field(pattern=r"^3\.[0-9]{1,2}$")
    provider: Literal["host", "conda"] = "conda"
    executable: Optional[str] = Field(None, description="host interpreter when provider = 'host'")


class PytorchSpec(Strict):
    version: str
    cuda: str = Field(pattern=EXACT_VERSION_RE, description="CUDA the PyTorch build targets, e.g. '12.9' (cu129)")
    provider: Literal["host", "conda", "pip"] = "conda"
    build: Optional[str] = Field(None, description="conda build-string glob, e.g. 'cuda129*'")

    _v = field_validator("version")(lambda cls, v: _check_range(v))


class NcclSpec(Strict):
    version: str
    provider: Literal["host", "conda", "pip"] = "conda"

    _v = field_validator("version")(lambda cls, v: _check_range(v))


class NvshmemSpec(Strict):
    version: str
    provider: Provider = "source"
    ibgda: bool = True
    gdrcopy: bool = False
    nic_handler: Literal["gpu", "cpu", "auto"] = "auto"
    patches: list[str] = Field(default_factory=list, description="patch names from recipes/nvshmem/sources.toml")

    _v = field_validator("version")(lambda cls, v: _check_range(v))


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


class HostSpec(Strict):
    """What the machine must provide (checked by doctor, never built)."""

    driver: Optional[str] = Field(None, description="minimum NVIDIA driver, e.g. '>=575'")
    doca_ofed: Optional[str] = Field(None, description="minimum DOCA-OFED/MLNX_OFED, e.g. '>=3.2.1'")
    rdma_core: Optional[str] = None
    kernel_modules: list[str] = Field(default_factory=list)
    driver_params: dict[str, int] = Field(default_factory=dict, description="e.g. {PeerMappingOverride = 1}")

    _d = field_validator("driver", "doca_ofed", "rdma_core")(lambda cls, v: v if v is None else _check_range(v))


class EnvSpec(Strict):
    format: int = Field(description="spec format version; this reader knows " + ", ".join(map(str, SUPPORTED_FORMATS)))
    name: str = Field(pattern=NAME_RE)
    version: str = Field(pattern=r"^[0-9][0-9A-Za-z.+_-]*$")
    description: str = ""
    platforms: list[str] = Field(min_length=1, description="platform profiles this env targets")
    subdirs: list[Literal["linux-64", "linux-aarch64"]] = Field(default_factory=lambda: ["linux-64"])
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
    host: HostSpec = Field(default_factory=HostSpec)
    env: dict[str, str] = Field(default_factory=dict, description="extra runtime variables for the overlay")

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if not ENV_NAME_RE.match(k):
                raise ValueError(f"not an environment variable name: {k!r}")
        return v

    @field_validator("channels")
    @classmethod
    def _channels(cls, v: list[str]) -> list[str]:
        for c in v:
            if "@" in c.split("//", 1)[-1].split("/", 1)[0]:
                # user:token@host — credentials belong in the environment or the auth store.
                raise ValueError("a channel URL must not carry credentials; use DEEPEP_ENV_CHANNEL_TOKEN or RATTLER_AUTH_FILE")
        if len(set(v)) != len(v):
            raise ValueError("duplicate channels")
        return v
