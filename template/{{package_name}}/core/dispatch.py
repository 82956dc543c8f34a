"""Putting messages on the broker: broker_guard turns transport errors into one error."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from kombu.exceptions import OperationalError

from .errors import QueueUnavailableError
from .settings import get_settings

BROKER_ERRORS: tuple[type[BaseException], ...] = (OperationalError, ConnectionError, socket.error)


@contextmanager
def broker_guard() -> Iterator[None]:
    """Raise QueueUnavailableError, with what to do, when the broker cannot take a message."""
    try:
        yield
    except BROKER_ERRORS as exc:
        raise QueueUnavailableError(
            broker=get_settings().safe_broker_url, reason=str(exc) or type(exc).__name__
        ) from exc
