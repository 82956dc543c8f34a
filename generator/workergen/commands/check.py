"""`workergen check`: is the project on the template's latest release? For CI."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from workergen import exit_codes
from workergen.generated_project import find_project
from workergen.releases import latest_release, version_of

Prereleases = Annotated[
    bool, typer.Option("--prereleases", help="Count pre-release tags as releases.")
]


def check(prereleases: Prereleases = False) -> None:
    """Say whether a newer template release exists (exit 10 when one does).

    Exit codes: 0 up to date, 10 an update exists, 1 an error (for example the
    template repository cannot be read).
    """
    project = find_project(Path.cwd())
    provenance = project.provenance
    latest = latest_release(provenance.src_path, prereleases=prereleases)
    current = version_of(provenance.commit or "")
    typer.echo(f"template:  {provenance.src_path}")
    typer.echo(f"current:   {provenance.commit}")
    if latest is None:
        typer.echo("latest:    (the template has no release tags)")
        return
    typer.echo(f"latest:    {latest.tag}")
    if current is not None and current >= latest.version:
        typer.secho("The project is on the latest template release.", fg="green")
        return
    typer.secho(
        f"A template update is available: {provenance.commit} -> {latest.tag}. "
        "Run `workergen update`.",
        fg="yellow",
    )
    raise typer.Exit(exit_codes.UPDATE_AVAILABLE)
