"""The session's clean-up removes its namespaces' policies from RabbitMQ, and no others."""

from __future__ import annotations

import subprocess

from support.brokers import require_rabbitmqctl
from support.cleanup import clear_rabbitmq_policies, delete_rabbitmq_policies, rabbitmq_policy_names
from support.projects import unique_namespace


def set_policy(name: str) -> None:
    subprocess.run(
        ["rabbitmqctl", "--quiet", "set_policy", name, f"^{name}$", '{"message-ttl": 60000}'],
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_the_policies_of_the_sessions_namespaces_are_cleared_and_no_others(
    rabbitmq_url: str,
) -> None:
    require_rabbitmqctl("to check the RabbitMQ clean-up")
    ours, theirs = unique_namespace("cl"), unique_namespace("cl")
    mine = [f"{ours}.default.dead-letters", f"{ours}.batch.dead-letters"]
    # A namespace that only starts like ours is not ours.
    other = f"{ours}x.default.dead-letters"
    kept = f"{theirs}.default.dead-letters"
    for name in [*mine, other, kept]:
        set_policy(name)
    try:
        assert delete_rabbitmq_policies([ours]) == 2
        left = set(rabbitmq_policy_names())
        assert not left & set(mine)
        assert {other, kept} <= left
    finally:
        clear_rabbitmq_policies([*mine, other, kept])
    assert not set(rabbitmq_policy_names()) & {*mine, other, kept}
