"""Renderers for lock data: a terminal table (rich), GitHub-flavoured markdown, JSON.

Pure functions of the data (:class:`LockDiff`, :class:`LockCheck`); nothing here computes.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypedDict

from deepep_env.lock.diff import LockDiff, PackageChange, PlatformDiff, VirtualPackageChange, order_key

if TYPE_CHECKING:  # annotations only: rich loads on first use
    from rich.console import Console


class _PrintOpts(TypedDict):
    """Console.print's options for data lines (typed, so ``**`` passes them checked)."""

    highlight: bool
    soft_wrap: bool


ARROW = "→"


def _vb(version: str, build: str) -> str:
    return f"{version} {build}".strip()


def _change_cells(c: PackageChange) -> tuple[str, str, str]:
    old = _vb(c.old_version, c.old_build)
    new = _vb(c.new_version, c.new_build)
    note = c.change
    if c.change == "content":
        note = "same build, different sha256"
    if c.old_channel != c.new_channel:
        # A version change that also switched channels (conda-forge → nvidia) must show both.
        moved = f"moved {c.old_channel} {ARROW} {c.new_channel}"
        note = moved if c.change == "moved" else f"{note}; {moved}"
    return old, new, note


def rows(sec: PlatformDiff) -> list[tuple[str, bool, str, str, str]]:
    """(name, pinned, old, new, change) for one section: one list, pinned components first (CUDA,
    NVSHMEM, NCCL, PyTorch, DeepEP…), then everything else by name — whatever the kind of change."""
    out: list[tuple[tuple, tuple[str, bool, str, str, str]]] = []

    def label(name: str, kind: str) -> str:
        # A pixi lock may hold a conda and a PyPI package of one name (numpy and numpy (pypi)).
        return name if kind == "conda" else f"{name} ({kind})"

    for c in sec.changed:
        old, new, note = _change_cells(c)
        out.append(((order_key(c.name), c.kind, 0), (label(c.name, c.kind), c.pinned, old, new, note)))
    for a in sec.added:
        out.append(((order_key(a.name), a.kind, 1),
                    (label(a.name, a.kind), a.component is not None, "", _vb(a.version, a.build), "added")))
    for r in sec.removed:
        out.append(((order_key(r.name), r.kind, 2),
                    (label(r.name, r.kind), r.component is not None, _vb(r.version, r.build), "", "removed")))
    return [row for _, row in sorted(out, key=lambda x: x[0])]


