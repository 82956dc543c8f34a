"""`schedule work|run|list`: the scheduler, one-shot runs for system cron, and the cron list."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from workergen_runtime.errors import ProjectError

schedule_app = typer.Typer(help="Run the scheduler and the crons.", no_args_is_help=True)


@schedule_app.command("work")
def schedule_work(
    loglevel: Annotated[str | None, typer.Option(help="Log level. Default: LOG_LEVEL.")] = None,
    pidfile: Annotated[Path | None, typer.Option(help="Write the scheduler's PID here.")] = None,
) -> None:
    """Run the scheduler. Start as many as you like: one leads, the others stand by."""
    from workergen_runtime.celery_app import app
    from workergen_runtime.discovery import import_jobs
    from workergen_runtime.scheduling.scheduler import TICK_INTERVAL, scheduler_class
    from workergen_runtime.settings import get_settings

    import_jobs()  # a module that cannot be imported stops the start, with its error
    settings = get_settings()
    scheduler = scheduler_class()
    if settings.metrics_port:
        from workergen_runtime.ops.metrics import measured_scheduler

        scheduler = measured_scheduler(scheduler, settings.metrics_port)
    app.Beat(
        scheduler=scheduler,
        loglevel=loglevel or settings.log_level,
        max_interval=TICK_INTERVAL,
        pidfile=str(pidfile) if pidfile else None,
        quiet=True,
    ).run()


@schedule_app.command("run")
def schedule_run(
    name: Annotated[str | None, typer.Argument(help="Run only this cron, due or not.")] = None,
    all_crons: Annotated[bool, typer.Option("--all", help="Run every cron, due or not.")] = False,
) -> None:
    """Run the crons due this minute once, here, and exit (for system cron or a CronJob)."""
    from workergen_runtime.celery_app import app
    from workergen_runtime.scheduling.crons import registered_crons
    from workergen_runtime.scheduling.scheduler import is_due_now

    crons = registered_crons()
    if name is not None:
        chosen = {n: t for n, t in crons.items() if name in (n, n.rsplit(".", 1)[-1])}
        if not chosen:
            raise ProjectError(f"No cron named {name!r}. Crons: {', '.join(crons) or 'none'}.")
    elif all_crons:
        chosen = crons
    else:
        now = app.now()
        chosen = {n: t for n, t in crons.items() if is_due_now(t.schedule, now)}
    failed = []
    for cron_name, task in chosen.items():
        result = task.apply()
        outcome = "failed" if result.failed() else "ran"
        typer.echo(f"{outcome} {cron_name}")
        if result.failed():
            failed.append(cron_name)
    if not chosen:
        typer.echo("no cron is due")
    if failed:
        raise ProjectError(f"{len(failed)} cron(s) failed: {', '.join(failed)}.")


@schedule_app.command("list")
def schedule_list() -> None:
    """Show every cron with its lane, schedule and next run time.

    With django-celery-beat's scheduler (DJANGO_SCHEDULER = "database"), the
    entries made in the admin follow, marked (database).
    """
    from workergen_runtime.celery_app import app
    from workergen_runtime.scheduling.crons import registered_crons
    from workergen_runtime.scheduling.scheduler import next_run, uses_database_scheduler
    from workergen_runtime.scheduling.schedules import describe

    now = app.now()
    crons = registered_crons()
    entries: list[str] = []
    if uses_database_scheduler():
        from workergen_runtime.django.scheduler import database_entries

        entries = list(database_entries(crons, now))
    if not crons and not entries:
        typer.echo("no crons: add one with make:cron NAME --schedule EXPR")
    for name, task in crons.items():
        typer.echo(
            f"{name}  lane={task.lane}  schedule={describe(task.schedule)}  "
            f"next={next_run(task.schedule, now).isoformat(timespec='seconds')}"
        )
    for line in entries:
        typer.echo(line)
