"""Cron schedules, the cron decorator and idempotency keys, without a broker."""

from datetime import UTC, datetime

import pytest
from celery.schedules import crontab, crontab_parser

from workergen_runtime import ConfigurationError, cron_task
from workergen_runtime.idempotency import derive_key
from workergen_runtime.scheduling.crons import CronTask, overlap_lock_key
from workergen_runtime.scheduling.expressions import InvalidScheduleError, parse_crontab
from workergen_runtime.scheduling.scheduler import is_due_now, next_run
from workergen_runtime.scheduling.schedules import (
    cron,
    daily,
    describe,
    every_minutes,
    every_seconds,
    hourly,
    weekly,
)


@pytest.mark.parametrize(
    ("expression", "field"),
    [
        ("60 * * * *", "minute"),
        ("* 24 * * *", "hour"),
        ("* * 32 * *", "day-of-month"),
        ("* * * 0 *", "month"),
        ("* * * * 9", "day-of-week"),
        ("x * * * *", "minute"),
        ("* 5-2 * * *", "hour"),
        ("² * * * *", "minute"),
        ("5/20 * * * *", "minute"),
    ],
)
def test_a_bad_expression_names_its_field(expression: str, field: str) -> None:
    with pytest.raises(ConfigurationError, match=f"{field} field"):
        cron(expression)


@pytest.mark.parametrize("text", ["*", "*/15", "0", "1-5", "0,30", "10-50/10", "5"])
def test_we_read_a_field_as_celery_reads_it(text: str) -> None:
    assert parse_crontab(f"{text} * * * *").minute == crontab_parser(60).parse(text)


@pytest.mark.parametrize(
    "expression", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4 *", "0 0 31 apr,jun,sep,nov *"]
)
def test_a_day_that_never_comes_is_refused(expression: str) -> None:
    with pytest.raises(ConfigurationError, match="never occurs"):
        cron(expression)


def test_names_and_wrapping_days_reach_celery_as_values() -> None:
    schedule = cron("0 9 29 feb,jul fri-mon")
    assert schedule.month_of_year == {2, 7}
    assert schedule.day_of_week == {5, 6, 0, 1}
    assert describe(schedule) == "0 9 29 feb,jul fri-mon"


def test_a_crontab_needs_five_fields() -> None:
    with pytest.raises(InvalidScheduleError, match="five"):
        parse_crontab("* * *")


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: weekly(day='mon"+str(1)+"'), "not a day of the week"),
        (lambda: weekly(day=True), "not a day of the week"),
        (lambda: hourly(True), "minute must be"),
        (lambda: every_minutes(90), "at most 59"),
        (lambda: every_seconds(0), "positive whole number"),
    ],
)
def test_helpers_refuse_what_make_cron_refuses(build, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        build()


def test_helpers_give_celery_schedules() -> None:
    assert describe(every_minutes(10)) == "*/10 * * * *"
    assert describe(hourly(15)) == "15 * * * *"
    assert describe(daily(at="02:30")) == "30 2 * * *"
    assert describe(weekly("fri", at="18:00")) == "0 18 * * fri"
    assert describe(every_seconds(5)) == "every 5s"
    assert isinstance(cron("0 * * * *"), crontab)
    with pytest.raises(ConfigurationError, match="HH:MM"):
        daily(at="25:00")


def test_due_now_and_next_run() -> None:
    at = datetime(2026, 1, 5, 2, 0, 30, tzinfo=UTC)  # a Monday
    assert is_due_now(daily(at="02:00"), at)
    assert not is_due_now(daily(at="03:00"), at)
    assert is_due_now(weekly("mon", at="02:00"), at)
    assert not is_due_now(weekly("tue", at="02:00"), at)
    assert is_due_now(every_seconds(5), at)
    assert next_run(hourly(30), at) == datetime(2026, 1, 5, 2, 30, tzinfo=UTC)


def test_a_cron_is_never_retried_and_carries_its_schedule() -> None:
    @cron_task(name="tests.crons.sample", schedule=every_minutes(5))
    def sample() -> str:
        return "ran"

    assert isinstance(sample, CronTask)
    assert sample.max_retries == 0
    assert sample.without_overlapping is True
    assert describe(sample.schedule) == "*/5 * * * *"
    assert sample() == "ran"  # called directly: no lock, no broker
    assert overlap_lock_key("x", "ventas") == "cron-lock:ventas.x"
    assert overlap_lock_key("x", "") == "cron-lock:x"


def test_idempotency_keys_are_stable_and_argument_sensitive() -> None:
    one = derive_key("t", (1, "a"), {"b": 2, "c": 3})
    assert one == derive_key("t", [1, "a"], {"c": 3, "b": 2})
    assert one != derive_key("t", (1, "b"), {"b": 2, "c": 3})
    assert one != derive_key("u", (1, "a"), {"b": 2, "c": 3})
