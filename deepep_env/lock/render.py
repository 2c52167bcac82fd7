"""Renderers for lock data: a terminal table (rich), GitHub-flavoured markdown, JSON.

Pure functions of the data (:class:`LockDiff`, :class:`LockCheck`); nothing here computes.
"""
from __future__ import annotations

import json
from typing import Any

from deepep_env.lock.diff import LockDiff, PackageChange, PackageEntry, PlatformDiff, order_key

ARROW = "→"


def _vb(version: str, build: str) -> str:
    return f"{version} {build}".strip()


def _change_cells(c: PackageChange) -> tuple[str, str, str]:
    old = _vb(c.old_version, c.old_build)
    new = _vb(c.new_version, c.new_build)
    note = c.change
    if c.change == "moved":
        note = f"moved {c.old_channel} {ARROW} {c.new_channel}"
    if c.change == "content":
        note = "same build, different sha256"
    return old, new, note


def rows(sec: PlatformDiff) -> list[tuple[str, bool, str, str, str]]:
    """(name, pinned, old, new, change) for one section: one list, pinned components first (CUDA,
    NVSHMEM, NCCL, PyTorch, DeepEP…), then everything else by name — whatever the kind of change."""
    out: list[tuple[tuple, tuple[str, bool, str, str, str]]] = []
    for c in sec.changed:
        old, new, note = _change_cells(c)
        out.append(((order_key(c.name), 0), (c.name, c.pinned, old, new, note)))
    for a in sec.added:
        out.append(((order_key(a.name), 1), (a.name, a.component is not None, "", _vb(a.version, a.build), "added")))
    for r in sec.removed:
        out.append(((order_key(r.name), 2), (r.name, r.component is not None, _vb(r.version, r.build), "", "removed")))
    return [row for _, row in sorted(out, key=lambda x: x[0])]


def diff_json(d: LockDiff) -> str:
    return json.dumps(d.to_dict(), indent=2) + "\n"


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|")


def diff_markdown(d: LockDiff) -> str:
    s = d.summary()
    lines = [f"### Lock diff: `{_md_escape(d.old)}` {ARROW} `{_md_escape(d.new)}`", ""]
    if d.empty:
        lines += ["No changes.", ""]
        return "\n".join(lines)
    lines += [f"**{s['changed']} changed, {s['added']} added, {s['removed']} removed**"
              + (f"; {s['build_ids_changed']} build id(s) changed" if s["build_ids_changed"] else ""), ""]
    for e in d.envs_added:
        lines.append(f"- environment `{e}` added")
    for e in d.envs_removed:
        lines.append(f"- environment `{e}` removed")
    for p in d.platforms_added:
        lines.append(f"- platform `{p}` added")
    for p in d.platforms_removed:
        lines.append(f"- platform `{p}` removed")
    for ch in d.channels_changed:
        lines.append(f"- `{ch['env']}` channels: {', '.join(ch['old']) or '-'} {ARROW} {', '.join(ch['new']) or '-'}")
    if d.envs_added or d.envs_removed or d.platforms_added or d.platforms_removed or d.channels_changed:
        lines.append("")
    for sec in d.sections:
        if sec.empty:
            continue
        lines += [f"#### `{sec.env}` · `{sec.platform}`", "", "| package | old | new | change |", "|---|---|---|---|"]
        for name, pinned, old, new, note in rows(sec):
            cell = f"**{name}**" if pinned else name
            o = f"`{_md_escape(old)}`" if old else ""
            n = f"`{_md_escape(new)}`" if new else ""
            lines.append(f"| {cell} | {o} | {n} | {note} |")
        lines += ["", f"<sub>{sec.unchanged} unchanged</sub>", ""]
    if d.build_ids:
        lines += ["**Build ids changed**", ""]
        for b in d.build_ids:
            lines.append(f"- `{b.package}` ({b.platform}): `{b.old or '-'}` {ARROW} `{b.new or '-'}`")
        lines.append("")
    return "\n".join(lines)


def diff_table(d: LockDiff, console) -> None:
    from rich.table import Table

    s = d.summary()
    console.print(f"[bold]{d.old}[/] {ARROW} [bold]{d.new}[/]: {s['changed']} changed, {s['added']} added, "
                  f"{s['removed']} removed, {s['build_ids_changed']} build id(s) changed")
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
    for ch in d.channels_changed:
        console.print(f"~ {ch['env']} channels: {', '.join(ch['old'])} {ARROW} {', '.join(ch['new'])}")
    for sec in d.sections:
        if sec.empty:
            continue
        t = Table(title=f"{sec.env} · {sec.platform} ({sec.unchanged} unchanged)", title_justify="left")
        t.add_column("package")
        t.add_column("old")
        t.add_column("new")
        t.add_column("change")
        for name, pinned, old, new, note in rows(sec):
            style = {"added": "[green]added[/]", "removed": "[red]removed[/]"}.get(note, note)
            t.add_row(f"[bold]{name}[/]" if pinned else name, old, new, style)
        console.print(t)
    if d.build_ids:
        console.print("[bold]build ids changed[/]")
        for b in d.build_ids:
            console.print(f"  {b.package} ({b.platform}): {b.old or '-'} {ARROW} {b.new or '-'}")


def check_text(data: dict[str, Any]) -> str:
    lines = [f"{data['env']}: lock {data['status']} ({data['path']})"]
    for r in data["reasons"]:
        lines.append(f"  [{r['kind']}] {r['message']}")
    for w in data.get("warnings", []):
        lines.append(f"  warning: {w}")
    return "\n".join(lines)


def entries_text(entries: list[PackageEntry]) -> str:
    return ", ".join(f"{e.name} {_vb(e.version, e.build)}" for e in entries)
