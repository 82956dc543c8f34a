"""The project's command line: `python -m <package>` and the `<package>` console script.

`make:job` and `make:cron` run from the scaffolding alone (make_cli.py and what it
imports): writing a job and its test needs neither Celery nor the settings. Every
other command runs the whole command line (cli.py).
"""

from __future__ import annotations

import sys

SCAFFOLDING = ("make:job", "make:cron")


def main() -> None:
    """Run the command line of the project this process serves."""
    run(sys.argv[1:])


def run(args: list[str], prog_name: str | None = None) -> None:
    """Run the command line with `args`, shown as `prog_name` (default: as invoked).

    `python manage.py workergen ...` in a Django project runs it here too.
    """
    if args and args[0] in SCAFFOLDING:
        from workergen_runtime import project
        from workergen_runtime.cli.make import run_alone

        run_alone(args[0], args[1:], prog_name=prog_name or f"python -m {project.PACKAGE}")
        return
    from workergen_runtime.cli.main import app
    from workergen_runtime.cli.make import run_cli

    run_cli(app, args=args, **({"prog_name": prog_name} if prog_name else {}))
