"""The resolved (concrete) spec: every version exact, every variant value decided, every source
pinned to a catalog entry. Produced only by :func:`deepep_env.envspec.resolve.resolve`."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from deepep_env.base.engines import Engine, get_engine
from deepep_env.envspec.catalog import PatchPin, SourcePin
from deepep_env.envspec.wheel_pins import PyPIWheel
from deepep_env.envspec.model import HostSpec, Strict, ToolchainSpec, VerifySpec


class RPatch(Strict):
    name: str
    pin: PatchPin


class RPython(Strict):
    version: str
    provider: Literal["host", "conda"]
    executable: Optional[str] = None


class RCuda(Strict):
    version: str
    architectures: list[str]
    provider: Literal["host", "conda", "wheel"]
    prefix: Optional[str] = None
    # provider "wheel": the pinned toolkit (part -> wheel, envspec/cuda_wheels.py); not part of any dump
    wheels: dict[str, PyPIWheel] = Field(default_factory=dict, exclude=True)

    @property
    def sm_list(self) -> list[str]:
        """CMake style: ['90', '100']."""
        return [a.replace(".", "") for a in self.architectures]


class RPytorch(Strict):
    version: str
    cuda: str
    provider: Literal["host", "conda", "pip", "wheel"]
    build: Optional[str] = None
    # provider "wheel": the pinned closure (part -> wheel, envspec/torch_wheels.py); not part of any dump
    wheels: dict[str, PyPIWheel] = Field(default_factory=dict, exclude=True)

    @property
    def build_glob(self) -> str:
        """The conda build string a conda PyTorch must match: the spec's, else ``cuda<XY>*``."""
        return self.build or f"cuda{self.cuda.replace('.', '')}*"


class RNccl(Strict):
    version: str
    provider: Literal["host", "conda", "pip", "source", "wheel"]
    source: Optional[SourcePin] = None  # provider = "source": the catalogued upstream tree


class RNvshmem(Strict):
    version: str
    provider: Literal["host", "conda", "source", "pip", "wheel"]
    ibgda: bool
    gdrcopy: bool
    nic_handler: Literal["gpu", "cpu"]
    source: Optional[SourcePin] = None
    patches: list[RPatch] = Field(default_factory=list)


class RGdrcopy(Strict):
    version: str
    source: SourcePin


class RDeepEP(Strict):
    revision: str
    version: str
    label: str
    engine: str  # a key of deepep_env/base/engines.py ENGINES (the catalog checked it)
    features: list[str]
    nvshmem_range: str
    nccl_range: Optional[str] = None      # from the catalog (recipes/deep-ep/sources.toml): what it needs
    pytorch_range: Optional[str] = None
    cuda_range: Optional[str] = None
    source: SourcePin
    patches: list[RPatch] = Field(default_factory=list)
    require: list[str] = Field(default_factory=list)
    aggressive_ptx: bool
    torch_cuda_arch_list: str

    @property
    def engine_record(self) -> Engine:
        """The :class:`~deepep_env.base.engines.Engine` this revision is (what every stage reads)."""
        return get_engine(self.engine)


class ResolvedSpec(Strict):
    name: str
    version: str
    description: str = ""
    platforms: list[str]
    subdirs: list[str]
    channels: list[str]
    publish_url: Optional[str] = None
    python: RPython
    cuda: RCuda
    pytorch: RPytorch
    nccl: RNccl
    nvshmem: RNvshmem
    gdrcopy: Optional[RGdrcopy] = None
    deepep: RDeepEP
    toolchain: ToolchainSpec = Field(default_factory=ToolchainSpec)
    packages: list[str] = Field(default_factory=list)
    host: HostSpec
    verify: VerifySpec = Field(default_factory=VerifySpec)
    env: dict[str, str] = Field(default_factory=dict)
    # [tests] wheels: the pinned wheels (part -> wheel, envspec/test_wheels.py); not part of any dump
    test_wheels: dict[str, PyPIWheel] = Field(default_factory=dict, exclude=True)
    decisions: list[str] = Field(default_factory=list, description="what resolve decided and why")


def spec_marker(r: ResolvedSpec) -> dict[str, Any]:
    """The fields of the install marker that come from the spec (the rest come from the lock and
    the prefix: :func:`deepep_env.formats.installed.new_marker`)."""
    return {
        "spec_version": r.version,
        "platforms": list(r.platforms),
        "python": {"provider": r.python.provider, "version": r.python.version,
                   "executable": r.python.executable or f"python{r.python.version}"},
        "cuda": {"provider": r.cuda.provider, "version": r.cuda.version, "prefix": r.cuda.prefix},
        "spec_env": dict(r.env),
    }
