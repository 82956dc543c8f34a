"""The session's clean-up removes its namespaces' policies and Redis entries, and no others."""

from __future__ import annotations

import subprocess

from support.brokers import require_rabbitmqctl
from support.cleanup import (
    DEADLINES,
    clear_rabbitmq_policies,
    delete_rabbitmq_policies,
    delete_redis_keys,
    rabbitmq_policy_names,
)
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


def test_the_redis_keys_and_pidbox_deadlines_of_the_sessions_namespaces_go_and_no_others(
    redis_url: str,
) -> None:
    import redis

    ours, theirs = unique_namespace("cl"), unique_namespace("cl")
    client = redis.Redis.from_url(redis_url)
    keys = [f"{ours}.default", f"_kombu.binding.{ours}.default", f"{theirs}.default"]
    members = [f"{ours}.celery.pidbox", f"{theirs}.celery.pidbox", f"{ours}x.celery.pidbox"]
    try:
        for key in keys:
            client.set(key, "x")
        client.zadd(DEADLINES, dict.fromkeys(members, 1))
        assert delete_redis_keys(redis_url, [ours]) == 3
        assert [client.exists(key) for key in keys] == [0, 0, 1]
        left = {member.decode() for member in client.zrange(DEADLINES, 0, -1)}
        assert left >= {f"{theirs}.celery.pidbox", f"{ours}x.celery.pidbox"}
        assert f"{ours}.celery.pidbox" not in left
    finally:
        client.delete(*keys)
        client.zrem(DEADLINES, *members)
        client.close()
