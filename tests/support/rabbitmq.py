"""What a RabbitMQ test leaves on the shared broker, removed by namespace."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterable

from kombu import Connection


def lane_policies(namespace: str) -> list[str]:
    """The names of the dead-letter policies set for a namespace (rabbitmqctl)."""
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
    names = [line.split("\t")[1] for line in listed.stdout.splitlines() if "\t" in line]
    return [name for name in names if name.startswith(f"{namespace}.")]


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
    ctl = shutil.which("rabbitmqctl")
    for policy in lane_policies(namespace):
        subprocess.run(
            [ctl, "--quiet", "clear_policy", policy], capture_output=True, timeout=60, check=False
        )
