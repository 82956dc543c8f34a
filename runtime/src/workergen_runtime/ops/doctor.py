"""`doctor`: audit the live settings, the Celery app and the broker, one check at a time.

Every check returns pass or fail with what it saw and, on a failure, the fix.
A check that cannot run (the broker is down) fails with the reason: doctor
never passes what it did not see.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import asdict, dataclass
from typing import Annotated, Any

import typer

from workergen_runtime import project
from workergen_runtime.errors import ProjectError
from workergen_runtime.queues import qualified_queue
from workergen_runtime.settings import Settings


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    # Passes, but is a risk taken on purpose that the report must show.
    warning: bool = False


def check_serialization(conf: Any) -> Check:
    """JSON only, both ways: any other accepted content type lets pickle in."""
    wrong = []
    for key in ("task_serializer", "result_serializer"):
        if conf.get(key) != "json":
            wrong.append(f"{key}={conf.get(key)!r}")
    for key in ("accept_content", "result_accept_content"):
        accepted = sorted(conf.get(key) or [])
        if accepted not in (["json"], ["application/json"]):
            wrong.append(f"{key}={accepted!r}")
    if wrong:
        return Check(
            "serialization",
            False,
            "accepts more than JSON: " + ", ".join(wrong),
            "The runtime sets JSON only; remove the project's change to these settings "
            "(app.conf or config_from_object in its modules): a pickle message runs code.",
        )
    return Check("serialization", True, "JSON only for tasks and results")


def check_acknowledgement(conf: Any) -> Check:
    """Late acknowledgement and reject-on-lost: a crash gives the job back."""
    wrong = [key for key in ("task_acks_late", "task_reject_on_worker_lost") if not conf.get(key)]
    if wrong:
        return Check(
            "acknowledgement",
            False,
            f"{' and '.join(wrong)} off: a job is lost when its worker dies",
            f"The runtime sets {' and '.join(wrong)}; remove the project's change to "
            "them (app.conf or config_from_object in its modules).",
        )
    return Check("acknowledgement", True, "acks_late and reject_on_worker_lost on")


def check_time_limits(settings: Settings, conf: Any, tasks: dict[str, Any]) -> Check:
    """Soft below hard; on Redis/SQS every job's hard limit below the visibility timeout."""
    problems = []
    soft, hard = conf.get("task_soft_time_limit"), conf.get("task_time_limit")
    if not soft or not hard:
        problems.append("a soft or hard time limit is not set")
    elif soft >= hard:
        problems.append(f"soft limit {soft} s is not below the hard limit {hard} s")
    if settings.uses_visibility_timeout:
        vt = settings.visibility_timeout
        for name, task in sorted(tasks.items()):
            limit = getattr(task, "time_limit", None) or hard
            if limit and limit >= vt:
                problems.append(f"{name} may run {limit} s, not below VISIBILITY_TIMEOUT {vt} s")
    if problems:
        return Check(
            "time limits",
            False,
            "; ".join(problems),
            "Keep TASK_SOFT_TIME_LIMIT < TASK_TIME_LIMIT, and every job's time_limit below "
            "VISIBILITY_TIMEOUT (raise VISIBILITY_TIMEOUT or lower the limit).",
        )
    detail = f"soft {soft} s < hard {hard} s"
    if settings.uses_visibility_timeout:
        detail += f" < visibility timeout {settings.visibility_timeout} s for every job"
    return Check("time limits", True, detail)


def check_namespace(settings: Settings, conf: Any) -> Check:
    """Every lane queue, the default queue and the control/event exchanges carry the namespace."""
    ns = settings.queue_namespace
    if not ns:
        return Check(
            "namespace",
            True,
            "QUEUE_NAMESPACE is empty: this app's queues have plain names; do not share "
            "the broker with another app",
        )
    expected = {
        "control_exchange": qualified_queue("celery", ns),
        "event_exchange": qualified_queue("celeryev", ns),
        "task_default_queue": qualified_queue("default", ns),
    }
    wrong = [f"{key}={conf.get(key)!r}" for key, want in expected.items() if conf.get(key) != want]
    wrong += [
        f"queue {queue.name!r}"
        for queue in conf.get("task_queues") or []
        if not queue.name.startswith(f"{ns}.")
    ]
    if wrong:
        return Check(
            "namespace",
            False,
            f"not under {ns!r}: " + ", ".join(wrong),
            "Name every queue and exchange through qualified_queue() (queues.py).",
        )
    return Check("namespace", True, f"queues and control/event exchanges under {ns!r}")


