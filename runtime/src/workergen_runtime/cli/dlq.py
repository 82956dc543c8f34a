"""`dlq`: list, inspect, replay and purge dead letters, the same way on every broker."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer

from workergen_runtime.errors import ProjectError
from workergen_runtime.log import printable

if TYPE_CHECKING:
    from workergen_runtime.deadletter import DeadLetterStore, Unreached

dlq_app = typer.Typer(
    help="Dead letters: jobs that failed for good, list them, fix the bug, replay them.",
    no_args_is_help=True,
)

LaneOption = Annotated[str | None, typer.Option(help="Only this lane. Default: every lane.")]

# A progress line on stderr every so many letters (replay, purge; list and show
# only once they have run a while).
PROGRESS_EVERY = 100
QUIET_READ_SECONDS = 2.0
# The exit code of a replay or purge that could not reach every letter: run it again.
EX_TEMPFAIL = 75


class Progress:
    """Counts letters as a store gets through them, a line on stderr every PROGRESS_EVERY."""

    def __init__(self, quiet_for: float = 0.0) -> None:
        self.counts: Counter[str] = Counter()
        self.started = time.monotonic()
        self.quiet_for = quiet_for

    def __call__(self, what: str, count: int) -> None:
        before = self.counts[what]
        self.counts[what] += count
        elapsed = time.monotonic() - self.started
        crossed = before // PROGRESS_EVERY != self.counts[what] // PROGRESS_EVERY
        if crossed and elapsed >= self.quiet_for:
            typer.echo(f"... {self.counts[what]} {what} ({elapsed:.0f} s)", err=True)


def _store() -> DeadLetterStore:
    from workergen_runtime.deadletter import store_for
    from workergen_runtime.settings import get_settings

    return store_for(get_settings())


def _store_with(progress: Progress) -> DeadLetterStore:
    """The store, telling `progress` of each letter it gets through."""
    store = _store()
    store.progress = progress
    return store


def _unreached_lines(unreached: Unreached, verb: str) -> list[str]:
    """What a command could not reach, said so its count is not taken for all of them."""
    lines = []
    if unreached.in_flight:
        lines.append(
            f"{unreached.in_flight} dead letter(s) in flight (hidden by another reader): "
            f"not {verb}; run again in {unreached.retry_after} s at most"
        )
    if unreached.readers:
        lines.append(
            f"{unreached.readers} other reader(s) of the dead-letter queue: letters they "
            f"hold unacknowledged are not {verb} and come back to the queue when they let go"
        )
    if unreached.timed_out:
        lines.append(f"stopped at the time bound with letters not {verb}: run again for the rest")
    return lines


@dlq_app.command("list")
def dlq_list(
    lane: LaneOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """List dead letters, oldest first."""
    store = _store_with(Progress(quiet_for=QUIET_READ_SECONDS))
    try:
        letters = store.list(lane)
        unreached = store.unreached(lane)
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
    for line in _unreached_lines(unreached, "listed"):
        typer.echo(line, err=True)


@dlq_app.command("show")
def dlq_show(letter_id: Annotated[str, typer.Argument(help="The id `dlq list` shows.")]) -> None:
    """Everything known about one dead letter: arguments, error, traceback, message."""
    from workergen_runtime.deadletter import DeadLetterNotFoundError

    store = _store_with(Progress(quiet_for=QUIET_READ_SECONDS))
    try:
        try:
            letter = store.show(letter_id)
        except DeadLetterNotFoundError as exc:
            unreached = _unreached_lines(store.unreached(), "searched")
            raise ProjectError("\n".join([str(exc), *unreached])) from None
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
    progress = Progress()
    store = _store_with(progress)
    try:
        if letter_id:
            typer.echo(f"replayed {letter_id} as {store.replay(letter_id)}")
            return
        new_ids = store.replay_all(lane)
        unreached = store.unreached(lane)
    finally:
        store.close()
    for new_id in new_ids:
        typer.echo(f"replayed as {new_id}")
    typer.echo(f"{len(new_ids)} dead letter(s) replayed")
    if progress.counts["skipped"]:
        typer.echo(
            f"{progress.counts['skipped']} dead letter(s) cannot be replayed (not a JSON job): "
            "left in place; inspect them with `dlq show`, then purge them"
        )
    _end_with(unreached, "replayed")


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
    store = _store_with(Progress())
    try:
        removed = store.purge(lane)
        unreached = store.unreached(lane)
    finally:
        store.close()
    typer.echo(f"purged {removed} dead letter(s) from {where}")
    _end_with(unreached, "purged")


def _end_with(unreached: Unreached, verb: str) -> None:
    """Say what was out of reach; exit EX_TEMPFAIL then, so a script runs the command again."""
    lines = _unreached_lines(unreached, verb)
    for line in lines:
        typer.echo(line)
    if lines:
        raise typer.Exit(EX_TEMPFAIL)


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0][:120] if (text or "").strip() else ""


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
