"""Cron schedules as users type them, parsed with the standard library only.

`make:cron --schedule` accepts a five-field crontab expression (`"*/5 * * * *"`) or a helper
call (`daily(at="02:00")`). Both are parsed here into a structure with canonical values; the
generated cron is rendered from that structure, and `schedules.py` builds the Celery
schedule at run time from the very same parse, so what make:cron accepts is what runs.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
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
DAY_NAMES = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
# The longest month lengths (February of a leap year): a day beyond them never comes.
DAYS_IN_MONTH = dict(enumerate((31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31), start=1))
_NAMES = {"month": MONTHS, "day-of-week": DAYS}
_NUMBER = re.compile(r"[0-9]{1,3}")
_AT = re.compile(r"([0-9]{1,2}):([0-9]{2})")


class InvalidScheduleError(ValueError):
    """A schedule cannot be understood; the message names the field or helper at fault."""


@dataclass(frozen=True)
class Crontab:
    """A parsed five-field expression: its canonical text and the values each field matches."""

    text: str
    minute: frozenset[int]
    hour: frozenset[int]
    day_of_month: frozenset[int]
    month: frozenset[int]
    day_of_week: frozenset[int]

    @property
    def fields(self) -> tuple[str, ...]:
        """The canonical text of each field, minute first."""
        return tuple(self.text.split(" "))


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule as make:cron writes it: the helper of schedules and its arguments."""

    helper: str
    arguments: tuple[tuple[str, int | str], ...]


def _token(text: str, field: str, low: int, high: int) -> tuple[int, str]:
    """One value of a field and its canonical spelling."""
    names = _NAMES.get(field, ())
    if text.lower() in names:
        return names.index(text.lower()) + (1 if field == "month" else 0), text.lower()
    if not _NUMBER.fullmatch(text):
        raise InvalidScheduleError(f"{field} field: {text!r} is not a number")
    number = int(text)
    if field == "day-of-week" and number == 7:
        return 0, "7"
    if not low <= number <= high:
        raise InvalidScheduleError(f"{field} field: {number} is out of range {low}-{high}")
    return number, str(number)


def parse_field(text: str, field: str, low: int, high: int) -> tuple[str, frozenset[int]]:
    """One crontab field (`*`, `*/5`, `1-5`, `1,3`, `mon-fri`, ...): canonical text and values."""
    if not text:
        raise InvalidScheduleError(f"{field} field is empty")
    values: set[int] = set()
    shown: list[str] = []
    for item in text.split(","):
        body, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not _NUMBER.fullmatch(step_text) or int(step_text) == 0:
                raise InvalidScheduleError(
                    f"{field} field: step {step_text!r} must be a positive number"
                )
            step = int(step_text)
        if body == "*":
            sequence, spelled = list(range(low, high + 1)), "*"
        else:
            start_text, dash, end_text = body.partition("-")
            first, first_shown = _token(start_text, field, low, high)
            last, last_shown = (first, "") if not dash else _token(end_text, field, low, high)
            if slash and not dash:
                raise InvalidScheduleError(
                    f"{field} field: a step needs a range or '*' ({start_text}-{high}/{step} "
                    f"or */{step}), not {item!r}"
                )
            if last >= first:
                sequence = list(range(first, last + 1))
            elif field == "day-of-week":
                sequence = [*range(first, high + 1), *range(low, last + 1)]  # fri-mon wraps
            else:
                raise InvalidScheduleError(f"{field} field: range {body!r} runs backwards")
            spelled = f"{first_shown}-{last_shown}" if dash else first_shown
        values.update(sequence[::step])
        shown.append(f"{spelled}/{step}" if slash else spelled)
    return ",".join(shown), frozenset(values)


def parse_crontab(expression: str) -> Crontab:
    """Parse a five-field crontab expression; refuses one that can never fire."""
    parts = expression.split()
    if len(parts) != 5:
        raise InvalidScheduleError(
            f"{expression!r} has {len(parts)} fields; a crontab expression has five: "
            "minute hour day-of-month month day-of-week (e.g. '0 * * * *')"
        )
    parsed = [
        parse_field(text, field, low, high)
        for text, (field, low, high) in zip(parts, FIELDS, strict=True)
    ]
    (_, days), (_, months) = parsed[2], parsed[3]
    if not any(day <= DAYS_IN_MONTH[month] for month in months for day in days):
        raise InvalidScheduleError(
            f"day-of-month {parsed[2][0]!r} never occurs in month {parsed[3][0]!r} "
            "(February has at most 29 days; April, June, September and November 30), "
            "so the cron would never run"
        )
    return Crontab(" ".join(text for text, _ in parsed), *(values for _, values in parsed))


