"""The `workergen` command line: wires the commands and handles their errors.

Commands live in `workergen.commands`, one module each. Nothing imported here
may import copier: `workergen --help` must stay fast. The console script is
`workergen.entry.main`, which runs this app.
"""

from __future__ import annotations

from typing import Annotated

import typer

from workergen import __version__
from workergen.boundary import WorkergenGroup
from workergen.commands.add import add
from workergen.commands.check import check
from workergen.commands.diff import diff
from workergen.commands.make import FORWARDED, make_cron, make_job, render_answers
from workergen.commands.new import new
from workergen.commands.update import update

app = typer.Typer(
    cls=WorkergenGroup,
    name="workergen",
    no_args_is_help=True,
    add_completion=False,
    # Plain help: formatting it with rich costs more than the rest of
    # `workergen --help` put together.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if not value:
        return
    typer.echo(f"workergen {__version__}")
    raise typer.Exit()


@app.callback()
def workergen(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Generate production-grade Celery worker projects."""


app.command("new")(new)
app.command("add")(add)
app.command("update")(update)
app.command("check")(check)
app.command("diff")(diff)
app.command("make:job", **FORWARDED)(make_job)
app.command("make:cron", **FORWARDED)(make_cron)
# Plumbing for a project's own `make:* --add-lane`, which has no template to render.
app.command("render-answers", hidden=True)(render_answers)
