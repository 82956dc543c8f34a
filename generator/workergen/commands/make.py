"""`workergen make:job` and `workergen make:cron`, run anywhere inside a generated project.

The commands, their options and the work are the project's own (`core/make_cli.py` and
`core/scaffold.py`), loaded from its files: the help and the files written are those of
`python -m <package> make:job`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
import typer.main

from workergen.errors import NotAProjectError, UserMessageError
from workergen.generated_project import find_project
from workergen.project_core import load_core, project_error
from workergen.provenance import ANSWERS_FILE

FORWARDED: dict[str, Any] = {
    # Every argument, --help included, goes to the project's command.
    "context_settings": {
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "help_option_names": [],
    },
    "add_help_option": False,
}


def run_project_command(ctx: typer.Context, spelling: str) -> None:
    """Run the project's own `spelling` command with the arguments given to workergen."""
    args = list(ctx.args)
    try:
        project = find_project(Path.cwd())
    except NotAProjectError:
        if "--help" in args or "-h" in args:
            typer.echo(f"Usage: workergen {spelling} NAME [OPTIONS]\n")
            typer.echo(
                f"{ctx.command.help}\n\nIts options are the project's own: run "
                f"`workergen {spelling} --help` inside a project to see them."
            )
            return
        raise
    package = project.answers.get("package_name")
    if not isinstance(package, str) or not package.isidentifier():
        raise UserMessageError(
            f"{project.root / ANSWERS_FILE} records no valid package_name",
            hint="Restore the file from git, or run `copier update`.",
        )
    make_cli = load_core(project.root, package)
    scaffold = importlib.import_module(f"{make_cli.__name__.rpartition('.')[0]}.scaffold")
    if hasattr(scaffold, "answer_renderer"):
        # workergen holds the template: a new lane is rendered here, not by a second workergen.
        scaffold.answer_renderer = rerender_answers
    commands = getattr(make_cli, "COMMANDS", None) or {
        "make:job": make_cli.make_job,
        "make:cron": make_cli.make_cron,
    }
    single = typer.Typer(add_completion=False, rich_markup_mode=None)
    single.command(spelling)(commands[spelling])
    command = typer.main.get_command(single)
    try:
        # Not standalone: an exit (--help, Ctrl-C) comes back as its code, a usage error is
        # raised to workergen's own command line, which shows it.
        code = command.main(args=args, prog_name=f"workergen {spelling}", standalone_mode=False)
    except project_error(make_cli) as error:
        message = getattr(error, "message", str(error))
        raise UserMessageError(message, hint=getattr(error, "hint", None)) from None
    if isinstance(code, int) and code:
        raise typer.Exit(code)


def rerender_answers(root: Path, answers: dict[str, Any]) -> list[tuple[str, str]]:
    """The template's files that `answers` change in the project at `root` (its edits kept)."""
    from workergen.answer_change import rerender

    return rerender(root, answers)


def render_answers() -> None:
    """Print, as JSON, the template's files that new answers (JSON on stdin) change here.

    The project's own `make:job --add-lane` runs this: the project holds no template.
    """
    import json

    try:
        answers = json.loads(sys.stdin.read())
    except ValueError as error:
        raise UserMessageError(f"render-answers reads the answers as JSON: {error}") from None
    if not isinstance(answers, dict):
        raise UserMessageError("render-answers reads the answers as a JSON object")
    files = rerender_answers(find_project(Path.cwd()).root, answers)
    typer.echo(json.dumps([{"path": path, "content": text} for path, text in files]))


def run_alone(spelling: str, args: Sequence[str]) -> None:
    """Run `workergen <spelling> ARGS` on its own, as the group would run it (`workergen.entry`)."""
    from workergen.boundary import WorkergenCommand

    single = typer.Typer(add_completion=False, rich_markup_mode=None)
    single.command(spelling, cls=WorkergenCommand, **FORWARDED)(COMMANDS[spelling])
    single(args=list(args), prog_name=f"workergen {spelling}")


def make_job(ctx: typer.Context) -> None:
    """Create a job module and its test in the project around the current folder."""
    run_project_command(ctx, "make:job")


def make_cron(ctx: typer.Context) -> None:
    """Create a cron module and its test in the project around the current folder."""
    run_project_command(ctx, "make:cron")


COMMANDS = {"make:job": make_job, "make:cron": make_cron}
"""The commands by their spelling."""
