"""Queue names and routing keys: which lane a delivery came from, and delayed bindings.

Delayed routing keys are RabbitMQ's (native delayed delivery); reading them needs
no broker, so they are checked whichever broker the project has.
"""

import re

import pytest
from kombu.transport.native_delayed_delivery import calculate_routing_key

from workergen_runtime import project
from workergen_runtime.queues import delayed_binding_key, lane_of_queue, qualified_queue


def topic_matches(binding: str, key: str) -> bool:
    """RabbitMQ's topic match: `*` is one word, `#` zero or more."""
    pattern = "\\.".join(
        "[^.]+" if word == "*" else ".*" if word == "#" else re.escape(word)
        for word in binding.split(".")
    )
    return re.fullmatch(pattern, key) is not None


@pytest.mark.parametrize("namespace", ["", "ventas"])
@pytest.mark.parametrize("lane", project.LANES)
def test_a_delivery_names_its_lane_directly_or_through_a_delayed_routing_key(
    lane: str, namespace: str
) -> None:
    queue = qualified_queue(lane, namespace)
    assert lane_of_queue(queue, namespace) == lane
    assert lane_of_queue(calculate_routing_key(5, queue), namespace) == lane
    assert lane_of_queue(calculate_routing_key(2**27, queue), namespace) == lane


@pytest.mark.parametrize("namespace", ["", "ventas"])
def test_a_routing_key_of_another_namespace_names_no_lane(namespace: str) -> None:
    assert lane_of_queue(None, namespace) is None
    assert lane_of_queue(qualified_queue("default", "elsewhere.x"), namespace) is None
    other = calculate_routing_key(5, qualified_queue("default", "other"))
    assert lane_of_queue(other, namespace) is None
    assert lane_of_queue("0.1." + qualified_queue("default", namespace), namespace) is None


@pytest.mark.parametrize("namespace", ["", "a", "b.a"])
def test_the_delayed_binding_takes_this_queues_delayed_keys_and_no_others(namespace: str) -> None:
    queue = qualified_queue("default", namespace)
    binding = delayed_binding_key(queue)
    assert topic_matches(binding, calculate_routing_key(3, queue))
    for other in ("x", "a.x", "b.a", "x.b.a"):
        if other != namespace:
            other_key = calculate_routing_key(3, qualified_queue("default", other))
            assert not topic_matches(binding, other_key)
    # Celery's own binding is this wide: an empty namespace takes every namespace's keys.
    assert topic_matches("#.default", calculate_routing_key(3, "a.default"))
