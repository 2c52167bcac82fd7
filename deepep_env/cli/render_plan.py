"""Rich rendering of `spec show` and `plan` data (the data itself comes from deepep_env.views.planning)."""
from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _id(v: Any) -> str:
    return v.split(":", 1)[1][:16] if isinstance(v, str) and ":" in v else "-"


def _evidence(ev: Any) -> str:
    items = ev if isinstance(ev, list) else [ev]
    out = []
    for e in items:
        if isinstance(e, dict):
            where = e.get("file") or e.get("path") or e.get("source") or ""
            out.append(f"{where}: {e.get('value')}" if where else str(e.get("value", e)))
        elif e is not None:
            out.append(str(e))
    return "; ".join(out)


def render_resolved(c: Console, d: dict[str, Any]) -> None:
    c.print(f"[bold]{d['name']}[/bold] {d['version']} — {d['description']}")
    c.print(f"platforms: {', '.join(d['platforms'])}   subdirs: {', '.join(d['subdirs'])}   "
            f"channels: {', '.join(d['channels'])}")
    t = Table(title="resolved pins", show_lines=False)
    t.add_column("component")
    t.add_column("pin")
    t.add_column("provider")
    for comp, pin in d["pins"].items():
        if pin is None:
            continue
        p = dict(pin)
        provider = p.pop("provider", "source")
        if comp == "deepep":
            text = f"{p['label']} ({p['engine']}), arch {p['torch_cuda_arch_list']}, aggressive PTX {'on' if p['aggressive_ptx'] else 'off'}"
            if p["require"]:
                text += f", requires {', '.join(p['require'])}"
        else:
            text = ", ".join(f"{k}={v}" for k, v in p.items() if v not in (None, [], ""))
        t.add_row(comp, text, provider)
    c.print(t)
    for dec in d.get("decisions", []):
        c.print(f"[dim]decided:[/dim] {dec}")
    t = Table(title="build graph (dependency order)")
    for col in ("package", "version", "build", "build id", "deps", "store"):
        t.add_column(col)
    for b in d["builds"]:
        store = "[green]cached[/green]" if b.get("in_store") else ("[red]unpinned: " + "; ".join(b["unpinned"]) + "[/red]"
                                                                   if b["unpinned"] else "to build")
        t.add_row(b["package"], b["version"], b["build_string"], _id(b["id"]), ", ".join(b["deps"]) or "-", store)
    c.print(t)
    _render_requirements(c, d["builds"])
    for b in d["builds"]:
        diffs = b.get("host_differs") or []
        if lacks := b.get("host_missing") or []:
            prepare = b.get("prepare")
            make = f": make them with `{prepare}` (the spec's [host] prepare)" if prepare else ""
            c.print("[yellow]missing host externals:[/yellow] " + escape(
                f"{b['package']} {b['build_string']} was built against host externals this machine lacks "
                f"({'; '.join(lacks[:3])}){make}"), markup=True, highlight=False)
        elif diffs:
            more = f" (+{len(diffs) - 2} more)" if len(diffs) > 2 else ""
            match = "; ".join(b.get("host_match") or [])
            c.print(f"[yellow]other host:[/yellow] {escape(b['package'])} {b['build_string']} names host externals this "
                    f"machine does not have ({escape('; '.join(diffs[:2]))}{more}): built here it would get another id, "
                    f"so `lock`/`install` here would not find the lock's build"
                    + (f"; to match the lock: {escape(match)}" if match else ""), markup=True, highlight=False)
        for p in b.get("to_pin", []):
            where = p["urls"][0] if p.get("urls") else (p.get("tag") or p.get("rev") or "?")
            c.print(f"[yellow]to pin:[/yellow] {b['package']}: {p['what']} {p.get('version', '')} from {where} "
                    f"({p['recipe']}) — run `deepep-env fetch {d['name']}` on a machine with network")


def _render_requirements(c: Console, builds: list[dict[str, Any]]) -> None:
    """What each build asks rattler-build for (the conda build graph), as the recipe renders it."""
    rows = [(b["package"], out, sec, specs) for b in builds for out, secs in (b.get("requirements") or {}).items()
            for sec, specs in secs.items()]
    if not rows:
        return
    t = Table(title="recipe requirements (as rendered for this spec)")
    for col in ("build", "output", "env", "requirements"):
        t.add_column(col)
    for pkg, out, sec, specs in rows:
        t.add_row(pkg, out, sec, "\n".join(specs))
    c.print(t)


def _render_nvshmem_options(c: Console, opts: list[dict[str, Any]]) -> None:
    t = Table(title="NVSHMEM options (recipes/nvshmem: source by tree hash; recipes/nvshmem-wheel: NVIDIA's wheel by sha256)")
    for col in ("version", "RC-QP layout", "source", "wheel (sha256)", "for this spec"):
        t.add_column(col)
    for o in opts:
        w = o.get("wheel")
        wheel = f"{w['package']}=={o['version']} {w['sha256'][7:19]}…" if w else "-"
        ok = "[green]allowed[/green]" if not o.get("refused_by") else f"[red]{o['refused_by']['rule']}[/red]"
        t.add_row(("* " if o.get("selected") else "") + o["version"], o["layout"], o.get("source") or "-", wheel, ok)
    c.print(t)


WHEEL_TABLES = (
    ("cuda_wheels", "CUDA toolkit (recipes/cuda-wheel: NVIDIA's wheels by sha256, repacked into deepep-cuda-toolkit)"),
    ("pytorch_wheels", "PyTorch (recipes/pytorch-wheel: pip's closure of torch by sha256, NCCL's wheel included, "
                       "repacked into deepep-pytorch)"),
)


