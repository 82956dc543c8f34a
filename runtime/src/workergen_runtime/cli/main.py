"""The project's command line: `python -m <package>` or the `<package>` script."""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from workergen_runtime import project
from workergen_runtime.cli.make import run_cli
from workergen_runtime.cli.provision import queue_provision
from workergen_runtime.errors import ProjectError

Command = TyperCommand | TyperGroup

# The commands in the order `--help` lists them: name -> "module:attribute", a command function
# or a Typer app of that module, imported when the command runs or `--help` lists it, so that
# `queue work` starts without them; None for `queue`, defined here.
LOADED_ON_USE: dict[str, str | None] = {
    "make:job": "workergen_runtime.cli.make:make_job",
    "make:cron": "workergen_runtime.cli.make:make_cron",
    "doctor": "workergen_runtime.ops.doctor:doctor",
    "monitor": "workergen_runtime.ops.monitor:monitor",
    "queue": None,
    "dlq": "workergen_runtime.cli.dlq:dlq_app",
    "schedule": "workergen_runtime.cli.schedule:schedule_app",
    **({"http": "workergen_runtime.cli.http:http_app"} if project.HTTP_API else {}),
}


def load_command(name: str) -> Command:
    """The command `name` of LOADED_ON_USE, built as `app.add_typer` or `app.command` would."""
    module_name, _, attribute = str(LOADED_ON_USE[name]).partition(":")
    target = getattr(importlib.import_module(module_name), attribute)
    holder = typer.Typer()
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
    else:
        holder.command(name)(target)
    return typer.main.get_group(holder).commands[name]


class LoadingCommands(MutableMapping[str, Command]):
    """A group's commands: those given and LOADED_ON_USE's, each of these loaded when used."""

    def __init__(self, loaded: Mapping[str, Command]) -> None:
        self.loaded = dict(loaded)
        self.order = [*LOADED_ON_USE, *(n for n in self.loaded if n not in LOADED_ON_USE)]

    def __getitem__(self, name: str) -> Command:
        if name not in self.loaded:
            if not LOADED_ON_USE.get(name):
                raise KeyError(name)
            self.loaded[name] = load_command(name)
        return self.loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        if name not in self.order:
            self.order.append(name)
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self.order.remove(name)
        self.loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)


