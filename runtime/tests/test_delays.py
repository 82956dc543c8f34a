"""How far ahead a job may be delayed: TASK_MAX_ETA, and how it fits the other settings."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from bound import only_on, with_a_visibility_timeout

from workergen_runtime.delays import eta_problem, seconds_ahead
from workergen_runtime.settings import Settings

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def settings(**overrides) -> Settings:
    """This project's settings: its defaults, its local broker, then the overrides."""
    return Settings(_env_file=None, **overrides)


@pytest.mark.parametrize(
    ("value", "overrides", "refused"),
    [
        (None, {}, False),
        ((NOW + timedelta(seconds=30)).isoformat(), {}, False),
        ((NOW + timedelta(seconds=900)).isoformat(), {}, False),
        ((NOW + timedelta(seconds=901)).isoformat(), {}, True),
        ("2099-01-01T00:00:00", {}, True),
        ("2099-01-01T00:00:00+00:00", {}, True),
        (datetime(2099, 1, 1, tzinfo=UTC), {}, True),
        ((NOW - timedelta(days=3)).isoformat(), {}, False),  # overdue: runs at once
        (
            (NOW + timedelta(hours=2)).isoformat(),
            {"task_max_eta": 3 * 3600, "visibility_timeout": 4 * 3600},
            False,
        ),
        (
            (NOW + timedelta(seconds=61)).isoformat(),
            {"task_max_eta": 60, "task_retry_backoff_max": 60},
            True,
        ),
        # A naive eta is in TIMEZONE: 12:10 in Madrid (UTC+2 in June) is 10:10 UTC.
        ("2026-06-01T12:10:00", {"timezone": "Europe/Madrid"}, False),
        ("2026-06-01T12:20:00", {}, True),
        ("9999-12-31T23:59:59", {}, True),
        ("not a date", {}, False),  # the message checks name it
        (12345, {}, False),
    ],
)
def test_an_eta_beyond_task_max_eta_is_refused(value, overrides: dict, refused: bool) -> None:
    configured = settings(**overrides)
    problem = eta_problem(value, NOW, configured)
    assert (problem is not None) is refused
    if refused:
        assert "TASK_MAX_ETA" in problem and str(configured.effective_task_max_eta) in problem


def test_the_reason_shows_a_hostile_eta_escaped_and_short() -> None:
    problem = eta_problem("2099-01-01T00:00:00\n" + "x" * 500, NOW, settings())
    # Not a date: the message checks report it; a date with junk after it is not read.
    assert problem is None
    problem = eta_problem("2099-01-01T00:00:00", NOW, settings())
    assert "'2099-01-01T00:00:00'" in problem and "\n" not in problem


def test_seconds_ahead_reads_offsets() -> None:
    later = datetime(2026, 6, 1, 13, 0, tzinfo=timezone(timedelta(hours=1)))
    assert seconds_ahead(later, NOW, "UTC") == 0
    assert seconds_ahead(later.isoformat(), NOW, "UTC") == 0
    assert seconds_ahead("2026-06-01T12:00:05Z", NOW, "UTC") == 5


@pytest.mark.parametrize(
    ("overrides", "bound"),
    [
        ({}, 900),
        # Unset, the bound is at least the longest retry backoff ...
        ({"task_retry_backoff_max": 1800}, 1800),
        # ... and stays below the visibility timeout, past which the job is handed out again.
        pytest.param(
            {"visibility_timeout": 700, "task_retry_backoff_max": 600, "lane_prefetch": {}},
            699,
            marks=with_a_visibility_timeout,
        ),
        ({"task_max_eta": 120, "task_retry_backoff_max": 60}, 120),
    ],
)
def test_the_effective_bound(overrides: dict, bound: int) -> None:
    assert settings(**overrides).effective_task_max_eta == bound


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        # A retry further ahead would be dead-lettered.
        ({"task_max_eta": 300}, ("TASK_RETRY_BACKOFF_MAX", "TASK_MAX_ETA")),
        # Held until its eta, the job would be handed to a second worker.
        pytest.param(
            {"task_max_eta": 3600},
            ("VISIBILITY_TIMEOUT", "TASK_MAX_ETA"),
            marks=with_a_visibility_timeout,
        ),
        pytest.param(
            {"visibility_timeout": 700, "task_retry_backoff_max": 700},
            ("VISIBILITY_TIMEOUT", "TASK_RETRY_BACKOFF_MAX"),
            marks=with_a_visibility_timeout,
        ),
    ],
)
def test_delays_that_do_not_fit_are_refused(overrides: dict, names: tuple) -> None:
    with pytest.raises(ValueError) as caught:
        settings(**overrides)
    for name in names:
        assert name in str(caught.value)


@only_on("rabbitmq")
def test_rabbitmq_has_no_visibility_timeout_to_bound_the_eta() -> None:
    assert settings(task_max_eta=86_400).effective_task_max_eta == 86_400
