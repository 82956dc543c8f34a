"""`monitor`: Flower on this project's app, so it speaks on the namespaced exchanges.

The project renames Celery's control and event exchanges after QUEUE_NAMESPACE,
so a Flower (or `celery inspect`) pointed only at the broker sees no worker.
Started here, Flower uses the project's Celery app and its namespace.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer

from workergen_runtime.errors import ProjectError

LOOPBACK_NAMES = ("localhost",)


def is_loopback(address: str) -> bool:
    """Whether an address to bind only answers this machine."""
    if address in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check_basic_auth(value: str) -> list[str]:
    """MONITOR_BASIC_AUTH as Flower takes it: `user:password`, several separated by commas."""
    pairs = [pair.strip() for pair in value.split(",") if pair.strip()]
    for pair in pairs:
        user, _, password = pair.partition(":")
        if not user or not password:
            raise ProjectError(
                "MONITOR_BASIC_AUTH must be user:password (several separated by commas), "
                "both parts non-empty."
            )
    return pairs


def flower_argv(address: str, port: int, basic_auth: list[str]) -> list[str]:
    """The `celery flower` arguments."""
    argv = ["flower", f"--address={address}", f"--port={port}"]
    if basic_auth:
        argv.append(f"--basic-auth={','.join(basic_auth)}")
    return argv


def monitor(
    address: Annotated[
        str, typer.Option(help="Address to listen on. Anything but loopback needs auth.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=1, max=65535)] = 5555,
) -> None:
    """Flower for this project's workers and jobs, behind MONITOR_BASIC_AUTH."""
    from workergen_runtime.settings import get_settings

    settings = get_settings()
    if settings.broker_kind == "sqs":
        raise ProjectError(
            "SQS has no remote control and no events (it cannot broadcast), so Flower cannot "
            "see workers or jobs on SQS. Watch them through metrics instead: set METRICS_PORT "
            "(docs: metrics.md)."
        )
    auth = check_basic_auth(settings.monitor_basic_auth)
    if not auth and not is_loopback(address):
        raise ProjectError(
            f"Refusing to serve Flower on {address} without a password: it can shut workers "
            "down. Set MONITOR_BASIC_AUTH=user:password, or listen on 127.0.0.1."
        )
    try:
        import flower  # noqa: F401
    except ImportError:
        raise ProjectError(
            "Flower is not installed. Install the project with its monitor extra: "
            "pip install -e '.[monitor]'"
        ) from None
    from workergen_runtime.celery_app import app

    app.start(flower_argv(address, port, auth))
