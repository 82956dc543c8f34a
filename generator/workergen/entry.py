"""The `workergen` console script (and `python -m workergen`).

`workergen --version` and `workergen make:job` / `make:cron` run without the
rest of the command line: the version needs none of it, and `make:*` runs the
project's own command (`workergen.commands.make`), so neither imports typer's
group of every command and their modules. Everything else runs
`workergen.cli.app`, which is also where `--help` lists them all.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

SCAFFOLDING = ("make:job", "make:cron")


def main(argv: Sequence[str] | None = None) -> None:
    """Run `workergen` with `argv` (default: the process's arguments)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        from workergen import __version__

        print(f"workergen {__version__}")
        return
    if args[:1] and args[0] in SCAFFOLDING:
        from workergen.commands.make import run_alone

        run_alone(args[0], args[1:])
        return
    from workergen.cli import app

    app(args=args)