def check_jobs_import() -> tuple[Check, dict[str, Any]]:
    """Every module under jobs/ and crons/ imports; returns the registered jobs too."""
    from workergen_runtime.discovery import job_modules

    broken = []
    for name in job_modules():
        try:
            importlib.import_module(name)
        except Exception as exc:  # any error is the finding
            broken.append(f"{name}: {type(exc).__name__}: {exc}")
    from workergen_runtime.celery_app import app
    from workergen_runtime.jobs import Job

    tasks = {n: t for n, t in app.tasks.items() if isinstance(t, Job)}
    if broken:
        return (
            Check(
                "jobs import",
                False,
                "; ".join(broken),
                "Fix the import error (run `python -c 'import <module>'` to see the traceback).",
            ),
            tasks,
        )
    return Check("jobs import", True, f"{len(tasks)} job(s) and cron(s) registered"), tasks


def check_broker(settings: Settings, conf: Any) -> Check:
    """The broker answers."""
    from kombu import Connection

    try:
        with Connection(
            conf.get("broker_url"),
            transport=conf.get("broker_transport"),
            transport_options=conf.get("broker_transport_options") or {},
            connect_timeout=5,
        ) as connection:
            connection.ensure_connection(max_retries=1)
    except Exception as exc:  # any error is the finding
        return Check(
            "broker",
            False,
            f"{settings.safe_broker_url}: {type(exc).__name__}: {exc}",
            "Start the broker or point BROKER_URL at it.",
        )
    return Check("broker", True, f"reachable at {settings.safe_broker_url}")


def check_dead_letter_queues(settings: Settings) -> Check:
    """Every lane has somewhere for its dead letters, as the broker keeps them."""
    from workergen_runtime.ops.depth import queue_depths

    kind = settings.broker_kind
    try:
        depths = queue_depths(settings)
    except Exception as exc:  # any error is the finding
        return Check(
            "dead-letter queues",
            False,
            f"could not ask the broker: {type(exc).__name__}: {exc}",
            "Start the broker or point BROKER_URL at it.",
        )
    dead = [d for d in depths if d.dead_letter]
    if kind == "amqp":
        missing = [d.queue for d in dead if d.messages is None]
        fix = "Start a worker once (it declares them), or declare them with your broker tooling."
        if not missing:
            return _check_rabbitmq_policies(settings, dead)
    elif kind == "sqs":
        from workergen_runtime.ops.provision import missing_redrive

        missing = [d.queue for d in dead if d.messages is None]
        missing += [f"{name} (no redrive policy)" for name in missing_redrive(settings)]
        fix = "Run: queue provision"
    elif kind == "redis":
        return _check_redis_dead_letters(settings)
    else:
        return Check("dead-letter queues", False, f"the {kind!r} broker keeps no dead letters")
    if missing:
        return Check("dead-letter queues", False, "missing: " + ", ".join(missing), fix)
    return Check(
        "dead-letter queues",
        True,
        f"{len(dead)} declared: " + ", ".join(d.queue for d in dead),
    )


def _check_rabbitmq_policies(settings: Settings, dead: list[Any]) -> Check:
    """RabbitMQ: a lane routes what it rejects to its dead-letter queue only under its policy.

    Without the policy the broker drops a message the worker rejects: the queues
    alone are not enough, and policies doctor cannot read are not taken as set.
    """
    from workergen_runtime.brokers.amqp.policies import (
        PolicyUnavailableError,
        how_to_set,
        lane_policies,
        manual_commands,
        missing_policies,
    )

    name = "dead-letter queues"
    try:
        missing = missing_policies(settings)
    except PolicyUnavailableError as exc:
        return Check(
            name,
            False,
            f"{exc} Without them a message the worker rejects is dropped.",
            how_to_set(lane_policies(settings)),
        )
    if missing:
        return Check(
            name,
            False,
            "dead-letter policies not set as wanted: "
            + ", ".join(p.name for p in missing)
            + ". Without them a message the worker rejects is dropped.",
            "Run `queue provision` (a worker sets them too, once it is quiet), or apply them "
            "on the broker:\n" + manual_commands(missing),
        )
    return Check(
        name,
        True,
        f"{len(dead)} declared, each lane's dead-letter policy set: "
        + ", ".join(d.queue for d in dead),
    )


