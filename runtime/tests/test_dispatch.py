"""What a dispatch costs the producer: settings and the job's signature, read once."""

import inspect
from datetime import UTC, datetime, timedelta

import pytest
from celery import Celery

from workergen_runtime.celery_app import ConfigFromSettings, create_app
from workergen_runtime.errors import DelayTooLongError, JobArgumentsError
from workergen_runtime.jobs import Job
from workergen_runtime.settings import Settings


def greet(name: str, greeting: str = "hello") -> str:
    """A job for the app below."""
    return f"{greeting} {name}"


def app_with_job(namespace: str) -> tuple[Celery, Job]:
    app = create_app(Settings(_env_file=None, broker_url="memory://", queue_namespace=namespace))
    return app, app.task(greet, name="tests.dispatch.greet", base=Job, shared=False)


def queued(app: Celery, queue: str) -> int:
    """How many messages wait in a queue of the in-process broker; they are removed."""
    with app.connection_for_read() as connection:
        return connection.default_channel.queue_purge(queue)


def headers(app: Celery, queue: str) -> list[dict]:
    """The headers of the messages waiting in a queue of the in-process broker, taken."""
    taken = []
    with app.connection_for_read() as connection:
        while (message := connection.default_channel.basic_get(queue)) is not None:
            message.ack()
            taken.append(message.headers)
    return taken


def test_a_message_shows_its_arguments_as_celery_would_cut_at_its_limit() -> None:
    app, job = app_with_job("dispatchrepr")
    job.dispatch("Ada", greeting="hi")
    job.dispatch("x" * 5000)
    job.dispatch_with(args=["s3cret"], argsrepr="('<hidden>',)")

    short, long, hidden = headers(app, "dispatchrepr.default")
    assert (short["argsrepr"], short["kwargsrepr"]) == ("('Ada',)", "{'greeting': 'hi'}")
    assert len(long["argsrepr"]) == 1024
    assert long["argsrepr"].startswith("('xxx") and long["argsrepr"].endswith("...")
    assert (hidden["argsrepr"], hidden["kwargsrepr"]) == ("('<hidden>',)", "{}")


def test_once_loaded_celery_reads_no_setting_through_the_settings_mapping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app, job = app_with_job("dispatchconf")
    job.dispatch("Ada")  # Celery loads its configuration here
    read: list[str] = []
    original = ConfigFromSettings.__getitem__

    def counted(self: ConfigFromSettings, key: str) -> object:
        read.append(key)
        return original(self, key)

    monkeypatch.setattr(ConfigFromSettings, "__getitem__", counted)
    job.dispatch("Grace")
    job.dispatch_with(args=["Alan"], kwargs={"greeting": "hi"})

    assert read == []
    assert app.conf.task_acks_late is True and app.conf.task_serializer == "json"
    assert queued(app, "dispatchconf.default") == 3


def test_the_arguments_are_checked_against_a_signature_read_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app, job = app_with_job("dispatchsig")
    read: list[object] = []
    original = inspect.signature

    def counted(obj: object, *args: object, **kwargs: object) -> inspect.Signature:
        if getattr(obj, "__name__", None) == "greet":
            read.append(obj)
        return original(obj, *args, **kwargs)

    monkeypatch.setattr(inspect, "signature", counted)
    for name in ("Ada", "Grace", "Alan"):
        job.dispatch(name)
    with pytest.raises(JobArgumentsError, match="unexpected keyword argument 'nope'"):
        job.dispatch("Ada", nope=1)
    with pytest.raises(JobArgumentsError, match="missing a required argument: 'name'"):
        job.dispatch()

    assert len(read) == 1
    assert queued(app, "dispatchsig.default") == 3


def test_a_delay_beyond_task_max_eta_is_refused_and_nothing_is_queued() -> None:
    app, job = app_with_job("dispatchdelay")
    limit = app.settings.effective_task_max_eta
    far = datetime.now(UTC) + timedelta(days=365)
    for options in ({"countdown": limit + 60}, {"eta": far}):
        with pytest.raises(DelayTooLongError, match="TASK_MAX_ETA") as refused:
            job.dispatch_with(args=["Ada"], **options)
        assert "NOT queued" in str(refused.value)
    job.dispatch_with(args=["Ada"], countdown=limit - 60)
    assert queued(app, "dispatchdelay.default") == 1
