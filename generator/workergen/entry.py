"""The `workergen` console script (and `python -m workergen`).

`workergen --version` and `workergen make:job` / `make:cron` run without the
rest of the command line: the version needs none of it, and `make:*` runs the
project's own command (`workergen.commands.make`), so neither imports typer's
group of every command and their modules. Everything else runs
`workergen.cli.app`, which is also where `--help` lists them all.
"""

from __future__ import annotations

import atexit
import gc
import sys
from collections.abc import Sequence

SCAFFOLDING = ("make:job", "make:cron")


def main(argv: Sequence[str] | None = None) -> None:
    """Run `workergen` with `argv` (default: the process's arguments).

    Without `argv` this is the console script (or `python -m workergen`): the
    process is the command's alone and ends with it (see `short_lived`).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        from workergen import __version__

        print(f"workergen {__version__}")
        return
    if argv is None:
        short_lived()
    if args[:1] and args[0] in SCAFFOLDING:
        from workergen.commands.make import run_alone

        run_alone(args[0], args[1:])
        return
    from workergen.cli import app

    app(args=args)


def short_lived() -> None:
    """Run the cycle collector for a process that loads a great deal and then ends.

    A command imports a few hundred modules (about 600 for `new`: copier and
    what it imports) and exits. While they load, the collector walks the
    growing heap of long-lived objects again and again, and it walks all of it
    once more as the interpreter shuts down: a tenth of `workergen new`'s time
    and some 60 ms at its exit, to free a few thousand objects that the end of
    the process frees anyway (about 0.7 MB more at the peak). So it stays off
    while the command runs, and everything still alive at exit is frozen (left
    out of the shutdown's collections) once the exit handlers have run; the
    handlers themselves, and the clean-up of everything freed as usual, run as
    they would.
    """
    gc.disable()
    # Registered before copier and the rest are imported: it runs after their exit handlers.
    atexit.register(gc.freeze)
