"""``deepep-env fleet report DIR``: the ``doctor ENV --json`` outputs of N nodes, one file each, as one report.

Per node: pass or fail (doctor errors) and its facts (``context.host``, written by doctor from the
host probe, plus the NIC handler and the libibverbs copies doctor found). Per fact that differs
between nodes: the majority value and the odd nodes. Then the first node that would break the job:
the node whose worst cause has the gravest consequence (another GPU model, then missing NICs, then the
rest: driver keys, versions), a node with doctor errors before one that only differs, then the first;
its causes listed in that order. The fleet passes when no node has an error and every required fact is uniform.

Admission records (``deepep-env admit ENV --json`` in the same folder, any file name, told apart by
their stamp; docs/admit.md) are matched to a node by file name (``admit-X.json`` to ``node-X.json``, as
launch writes them), else by host name (when one node has it): a node refused (or whose
admission has expired) fails the fleet, and the report names its first failing figure and rank.

Every file is read with a size and nesting bound, NaN and Infinity refused (the bounded JSON reader,
:func:`deepep_env.base.readfile.parse_json`); anything under DIR that is not a regular file is refused
in one line. The text report prints every value as data (:func:`deepep_env.base.safetext.terminal`): a
node's ``driver`` holding a newline and a forged ``fleet: PASS`` line prints as one escaped value.
Stdlib only, one pass over the files: 1,000 nodes in well under 2 s (docs/benchmarks.md, the fleet benchmark).
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from deepep_env.base.errors import UserError
from deepep_env.base.readfile import decode, parse_json, read_bounded
from deepep_env.base.safetext import terminal
from deepep_env.formats.stamps import DOCTOR_REPORT, FLEET_REPORT
from deepep_env.verify.admission import is_admission

MAX_NODE_BYTES = 4 << 20
MAX_NODES = 100_000

# Facts a multi-node DeepEP job needs equal on every node (a difference fails the fleet), in report order.
REQUIRED = ("platform", "gpus", "driver", "cuda_driver", "ofed", "rdma_core", "libibverbs", "libibverbs_copies",
            "gid_index", "nic_count", "active_nics", "gpu_hca", "peermem", "nic_handler", "env")
# Facts shown when they differ, that do not fail the fleet on their own.
INFORMATIONAL = ("kernel", "nics")
FACTS = REQUIRED + INFORMATIONAL

# What breaks a job first, by consequence (issue 56): a node with another GPU model cannot run the job's
# kernels at all; one with missing NICs cannot join the internode traffic; then everything else (driver
# keys, versions, ...). Differing facts and doctor error ids, each in its tier.
GPU_FACTS = ("platform", "gpus")
NIC_FACTS = ("nic_count", "active_nics", "gpu_hca", "nics")
GPU_ERRORS = ("env.platform-mismatch",)
NIC_ERRORS = ("host.no-rdma-nic", "host.port-down", "host.hca-list", "host.hca-mapping", "efa.devices")


@dataclass
class Node:
    name: str
    file: str
    host: Optional[str]
    errors: list[str]            # finding ids of severity error
    warnings: list[str]
    facts: dict[str, Any]
    odd: list[str] = field(default_factory=list)   # required facts where this node is not the majority
    admission: Optional[dict[str, Any]] = None     # {admitted, valid_until, why}: its admit record, when present

    @property
    def refused(self) -> bool:
        return self.admission is not None and not self.admission["admitted"]

    @property
    def state(self) -> str:
        return "fail" if self.errors else ("refused" if self.refused else ("odd" if self.odd else "pass"))

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.name, "file": self.file, "host": self.host, "state": self.state,
                "errors": self.errors, "warnings": self.warnings, "odd": self.odd, "facts": self.facts,
                "admission": self.admission}


def _fact_key(v: Any) -> str:
    return json.dumps(v, sort_keys=True)


def node_facts(doc: dict[str, Any]) -> tuple[Optional[str], dict[str, Any]]:
    raw_ctx = doc.get("context")
    ctx: dict[str, Any] = raw_ctx if isinstance(raw_ctx, dict) else {}
    raw_host = ctx.get("host")
    host: dict[str, Any] = raw_host if isinstance(raw_host, dict) else {}
    facts = {k: host.get(k) for k in FACTS if k in host}
    nh = ctx.get("nic_handler")
    facts["nic_handler"] = nh.get("value") if isinstance(nh, dict) else None
    libs = ctx.get("libibverbs")
    if isinstance(libs, list):
        facts["libibverbs_copies"] = len(libs)
    facts["env"] = doc.get("env")
    if "platform" not in facts:
        p = doc.get("platform")
        facts["platform"] = p.get("name") if isinstance(p, dict) else p
    return (host.get("node") if isinstance(host.get("node"), str) else None), facts


def _read_doc(path: Path) -> Any:
    accepted = "`deepep-env doctor ENV --json` output"
    raw = read_bounded(path, MAX_NODE_BYTES, what="node report",
                       accepted="regular files written by `deepep-env doctor ENV --json`")
    return parse_json(decode(raw, path, what="node report", accepted=accepted), path, accepted=accepted)


def _first_line(lines: Any) -> str:
    return str(lines[0]) if isinstance(lines, list) and lines else "refused"


def admission_of(doc: dict[str, Any], now: Optional[str] = None) -> tuple[Optional[str], dict[str, Any]]:
    """(host name, ``{admitted, valid_until, why}``) of an admission record; ``why``: its first refusal
    line, or that it has expired (``now``: a UTC time as records write it)."""
    raw_host = doc.get("host")
    host: dict[str, Any] = raw_host if isinstance(raw_host, dict) else {}
    until = str(doc.get("valid_until") or "")
    raw_tests = doc.get("tests")
    tests = [t for t in raw_tests if isinstance(t, dict)] if isinstance(raw_tests, list) else []
    why = next((f"{t.get('test')}: {_first_line(t.get('lines'))}" for t in tests if t.get("admitted") is not True), None)
    admitted = doc.get("admitted") is True
    if admitted and now is not None and until < now:
        admitted, why = False, f"admission expired at {until}"
    node = host.get("node")
    return (node if isinstance(node, str) else None), {"admitted": admitted, "valid_until": until, "why": why}


def read_node(path: Path, doc: Any = None) -> Node:
    doc = _read_doc(path) if doc is None else doc
    DOCTOR_REPORT.check(doc, file=path, field="_meta")
    host, facts = node_facts(doc)
    findings = doc.get("findings") if isinstance(doc.get("findings"), list) else []
    sev = [(str(f.get("id")), f.get("severity")) for f in findings if isinstance(f, dict)]
    return Node(name=path.stem, file=path.name, host=host, errors=[i for i, s in sev if s == "error"],
                warnings=[i for i, s in sev if s == "warning"], facts=facts)


def node_files(folder: Path) -> list[Path]:
    """``*.json`` directly under ``folder``, in name order; anything there that is not a regular file is refused."""
    if not folder.is_dir():
        raise UserError("not a folder", file=folder, accepted="a folder of `deepep-env doctor ENV --json` outputs, one per node")
    out = []
    with os.scandir(folder) as it:
        for e in it:
            if not e.name.endswith(".json") or e.name.startswith("."):
                continue
            if not e.is_file(follow_symlinks=False):
                raise UserError("not a regular file", file=Path(folder) / e.name,
                                accepted="regular files written by `deepep-env doctor ENV --json`")
            out.append(Path(e.path))
            if len(out) > MAX_NODES:
                raise UserError(f"more than {MAX_NODES} node reports", file=folder)
    return sorted(out, key=lambda p: _natural(p.name))


def _natural(name: str) -> tuple:
    import re

    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def merge(nodes: list[Node], expect: Optional[int] = None) -> dict[str, Any]:
    differing: list[dict[str, Any]] = []
    for fact in FACTS:
        counts: Counter[str] = Counter()
        first: dict[str, int] = {}
        for i, n in enumerate(nodes):
            k = _fact_key(n.facts.get(fact))
            counts[k] += 1
            first.setdefault(k, i)
        if len(counts) <= 1:
            continue
        majority = max(counts, key=lambda k: (counts[k], -first[k]))
        odd = [n for n in nodes if _fact_key(n.facts.get(fact)) != majority]
        required = fact in REQUIRED
        if required:
            for n in odd:
                n.odd.append(fact)
        differing.append({"fact": fact, "required": required, "majority": json.loads(majority),
                          "majority_nodes": counts[majority],
                          "odd": [{"node": n.name, "value": n.facts.get(fact)} for n in odd]})
    failing = [n for n in nodes if n.errors]
    majority_of = {d["fact"]: d["majority"] for d in differing}
    refused = [n for n in nodes if n.refused]
    breaker: Optional[dict[str, Any]] = None
    ranked = sorted((min(_tier(c) for c in _causes(n)), not n.errors, i) for i, n in enumerate(nodes) if n.errors or n.odd)
    if ranked:
        n = nodes[ranked[0][2]]
        causes = sorted(_causes(n), key=_tier)
        breaker = {"node": n.name, "host": n.host, "causes": [c[1] for c in causes],
                   "why": "; ".join(_cause_text(c, n, majority_of) for c in causes)}
    elif refused:
        n = refused[0]
        breaker = {"node": n.name, "host": n.host, "causes": ["admission"],
                   "why": f"not admitted: {(n.admission or {}).get('why')}"}
    missing = max(0, (expect or 0) - len(nodes))
    if missing and breaker is None:
        breaker = {"node": None, "why": f"{missing} of {expect} nodes sent no report"}
    uniform = not any(d["required"] for d in differing)
    ok = bool(nodes) and not failing and not refused and uniform and not missing
    return {
        "format": FLEET_REPORT.stamp, "ok": ok, "nodes": len(nodes), "expected": expect,
        "failing": len(failing), "uniform": uniform, "first_breaking": breaker,
        "differing": differing, "per_node": [n.to_dict() for n in nodes],
    }


def _causes(n: Node) -> list[tuple[str, str]]:
    """("fact", name) for each required fact where ``n`` is odd, ("error", id) for each doctor error."""
    return [("fact", f) for f in n.odd] + [("error", e) for e in n.errors]


def _tier(cause: tuple[str, str]) -> int:
    kind, name = cause
    if name in (GPU_FACTS if kind == "fact" else GPU_ERRORS):
        return 0
    if kind == "fact" and name in NIC_FACTS or kind == "error" and name.startswith(NIC_ERRORS):
        return 1
    return 2


def _cause_text(cause: tuple[str, str], n: Node, majority: dict[str, Any]) -> str:
    kind, name = cause
    if kind == "error":
        return f"doctor error {name}"
    return f"{name} {_show(n.facts.get(name))} (majority {_show(majority.get(name))})"


def fleet_report(folder: "str | os.PathLike[str]", expect: Optional[int] = None) -> dict[str, Any]:
    if expect is not None and (isinstance(expect, bool) or expect < 1 or expect > MAX_NODES):
        raise UserError(f"not a number of nodes: {expect}", field="--expect", accepted=f"1 to {MAX_NODES}")
    paths = node_files(Path(folder))
    if not paths and not expect:
        raise UserError("no node reports (*.json)", file=Path(folder), accepted="`deepep-env doctor ENV --json > DIR/NODE.json` on every node")
    nodes: list[Node] = []
    by_file: dict[str, dict[str, Any]] = {}
    by_host: dict[Optional[str], dict[str, Any]] = {}
    now = datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    for p in paths:
        doc = _read_doc(p)
        if is_admission(doc):
            host, adm = admission_of(doc, now)
            by_file[p.stem.removeprefix("admit-")] = by_host[host] = adm
        else:
            nodes.append(read_node(p, doc))
    hosts = Counter(n.host for n in nodes)
    for n in nodes:
        n.admission = by_file.get(n.name.removeprefix("node-")) or (by_host.get(n.host) if hosts[n.host] == 1 else None)
    return merge(nodes, expect)


def _show(v: Any) -> str:
    """A fact's value for the text report, as data: one line, controls escaped."""
    return terminal("unknown" if v is None else (json.dumps(v) if not isinstance(v, str) else v))


