"""Queue names: one resolver applies QUEUE_NAMESPACE to every queue and exchange."""

from __future__ import annotations

from . import project
from .errors import UnknownLaneError
from .naming import DEFAULT_LANE as DEFAULT_LANE
from .settings import get_settings

DEAD_LETTER_SUFFIX = "dlq"


def qualified_queue(name: str, namespace: str | None = None) -> str:
    """Prefix a logical queue (or exchange, or lock) name with the namespace, if any."""
    ns = get_settings().queue_namespace if namespace is None else namespace
    return f"{ns}.{name}" if ns else name


def dead_letter_queue(lane: str, namespace: str | None = None) -> str:
    """The dead-letter queue of a lane."""
    return qualified_queue(f"{lane}.{DEAD_LETTER_SUFFIX}", namespace)


def lane_of_queue(routing_key: str | None) -> str | None:
    """The lane a queue name (or a delayed routing key ending in it) belongs to."""
    if not routing_key:
        return None
    for lane in project.LANES:
        queue = qualified_queue(lane)
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
