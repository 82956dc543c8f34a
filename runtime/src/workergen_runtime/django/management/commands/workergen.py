"""`python manage.py workergen <command>`: the runtime's command line in a Django project.

The same commands as `python -m <package>` of a generated project (queue work,
schedule work, dlq, doctor, monitor, make:job, ...), with their own options and help.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

PROG = "python manage.py workergen"


def run(args: list[str]) -> None:
    """Run the runtime's command line with `args`; exits as it does."""
    from workergen_runtime.cli.entry import run as run_command_line

    run_command_line(args, prog_name=PROG)


class Command(BaseCommand):
    help = "Run workers, the scheduler and the dead-letter tools (workergen runtime)."

    def run_from_argv(self, argv: list[str]) -> None:
        # Every argument after `workergen` is the runtime's: Django parses none of them.
        run(argv[2:])

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("args", nargs="*")

    def handle(self, *args: str, **options: Any) -> None:
        # call_command("workergen", "doctor"): a click command exits; a return is a success.
        try:
            run(list(args))
        except SystemExit as stop:
            if stop.code not in (0, None):
                raise
