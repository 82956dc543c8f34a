"""Cron schedules: a crontab expression or a helper, each giving a Celery schedule."""

from __future__ import annotations

from datetime import timedelta

from celery.schedules import crontab, crontab_parser, schedule

from .errors import ConfigurationError
from .schedule_expr import FIELDS, InvalidScheduleError, check_crontab, parse_at, parse_day

# Celery's parser bounds per field: (max exclusive, min).
_CELERY_BOUNDS = {"minute": (60, 0), "hour": (24, 0), "day-of-month": (31, 1), "month": (12, 1)}


def cron(expression: str) -> crontab:
    """A five-field crontab expression (`"*/5 * * * *"`); the error names the field at fault."""
    try:
        fields = check_crontab(expression)
    except InvalidScheduleError as error:
        raise ConfigurationError(f"bad cron schedule {expression!r}: {error}") from None
    for text, (field, _low, _high) in zip(fields, FIELDS, strict=True):
        if field in _CELERY_BOUNDS:
            try:
                crontab_parser(*_CELERY_BOUNDS[field]).parse(text)
            except Exception as error:  # celery raises ParseException or ValueError
                raise ConfigurationError(
                    f"bad cron schedule {expression!r}: {field} field {text!r}: {error}"
                ) from None
    minute, hour, day_of_month, month, day_of_week = fields
    return crontab(
        minute=minute,
        hour=hour,
        day_of_month=day_of_month,
        month_of_year=month,
        day_of_week=day_of_week,
    )


def every_seconds(seconds: int) -> schedule:
    """Every N seconds (an interval, not tied to the clock's minutes)."""
    return schedule(timedelta(seconds=seconds))


def every_minutes(minutes: int) -> crontab:
    """At every N-th minute of the hour (`*/N * * * *`)."""
    return cron(f"*/{minutes} * * * *")


def hourly(minute: int = 0) -> crontab:
    """Once an hour, at the given minute."""
    return cron(f"{minute} * * * *")


def daily(at: str = "00:00") -> crontab:
    """Once a day at HH:MM (in TIMEZONE)."""
    hour, minute = _at(at)
    return cron(f"{minute} {hour} * * *")


def weekly(day: str | int = "mon", at: str = "00:00") -> crontab:
    """Once a week on `day` (mon..sun) at HH:MM."""
    hour, minute = _at(at)
    try:
        weekday = parse_day(day)
    except InvalidScheduleError as error:
        raise ConfigurationError(str(error)) from None
    return cron(f"{minute} {hour} * * {weekday}")


def _at(at: str) -> tuple[int, int]:
    try:
        return parse_at(at)
    except InvalidScheduleError as error:
        raise ConfigurationError(str(error)) from None


def describe(entry: schedule) -> str:
    """The schedule as a user writes it: `*/5 * * * *` or `every 10s`."""
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
