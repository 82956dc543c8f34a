"""`workergen make:job` and `workergen make:cron`, run anywhere inside a generated project.

The project's own `core/scaffold.py` does the work, so the files are byte for byte those of
`python -m <package> make:job`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from workergen.errors import UserMessageError
from workergen.project_core import find_project_root, load_core, package_of

Name = Annotated[str, typer.Argument(help="Name, e.g. SendInvoice or billing/refund.")]
Queue = Annotated[str, typer.Option("--queue", help="Lane to run on.")]
AddLane = Annotated[
    bool, typer.Option("--add-lane", help="Add the --queue lane to the project if it is new.")
]
Force = Annotated[bool, typer.Option("--force", help="Overwrite files that differ.")]
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Show what would be written; write nothing.")
]


def run_request(**request: Any) -> None:
    """Run the project's scaffolding for a request and print its report."""
    root = find_project_root(Path.cwd())
    package = package_of(root)
    scaffold, project = load_core(root, package)
    try:
        lines = scaffold.make(
            root, scaffold.MakeRequest(**request), package=package, lanes=tuple(project.LANES)
        )
    except scaffold.ScaffoldError as error:
        for line in error.report:
            typer.echo(line)
        raise UserMessageError(error.message, hint=error.hint) from None
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
    """Create a job module and its test in the project around the current folder."""
    run_request(
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
    """Create a cron module and its test in the project around the current folder."""
    run_request(
        kind="cron",
        name=name,
        queue=queue,
        add_lane=add_lane,
        schedule=schedule,
        force=force,
        dry_run=dry_run,
    )
