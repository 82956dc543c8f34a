"""`workergen make:job` and `workergen make:cron`, run anywhere inside a generated project.

The commands, their options and the work are the worker runtime's (`workergen_runtime.cli.make`
and `workergen_runtime.scaffold`), the same the project's own `python -m <package> make:job`
runs: the help and the files written are the same.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
import typer.main

from workergen.errors import NotAProjectError, UserMessageError
from workergen.generated_project import find_project
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
    from workergen_runtime.scaffold import find_django_project

    if find_django_project(Path.cwd()) is not None:
        # Workers added to a Django project (`workergen add`): the job goes in the app
        # --app names.
        run_runtime_command(spelling, args)
        return
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
    if (project.root / package / "core").is_dir():
        raise UserMessageError(
            f"{project.root} carries its own copy of the worker runtime ({package}/core/), "
            "from a release before the runtime library",
            hint="Run `workergen update` in the project first (docs/updating.md), or run "
            f"`python -m {package} {spelling}` there.",
        )
    run_runtime_command(spelling, args)


def run_runtime_command(spelling: str, args: list[str]) -> None:
    """The runtime's `spelling` command (workergen_runtime.cli.make) with `args`."""
    from workergen_runtime import scaffold
    from workergen_runtime.cli import make as make_cli
    from workergen_runtime.errors import ProjectError

    # workergen holds the template: a new lane is rendered here, not by a second workergen.
    scaffold.answer_renderer = rerender_answers
    single = typer.Typer(add_completion=False, rich_markup_mode=None)
    single.command(spelling)(make_cli.COMMANDS[spelling])
    command = typer.main.get_command(single)
    try:
        # Not standalone: an exit (--help, Ctrl-C) comes back as its code, a usage error is
        # raised to workergen's own command line, which shows it.
        code = command.main(args=args, prog_name=f"workergen {spelling}", standalone_mode=False)
    except ProjectError as error:
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
