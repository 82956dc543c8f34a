"""Retries: transient errors only, exponential backoff with jitter and a cap."""

from workergen_runtime import job, retry_policy
from workergen_runtime.settings import get_settings

attempts: list[str] = []


@job(name="tests.flaky", retry_for=(ConnectionError,), max_retries=3, backoff=1, jitter=False)
def flaky(fail_times: int) -> str:
    attempts.append("flaky")
    if len(attempts) <= fail_times:
        raise ConnectionError("upstream went away")
    return "done"


@job(name="tests.broken", retry_for=(ConnectionError,), max_retries=3)
def broken() -> None:
    attempts.append("broken")
    raise FileNotFoundError("a permanent error")


def test_policy_takes_defaults_from_settings() -> None:
    settings = get_settings()
    policy = retry_policy((TimeoutError,))
    assert policy["autoretry_for"] == (TimeoutError,)
    assert policy["max_retries"] == settings.task_max_retries
    assert policy["retry_backoff"] == settings.task_retry_backoff
    assert policy["retry_backoff_max"] == settings.task_retry_backoff_max
    assert policy["retry_jitter"] is True


def test_policy_can_be_set_per_job() -> None:
    policy = retry_policy((TimeoutError,), max_retries=7, backoff=10, backoff_max=60, jitter=False)
    assert policy["max_retries"] == 7
    assert policy["retry_backoff"] == 10
    assert policy["retry_backoff_max"] == 60
    assert policy["retry_jitter"] is False


def test_a_transient_error_is_retried_until_it_passes() -> None:
    attempts.clear()
    result = flaky.apply(args=(2,))
    assert result.get() == "done"
    assert attempts == ["flaky"] * 3


def test_a_permanent_error_is_not_retried() -> None:
    attempts.clear()
    result = broken.apply()
    assert isinstance(result.result, FileNotFoundError)
    assert attempts == ["broken"]


def test_each_retry_is_logged_with_its_attempt_and_delay(caplog) -> None:
    attempts.clear()
    with caplog.at_level("INFO", logger="workergen_runtime.jobs"):
        flaky.apply(args=(2,))
    retries = [r.getMessage() for r in caplog.records if r.getMessage().startswith("retry ")]
    assert retries == [
        "retry 1 of 3 in 1s: upstream went away",
        "retry 2 of 3 in 2s: upstream went away",
    ]