class LoadingGroup(TyperGroup):
    """The top-level group: its commands' modules are imported when needed (LoadingCommands)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LoadingCommands(self.commands)

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(self.commands)


app = typer.Typer(
    name=project.PACKAGE.replace("_", "-"),
    help=f"{project.PROJECT_NAME}: run workers, dispatch jobs and manage queues.",
    cls=LoadingGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
queue_app = typer.Typer(help="Run workers and put jobs on the queues.", no_args_is_help=True)
app.add_typer(queue_app, name="queue")
queue_app.command("provision")(queue_provision)

log = logging.getLogger(__name__)

LanesOption = Annotated[
    str | None,
    typer.Option(
        "--queue",
        "-Q",
        help="Lanes to consume, comma-separated (e.g. critical,default). Default: every lane.",
    ),
]


@queue_app.command("work")
def queue_work(
    queue: LanesOption = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Worker processes. Default: one per CPU.", min=1)
    ] = None,
    pool: Annotated[
        str | None,
        typer.Option(
            help="prefork, solo, threads or gevent (needs the gevent extra). "
            "Default: prefork (solo on Windows)."
        ),
    ] = None,
    loglevel: Annotated[str | None, typer.Option(help="Log level. Default: LOG_LEVEL.")] = None,
    prefetch: Annotated[
        int | None,
        typer.Option(
            help="Messages reserved per process. Default: the lane's LANE_PREFETCH (default "
            "lane: 4), else WORKER_PREFETCH_MULTIPLIER (1); the lowest of the lanes served. "
            "Raise it only on lanes of short tasks.",
            min=1,
        ),
    ] = None,
    pidfile: Annotated[
        Path | None, typer.Option(help="Write the worker's PID here (for supervisors).")
    ] = None,
    hostname: Annotated[str | None, typer.Option(help="Worker node name.")] = None,
) -> None:
    """Start a worker on the given lanes. The worker never runs the scheduler."""
    from workergen_runtime.queues import parse_lanes
    from workergen_runtime.settings import get_settings
    from workergen_runtime.worker.start import (
        POOLS,
        choose_pool,
        prepare_pool,
        run_worker,
        worker_argv,
    )

    settings = get_settings()
    if pool and pool not in POOLS:
        raise ProjectError(f"Unknown pool {pool!r}; choose one of: {', '.join(POOLS)}.")
    prepare_pool(pool)  # before the worker starts a thread or opens a connection
    lanes = parse_lanes(queue)
    if prefetch is None:
        prefetch = settings.prefetch_for(lanes)
    else:
        try:
            settings.check_prefetch(prefetch, "--prefetch")
        except ValueError as exc:
            raise ProjectError(str(exc)) from None
    choice = choose_pool(pool, sys.platform)
    if settings.broker_kind == "sqs":
        from workergen_runtime.ops.provision import require_provisioned

        require_provisioned(settings)
        typer.echo(
            "SQS: remote control and events are off (SQS has no broadcast); "
            "`celery inspect`, `control` and Flower will not see this worker.",
            err=True,
        )
    if settings.broker_kind == "amqp":
        from workergen_runtime.brokers.amqp.policies import apply_in_background

        apply_in_background(settings)  # rejects wait for it; its outcome is logged

    if settings.metrics_port:
        # Before any job module is imported: one that imports prometheus_client
        # must find the multiprocess folder already set.
        from workergen_runtime.ops.metrics import install_worker_metrics

        install_worker_metrics(settings, lanes)
    from workergen_runtime.celery_app import app as celery_app
    from workergen_runtime.discovery import import_jobs

    import_jobs()  # a module that cannot be imported stops the start, with its error
    argv = worker_argv(
        lanes=lanes,
        loglevel=loglevel or settings.log_level,
        pool=choice.pool,
        concurrency=concurrency,
        prefetch=prefetch,
        pidfile=pidfile,
        hostname=hostname,
        namespace=settings.queue_namespace,
    )
    if choice.note:
        logging.getLogger(project.PACKAGE).warning(choice.note)
        typer.echo(choice.note, err=True)
    exit_code = run_worker(celery_app, argv)
    if exit_code:
        raise typer.Exit(exit_code)


@queue_app.command("dispatch")
def queue_dispatch(
    name: Annotated[str, typer.Argument(help="Job name, e.g. hello or billing.hello.")],
    args: Annotated[str, typer.Option(help="Positional arguments as a JSON list.")] = "[]",
    kwargs: Annotated[str, typer.Option(help="Keyword arguments as a JSON object.")] = "{}",
    lane: Annotated[str | None, typer.Option(help="Another lane than the job's own.")] = None,
    wait: Annotated[
        float | None,
        typer.Option(help="Wait up to this many seconds for the result (needs a result backend)."),
    ] = None,
) -> None:
    """Put one job on its queue, and optionally wait for its result."""
    from workergen_runtime.discovery import import_jobs
    from workergen_runtime.jobs import Job
    from workergen_runtime.settings import get_settings

    call_args = _json_arg("--args", args, list)
    call_kwargs = _json_arg("--kwargs", kwargs, dict)
    settings = get_settings()  # a bad setting is named before any job module is imported
    if wait is not None and settings.effective_result_backend is None:
        raise ProjectError(
            "--wait needs a result backend: set RESULT_BACKEND_URL (e.g. redis://localhost:6379/1)."
        )
    import_jobs()
    from workergen_runtime.celery_app import app as celery_app

    jobs = {n: t for n, t in celery_app.tasks.items() if isinstance(t, Job)}
    task = jobs.get(name) or jobs.get(f"{project.PACKAGE}.{name}")
    if task is None:
        known = ", ".join(sorted(jobs)) or "none"
        raise ProjectError(f"No job named {name!r}. Known jobs: {known}.")
    result = task.dispatch_with(args=call_args, kwargs=call_kwargs, lane=lane)
    typer.echo(f"dispatched {task.name} id={result.id}")
    if wait is not None:
        from celery.exceptions import TimeoutError as ResultTimeout

        try:
            value = result.get(timeout=wait)
        except ResultTimeout:
            # Stop listening for the result now: left to interpreter shutdown,
            # the result backend's clean-up fails and prints a traceback.
            result.backend.remove_pending_result(result)
            raise ProjectError(
                f"No result within {wait:g} s. Is a worker running on lane "
                f"{lane or task.lane!r}? Start one with: queue work --queue {lane or task.lane}"
            ) from None
        typer.echo(f"result {json.dumps(value, default=str)}")


@queue_app.command("lanes")
def queue_lanes() -> None:
    """List the lanes and the queues they map to under QUEUE_NAMESPACE."""
    from workergen_runtime.queues import dead_letter_queue, qualified_queue
    from workergen_runtime.settings import get_settings

    namespace = get_settings().queue_namespace
    for lane in project.LANES:
        typer.echo(
            f"{lane:<12} queue={qualified_queue(lane, namespace)}  "
            f"dead-letter={dead_letter_queue(lane, namespace)}"
        )


def _json_arg(flag: str, raw: str, kind: type) -> Any:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ProjectError(f"{flag} must be JSON ({exc.msg}).") from None
    if not isinstance(value, kind):
        raise ProjectError(f"{flag} must be a JSON {'list' if kind is list else 'object'}.")
    return value


def main() -> None:
    """Run the CLI; expected errors print as one message and exit 1."""
    run_cli(app)