def diff_json(d: LockDiff) -> str:
    # sort_keys: byte-stable output for CI artefacts and golden files; list order is the review order.
    return json.dumps(d.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _md_escape(s: str) -> str:
    """A value inside a GitHub table cell: `|` ends the cell even inside a code span unless escaped;
    newlines end the row."""
    return str(s).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _md_code(s: str) -> str:
    """`s` as an inline code span (a backtick inside gets a longer fence)."""
    s = _md_escape(s)
    if not s:
        return ""
    fence = "``" if "`" in s else "`"
    pad = " " if "`" in s else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _vp_text(v: VirtualPackageChange) -> tuple[str, str]:
    return v.old or "-", v.new or "-"


def diff_markdown(d: LockDiff) -> str:
    s = d.summary()
    lines = [f"### Lock diff: {_md_code(d.old)} {ARROW} {_md_code(d.new)}", ""]
    if d.empty:
        lines += ["No changes.", ""]
        return "\n".join(lines)
    lines += [f"**{s['changed']} changed, {s['added']} added, {s['removed']} removed**"
              + (f"; {s['build_ids_changed']} build id(s) changed" if s["build_ids_changed"] else "")
              + (f"; {s['virtual_packages_changed']} virtual package(s) changed"
                 if s["virtual_packages_changed"] else ""), ""]
    for e in d.envs_added:
        lines.append(f"- environment `{e}` added")
    for e in d.envs_removed:
        lines.append(f"- environment `{e}` removed")
    for p in d.platforms_added:
        lines.append(f"- platform `{p}` added")
    for p in d.platforms_removed:
        lines.append(f"- platform `{p}` removed")
    for pc in d.platforms_changed:
        lines.append(f"- platform {_md_code(pc['platform'])} subdir: {_md_code(pc['old_subdir'])} {ARROW} "
                     f"{_md_code(pc['new_subdir'])}")
    for ch in d.channels_changed:
        lines.append(f"- {_md_code(ch['env'])} channels: {_md_escape(', '.join(ch['old'])) or '-'} {ARROW} "
                     f"{_md_escape(', '.join(ch['new'])) or '-'}")
    if d.virtual_packages:
        lines.append("- virtual packages:")
        for v in d.virtual_packages:
            o, n = _vp_text(v)
            lines.append(f"  - {_md_code(v.platform)}: {_md_code(o)} {ARROW} {_md_code(n)}")
    if (d.envs_added or d.envs_removed or d.platforms_added or d.platforms_removed or d.platforms_changed
            or d.channels_changed or d.virtual_packages):
        lines.append("")
    for sec in d.sections:
        if sec.empty:
            continue
        lines += [f"#### {_md_code(sec.env)} · {_md_code(sec.platform)}", "",
                  "| package | old | new | change |", "|---|---|---|---|"]
        for name, pinned, old, new, note in rows(sec):
            cell = f"**{_md_escape(name)}**" if pinned else _md_escape(name)
            lines.append(f"| {cell} | {_md_code(old)} | {_md_code(new)} | {_md_escape(note)} |")
        lines += ["", f"<sub>{sec.unchanged} unchanged</sub>", ""]
    if d.build_ids:
        lines += ["**Build ids changed**", ""]
        for b in d.build_ids:
            lines.append(f"- {_md_code(b.package)} ({_md_escape(b.env)} · {_md_escape(b.platform)}): "
                         f"{_md_code(b.old or '-')} {ARROW} {_md_code(b.new or '-')}")
        lines.append("")
    return "\n".join(lines)


def diff_table(d: LockDiff, console: Console) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    # Values are data, not rich markup: a build string or a path with `[...]` must print as written;
    # long URLs/paths must not be cut or wrapped mid-word by rich's highlighter.
    _plain: _PrintOpts = {"highlight": False, "soft_wrap": True}
    s = d.summary()
    console.print(f"[bold]{esc(d.old)}[/] {ARROW} [bold]{esc(d.new)}[/]: {s['changed']} changed, {s['added']} added, "
                  f"{s['removed']} removed, {s['build_ids_changed']} build id(s) changed"
                  + (f", {s['virtual_packages_changed']} virtual package(s) changed"
                     if s["virtual_packages_changed"] else ""), **_plain)
    if d.empty:
        console.print("no changes")
        return
    for e in d.envs_added:
        console.print(f"+ environment {e}")
    for e in d.envs_removed:
        console.print(f"- environment {e}")
    for p in d.platforms_added:
        console.print(f"+ platform {p}")
    for p in d.platforms_removed:
        console.print(f"- platform {p}")
    for pc in d.platforms_changed:
        console.print(f"~ platform {esc(pc['platform'])} subdir: {esc(pc['old_subdir'])} {ARROW} {esc(pc['new_subdir'])}",
                      **_plain)
    for ch in d.channels_changed:
        console.print(f"~ {esc(ch['env'])} channels: {esc(', '.join(ch['old']))} {ARROW} {esc(', '.join(ch['new']))}",
                      **_plain)
    for v in d.virtual_packages:
        o, n = _vp_text(v)
        console.print(f"~ {esc(v.platform)} virtual package: {esc(o)} {ARROW} {esc(n)}", **_plain)
    for sec in d.sections:
        if sec.empty:
            continue
        t = Table(title=f"{esc(sec.env)} · {esc(sec.platform)} ({sec.unchanged} unchanged)", title_justify="left")
        t.add_column("package", overflow="fold")
        t.add_column("old", overflow="fold")
        t.add_column("new", overflow="fold")
        t.add_column("change", overflow="fold")
        for name, pinned, old, new, note in rows(sec):
            style = {"added": "[green]added[/]", "removed": "[red]removed[/]"}.get(note, esc(note))
            t.add_row(f"[bold]{esc(name)}[/]" if pinned else esc(name), esc(old), esc(new), style)
        console.print(t)
    if d.build_ids:
        console.print("[bold]build ids changed[/]")
        for b in d.build_ids:
            console.print(f"  {esc(b.package)} ({esc(b.env)} · {esc(b.platform)}): {esc(b.old or '-')} {ARROW} "
                          f"{esc(b.new or '-')}", **_plain)


def check_text(data: dict[str, Any]) -> str:
    lines = [f"{data['env']}: lock {data['status']} ({data['path']})"]
    for r in data["reasons"]:
        lines.append(f"  [{r['kind']}] {r['message']}")
    for w in data.get("warnings", []):
        lines.append(f"  warning: {w}")
    for n in data.get("notes", []):
        lines.append(f"  note: {n}")
    return "\n".join(lines)