def _check_redis_dead_letters(settings: Settings) -> Check:
    """Redis: the project records dead letters in one hash per lane; nothing else may hold it."""
    import redis

    from workergen_runtime.ops.depth import lane_queue_names

    client = redis.Redis.from_url(settings.effective_broker_url, socket_connect_timeout=5)
    try:
        names = [name for _lane, name, dead in lane_queue_names(settings) if dead]
        wrong = []
        for name in names:
            kind = client.type(name).decode()
            if kind not in ("none", "hash"):
                wrong.append(f"{name} holds a {kind}")
    finally:
        client.close()
    if wrong:
        return Check(
            "dead-letter queues",
            False,
            "; ".join(wrong),
            "Another program writes those keys: give this app its own QUEUE_NAMESPACE "
            "or Redis database.",
        )
    return Check("dead-letter queues", True, "recorded by the project in: " + ", ".join(names))


def check_scheduler_lock(settings: Settings) -> Check:
    """The Redis at LOCK_URL that elects the scheduler's leader answers."""
    import redis

    from workergen_runtime.settings import mask_password

    url = settings.effective_lock_url
    client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
    try:
        client.ping()
    except redis.RedisError as exc:
        return Check(
            "scheduler lock",
            False,
            f"{mask_password(url)}: {exc}",
            "Start Redis or point LOCK_URL at one (the scheduler's leader lock lives there).",
        )
    finally:
        client.close()
    return Check("scheduler lock", True, f"reachable at {mask_password(url)}")


def check_http_access() -> Check:
    """The HTTP front door needs a token off loopback; an explicit opt-out is a warning."""
    from workergen_runtime.ops.http_api import exposure_problem, is_anonymous, load_http_settings

    try:
        http = load_http_settings()
    except ProjectError as exc:
        return Check("http access", False, str(exc), "Fix the settings named above (.env).")
    problem = exposure_problem(http.host, http)
    if problem:
        detail = f"HTTP_HOST={http.host} and no HTTP_TOKEN: `http serve` refuses to start"
        return Check("http access", False, detail, problem.partition("\n")[2])
    if is_anonymous(http):
        return Check(
            "http access",
            True,
            "HTTP_ALLOW_ANONYMOUS=true and no HTTP_TOKEN: whoever reaches the port can "
            "enqueue any job",
            "Set HTTP_TOKEN, or keep a gateway that authenticates in front of `http serve`.",
            warning=True,
        )
    if not http.token:
        return Check("http access", True, f"no HTTP_TOKEN: `http serve` on {http.host} only")
    return Check("http access", True, "a bearer token (HTTP_TOKEN) is required on /jobs")


def run_checks() -> list[Check]:
    """Every check, in order; settings that do not load are the only check."""
    from workergen_runtime.settings import get_settings

    try:
        settings = get_settings()
    except ProjectError as exc:
        return [Check("settings", False, str(exc), "Fix the settings named above (.env).")]
    from workergen_runtime.celery_app import app

    conf = app.conf
    jobs_check, tasks = check_jobs_import()
    return [
        Check(
            "settings", True, f"{settings.broker_kind} broker, lanes: {', '.join(project.LANES)}"
        ),
        check_serialization(conf),
        check_acknowledgement(conf),
        check_time_limits(settings, conf, tasks),
        check_namespace(settings, conf),
        jobs_check,
        check_broker(settings, conf),
        check_dead_letter_queues(settings),
        check_scheduler_lock(settings),
        *([check_http_access()] if project.HTTP_API else []),
    ]


def doctor(
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per check instead of the table.")
    ] = False,
) -> None:
    """Audit the live settings, the app and the broker; exit 1 when any check fails."""
    from rich.console import Console
    from rich.table import Table

    checks = run_checks()
    failed = [check.name for check in checks if not check.ok]
    if as_json:
        for check in checks:
            typer.echo(json.dumps(asdict(check)))
        if failed:
            raise typer.Exit(1)
        return
    table = Table(title=f"{project.PROJECT_NAME}: doctor", show_lines=False)
    table.add_column("check", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("what was seen")
    table.add_column("fix")
    for check in checks:
        result = "[red]FAIL[/red]"
        if check.ok:
            result = "[yellow]warn[/yellow]" if check.warning else "[green]pass[/green]"
        table.add_row(check.name, result, check.detail, check.fix)
    # Wide enough off a terminal (CI logs, pipes) that no check name is cut.
    console = Console(width=None if Console().is_terminal else 160)
    console.print(table)
    if failed == ["settings"]:
        # Settings that do not load: the same short message every other command gives.
        raise ProjectError(checks[0].detail)
    if failed:
        raise ProjectError(f"{len(failed)} check(s) failed: {', '.join(failed)}.")
    warned = [check.name for check in checks if check.warning]
    note = f" Warning: {', '.join(warned)} (see above)." if warned else ""
    console.print(f"All {len(checks)} checks passed.{note}")
