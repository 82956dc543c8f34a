"""Dispatch inside a Django transaction: the message is sent once it commits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def sent_on_commit(publish: Callable[[], Any]) -> bool:
    """Inside `transaction.atomic()` (default database): `publish` on commit, and True.

    Outside one, False: the caller publishes at once. A rolled-back transaction
    publishes nothing, so a job never runs for a row that was never committed.
    """
    from django.db import transaction

    if not transaction.get_connection().in_atomic_block:
        return False
    transaction.on_commit(publish)
    return True
