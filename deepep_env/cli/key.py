"""`deepep-env key new PATH`: an ed25519 key pair for signing test records (PATH, mode 0600; PATH.pub)."""
from __future__ import annotations

from typing import Optional

import typer

from deepep_env.cli._common import JsonOpt, print_json


def register(app: typer.Typer) -> None:
    key = typer.Typer(help="Keys that sign test records (in-toto attestations), offline.", no_args_is_help=True)
    app.add_typer(key, name="key")

    @key.command("new")
    def new_cmd(
        path: str = typer.Argument(..., metavar="PATH", help="the private key file to create (mode 0600); PATH.pub beside it"),
        name: Optional[str] = typer.Option(None, "--name", help="the key's name in PATH.pub (default: PATH's file name)"),
        as_json: bool = JsonOpt,
    ) -> None:
        """Make an ed25519 key pair: PATH (private, never overwritten) and PATH.pub (a trust file of one line)."""
        from pathlib import Path

        from deepep_env.verify.keys import load_trust, new_key

        priv, pub = new_key(Path(path), name)
        k = load_trust(pub).keys[0]
        if as_json:
            print_json({"key": str(priv), "public": str(pub), "name": k.name, "keyid": k.keyid})
            return
        print(f"wrote {priv} (private, mode 0600: keep it off channels and out of the project) and {pub} "
              f"(public: add its line to a trust file); keyid {k.keyid[:16]}…, name {k.name}")
