"""`make:job` and `make:cron`: their options, declared here only; scaffold does the work.

The project's CLI registers these commands, and `workergen make:job` runs the same commands, so
both show the same options and write the same files. `python -m <package> make:job` runs them
alone (`run_alone`, from entry.py).
Nothing here may import Celery or the settings; scaffold is imported when a command runs,
so that the project's CLI loads this module (for `run_cli`) without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from workergen_runtime.errors import ProjectError

if TYPE_CHECKING:
    from workergen_runtime.scaffold import MakeRequest

Name = Annotated[str, typer.Argument(help="Name, e.g. SendInvoice or billing/refund.")]
Queue = Annotated[str, typer.Option("--queue", help="Lane to run on.")]
AddLane = Annotated[
    bool, typer.Option("--add-lane", help="Add the --queue lane to the project if it is new.")
]
Force = Annotated[bool, typer.Option("--force", help="Overwrite files that differ.")]
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Show what would be written; write nothing.")
]
App = Annotated[
    str, typer.Option("--app", help="Django projects: the app to write into, e.g. accounts.")
]


def run_request(request: MakeRequest) -> None:
    """Run a request and print its report; a refusal prints the files examined, then raises."""
    from workergen_runtime.scaffold import ScaffoldError, make_in_project

    try:
        lines = make_in_project(request)
    except ScaffoldError as error:
        for line in error.report:
            typer.echo(line)
        raise
    for line in lines:
        typer.echo(line)


def make_job(
    name: Name,
    queue: Queue = "default",
    add_lane: AddLane = False,
    retry_for: Annotated[
        str,
        typer.Option(
            "--retry-for",
            help="Transient errors to retry, comma-separated exception classes, "
            "e.g. ConnectionError,socket.timeout.",
        ),
    ] = "",
    max_retries: Annotated[int | None, typer.Option("--max-retries", min=0)] = None,
    backoff: Annotated[
        int | None, typer.Option("--backoff", help="First retry delay (s).", min=1)
    ] = None,
    idempotent: Annotated[
        bool, typer.Option("--idempotent", help="Run each idempotency key's work once.")
    ] = False,
    force: Force = False,
    dry_run: DryRun = False,
    app: App = "",
) -> None:
    """Create a job module and its test under jobs/ and tests/jobs/."""
    from workergen_runtime.scaffold import MakeRequest

    run_request(
        MakeRequest(
            kind="job",
            name=name,
            queue=queue,
            add_lane=add_lane,
            retry_for=retry_for,
            max_retries=max_retries,
            backoff=backoff,
            idempotent=idempotent,
            force=force,
            dry_run=dry_run,
            app=app,
        )
    )


def make_cron(
    name: Name,
    schedule: Annotated[
        str,
        typer.Option("--schedule", help='Crontab ("0 * * * *") or helper (daily(at="02:00")).'),
    ],
    queue: Queue = "default",
    add_lane: AddLane = False,
    force: Force = False,
    dry_run: DryRun = False,
    app: App = "",
) -> None:
    """Create a cron module and its test under crons/ and tests/crons/."""
    from workergen_runtime.scaffold import MakeRequest

    run_request(
        MakeRequest(
            kind="cron",
            name=name,
            queue=queue,
            add_lane=add_lane,
            schedule=schedule,
            force=force,
            dry_run=dry_run,
            app=app,
        )
    )


COMMANDS = {"make:job": make_job, "make:cron": make_cron}
"""The commands by their spelling, for the project's CLI and for `workergen`."""


def run_alone(spelling: str, args: Sequence[str], *, prog_name: str) -> None:
    """Run the `spelling` command with `args` as the project's CLI would, without the rest of it.

    The rest imports Celery and the settings, which writing a job and its test needs neither of;
    the usage, options and errors shown are those of `<prog_name> <spelling>` in the whole CLI.
    """
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(spelling)(COMMANDS[spelling])
    run_cli(app, args=list(args), prog_name=f"{prog_name} {spelling}")


def run_cli(app: typer.Typer, **options: Any) -> None:
    """Run `app` (with click's `options`); expected errors print as one message and exit 1."""
    try:
        app(**options)
    except ProjectError as exc:
        typer.secho(f"Error: {exc}", fg=typer.colors.RED, err=True)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        typer.secho("Stopped by user.", fg=typer.colors.RED, err=True)
        raise SystemExit(130) from None
