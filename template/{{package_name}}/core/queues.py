"""Queue names: one resolver applies QUEUE_NAMESPACE to every queue and exchange."""

from __future__ import annotations

from . import project
from .errors import UnknownLaneError
from .naming import DEFAULT_LANE as DEFAULT_LANE

DEAD_LETTER_SUFFIX = "dlq"


def qualified_queue(name: str, namespace: str) -> str:
    """Prefix a logical queue (or exchange, or lock) name with the namespace, if any.

    The namespace is always given (an app's `settings.queue_namespace`), never
    read from the process's settings, so each app names only its own queues.
    """
    return f"{namespace}.{name}" if namespace else name


def dead_letter_queue(lane: str, namespace: str) -> str:
    """The dead-letter queue of a lane."""
    return qualified_queue(f"{lane}.{DEAD_LETTER_SUFFIX}", namespace)


def lane_of_queue(routing_key: str | None, namespace: str) -> str | None:
    """The lane a queue name (or a delayed routing key ending in it) belongs to."""
    if not routing_key:
        return None
    for lane in project.LANES:
        queue = qualified_queue(lane, namespace)
        if routing_key == queue or routing_key.endswith("." + queue):
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
