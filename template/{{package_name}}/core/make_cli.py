"""`make:job` and `make:cron`: their options, declared here only; core.scaffold does the work.

The project's CLI registers these commands, and `workergen make:job` loads this module from the
project's files and runs the same commands, so both show the same options and write the same
files. Nothing here may import Celery or the settings.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .scaffold import MakeRequest, ScaffoldError, make_in_project

Name = Annotated[str, typer.Argument(help="Name, e.g. SendInvoice or billing/refund.")]
Queue = Annotated[str, typer.Option("--queue", help="Lane to run on.")]
AddLane = Annotated[
    bool, typer.Option("--add-lane", help="Add the --queue lane to the project if it is new.")
]
Force = Annotated[bool, typer.Option("--force", help="Overwrite files that differ.")]
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Show what would be written; write nothing.")
]


def run_request(request: MakeRequest) -> None:
    """Run a request and print its report; a refusal prints the files examined, then raises."""
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
) -> None:
    """Create a job module and its test under jobs/ and tests/jobs/."""
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
) -> None:
    """Create a cron module and its test under crons/ and tests/crons/."""
    run_request(
        MakeRequest(
            kind="cron",
            name=name,
            queue=queue,
            add_lane=add_lane,
            schedule=schedule,
            force=force,
            dry_run=dry_run,
        )
    )


COMMANDS = {"make:job": make_job, "make:cron": make_cron}
"""The commands by their spelling, for the project's CLI and for `workergen`."""
