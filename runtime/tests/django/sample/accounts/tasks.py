"""Django's `@task` functions of the sample project, queued on the workers by the tests."""

from typing import Any

try:
    from django.tasks import task
except ImportError:  # Django before 6.0: the django-tasks backport
    from django_tasks import task

from django.db.models import Value
from django.db.models.functions import Concat

from accounts.models import Account


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def echo(value: Any = None) -> Any:
    return value


@task(takes_context=True)
def attempt(context: Any, note: str) -> dict[str, Any]:
    return {"id": context.task_result.id, "attempt": context.attempt, "note": note}


@task
async def shout(text: str) -> str:
    return text.upper()


@task
def fail(reason: str) -> None:
    raise ValueError(reason)


@task(queue_name="critical")
def note(account_id: int, text: str) -> str:
    """Write a note on an account through the ORM: the worker's own database connection."""
    Account.objects.filter(pk=account_id).update(note=text)
    return text


not_a_task = add.func


@task
def append(account_id: int, text: str) -> None:
    """Add a word to an account's note: the order the tasks ran in."""
    Account.objects.filter(pk=account_id).update(note=Concat("note", Value(f"{text} ")))


@task
async def note_later(account_id: int, text: str) -> None:
    """An async task: the worker runs the coroutine to its end."""
    await Account.objects.filter(pk=account_id).aupdate(note=text)
