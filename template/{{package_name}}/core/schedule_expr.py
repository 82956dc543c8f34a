"""Cron schedule expressions as users type them, checked with the standard library only.

`make:cron --schedule` accepts a five-field crontab expression (`"*/5 * * * *"`) or a helper
call (`daily(at="02:00")`); this module turns either into the Python source the cron uses.
`core/schedules.py` builds the Celery schedules from the same rules.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 6),
)
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NAMES = {"month": MONTHS, "day-of-week": DAYS}


class InvalidScheduleError(ValueError):
    """A schedule cannot be understood; the message names the field or helper at fault."""


def _value(text: str, field: str, low: int, high: int) -> int:
    names = _NAMES.get(field, ())
    if text.lower() in names:
        return names.index(text.lower()) + (1 if field == "month" else 0)
    if not text.isdigit():
        raise InvalidScheduleError(f"{field} field: {text!r} is not a number")
    number = int(text)
    if field == "day-of-week" and number == 7:
        return 0
    if not low <= number <= high:
        raise InvalidScheduleError(f"{field} field: {number} is out of range {low}-{high}")
    return number


def check_field(text: str, field: str, low: int, high: int) -> None:
    """Check one crontab field (`*`, `*/5`, `1-5`, `1,3`, `mon-fri`, ...)."""
    if not text:
        raise InvalidScheduleError(f"{field} field is empty")
    for item in text.split(","):
        body, _, step = item.partition("/")
        if step and (not step.isdigit() or int(step) == 0):
            raise InvalidScheduleError(f"{field} field: step {step!r} must be a positive number")
        if body == "*":
            continue
        start, dash, end = body.partition("-")
        first = _value(start, field, low, high)
        if dash:
            last = _value(end, field, low, high)
            if last < first and field != "day-of-week":
                raise InvalidScheduleError(f"{field} field: range {body!r} runs backwards")


def check_crontab(expression: str) -> tuple[str, ...]:
    """Split and check a five-field crontab expression; the error names the bad field."""
    parts = tuple(expression.split())
    if len(parts) != 5:
        raise InvalidScheduleError(
            f"{expression!r} has {len(parts)} fields; a crontab expression has five: "
            "minute hour day-of-month month day-of-week (e.g. '0 * * * *')"
        )
    for text, (field, low, high) in zip(parts, FIELDS, strict=True):
        check_field(text, field, low, high)
    return parts


def parse_at(at: str) -> tuple[int, int]:
    """`"02:30"` gives (2, 30)."""
    match = re.fullmatch(r"(\d{1,2}):(\d{2})", at)
    if not match or int(match[1]) > 23 or int(match[2]) > 59:
        raise InvalidScheduleError(f"at={at!r} is not a time of day in HH:MM (00:00-23:59)")
    return int(match[1]), int(match[2])


def parse_day(day: str | int) -> int:
    """`"mon"` or 1 gives 1 (Sunday is 0)."""
    if isinstance(day, int) and 0 <= day <= 7:
        return day % 7
    if isinstance(day, str) and day.lower()[:3] in DAYS:
        return DAYS.index(day.lower()[:3])
    raise InvalidScheduleError(f"day={day!r} is not a day of the week (mon..sun or 0-6)")


def _positive(name: str, limit: int | None = None) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidScheduleError(f"{name} must be a positive whole number, got {value!r}")
        if limit is not None and value > limit:
            raise InvalidScheduleError(f"{name} must be at most {limit}, got {value!r}")

    return check


def _minute(value: Any) -> None:
    if not isinstance(value, int) or not 0 <= value <= 59:
        raise InvalidScheduleError(f"minute must be 0-59, got {value!r}")


# helper -> (parameter names, default values, checks per parameter)
HELPERS: dict[str, tuple[tuple[str, ...], dict[str, Any], dict[str, Callable[[Any], None]]]] = {
    "every_seconds": (("seconds",), {}, {"seconds": _positive("seconds")}),
    "every_minutes": (("minutes",), {}, {"minutes": _positive("minutes", 59)}),
    "hourly": (("minute",), {"minute": 0}, {"minute": _minute}),
    "daily": (("at",), {"at": "00:00"}, {"at": parse_at}),
    "weekly": (("day", "at"), {"day": "mon", "at": "00:00"}, {"day": parse_day, "at": parse_at}),
}


def helper_arguments(expression: str) -> tuple[str, dict[str, Any]] | None:
    """`daily(at="02:00")` gives ("daily", {"at": "02:00"}); None when it is no call."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        return None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return None
    helper = call.func.id
    if helper not in HELPERS:
        raise InvalidScheduleError(
            f"unknown schedule helper {helper}(); use one of: "
            + ", ".join(f"{name}()" for name in HELPERS)
            + ", or a five-field crontab expression"
        )
    params, defaults, checks = HELPERS[helper]
    try:
        values = [ast.literal_eval(arg) for arg in call.args]
        named = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    except ValueError:
        raise InvalidScheduleError(f"{helper}() takes plain values (numbers, strings)") from None
    if len(values) > len(params) or None in named or set(named) - set(params):
        raise InvalidScheduleError(f"{helper}() takes: {', '.join(params)}")
    arguments = {**defaults, **dict(zip(params, values, strict=False)), **named}
    missing = [p for p in params if p not in arguments]
    if missing:
        raise InvalidScheduleError(f"{helper}() needs {', '.join(missing)}")
    for name, value in arguments.items():
        checks[name](value)
    return helper, arguments


def schedule_source(expression: str) -> tuple[str, str]:
    """The Python source for a schedule and the helper it imports from core.schedules."""
    found = helper_arguments(expression)
    if found is None:
        fields = check_crontab(expression)
        return f'cron("{" ".join(fields)}")', "cron"
    helper, arguments = found
    params = HELPERS[helper][0]
    shown = ", ".join(f"{name}={arguments[name]!r}" for name in params)
    return f"{helper}({shown})".replace("'", '"'), helper