def _node_line(n: dict[str, Any]) -> str:
    why = ""
    if n["errors"]:
        why = f"  errors: {', '.join(map(_show, n['errors']))}"
    elif n.get("admission") and n["admission"]["why"]:
        why = f"  not admitted: {_show(n['admission']['why'])}"
    elif n["odd"]:
        why = f"  differs: {', '.join(n['odd'])}"
    adm = n.get("admission")
    until = f"  admitted until {_show(adm['valid_until'])}" if adm and adm["admitted"] else ""
    return f"{n['state'].upper():4} {node_label(n)}{why}{until}"


def node_label(n: dict[str, Any]) -> str:
    """A node as the reports name it: its file's name, and the host name doctor read, where that differs."""
    if not n.get("node"):
        return "-"
    host = f" ({_show(n['host'])})" if n.get("host") and n["host"] != n["node"] else ""
    return f"{_show(n['node'])}{host}"


def render_text(rep: dict[str, Any]) -> str:
    """The report for a terminal or a job log; the verdict is always the last line, and no value from a
    node report can print a line of its own."""
    lines = [_node_line(n) for n in rep["per_node"]]
    for d in rep["differing"]:
        odd = ", ".join(f"{_show(o['node'])}={_show(o['value'])}" for o in d["odd"][:20])
        more = f" (+{len(d['odd']) - 20} more)" if len(d["odd"]) > 20 else ""
        tag = "" if d["required"] else " (informational)"
        lines.append(f"differs: {d['fact']}{tag}: majority {_show(d['majority'])} on {d['majority_nodes']} node(s); odd: {odd}{more}")
    b = rep["first_breaking"]
    if b:
        lines.append(f"first node that would break the job: {node_label(b)}: {_show(b['why'])}")
    verdict = "PASS" if rep["ok"] else "FAIL"
    exp = f" of {rep['expected']}" if rep.get("expected") else ""
    lines.append(f"fleet: {verdict}: {rep['nodes']}{exp} node(s), {rep['failing']} with errors, "
                 f"{'uniform' if rep['uniform'] else 'not uniform'}")
    return "\n".join(lines) + "\n"
