"""Settings: effective values, and combinations refused at start-up."""

import pytest
from bound import BROKER, only_on, with_a_visibility_timeout

from workergen_runtime import project
from workergen_runtime.errors import ConfigurationError
from workergen_runtime.settings import BROKER_SCHEMES, Settings, get_settings, mask_password

LOCAL_BROKER = {
    "redis": "redis://localhost:6379/0",
    "rabbitmq": "amqp://guest:guest@localhost:5672//",
    "sqs": "sqs://",
}[BROKER]
sqs_only = only_on("sqs")


def test_an_unset_broker_url_falls_back_to_the_local_development_broker() -> None:
    settings = Settings(_env_file=None)
    assert settings.effective_broker_url == LOCAL_BROKER


def test_no_result_backend_unless_configured() -> None:
    assert Settings(_env_file=None, result_backend_url="").effective_result_backend is None
    configured = Settings(_env_file=None, result_backend_url="redis://cache:6379/1")
    assert configured.effective_result_backend == "redis://cache:6379/1"


@only_on("redis")
def test_lock_url_falls_back_to_the_redis_broker() -> None:
    settings = Settings(_env_file=None, broker_url="redis://queue:6379/3")
    assert settings.effective_lock_url == "redis://queue:6379/3"


@only_on("rabbitmq", "sqs", because="on Redis, the locks fall back to the broker")
def test_lock_url_falls_back_to_the_local_redis() -> None:
    assert Settings(_env_file=None).effective_lock_url == "redis://localhost:6379/0"
    configured = Settings(_env_file=None, lock_url="redis://locks:6379/2")
    assert configured.effective_lock_url == "redis://locks:6379/2"


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        (
            {"task_soft_time_limit": 300, "task_time_limit": 300},
            ("TASK_SOFT_TIME_LIMIT", "TASK_TIME_LIMIT"),
        ),
        pytest.param(
            {"visibility_timeout": 60, "task_time_limit": 120, "task_soft_time_limit": 100},
            ("VISIBILITY_TIMEOUT", "TASK_TIME_LIMIT"),
            marks=with_a_visibility_timeout,
        ),
        pytest.param(
            {"visibility_timeout": 700, "task_retry_backoff_max": 900},
            ("VISIBILITY_TIMEOUT", "TASK_RETRY_BACKOFF_MAX"),
            marks=with_a_visibility_timeout,
        ),
        pytest.param(
            {"visibility_timeout": 3600, "worker_heartbeat_ttl": 3600},
            ("WORKER_HEARTBEAT_TTL", "VISIBILITY_TIMEOUT"),
            marks=only_on("redis", because="worker heartbeats are the Redis transport's"),
        ),
    ],
)
def test_refused_combinations_name_both_settings(overrides: dict, names: tuple[str, str]) -> None:
    with pytest.raises(ValueError) as caught:
        Settings(_env_file=None, **overrides)
    for name in names:
        assert name in str(caught.value)


@only_on("rabbitmq")
def test_amqp_has_no_visibility_timeout_to_check() -> None:
    settings = Settings(
        _env_file=None,
        visibility_timeout=1,
        task_time_limit=120,
        task_soft_time_limit=100,
        lane_prefetch={"default": 16},
    )
    assert settings.uses_visibility_timeout is False


def test_the_default_lane_reserves_more_than_lanes_of_long_jobs() -> None:
    settings = Settings(_env_file=None)
    assert settings.prefetch_for(["default"]) == 4
    other_lanes = [lane for lane in project.LANES if lane != "default"]
    for lane in other_lanes:
        assert settings.prefetch_for([lane]) == 1
    # One worker reserves one number for all its lanes: a long-job lane keeps it at 1.
    assert settings.prefetch_for(list(project.LANES)) == (1 if other_lanes else 4)


def test_lane_prefetch_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANE_PREFETCH", '{"default": 2}')
    assert Settings(_env_file=None).prefetch_for(["default"]) == 2


def test_lane_prefetch_for_an_unknown_lane_is_refused() -> None:
    with pytest.raises(ValueError, match="LANE_PREFETCH names the lane 'nope'"):
        Settings(_env_file=None, lane_prefetch={"nope": 4})


@with_a_visibility_timeout
def test_a_prefetch_that_could_outwait_the_visibility_timeout_is_refused() -> None:
    with pytest.raises(ValueError) as caught:
        Settings(_env_file=None, visibility_timeout=1000, lane_prefetch={"default": 4})
    message = str(caught.value)
    for name in ("VISIBILITY_TIMEOUT", "LANE_PREFETCH", "TASK_TIME_LIMIT"):
        assert name in message


@with_a_visibility_timeout
@pytest.mark.parametrize("prefetch", [2, 3, 4])
def test_a_prefetch_is_refused_up_to_the_longest_wait_and_accepted_past_it(prefetch: int) -> None:
    limits = {"_env_file": None, "task_time_limit": 100, "task_soft_time_limit": 90}
    limits["task_retry_backoff_max"] = 10
    longest_wait = prefetch * 100
    by_lane = {"lane_prefetch": {"default": prefetch}}
    by_worker = {"worker_prefetch_multiplier": prefetch, "lane_prefetch": {}}
    for extra in (by_lane, by_worker):
        with pytest.raises(ValueError, match=f"= {longest_wait} s"):
            Settings(**limits, **extra, visibility_timeout=longest_wait)
        Settings(**limits, **extra, visibility_timeout=longest_wait + 1)
    # One message per process waits for no other job: only the time limit counts.
    Settings(**limits, lane_prefetch={"default": 1}, visibility_timeout=101)


