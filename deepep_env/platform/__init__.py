"""Hardware detection: probes under a root → HostFacts → a platform profile, with evidence.

Entry point: :func:`detect`. Everything here is stdlib-only (NamedTuple records, os, json) so that
``deepep-env activate`` stays fast (the activation benchmark, docs/benchmarks.md).
"""
from __future__ import annotations

import os
from typing import Any, Mapping, NamedTuple, Optional

from deepep_env.formats.stamps import HOST_FACTS
from deepep_env.platform.facts import HostFacts, to_jsonable
from deepep_env.platform.probes import probe_host
from deepep_env.platform.profiles import PlatformChoice, get_profile, select_platform


class Detection(NamedTuple):
    facts: HostFacts
    platform: PlatformChoice

    def to_dict(self) -> dict[str, Any]:
        """The ``detect --json`` document (docs/overlay.md)."""
        f = self.facts.to_dict()
        prof = self.platform.profile
        return {
            "_meta": HOST_FACTS.meta(),
            "root": f["root"],
            "platform": {
                "name": self.platform.name,
                "source": self.platform.source,
                "evidence": list(self.platform.evidence),
                "description": prof.description,
                "status": prof.status,
                "rules": list(prof.rules),
            },
            "gpus": f["gpus"],
            "nics": f["nics"],
            "gpu_nic_affinity": f["affinity"],
            "gid_index": f["gid"],
            "topology": f["topology"],
            "driver": f["driver"],
            "modules": f["modules"],
            "dmi": f["dmi"],
            "kernel": f["kernel"],
            "os_release": f["os_release"],
            "kubernetes": f["kubernetes"],
            "libraries": f["libraries"],
            "ofed": f["ofed"],
            "paths": f["paths"],
            "findings": f["findings"],
            "warnings": f["warnings"],
            "partial": f["partial"],
        }


def detect(
    root: str | os.PathLike[str] = "/",
    platform: Optional[str] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> Detection:
    """Probe ``root`` and choose a platform (``platform`` overrides the choice)."""
    if platform is not None:
        get_profile(platform)  # reject an unknown name before probing: a typo should not cost a scan
    facts = probe_host(root, environ=environ)
    return Detection(facts=facts, platform=select_platform(facts, platform))


__all__ = ["Detection", "HostFacts", "detect", "probe_host", "select_platform", "to_jsonable"]
