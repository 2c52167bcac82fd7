"""`deepep-env verified [-e ENV] [--json]`: env × platform × test from the test records in verified/."""
from __future__ import annotations

from typing import Any, Optional

import typer

from deepep_env.cli._common import JsonOpt, ProjectOpt, TrustOpt, print_json, print_warnings, project, trust


def register(app: typer.Typer) -> None:
    @app.command("verified")
    def verified_cmd(
        env: Optional[str] = typer.Option(None, "--env", "-e", help="only this environment"),
        channel: Optional[str] = typer.Option(None, "--channel", help="read the records a file channel holds (DIR or file:///DIR, as `publish` shipped them) instead of the project's"),
        ranks: Optional[int] = typer.Option(None, "--ranks", min=1, help="a record verifies only with at least N ranks (the spec's [verify] ranks when higher)"),
        trust_file: Optional[str] = TrustOpt,
        project_dir: Optional[str] = ProjectOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """What was tested where: pass/fail, the newest figures, and whether each record still matches the lock."""
        from deepep_env.verify.matrix import build_matrix

        base = None
        if channel:
            from deepep_env.base.errors import UserError
            from deepep_env.publish.local import channel_path

            base = channel_path(channel) / "verified"
            if not base.is_dir():
                raise UserError("the channel holds no test records (no verified/ folder)", file=base, field="--channel",
                                accepted="a file channel `deepep-env publish ENV` shipped records to")
        m = build_matrix(project(project_dir), env, base, ranks, trust(trust_file))
        print_warnings(m["warnings"])
        if as_json:
            print_json(m)
            return
        if not m["cells"]:
            print("no test records under verified/ (run `deepep-env task deepep-test-… -e ENV`)")
            return
        render_table(m)


def _activation(c: dict[str, Any]) -> str:
    """The activation the deciding record ran under: its digest and how many variables it set (``--json``
    lists them), or why the record has none (``v1 record``)."""
    a = c.get("activation") or {}
    if not a.get("recorded"):
        return str(a.get("why") or "not recorded")
    return f"{str(a['digest'])[7:19]} ({len(a['variables'])} var.)"   # the variables: --json


def render_table(m: dict[str, Any]) -> None:
    """The matrix as a table; every value from a record printed as data (``Text``: no markup, controls shown)."""
    from rich.table import Table
    from rich.text import Text

    from deepep_env.base.safetext import terminal
    from deepep_env.cli._common import console

    t = Table(title=f"verified ({m['records']} records; lock: {m['lock']})")
    for col in ("env", "platform", "test", "result", "ranks", "lock", "records", "newest", "figures"):
        t.add_column(col, overflow="fold")   # a long value wraps, never cut with an ellipsis: data shown whole
    for c in m["cells"]:
        lock = "matches" if c["matches_lock"] else "stale"
        if not c["matches_lock"] and c["verified"]:
            lock = "stale (an older record matches)"
        figs = ", ".join(f"{k}={v:g}" for k, v in sorted(c["figures"].items()) if k.endswith(("_gbps", "_us")))
        res = Text("pass", style="green") if c["status"] == "pass" else Text("fail", style="red")
        if c.get("untrusted_why"):
            res = Text("pass, not trusted", style="yellow")
        ranks = str(c["ranks"] or "?") + (f"/{c['ranks_required']}" if c.get("ranks_required") else "")   # ran/needed
        data = [c["env"], c["platform"], c["test"]]
        signed = c["signature"]["label"]       # under the lock: signed by NAME, unsigned, or why not trusted
        if c.get("untrusted_why"):
            signed = f"not verified: {c['untrusted_why']}"
        t.add_row(*(Text(terminal(x)) for x in data), res, ranks, Text.assemble(lock, "\n", Text(terminal(signed)), "\n", Text(terminal("activation " + _activation(c)))),
                  f"{c['current_records']}/{c['records']}",
                  Text(terminal(f"{c['newest']['time']} {c['newest']['node']}")),
                  Text(terminal(figs or "-")))
    if m["cells"]:
        console().print(t)
    if m.get("none"):   # every locked env without any record: a row saying none, and why (issue 51.6)
        n = Table(title="locked, never tested")
        for col in ("env", "platform", "result", "why"):
            n.add_column(col, overflow="fold")
        for c in m["none"]:
            n.add_row(Text(terminal(c["env"])), Text(terminal(c["platform"])), Text("none", style="yellow"),
                      Text(terminal(c["why"])))
        console().print(n)
    if m.get("lock_error"):
        print(f"lock: {terminal(m['lock_error'])}")
