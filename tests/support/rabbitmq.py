"""What a RabbitMQ test leaves on the shared broker, removed by namespace."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from kombu import Connection

from support.cleanup import clear_rabbitmq_policies, rabbitmq_policy_names


def lane_policies(namespace: str) -> list[str]:
    """The names of the dead-letter policies set for a namespace (rabbitmqctl)."""
    return [name for name in rabbitmq_policy_names() if name.startswith(f"{namespace}.")]


def remove_namespace(url: str, namespace: str, lanes: Iterable[str]) -> None:
    """Delete the lanes, their dead-letter queues and exchanges, and their policies."""
    names = [f"{namespace}.{lane}" for lane in lanes]
    with Connection(url) as connection:
        for name in [*names, *(f"{n}.dlq" for n in names)]:
            channel = connection.channel()
            with contextlib.suppress(Exception):
                channel.queue_delete(name)
                channel.exchange_delete(name)
            with contextlib.suppress(Exception):
                channel.close()
    clear_rabbitmq_policies(lane_policies(namespace))
