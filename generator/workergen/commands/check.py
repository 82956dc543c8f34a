"""`workergen check`: is the project on the template's latest release? For CI.

The releases are those of the installed workergen's template (the RELEASES
file of its checkout, or of the history its wheel ships), or of `--template`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from workergen import exit_codes
from workergen.errors import NoReleaseError
from workergen.generated_project import find_project
from workergen.options import HistoryOption
from workergen.template_source import history_of

Prereleases = Annotated[bool, typer.Option("--prereleases", help="Count pre-releases as releases.")]


def check(prereleases: Prereleases = False, template: HistoryOption = None) -> None:
    """Say whether a newer template release exists (exit 10 when one does).

    Exit codes: 0 on the latest release (or newer), 10 an update exists, 1 an
    error (the releases or the project's version cannot be read).
    """
    project = find_project(Path.cwd())
    provenance = project.provenance
    with history_of(template) as history:
        latest = history.latest_release(prereleases=prereleases)
        if latest is None:
            raise NoReleaseError(source=history.source)
        current = history.version(str(provenance.commit))
    typer.echo(f"releases:  {history.source}")
    typer.echo(f"current:   {current.name}")
    typer.echo(f"latest:    {latest.tag} (commit {latest.commit[:12]})")
    if current.version is not None and current.version >= latest.version:
        typer.secho(f"The project is on {latest.tag}, the latest release, or newer.", fg="green")
        return
    typer.secho(
        f"A template update is available: {current.name} -> {latest.tag}. Run `workergen update`.",
        fg="yellow",
    )
    raise typer.Exit(exit_codes.UPDATE_AVAILABLE)
