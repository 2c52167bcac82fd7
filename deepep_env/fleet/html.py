"""``fleet report --html FILE``: one self-contained page (no script, no external file).

A cell per node, coloured by state (pass, odd, fail); hovering a cell shows what is wrong with that
node (its doctor errors and the facts where it differs from the majority); below, the table of
differing facts with the majority value and the odd nodes. Written as well-formed XHTML, so a test
can parse it as XML: every value from a node report goes through :func:`deepep_env.base.safetext.terminal`
(controls shown as escapes, one line) and :func:`~deepep_env.base.safetext.xml` (``esc``).
"""
from __future__ import annotations

import json
from typing import Any

from deepep_env.base.safetext import terminal
from deepep_env.base.safetext import xml as escape

COLOURS = {"pass": "#2e7d32", "odd": "#f9a825", "fail": "#c62828"}

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em}
.grid{display:flex;flex-wrap:wrap;gap:4px;margin:1em 0}
.cell{width:5.5em;height:2.6em;border-radius:4px;color:#fff;font-size:.75em;display:flex;align-items:center;
justify-content:center;text-align:center;overflow:hidden;word-break:break-all;cursor:default}
.pass{background:#2e7d32}.odd{background:#f9a825;color:#222}.fail,.refused{background:#c62828}
table{border-collapse:collapse;margin-top:1em}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
.verdict-ok{color:#2e7d32}.verdict-bad{color:#c62828}
"""


def _v(value: Any) -> str:
    """A value from a node report, as one line of data."""
    return terminal("unknown" if value is None else (value if isinstance(value, str) else json.dumps(value)))


def _label(node: dict[str, Any]) -> str:
    """A node as the terminal report names it: the host name doctor read, else its file's name."""
    return _v(node.get("host") or node["node"] or "-")


def _hover(node: dict[str, Any], majority: dict[str, Any]) -> str:
    lines = [f"{_label(node)} ({_v(node['file'])}): {node['state']}"]
    if node["errors"]:
        lines.append("doctor errors: " + ", ".join(map(_v, node["errors"])))
    if (node.get("admission") or {}).get("why"):
        lines.append("not admitted: " + _v(node["admission"]["why"]))
    for fact in node["odd"]:
        lines.append(f"{fact}: {_v(node['facts'].get(fact))} (majority: {_v(majority.get(fact))})")
    return "\n".join(lines)


def render_html(rep: dict[str, Any]) -> str:
    majority = {d["fact"]: d["majority"] for d in rep["differing"]}
    hosts = {n["node"]: _label(n) for n in rep["per_node"]}
    ok = rep["ok"]
    b = rep["first_breaking"]
    out = ['<?xml version="1.0" encoding="utf-8"?>', "<!DOCTYPE html>",
           '<html xmlns="http://www.w3.org/1999/xhtml" lang="en"><head><meta charset="utf-8"/>',
           f"<title>deepep-env fleet report: {'PASS' if ok else 'FAIL'}</title>",
           f"<style>{_CSS}</style></head><body>",
           f"<h1>Fleet preflight: <span class=\"{'verdict-ok' if ok else 'verdict-bad'}\" id=\"verdict\">"
           f"{'PASS' if ok else 'FAIL'}</span></h1>",
           f"<p>{rep['nodes']} node(s), {rep['failing']} with doctor errors, "
           f"{'uniform' if rep['uniform'] else 'not uniform'}.</p>"]
    if b:
        out.append(f"<p id=\"first-breaking\">First node that would break the job: <b>{escape(_label(b))}</b>"
                   f"{escape(' (' + _v(b['node']) + ')' if b.get('host') and b['node'] else '')}: "
                   f"{escape(_v(b['why']))}</p>")
    out.append('<div class="grid" id="nodes">')
    for n in rep["per_node"]:
        out.append(f"<div class=\"cell {n['state']}\" data-node=\"{escape(_v(n['node']))}\" data-host=\"{escape(_v(n['host'] or ''))}\" "
                   f"data-state=\"{n['state']}\" title=\"{escape(_hover(n, majority))}\">{escape(_label(n))}</div>")
    out.append("</div>")
    out.append('<p>Legend: <span style="color:#2e7d32">■ pass</span> <span style="color:#f9a825">■ differs from the '
               'majority</span> <span style="color:#c62828">■ doctor errors</span></p>')
    if rep["differing"]:
        out.append('<table id="differing"><tr><th>fact</th><th>majority</th><th>nodes</th><th>odd nodes</th></tr>')
        for d in rep["differing"]:
            odd = "<br/>".join(f"{escape(hosts.get(o['node']) or _v(o['node']))}: {escape(_v(o['value']))}" for o in d["odd"][:200])
            if len(d["odd"]) > 200:
                odd += f"<br/>(+{len(d['odd']) - 200} more)"
            name = escape(d["fact"]) + ("" if d["required"] else " (informational)")
            out.append(f"<tr><td>{name}</td><td>{escape(_v(d['majority']))}</td><td>{d['majority_nodes']}</td>"
                       f"<td>{odd}</td></tr>")
        out.append("</table>")
    else:
        out.append("<p>Every node reports the same facts.</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