def test_bad_environment_becomes_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASK_SOFT_TIME_LIMIT", "400")
    with pytest.raises(ConfigurationError, match="TASK_SOFT_TIME_LIMIT"):
        get_settings()


def test_passwords_are_masked_in_messages() -> None:
    assert mask_password("amqp://user:s3cret@host:5672//") == "amqp://user:***@host:5672//"
    assert mask_password("redis://localhost:6379/0") == "redis://localhost:6379/0"


def test_a_password_that_breaks_the_url_is_masked_too() -> None:
    assert mask_password("redis://user:wJal+rX/Utn#x@host:6379/0") == "redis://user:***@host:6379/0"
    assert mask_password("garbage") == "garbage"


def settings_error(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    """The message get_settings gives for these environment variables."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        with pytest.raises(ConfigurationError) as caught:
            get_settings()
    finally:
        get_settings.cache_clear()
    return str(caught.value)


OTHER_BROKER_URL = {
    "redis": "amqp://guest:guest@localhost//",
    "rabbitmq": "sqs://",
    "sqs": "redis://localhost:6379/0",
}[BROKER]


@pytest.mark.parametrize(
    ("env", "shown"),
    [
        ({"QUEUE_NAMESPACE": "my ns"}, "QUEUE_NAMESPACE='my ns': the queue namespace must"),
        ({"QUEUE_NAMESPACE": "*"}, "QUEUE_NAMESPACE='*'"),
        ({"QUEUE_NAMESPACE": "ns\n"}, "QUEUE_NAMESPACE='ns\\n'"),
        ({"TASK_TIME_LIMIT": "-5"}, "TASK_TIME_LIMIT='-5': Input should be greater than 0"),
        pytest.param(
            {"SQS_REGION": "us-east-1\n"}, "the SQS region must look like", marks=sqs_only
        ),
        pytest.param(
            {"SQS_POLLING_INTERVAL": "0"},
            "SQS_POLLING_INTERVAL='0': Input should be greater",
            marks=sqs_only,
        ),
        pytest.param(
            {"SQS_WAIT_TIME_SECONDS": "21"},
            "SQS_WAIT_TIME_SECONDS='21': Input should be less",
            marks=sqs_only,
        ),
        pytest.param(
            {"WORKER_HEARTBEAT_TTL": "1"},
            "WORKER_HEARTBEAT_TTL='1': Input should be greater",
            marks=only_on("redis"),
        ),
        ({"SCHEDULER_LEADER_TTL": "5"}, "SCHEDULER_LEADER_TTL='5': Input should be greater"),
        ({"LANE_PREFETCH": "not json"}, "LANE_PREFETCH='not json': is not valid JSON"),
        ({"BROKER_URL": "http://example.com"}, "BROKER_URL='http://example.com': has scheme"),
        ({"BROKER_URL": "garbage"}, "BROKER_URL='garbage': has no scheme"),
        ({"BROKER_URL": ""}, "BROKER_URL='': is empty"),
        ({"BROKER_URL": OTHER_BROKER_URL}, f"expected a {BROKER} URL"),
        ({"RESULT_BACKEND_URL": "http://cache"}, "RESULT_BACKEND_URL='http://cache'"),
        ({"LOCK_URL": "amqp://x"}, "LOCK_URL='amqp://x'"),
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL='loud'"),
        ({"TIMEZONE": "Mars/Olympus"}, "TIMEZONE='Mars/Olympus'"),
    ],
)
def test_a_bad_setting_names_its_variable_its_value_and_the_rule(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], shown: str
) -> None:
    message = settings_error(monkeypatch, **env)
    assert shown in message
    assert len(message.splitlines()) <= 3


@pytest.mark.parametrize("secret", ["wJal+rX/Utn", "wJal+rX#Utn", "wJal+rX?Utn"])
def test_a_url_that_does_not_parse_never_shows_its_password(
    monkeypatch: pytest.MonkeyPatch, secret: str
) -> None:
    scheme = BROKER_SCHEMES[BROKER][0]
    message = settings_error(monkeypatch, BROKER_URL=f"{scheme}://user:{secret}@host:1234/0")
    assert "BROKER_URL=" in message and "percent-encode" in message
    assert "wJal" not in message and "Utn" not in message


def test_every_rule_of_the_answers_applies_to_the_namespace_setting() -> None:
    from workergen_runtime.naming import NAMESPACE_RULE

    for value in ("", "ventas", "a-b_2", "my ns", "*", "ns\n", "Ventas", "{{ x }}"):
        problem = NAMESPACE_RULE.problem(value)
        if problem is None:
            assert Settings(_env_file=None, queue_namespace=value).queue_namespace == value
        else:
            with pytest.raises(ValueError, match="the queue namespace"):
                Settings(_env_file=None, queue_namespace=value)
