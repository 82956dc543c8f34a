"""Tasks of the test app: a message may name these, and nothing outside an installed app."""

from typing import Any

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


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


not_a_task = add.func
