"""How many messages wait on each lane and its dead-letter queue, asked of the broker.

Redis: the length of the lane's list and of its priority sub-lists, and the
number of records in the lane's dead-letter hash. RabbitMQ: the message and
consumer counts of a passive declare. SQS: the approximate number of visible
messages. A queue the broker does not have is reported with `messages=None`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from workergen_runtime import project
from workergen_runtime.queues import dead_letter_queue, qualified_queue
from workergen_runtime.settings import Settings

# kombu's Redis transport keeps a queue's messages of priority N > 0 in a list
# named `<queue><SEP><N>`, one list per step.
REDIS_PRIORITY_SEP = "\x06\x16"
REDIS_PRIORITY_STEPS = (0, 3, 6, 9)
# The reply code of a passive declare of a queue that does not exist.
AMQP_NOT_FOUND = 404


@dataclass(frozen=True)
class QueueDepth:
    """Messages waiting on one queue; None when the queue does not exist."""

    lane: str
    queue: str
    dead_letter: bool
    messages: int | None
    consumers: int | None = None


def lane_queue_names(settings: Settings) -> list[tuple[str, str, bool]]:
    """(lane, queue name, is a dead-letter queue) for every lane, under the namespace."""
    ns = settings.queue_namespace
    names = []
    for lane in project.LANES:
        names.append((lane, qualified_queue(lane, ns), False))
        names.append((lane, dead_letter_queue(lane, ns), True))
    return names


def queue_depths(settings: Settings) -> list[QueueDepth]:
    """The depth of every lane queue and dead-letter queue; raises on a broker error."""
    kind = settings.broker_kind
    if kind == "redis":
        return _redis_depths(settings)
    if kind == "amqp":
        return _amqp_depths(settings)
    if kind == "sqs":
        return _sqs_depths(settings)
    return []


def _redis_depths(settings: Settings) -> list[QueueDepth]:
    import redis

    client = redis.Redis.from_url(
        settings.effective_broker_url, socket_connect_timeout=5, socket_timeout=10
    )
    try:
        pipe = client.pipeline(transaction=False)
        names = lane_queue_names(settings)
        for _lane, name, dead in names:
            if dead:
                pipe.hlen(name)
            else:
                for step in REDIS_PRIORITY_STEPS:
                    pipe.llen(f"{name}{REDIS_PRIORITY_SEP}{step}" if step else name)
        counts = iter(pipe.execute())
        depths = []
        for lane, name, dead in names:
            steps = 1 if dead else len(REDIS_PRIORITY_STEPS)
            total = sum(int(next(counts)) for _ in range(steps))
            depths.append(QueueDepth(lane, name, dead, total))
        return depths
    finally:
        client.close()


@contextmanager
def _amqp_connection(settings: Settings) -> Iterator[Any]:
    from kombu import Connection

    with Connection(settings.effective_broker_url, connect_timeout=5) as connection:
        connection.ensure_connection(max_retries=1)
        yield connection


def _amqp_depths(settings: Settings) -> list[QueueDepth]:
    depths = []
    with _amqp_connection(settings) as connection:
        for lane, name, dead in lane_queue_names(settings):
            # A passive declare of a missing queue closes its channel: one channel each.
            channel = connection.channel()
            try:
                _, messages, consumers = channel.queue_declare(queue=name, passive=True)
                depths.append(QueueDepth(lane, name, dead, int(messages), int(consumers)))
            except connection.channel_errors as exc:
                if getattr(exc, "code", None) != AMQP_NOT_FOUND:
                    raise
                depths.append(QueueDepth(lane, name, dead, None))
            finally:
                # The broker may have closed it already.
                with suppress(Exception):
                    channel.close()
    return depths


def _sqs_depths(settings: Settings) -> list[QueueDepth]:
    from botocore.exceptions import ClientError

    from workergen_runtime.ops.provision import sqs_client, sqs_queue_name

    client = sqs_client(settings)
    depths = []
    for lane, name, dead in lane_queue_names(settings):
        try:
            url = client.get_queue_url(QueueName=sqs_queue_name(name))["QueueUrl"]
            attributes = client.get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
            )["Attributes"]
        except ClientError:
            depths.append(QueueDepth(lane, sqs_queue_name(name), dead, None))
            continue
        count = int(attributes.get("ApproximateNumberOfMessages", 0))
        depths.append(QueueDepth(lane, sqs_queue_name(name), dead, count))
    return depths
