"""The one exception boundary of the `workergen` command line, for its group and lone commands.

Expected errors (`UserMessageError`) become a red message and exit 1; Ctrl-C exits 130.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from workergen.errors import UserMessageError


class ErrorBoundary:
    """Mixed into a click command: its `invoke` reports expected errors without a traceback."""

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except UserMessageError as error:
            typer.secho(f"Error: {error.message}", fg="red", err=True)
            if error.hint:
                typer.secho(error.hint, fg="red", err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            typer.secho("Execution stopped by user", fg="red", err=True)
            raise typer.Exit(130) from None


class WorkergenGroup(ErrorBoundary, TyperGroup):
    """The `workergen` group of commands."""


class WorkergenCommand(ErrorBoundary, TyperCommand):
    """A `workergen` command run on its own (see `workergen.entry`)."""
