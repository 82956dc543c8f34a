"""Jobs that read and write the ORM, for the tests."""

import logging

from django.db import connection

from accounts.models import Account, Tick
from workergen_runtime import job

log = logging.getLogger(__name__)


@job(name="accounts.welcome")
def welcome(account_id: int) -> str:
    """Mark an account welcomed; the account must exist when the job runs."""
    account = Account.objects.get(pk=account_id)
    account.welcomed = True
    account.save(update_fields=["welcomed"])
    return account.email


@job(name="accounts.backend_pid")
def backend_pid(account_id: int) -> int:
    """Write the PostgreSQL backend this job ran on into the account's note."""
    pid = connection.cursor().connection.info.backend_pid
    Account.objects.filter(pk=account_id).update(note=f"pid {pid}")
    return pid


@job(name="accounts.broken")
def broken(account_id: int) -> None:
    """Always fails: it is dead-lettered."""
    raise ValueError(f"account {account_id} cannot be welcomed")


@job(name="accounts.tick")
def tick() -> None:
    """Record one run: the scheduler tests count them."""
    Tick.objects.create()
