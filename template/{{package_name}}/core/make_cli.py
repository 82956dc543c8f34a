"""`make:job` and `make:cron` in the project's own CLI; the work is done by core.scaffold."""

from __future__ import annotations

from typing import Annotated

import typer

from .errors import ProjectError
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
    """Run a request and print its report; a refusal becomes a ProjectError."""
    try:
        lines = make_in_project(request)
    except ScaffoldError as error:
        for line in error.report:
            typer.echo(line)
        raise ProjectError(str(error)) from None
    for line in lines:
        typer.echo(line)


def make_job(
    name: Name,
    queue: Queue = "default",
    add_lane: AddLane = False,
    retry_for: Annotated[
        str, typer.Option("--retry-for", help="Transient errors to retry, e.g. ConnectionError.")
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
