"""How often a job was delivered: a job that keeps killing its worker is stopped.

RabbitMQ quorum queues count deliveries themselves (`x-delivery-limit`). Redis
and classic RabbitMQ queues do not, but both mark a message they deliver again
as `redelivered`. A first delivery therefore costs nothing; the worker counts
each redelivery of a task id (and retry number) in Redis - the broker itself on
Redis, LOCK_URL on RabbitMQ - before the job runs, and drops the counter once
the job is done.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from functools import cache, cached_property
from typing import Any

from workergen_runtime import project
from workergen_runtime.queues import qualified_queue
from workergen_runtime.settings import Settings
from workergen_runtime.worker.bodies import body_digest

log = logging.getLogger(__name__)

# The longest task id a counter is named by (as the intake checks it).
MAX_TASK_ID = 255
# A counter outlives any redelivery of its task, then disappears by itself.
COUNTER_TTL = 7 * 24 * 3600

# Set once the broker holds the rules a message given back or rejected relies on.
# RabbitMQ: the lanes' dead-letter policies (and quorum delivery limit), which a
# worker applies in the background as it starts (policies.py).
broker_rules_ready = threading.Event()
broker_rules_ready.set()
# Set when something waits for those rules: their check must not wait any longer.
broker_rules_wanted = threading.Event()


class DeliveryCounter:
    """Counts deliveries per (task id, retry) in Redis."""

    def __init__(self, url: str, namespace: str, limit: int) -> None:
        self.url = url
        self.namespace = namespace
        self.limit = limit

    @cached_property
    def client(self) -> Any:
        """Connected on the first redelivery: a first delivery never needs Redis."""
        import redis

        return redis.Redis.from_url(self.url, socket_connect_timeout=5, socket_timeout=10)

    def key(self, task_id: str, retries: int) -> str:
        return qualified_queue(f"deliveries.{task_id}.{retries}", self.namespace)

    def count(self, task_id: str, retries: int, *, redelivered: bool) -> int | None:
        """Deliveries so far, this one included; None when Redis cannot count (run anyway).

        The first delivery is not stored: only redeliveries add to the counter.
        """
        if not redelivered:
            return 1
        import redis

        key = self.key(task_id, retries)
        try:
            pipe = self.client.pipeline(transaction=True)
            redeliveries, _ = pipe.incr(key).expire(key, COUNTER_TTL).execute()
        except redis.RedisError as exc:
            log.warning("Cannot count deliveries of %s (%s); running it anyway.", task_id, exc)
            return None
        return int(redeliveries) + 1

    def forget(self, task_id: str, retries: int) -> None:
        """The job is done (or dead-lettered): drop its counter."""
        import redis

        with contextlib.suppress(redis.RedisError):  # else it expires by itself
            self.client.delete(self.key(task_id, retries))


def counts_deliveries(settings: Settings) -> bool:
    """Quorum queues count on the broker; Redis and classic RabbitMQ count here."""
    if settings.broker_kind == "redis":
        return True
    return settings.broker_kind == "amqp" and project.QUEUE_TYPE != "quorum"


@cache
def delivery_counter(celery_app: Any) -> DeliveryCounter | None:
    """An app's counter (one per process), or None when the broker counts (or nothing can)."""
    settings = celery_app.settings
    if not counts_deliveries(settings):
        return None
    url = settings.effective_broker_url if settings.broker_kind == "redis" else None
    return DeliveryCounter(
        url or settings.effective_lock_url, settings.queue_namespace, settings.task_max_deliveries
    )


def forget_deliveries(celery_app: Any, message: Any) -> None:
    """The job is done or dead-lettered: drop its counter, if it was delivered again."""
    if (getattr(message, "deliveries", None) or 1) < 2:
        return
    counter = delivery_counter(celery_app)
    task_id, retries = message_task(message)
    if counter is not None:
        counter.forget(task_id or delivery_identity(message), retries)


def message_task(message: Any) -> tuple[str | None, int]:
    """(task id, retries) from a task message's headers."""
    headers = message.headers if isinstance(message.headers, dict) else {}
    task_id = headers.get("id")
    retries = headers.get("retries")
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        retries = 0  # such a message is dead-lettered as malformed before it runs
    sound = isinstance(task_id, str) and 0 < len(task_id) <= MAX_TASK_ID
    return (task_id if sound else None), retries


def delivery_identity(message: Any) -> str:
    """What names a message across its deliveries when its `id` header cannot: its body."""
    return body_digest(message.body)


def redelivered(message: Any) -> bool:
    """Whether the broker delivered this message before (Redis and RabbitMQ mark it)."""
    return bool((message.delivery_info or {}).get("redelivered"))


def broker_deliveries(message: Any) -> int | None:
    """How often the broker itself says it delivered a message, this time included.

    SQS: its receive count. A RabbitMQ quorum queue: `x-delivery-count`, the
    deliveries before this one (absent on the first). None when neither says.
    """
    delivery_info = message.delivery_info if isinstance(message.delivery_info, dict) else {}
    sqs_message = delivery_info.get("sqs_message") or {}
    if isinstance(sqs_message, dict):
        count = (sqs_message.get("Attributes") or {}).get("ApproximateReceiveCount")
        if isinstance(count, str) and count.isdigit():
            return int(count)
    headers = message.headers if isinstance(message.headers, dict) else {}
    before = headers.get("x-delivery-count")
    if isinstance(before, int) and not isinstance(before, bool) and before >= 0:
        return before + 1
    return None


def await_broker_rules() -> None:
    """Before a message is rejected or given back: wait for the broker's dead-letter rules.

    Without its lane's policy, RabbitMQ drops a message rejected without requeue,
    and a quorum lane bounds its redeliveries by another limit. The wait ends
    once the policies are set or known to be missing (the worker logs which); a
    check still put off for a quiet moment starts at once.
    """
    if not broker_rules_ready.is_set():
        broker_rules_wanted.set()
        broker_rules_ready.wait()


def give_back_requeues(settings: Settings) -> bool:
    """Whether giving a message back for another delivery is a requeue.

    Not on SQS: a requeue there publishes a fresh copy whose receive count starts
    again at zero. Rejected without requeue, the message stays in its queue (the
    redrive policy makes kombu keep it) and SQS delivers it again after the
    visibility timeout, counting the receive.
    """
    return settings.broker_kind != "sqs"
