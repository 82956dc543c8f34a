"""Two apps with different namespaces in one process: each names only its own queues."""

from celery import Celery

from workergen_runtime import project
from workergen_runtime.brokers.amqp.policies import lane_policies
from workergen_runtime.celery_app import create_app
from workergen_runtime.config import dead_letter_queues
from workergen_runtime.jobs import Job
from workergen_runtime.settings import Settings

# kombu's in-process broker: every app of this process sees the same queues.
MEMORY = "memory://"
LAST_LANE = project.LANES[-1]


def sample() -> str:
    """A job for the apps below."""
    return "ran"


def app_with_job(namespace: str, broker_url: str | None = None) -> tuple[Celery, Job]:
    """An app on `broker_url` (unset: this project's local broker) under `namespace`."""
    app = create_app(Settings(_env_file=None, broker_url=broker_url, queue_namespace=namespace))
    task = app.task(sample, name="tests.namespaces.sample", base=Job, shared=False)
    return app, task


def taken(app: Celery, queue: str) -> int:
    """How many messages wait in a queue of the in-process broker; they are removed."""
    with app.connection_for_read() as connection:
        return connection.default_channel.queue_purge(queue)


def declared_names(app: Celery) -> set[str]:
    """Every queue and exchange an app's worker declares or sends to; on RabbitMQ, its policies."""
    names = {app.conf.control_exchange, app.conf.event_exchange, app.conf.task_default_queue}
    queues = [*app.amqp.queues.values(), *dead_letter_queues(app.settings)]
    for queue in queues:
        names |= {queue.name, queue.exchange.name, queue.routing_key}
    if project.BROKER == "rabbitmq":
        for policy in lane_policies(app.settings):
            names |= {policy.name, policy.definition["dead-letter-exchange"]}
            names |= {policy.definition["dead-letter-routing-key"]}
    return names


def test_each_app_routes_its_jobs_to_its_own_lanes() -> None:
    alpha, alpha_job = app_with_job("alpha", MEMORY)
    beta, beta_job = app_with_job("beta", MEMORY)
    alpha_job.dispatch()
    beta_job.dispatch()
    beta_job.dispatch_with(lane=LAST_LANE)

    # Sent under another namespace, a job would not be in these queues (or would
    # fail to send: every app knows only its own queues).
    if LAST_LANE == "default":
        assert (taken(alpha, "alpha.default"), taken(beta, "beta.default")) == (1, 2)
    else:
        assert taken(alpha, "alpha.default") == 1
        assert (taken(beta, "beta.default"), taken(beta, f"beta.{LAST_LANE}")) == (1, 1)


def test_each_app_declares_only_its_own_queues_and_exchanges() -> None:
    apps = {namespace: app_with_job(namespace)[0] for namespace in ("alpha", "beta")}
    for namespace, app in apps.items():
        names = declared_names(app)
        assert {f"{namespace}.{lane}" for lane in project.LANES} <= names
        assert {f"{namespace}.{lane}.dlq" for lane in project.LANES} <= names
        assert {f"{namespace}.celery", f"{namespace}.celeryev"} <= names
        assert all(name.startswith(f"{namespace}.") for name in names), names
        assert app.settings.queue_namespace == namespace
