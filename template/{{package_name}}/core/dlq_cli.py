"""`dlq`: list, inspect, replay and purge dead letters, the same way on every broker."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Annotated

import typer

from .errors import ProjectError
from .log import printable

dlq_app = typer.Typer(
    help="Dead letters: jobs that failed for good, list them, fix the bug, replay them.",
    no_args_is_help=True,
)

LaneOption = Annotated[str | None, typer.Option(help="Only this lane. Default: every lane.")]


def _store():
    from .deadletter import store_for
    from .settings import get_settings

    return store_for(get_settings())


@dlq_app.command("list")
def dlq_list(
    lane: LaneOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """List dead letters, oldest first."""
    store = _store()
    try:
        letters = store.list(lane)
    finally:
        store.close()
    for letter in letters:
        if as_json:
            typer.echo(json.dumps(asdict(letter), default=str))
            continue
        line = (
            f"{_short(letter.id)}  {_short(letter.lane or '?'):<10} "
            f"{_short(letter.task_name or '?')}  {letter.reason}  attempts={letter.attempts}  "
            f"last={letter.last_failed_at}  {_first_line(letter.exception)}"
        )
        typer.echo(printable(line, newlines=False))
    if not as_json:
        typer.echo(f"{len(letters)} dead letter(s)", err=True)


@dlq_app.command("show")
def dlq_show(letter_id: Annotated[str, typer.Argument(help="The id `dlq list` shows.")]) -> None:
    """Everything known about one dead letter: arguments, error, traceback, message."""
    store = _store()
    try:
        letter = store.show(letter_id)
    finally:
        store.close()
    for label, value in (
        ("id", letter.id),
        ("task", letter.task_name),
        ("task id", letter.task_id),
        ("lane", letter.lane),
        ("reason", letter.reason),
        ("attempts", letter.attempts),
        ("first failed", letter.first_failed_at),
        ("last failed", letter.last_failed_at),
        ("content type", letter.content_type),
        ("args", _short(json.dumps(letter.args), 2000)),
        ("kwargs", _short(json.dumps(letter.kwargs), 2000)),
        ("exception", letter.exception),
    ):
        typer.echo(printable(f"{label + ':':<14}{value}"))
    for name, size in sorted(letter.truncated.items()):
        typer.echo(f"{'truncated:':<14}{name} was {size} characters/bytes; the record keeps less")
    if letter.traceback:
        typer.echo(printable("traceback:\n" + letter.traceback.rstrip()))
    if not letter.replayable:
        body = letter.body if len(letter.body) < 2000 else letter.body[:2000] + "..."
        typer.echo(printable(f"body ({letter.body_encoding}):\n{body}"))


@dlq_app.command("replay")
def dlq_replay(
    letter_id: Annotated[str | None, typer.Argument(help="The id `dlq list` shows.")] = None,
    replay_all: Annotated[
        bool, typer.Option("--all", help="Every replayable dead letter.")
    ] = False,
    lane: LaneOption = None,
) -> None:
    """Put a job back on its lane with fresh attempts (after fixing what made it fail)."""
    if bool(letter_id) == replay_all:
        raise ProjectError("Give one dead letter id, or --all (optionally with --lane).")
    store = _store()
    try:
        if letter_id:
            typer.echo(f"replayed {letter_id} as {store.replay(letter_id)}")
            return
        new_ids = store.replay_all(lane)
    finally:
        store.close()
    for new_id in new_ids:
        typer.echo(f"replayed as {new_id}")
    typer.echo(f"{len(new_ids)} dead letter(s) replayed")


@dlq_app.command("purge")
def dlq_purge(
    lane: LaneOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete dead letters for good."""
    where = f"lane {lane!r}" if lane else "every lane"
    if not yes and not sys.stdin.isatty():
        raise ProjectError("Purging deletes dead letters for good: pass --yes to confirm.")
    if not yes and not typer.confirm(f"Delete the dead letters of {where}?", default=False):
        raise ProjectError("Nothing purged.")
    store = _store()
    try:
        removed = store.purge(lane)
    finally:
        store.close()
    typer.echo(f"purged {removed} dead letter(s) from {where}")


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0][:120] if (text or "").strip() else ""


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
