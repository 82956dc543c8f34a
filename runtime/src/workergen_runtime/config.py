"""The Celery configuration, built from Settings by one pure function."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kombu import Exchange, Queue

from workergen_runtime import project
from workergen_runtime.queues import DEFAULT_LANE, dead_letter_queue, qualified_queue
from workergen_runtime.settings import Settings

# Publishing gives up after about two seconds, so a dispatch to a dead broker
# fails fast instead of hanging the caller.
PUBLISH_RETRY_POLICY = {
    "max_retries": 3,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 1,
}


def lane_queue_arguments(settings: Settings, lane: str) -> dict[str, Any]:
    """RabbitMQ arguments of a lane's queue: only its type, which no policy can set.

    Dead-lettering (and a quorum lane's delivery limit) comes from the lane's
    policy (policies.py), so any client may declare the lane as plain Celery
    does and the broker accepts it as the same queue.
    """
    if settings.broker_kind != "amqp" or project.QUEUE_TYPE != "quorum":
        return {}
    return {"x-queue-type": "quorum"}


def lane_exchange_type() -> str:
    """Quorum lanes use topic exchanges: Celery's native delayed delivery needs them."""
    return "topic" if project.QUEUE_TYPE == "quorum" else "direct"


def lane_queues(settings: Settings) -> list[Queue]:
    """One durable queue per lane, each under the namespace."""
    ns = settings.queue_namespace
    queues = []
    for lane in project.LANES:
        name = qualified_queue(lane, ns)
        queues.append(
            Queue(
                name,
                Exchange(name, type=lane_exchange_type()),
                routing_key=name,
                durable=True,
                queue_arguments=lane_queue_arguments(settings, lane) or None,
            )
        )
    return queues


def dead_letter_queues(settings: Settings) -> list[Queue]:
    """RabbitMQ: the dead-letter exchange and queue of every lane.

    They are classic durable queues: listing dead letters hands them back to
    the queue, which a quorum queue would count as failed deliveries.
    """
    queues = []
    for lane in project.LANES:
        name = dead_letter_queue(lane, settings.queue_namespace)
        queues.append(Queue(name, Exchange(name, type="direct"), routing_key=name, durable=True))
    return queues


def transport_options(settings: Settings) -> dict[str, Any]:
    """Broker transport options for the effective broker."""
    options: dict[str, Any] = {}
    if settings.uses_visibility_timeout:
        options["visibility_timeout"] = settings.visibility_timeout
    if settings.broker_kind == "redis":
        options["socket_connect_timeout"] = 5
        options["socket_timeout"] = 30
        options.update(recovery_options(settings))
    if settings.broker_kind == "amqp":
        # The broker confirms every publish: dispatch returns once RabbitMQ has the job.
        options["confirm_publish"] = True
    if settings.broker_kind == "sqs":
        options["region"] = settings.sqs_region
        options["is_secure"] = settings.effective_sqs_is_secure
        options.update(sqs_polling_options(settings))
    if settings.broker_kind == "filesystem":
        folder = Path(urlsplit(settings.effective_broker_url).path or ".broker")
        options["data_folder_in"] = str(folder / "messages")
        options["data_folder_out"] = str(folder / "messages")
        options["processed_folder"] = str(folder / "processed")
        options["store_processed"] = False
    return options


def sqs_polling_options(settings: Settings) -> dict[str, Any]:
    """SQS: how often the worker receives, and how long each receive waits.

    Long polling (`wait_time_seconds`): a receive on an empty queue waits on
    SQS's side until a message arrives, so an idle lane costs one request per
    wait instead of one per poll. kombu waits `polling_interval` more after an
    empty receive and, which is what bounds a busy lane, before it looks again
    at whether a reserved message has been acknowledged when all are taken:
    its 1 s default held a worker to about prefetch x processes jobs a second.
    Each receive asks for the free reservations, up to SQS's 10 a request.
    """
    return {
        "wait_time_seconds": settings.sqs_wait_time_seconds,
        "polling_interval": settings.sqs_polling_interval,
    }


def recovery_options(settings: Settings) -> dict[str, Any]:
    """Redis: namespaced keys for unacknowledged messages and the workers holding them."""
    ns = settings.queue_namespace
    return {
        "unacked_key": qualified_queue("unacked", ns),
        "unacked_index_key": qualified_queue("unacked_index", ns),
        "unacked_mutex_key": qualified_queue("unacked_mutex", ns),
        "holders_prefix": qualified_queue("holders", ns),
        "holder_ttl": settings.worker_heartbeat_ttl,
    }


def broker_transport(settings: Settings) -> str | None:
    """The project's own transports (transports.py, sqs_transport.py).

    Redis and SQS quarantine an envelope they cannot read. Redis also restores a
    dead worker's messages within seconds (recovery.py); SQS names queues
    one-to-one. RabbitMQ runs on kombu's own py-amqp transport.
    """
    scheme = urlsplit(settings.effective_broker_url).scheme
    if scheme in ("redis", "rediss"):
        return "workergen_runtime.brokers.redis.transport:RedisTransport"
    if settings.broker_kind == "sqs":
        return "workergen_runtime.brokers.sqs.transport:Transport"
    return None


def build_config(settings: Settings) -> dict[str, Any]:
    """Every Celery setting the project relies on, with its secure default."""
    ns = settings.queue_namespace
    broker_url = settings.effective_broker_url
    if settings.broker_kind == "filesystem":
        broker_url = "filesystem://"
    return {
        "broker_url": broker_url,
        "broker_transport": broker_transport(settings),
        "broker_transport_options": transport_options(settings),
        "broker_connection_retry_on_startup": True,
        "broker_connection_timeout": 5,
        "broker_channel_error_retry": True,
        # JSON only, both ways: a pickle message is refused before it is decoded.
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        # Acknowledge after the task ran, and give the message back when the
        # worker process dies under it, so nothing is lost on a crash.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        # A failure or a hard time limit is not acknowledged (which would drop the
        # job) nor requeued (which would loop): the worker dead-letters it.
        "task_acks_on_failure_or_timeout": False,
        "worker_consumer": "workergen_runtime.worker.consumer:DeadLetterConsumer",
        "worker_prefetch_multiplier": settings.worker_prefetch_multiplier,
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        # The prefork pool with cheaper time limits (pool.py); --pool still picks another.
        "worker_pool": "workergen_runtime.worker.pool:TaskPool",
        "task_soft_time_limit": settings.task_soft_time_limit,
        "task_time_limit": settings.task_time_limit,
        "worker_max_tasks_per_child": settings.worker_max_tasks_per_child,
        "worker_max_memory_per_child": settings.worker_max_memory_per_child,
        "task_publish_retry": True,
        "task_publish_retry_policy": PUBLISH_RETRY_POLICY,
        # Lanes are explicit: a message for an unknown queue is an error, not a new queue.
        "task_queues": lane_queues(settings),
        "task_default_queue": qualified_queue(DEFAULT_LANE, ns),
        "task_default_exchange": qualified_queue(DEFAULT_LANE, ns),
        "task_default_routing_key": qualified_queue(DEFAULT_LANE, ns),
        "task_create_missing_queues": False,
        "control_exchange": qualified_queue("celery", ns),
        "event_exchange": qualified_queue("celeryev", ns),
        "worker_hijack_root_logger": False,
        "worker_redirect_stdouts": False,
        "timezone": settings.timezone,
        "enable_utc": True,
        **sqs_overrides(settings),
        **result_config(settings.effective_result_backend),
    }


def result_config(backend: str | None) -> dict[str, Any]:
    """Where results are kept, for how long, and how hard a store is retried; with no
    backend, none is kept."""
    return {
        "result_backend": backend,
        "result_expires": 3600 if backend else None,
        "task_ignore_result": backend is None,
        **result_backend_retries(backend),
    }


def result_backend_retries(backend: str | None) -> dict[str, Any]:
    """How long the result backend is retried.

    A dispatch first subscribes to its result: with the backend down it gives
    up as soon as a publish to a dead broker does (PUBLISH_RETRY_POLICY), not
    after Celery's twenty retries. A worker storing a result keeps retrying
    for longer, with backoff, so a short outage loses no result.
    """
    if not backend:
        return {}
    return {
        "redis_socket_connect_timeout": 2,
        "result_backend_transport_options": {"retry_policy": PUBLISH_RETRY_POLICY},
        "result_backend_always_retry": True,
        "result_backend_max_retries": 10,
        "result_backend_max_sleep_between_retries_ms": 5000,
    }


def sqs_overrides(settings: Settings) -> dict[str, Any]:
    """SQS has no broadcast: no remote control (pidbox) and no events."""
    if settings.broker_kind != "sqs":
        return {}
    return {
        "worker_enable_remote_control": False,
        "worker_send_task_events": False,
        "task_send_sent_event": False,
    }
