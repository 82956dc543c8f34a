"""Queue names: one resolver applies QUEUE_NAMESPACE to every queue and exchange."""

from __future__ import annotations

import re

from workergen_runtime import project
from workergen_runtime.errors import ConfigurationError, UnknownLaneError
from workergen_runtime.naming import DEFAULT_LANE as DEFAULT_LANE

DEAD_LETTER_SUFFIX = "dlq"

# SQS names: letters, digits, '-' and '_', at most 80 characters.
SQS_NAME_LIMIT = 80
_SQS_PLAIN = re.compile(r"[a-z0-9_]")
_SQS_ESCAPES = {"-": "H", ".": "D"}
# A delayed routing key on RabbitMQ quorum lanes: 28 bits, one word each, then the queue.
DELAY_BITS = 28
_DELAY_PREFIX = re.compile(r"^(?:[01]\.){" + str(DELAY_BITS) + "}")


def qualified_queue(name: str, namespace: str) -> str:
    """Prefix a logical queue (or exchange, or lock) name with the namespace, if any.

    The namespace is always given (an app's `settings.queue_namespace`), never
    read from the process's settings, so each app names only its own queues.
    """
    return f"{namespace}.{name}" if namespace else name


def dead_letter_queue(lane: str, namespace: str) -> str:
    """The dead-letter queue of a lane."""
    return qualified_queue(f"{lane}.{DEAD_LETTER_SUFFIX}", namespace)


def sqs_queue_name(name: str) -> str:
    """The SQS name of a queue: a one-to-one spelling of its dotted name in SQS's charset.

    Each dot-separated part keeps lowercase letters, digits and '_'; '-' becomes
    'H', '.' 'D' and any other character 'X' and six hex digits. The parts are
    joined with '-', which no part holds, so `advs1.eu-default` and
    `advs1-eu.default` stay two queues (`advs1-euHdefault`, `advs1Heu-default`).
    """
    physical = "-".join("".join(map(_sqs_char, part)) for part in name.split("."))
    if len(physical) > SQS_NAME_LIMIT:
        raise ConfigurationError(
            f"The SQS queue name {physical!r} ({len(physical)} characters) is longer than "
            f"SQS allows ({SQS_NAME_LIMIT}). Shorten QUEUE_NAMESPACE (or the lane name)."
        )
    return physical


def _sqs_char(char: str) -> str:
    if _SQS_PLAIN.fullmatch(char):
        return char
    return _SQS_ESCAPES.get(char) or f"X{ord(char):06X}"


def delayed_binding_key(queue: str) -> str:
    """The RabbitMQ binding that takes exactly this queue's delayed messages, no other's.

    Celery's shared `celery_delayed_delivery` exchange routes a delayed message by
    `<28 one-bit words>.<routing key>`; Celery binds `#.<queue>`, which also matches
    `<bits>.<other namespace>.<queue>`. One `*` per bit word matches only this queue.
    """
    return "*." * DELAY_BITS + queue


def lane_of_queue(routing_key: str | None, namespace: str) -> str | None:
    """The lane a queue name (or a delayed routing key of it) belongs to."""
    if not routing_key:
        return None
    queue = _DELAY_PREFIX.sub("", routing_key, count=1)
    for lane in project.LANES:
        if queue == qualified_queue(lane, namespace):
            return lane
    return None


def check_lane(lane: str) -> str:
    """Return the lane when the project has it, else raise UnknownLaneError."""
    if lane not in project.LANES:
        raise UnknownLaneError(lane=lane, lanes=project.LANES)
    return lane


def parse_lanes(value: str | None) -> list[str]:
    """Turn `a,b` (or None for every lane) into a checked list of lanes."""
    if not value:
        return list(project.LANES)
    return [check_lane(lane.strip()) for lane in value.split(",") if lane.strip()]