def parse_at(at: object) -> tuple[int, int]:
    """`"02:30"` gives (2, 30)."""
    match = _AT.fullmatch(at) if isinstance(at, str) else None
    if not match or int(match[1]) > 23 or int(match[2]) > 59:
        raise InvalidScheduleError(f"at={at!r} is not a time of day in HH:MM (00:00-23:59)")
    return int(match[1]), int(match[2])


def parse_day(day: object) -> int:
    """`"mon"`, `"Monday"` or 1 gives 1 (Sunday is 0, and 7)."""
    if isinstance(day, int) and not isinstance(day, bool) and 0 <= day <= 7:
        return day % 7
    if isinstance(day, str):
        lowered = day.lower()
        for names in (DAYS, DAY_NAMES):
            if lowered in names:
                return names.index(lowered)
    raise InvalidScheduleError(f"day={day!r} is not a day of the week (mon..sun or 0-7)")


def _whole(name: str, low: int, high: int | None = None) -> Callable[[object], int]:
    def check(value: object) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            kind = "a positive whole number" if low == 1 else f"a whole number from {low}"
            raise InvalidScheduleError(f"{name} must be {kind}, got {value!r}")
        if high is not None and value > high:
            raise InvalidScheduleError(f"{name} must be at most {high}, got {value!r}")
        return value

    return check


def _at(value: object) -> str:
    hour, minute = parse_at(value)
    return f"{hour:02d}:{minute:02d}"


def _day(value: object) -> str:
    return DAYS[parse_day(value)]


# helper -> (parameter names, default values, the canonical value of each parameter)
HELPERS: dict[str, tuple[tuple[str, ...], dict[str, Any], dict[str, Callable[[object], Any]]]] = {
    "every_seconds": (("seconds",), {}, {"seconds": _whole("seconds", 1, 86_400)}),
    "every_minutes": (("minutes",), {}, {"minutes": _whole("minutes", 1, 59)}),
    "hourly": (("minute",), {"minute": 0}, {"minute": _whole("minute", 0, 59)}),
    "daily": (("at",), {"at": "00:00"}, {"at": _at}),
    "weekly": (("day", "at"), {"day": "mon", "at": "00:00"}, {"day": _day, "at": _at}),
}


def check_helper(helper: str) -> None:
    """Refuse a helper name that schedules does not have."""
    if helper not in HELPERS:
        raise InvalidScheduleError(
            f"unknown schedule helper {helper}(); use one of: "
            + ", ".join(f"{name}()" for name in HELPERS)
            + ", or a five-field crontab expression"
        )


def helper_values(
    helper: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
) -> tuple[tuple[str, Any], ...]:
    """The canonical arguments of a helper call, in parameter order; refuses bad ones."""
    check_helper(helper)
    params, defaults, checks = HELPERS[helper]
    named = kwargs or {}
    if len(args) > len(params) or set(named) - set(params):
        raise InvalidScheduleError(f"{helper}() takes: {', '.join(params)}")
    given = dict(zip(params, args, strict=False))
    if set(given) & set(named):
        raise InvalidScheduleError(f"{helper}() got {', '.join(set(given) & set(named))} twice")
    arguments = {**defaults, **given, **named}
    missing = [p for p in params if p not in arguments]
    if missing:
        raise InvalidScheduleError(f"{helper}() needs {', '.join(missing)}")
    return tuple((name, checks[name](arguments[name])) for name in params)


def _helper_call(expression: str) -> ScheduleSpec | None:
    """`daily(at="02:00")` parsed; None when the text is no call (then it is a crontab)."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError):  # ValueError: a NUL byte in the text
        return None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return None
    helper = call.func.id
    check_helper(helper)
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(
        kw.arg is None for kw in call.keywords
    ):
        raise InvalidScheduleError(f"{helper}() takes plain values (numbers, strings)")
    try:
        args = tuple(ast.literal_eval(arg) for arg in call.args)
        kwargs = {str(kw.arg): ast.literal_eval(kw.value) for kw in call.keywords}
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise InvalidScheduleError(f"{helper}() takes plain values (numbers, strings)") from None
    return ScheduleSpec(helper, helper_values(helper, args, kwargs))


def parse_schedule(expression: str) -> ScheduleSpec:
    """A `--schedule` value as the helper call make:cron writes, with canonical arguments."""
    found = _helper_call(expression)
    if found is not None:
        return found
    return ScheduleSpec("cron", (("expression", parse_crontab(expression).text),))
