"""Cron schedules: a crontab expression or a helper, each giving a Celery schedule.

Every helper goes through `schedule_expr`, the parser make:cron uses, so a schedule that
make:cron accepts is the one that runs, and one it refuses is refused here with the same words.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from celery.schedules import crontab, schedule

from workergen_runtime.errors import ConfigurationError
from workergen_runtime.scheduling.expressions import (
    Crontab,
    InvalidScheduleError,
    helper_values,
    parse_at,
    parse_crontab,
)


class CronSchedule(crontab):
    """A Celery crontab built from a parsed expression, which it keeps for display."""

    def __init__(self, parsed: Crontab, **kwargs: Any) -> None:
        self.expression = parsed.text
        # Celery gets the values, not the text: its own parser knows no month names.
        # "*" stays "*", which keeps Celery's quick path for "every day".
        fields = [
            "*" if text == "*" else set(values)
            for text, values in zip(
                parsed.fields,
                (parsed.minute, parsed.hour, parsed.day_of_month, parsed.month, parsed.day_of_week),
                strict=True,
            )
        ]
        minute, hour, day_of_month, month, day_of_week = fields
        super().__init__(
            minute=minute,
            hour=hour,
            day_of_month=day_of_month,
            month_of_year=month,
            day_of_week=day_of_week,
            **kwargs,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (cron, (self.expression,))


def cron(expression: str) -> CronSchedule:
    """A five-field crontab expression (`"*/5 * * * *"`); the error names the field at fault."""
    try:
        return CronSchedule(parse_crontab(expression))
    except InvalidScheduleError as error:
        raise ConfigurationError(f"bad cron schedule {expression!r}: {error}") from None


def _values(helper: str, **arguments: Any) -> dict[str, Any]:
    try:
        return dict(helper_values(helper, (), arguments))
    except InvalidScheduleError as error:
        raise ConfigurationError(f"bad schedule {helper}(): {error}") from None


def every_seconds(seconds: int) -> schedule:
    """Every N seconds (an interval, not tied to the clock's minutes)."""
    return schedule(timedelta(seconds=_values("every_seconds", seconds=seconds)["seconds"]))


def every_minutes(minutes: int) -> CronSchedule:
    """At every N-th minute of the hour (`*/N * * * *`)."""
    return cron(f"*/{_values('every_minutes', minutes=minutes)['minutes']} * * * *")


def hourly(minute: int = 0) -> CronSchedule:
    """Once an hour, at the given minute."""
    return cron(f"{_values('hourly', minute=minute)['minute']} * * * *")


def daily(at: str = "00:00") -> CronSchedule:
    """Once a day at HH:MM (in TIMEZONE)."""
    hour, minute = parse_at(_values("daily", at=at)["at"])
    return cron(f"{minute} {hour} * * *")


def weekly(day: str | int = "mon", at: str = "00:00") -> CronSchedule:
    """Once a week on `day` (mon..sun) at HH:MM."""
    values = _values("weekly", day=day, at=at)
    hour, minute = parse_at(values["at"])
    return cron(f"{minute} {hour} * * {values['day']}")


def describe(entry: schedule) -> str:
    """The schedule as a user writes it: `*/5 * * * *` or `every 10s`."""
    if isinstance(entry, CronSchedule):
        return entry.expression
    if isinstance(entry, crontab):
        return " ".join(
            str(part)
            for part in (
                entry._orig_minute,
                entry._orig_hour,
                entry._orig_day_of_month,
                entry._orig_month_of_year,
                entry._orig_day_of_week,
            )
        )
    return f"every {entry.run_every.total_seconds():g}s"
