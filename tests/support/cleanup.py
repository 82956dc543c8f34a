"""What the suite leaves on the shared brokers: deleted at the end of the session.

Every namespace a test uses comes from `unique_namespace`, which records it.
Redis keys and RabbitMQ queues, exchanges and policies holding one of them as
a dot- or colon-separated word are removed (lanes, dead-letter queues, the
control and event exchanges, pidbox queues, the lanes' dead-letter policies,
locks, idempotency keys).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from collections.abc import Iterable

from support.brokers import port_open

DEADLINES = "_kombu.binding_deadlines"


def namespaced(namespaces: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern matching names that hold one of the namespaces as a word."""
    words = sorted(set(namespaces))
    if not words:
        return None
    return re.compile(r"(?:^|[.:])(?:" + "|".join(map(re.escape, words)) + r")[.:]")


def delete_redis_keys(url: str, namespaces: Iterable[str]) -> int:
    """Delete the keys of these namespaces from the Redis database at url; how many."""
    import redis

    pattern = namespaced(namespaces)
    if pattern is None or not port_open(url):
        return 0
    client = redis.Redis.from_url(url, socket_timeout=10)
    doomed = [
        key
        for key in client.scan_iter(count=1000)
        if pattern.search(key.decode("utf-8", "replace"))
    ]
    for start in range(0, len(doomed), 500):
        client.delete(*doomed[start : start + 500])
    # kombu keeps one sorted set of every pidbox binding's expiry, for every
    # namespace at once: only the entries of these namespaces go.
    stale = [
        member
        for member in client.zrange(DEADLINES, 0, -1)
        if pattern.search(member.decode("utf-8", "replace"))
    ]
    if stale:
        client.zrem(DEADLINES, *stale)
    return len(doomed) + len(stale)


def rabbitmq_names(kind: str) -> list[str]:
    """The names of every queue or exchange (kind) on the local RabbitMQ (read-only)."""
    if not shutil.which("rabbitmqctl"):
        return []
    listed = subprocess.run(
        ["rabbitmqctl", "-s", f"list_{kind}", "name"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return listed.stdout.split() if listed.returncode == 0 else []


def delete_rabbitmq_entities(url: str, namespaces: Iterable[str]) -> int:
    """Delete the queues and exchanges of these namespaces on the RabbitMQ at url; how many."""
    from kombu import Connection

    pattern = namespaced(namespaces)
    if pattern is None or not port_open(url):
        return 0
    queues = [name for name in rabbitmq_names("queues") if pattern.search(name)]
    exchanges = [name for name in rabbitmq_names("exchanges") if pattern.search(name)]
    with Connection(url, connect_timeout=5) as connection:
        for name in queues:
            # A failed delete closes its channel: one channel per entity.
            with contextlib.suppress(Exception), connection.channel() as channel:
                channel.queue_delete(name)
        for name in exchanges:
            with contextlib.suppress(Exception), connection.channel() as channel:
                channel.exchange_delete(name)
    return len(queues) + len(exchanges)


def rabbitmq_policy_names() -> list[str]:
    """The names of the policies on the local RabbitMQ's default vhost (read-only)."""
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        return []
    listed = subprocess.run(
        [ctl, "--quiet", "list_policies", "--no-table-headers"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return [line.split("\t")[1] for line in listed.stdout.splitlines() if "\t" in line]


def clear_rabbitmq_policies(names: Iterable[str], at_once: int = 8) -> None:
    """Clear these policies: all with one rabbitmqctl call, then any left one by one.

    rabbitmqctl starts a node each time, so the ones left are cleared several at once.
    """
    ctl = shutil.which("rabbitmqctl")
    pending = list(names)
    if ctl is None or not pending:
        return
    cleared = clear_rabbitmq_policies_at_once(ctl, pending)
    if len(cleared) < len(pending):
        present = set(rabbitmq_policy_names()) - cleared
        pending = [name for name in pending if name in present]
    else:
        pending = []
    while pending:
        batch, pending = pending[:at_once], pending[at_once:]
        running = [
            subprocess.Popen(
                [ctl, "--quiet", "clear_policy", name],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for name in batch
        ]
        for process in running:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# Policy names the suite's projects set: safe inside an Erlang binary literal.
PLAIN_NAME = re.compile(r"[A-Za-z0-9._:-]+")


def clear_rabbitmq_policies_at_once(ctl: str, names: list[str]) -> set[str]:
    """Clear these policies with one rabbitmqctl call, not one node start per policy.

    `rabbitmqctl clear_policy` deletes through rabbit_policy:delete/3. A session
    leaves a policy per lane of every RabbitMQ namespace, and a node start for
    each took about half a minute of both cores at the end of every session.
    What this leaves (a RabbitMQ without that function, an unusual name)
    clear_rabbitmq_policies clears one by one. Returns the names it cleared.
    """
    plain = [name for name in names if PLAIN_NAME.fullmatch(name)]
    if not plain:
        return set()
    binaries = ", ".join(f'<<"{name}">>' for name in plain)
    expression = f'[rabbit_policy:delete(<<"/">>, N, <<"workergen-tests">>) || N <- [{binaries}]].'
    try:
        done = subprocess.run(
            [ctl, "--quiet", "eval", expression],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return set()
    # One `ok` per policy, in order: [ok,ok,...].
    results = done.stdout.strip().removeprefix("[").removesuffix("]").split(",")
    if done.returncode != 0 or len(results) != len(plain):
        return set()
    return {name for name, result in zip(plain, results, strict=True) if result.strip() == "ok"}


def delete_rabbitmq_policies(namespaces: Iterable[str]) -> int:
    """Clear the dead-letter policies the projects of these namespaces set; how many."""
    pattern = namespaced(namespaces)
    if pattern is None:
        return 0
    doomed = [name for name in rabbitmq_policy_names() if pattern.search(name)]
    clear_rabbitmq_policies(doomed)
    return len(doomed)
