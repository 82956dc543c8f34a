"""Putting messages on the broker: broker_guard turns transport errors into one error."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from kombu.exceptions import OperationalError

from .errors import QueueUnavailableError
from .settings import Settings, get_settings

BROKER_ERRORS: tuple[type[BaseException], ...] = (OperationalError, ConnectionError, socket.error)


@contextmanager
def broker_guard(settings: Settings | None = None) -> Iterator[None]:
    """Raise QueueUnavailableError, with what to do, when the broker cannot take a message.

    The message names the broker of `settings` (a job's app passes its own),
    else of the process's settings.
    """
    try:
        yield
    except BROKER_ERRORS as exc:
        broker = (settings or get_settings()).safe_broker_url
        raise QueueUnavailableError(broker=broker, reason=str(exc) or type(exc).__name__) from exc