def _render_wheels(c: Console, title: str, rows: list[dict[str, Any]]) -> None:
    t = Table(title=title)
    for col in ("part", "wheel", "sha256", "MB"):
        t.add_column(col)
    for w in rows:
        t.add_row(w["part"], f"{w['project']}=={w['version']}", f"{w['sha256'][7:19]}…", f"{w['size'] / 1e6:.1f}")
    c.print(t)


def verified_line(v: dict[str, Any]) -> str:
    """The plan's one line on test records (deepep_env.verify.matrix.plan_verification), as rich text: what
    came from the records is printed as data (markup escaped, controls shown)."""
    from deepep_env.base.safetext import markup_free

    st = v.get("status")
    digest = markup_free(str(v.get("digest"))[7:19])
    if st == "verified":
        tests = ", ".join(sorted({f"{p['test']} on {p['platform']}" + (f", {p['ranks']} ranks" if p.get("ranks") else "")
                                  for p in v["passing"]}))
        signed = ", ".join(sorted({p["signature"]["label"] for p in v["passing"] if p.get("signature")}))
        return f"yes: a passing record for digest {digest} ({markup_free(tests)}; {markup_free(signed or 'unsigned')})"
    if st == "untrusted":
        return (f"no: passing records for digest {digest}, none signed by a key of {markup_free(str(v.get('trust')))} "
                f"(newest: {markup_free(str(v.get('untrusted_why')))})")
    if st == "too few ranks":
        short = ", ".join(sorted({f"{p['test']} ({p['ranks'] or 'unknown'} ranks)" for p in v["short"]}))
        return (f"no: passing records for digest {digest} used fewer ranks than the spec's [verify] ranks = "
                f"{v['ranks_required']} ({markup_free(short)})")
    if st == "failing":
        return f"no: {v['matching']} record(s) for digest {digest}, none passing"
    if st == "unverified":
        stale = f"; {v['stale']} record(s) for other locks" if v.get("stale") else ""
        if v.get("why"):   # no record at all: say why (issue 51.6)
            return f"no passing record for digest {digest}, no record at all: {markup_free(str(v['why']))}"
        if v.get("other_tests"):    # passing records of tests that are not DeepEP's prove nothing of it
            stale += f"; passing records of {markup_free(', '.join(v['other_tests']))} beside (only DeepEP's tests verify)"
        return f"no passing record for digest {digest} (run `deepep-env task deepep-test-… -e ENV`){stale}"
    if st == "not locked":
        return "not locked: records need a lock digest"
    return markup_free(str(v.get("error", st)))


def render_plan(c: Console, d: dict[str, Any]) -> None:
    render_resolved(c, d)
    for key, title in WHEEL_TABLES:
        if d.get(key):
            _render_wheels(c, title, d[key])
    if d.get("nvshmem_options"):
        _render_nvshmem_options(c, d["nvshmem_options"])
    if d.get("nvshmem_suggestion"):
        from rich.markup import escape

        c.print(f"[bold]suggestion[/bold]: {escape(d['nvshmem_suggestion'])}")
    lock = d.get("lock", {})
    why = f"{lock['why']}; next: " if lock.get("why") else ""
    c.print(f"[bold]lock[/bold] {lock.get('path')}: {lock.get('status')}" + (f" — {why}`{lock['hint']}`" if lock.get("hint") else ""))
    for reason in lock.get("reasons", []) or []:
        c.print(f"  - {reason}")
    ver = d.get("verified")
    if ver:
        c.print(f"[bold]verified[/bold]: {verified_line(ver)}")
    pre = d.get("prefix", {})
    c.print(f"[bold]prefix[/bold] {pre.get('path')}: {'installed' if pre.get('installed') else 'not installed'}")
    host = d.get("host")
    if host:
        c.print(f"[bold]host[/bold] {host.get('source')}: platform [bold]{host.get('platform')}[/bold]"
                + (f" (spec targets {', '.join(d['platforms'])})" if host.get("platform") not in d["platforms"] else ""))
        for ev in host.get("evidence", [])[:8]:
            c.print(f"  [dim]evidence:[/dim] {ev}")
        for k, v in (host.get("summary") or {}).items():
            c.print(f"  {k}: {v}")
    ov = d.get("overlay")
    if ov:
        t = Table(title="overlay (what `deepep-env activate` applies)")
        t.add_column("variable")
        t.add_column("value")
        t.add_column("rule ← fact")
        for ch in ov.get("changes", []):
            val = ch.get("value")
            t.add_row(ch.get("name", ""), "(unset)" if ch.get("op") == "unset" else str(val if val is not None else ""),
                      f"{ch.get('rule', '')} ← {ch.get('fact', '')}")
        c.print(t)
        for note in ov.get("notes", []):
            if isinstance(note, dict):
                c.print(f"  [yellow]{note.get('level', 'note')}:[/yellow] {note.get('message')} [dim]({note.get('rule')} ← {note.get('fact')})[/dim]")
            else:
                c.print(f"  [yellow]note:[/yellow] {note}")
    doc = d.get("doctor")
    if doc is not None:
        findings = doc.get("findings", [])
        if not findings:
            c.print("[bold]doctor[/bold]: [green]no findings[/green]")
        else:
            t = Table(title="doctor")
            for col in ("id", "severity", "evidence", "fix"):
                t.add_column(col)
            for f in findings:
                t.add_row(f.get("id", ""), f.get("severity", ""), _evidence(f.get("evidence")), f.get("fix", ""))
            c.print(t)
    for err in d.get("errors", []):
        c.print(f"[red]{err}[/red]")
