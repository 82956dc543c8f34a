"""The extension points of docs/runtime.md, and its examples, run as written there."""

import logging
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from bound import PACKAGE
from doubles import MemoryStore, consumer
from kombu.exceptions import ContentDisallowed
from pydantic import Field

from workergen_runtime import Settings, job, job_dead_lettered
from workergen_runtime.celery_app import app as celery_app
from workergen_runtime.deadletter import routing as deadlettering
from workergen_runtime.queues import qualified_queue


# docs/runtime.md, "Per-job options".
@job(
    name="tests.extension.charge",
    queue="default",
    retry_for=(ConnectionError,),
    max_retries=5,
    backoff=10,
    backoff_max=300,
    soft_time_limit=50,
    time_limit=60,
    idempotent=True,
)
def charge(invoice_id: int) -> None:
    """Charge one invoice; a dropped connection is retried, anything else is not."""


# docs/runtime.md, "A retry policy of your own": options shared by several jobs.
NETWORK_RETRIES = {"retry_for": (ConnectionError, TimeoutError), "max_retries": 8, "backoff": 5}


@job(name="tests.extension.fetch_rates", **NETWORK_RETRIES)
def fetch_rates() -> None: ...


# docs/runtime.md, "Settings".
class BillingSettings(Settings):
    """The project's settings and its own, from the same environment and `.env`."""

    payments_url: str = "https://payments.example.com"
    invoice_batch_size: int = Field(default=100, gt=0)


@cache
def billing_settings() -> BillingSettings:
    return BillingSettings()


# docs/runtime.md, "The dead-letter hook".
@job(name="tests.extension.tell_on_call")
def tell_on_call(task_name: str | None, reason: str, letter_id: str) -> None:
    """Page whoever is on call (your chat or pager client goes here)."""


def on_dead_letter(task_name: str | None, reason: str, letter_id: str, **_: object) -> None:
    # Runs in the worker's main process: slow work goes to a job. Never for
    # tell_on_call's own letters, or a failing tell_on_call would loop.
    if task_name != tell_on_call.name:
        tell_on_call.dispatch(task_name, reason, letter_id)


# docs/runtime.md, "A retry policy of your own".
class RateLimited(Exception):
    def __init__(self, retry_after: int) -> None:
        super().__init__(f"rate limited, retry after {retry_after} s")
        self.retry_after = retry_after


pushes: list[int] = []


def push(invoice_id: int) -> None:
    """The service: says how long to wait on its first call, then takes the invoice."""
    pushes.append(invoice_id)
    if len(pushes) == 1:
        raise RateLimited(retry_after=30)


@job(name="tests.extension.sync_invoice", max_retries=5)
def sync_invoice(invoice_id: int) -> None:
    try:
        push(invoice_id)
    except RateLimited as exc:
        # The service said when: wait that long, not the backoff.
        raise sync_invoice.retry(exc=exc, countdown=exc.retry_after) from None


class Message:
    """A task message as the consumer reads it: acknowledged, or handed back."""

    def __init__(self, task_id: str, task: str, content_type: str = "application/json") -> None:
        self.body = b"[[], {}, {}]"
        self.content_type = content_type
        self.content_encoding = "utf-8"
        self.headers = {"id": task_id, "task": task}
        self.properties: dict = {}
        namespace = celery_app.settings.queue_namespace
        self.delivery_info = {"routing_key": qualified_queue("default", namespace)}
        self.acked = False
        self.rejected: bool | None = None

    def ack(self) -> None:
        self.acked = True

    def reject_log_error(self, logger, errors, requeue: bool = False) -> None:
        self.rejected = requeue


def refuse(message: Message) -> None:
    """What the worker does with content it never decodes: dead-letter it as `refused`."""
    consumer().on_invalid_task(None, message, ContentDisallowed("Refusing to deserialize"))


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> MemoryStore:
    memory = MemoryStore()
    monkeypatch.setattr(deadlettering, "dead_letter_store", lambda _app: memory)
    return memory


@pytest.fixture
def heard(store: MemoryStore) -> Iterator[list[dict]]:
    """What a receiver of job_dead_lettered was given, and the letters stored by then."""
    calls: list[dict] = []

    def receiver(**kwargs: object) -> None:
        calls.append({**kwargs, "stored": list(store.letters)})

    job_dead_lettered.connect(receiver)
    yield calls
    job_dead_lettered.disconnect(receiver)


def test_the_hook_fires_once_per_letter_after_the_store_holds_it(
    store: MemoryStore, heard: list[dict]
) -> None:
    message = Message("t-1", f"{PACKAGE}.gone", content_type="application/x-yaml")
    refuse(message)
    [letter] = store.letters
    [call] = heard
    assert call["letter"] is letter and call["stored"] == [letter]
    assert (call["letter_id"], call["task_id"], call["task_name"]) == (
        "t-1",
        "t-1",
        f"{PACKAGE}.gone",
    )
    assert (call["reason"], call["lane"], call["attempts"]) == ("refused", "default", 1)
    assert "Refusing to deserialize" in call["exception"]
    assert message.acked


def test_a_receiver_that_raises_is_logged_once_and_the_worker_goes_on(
    store: MemoryStore, heard: list[dict], caplog: pytest.LogCaptureFixture
) -> None:
    def broken(**_: object) -> None:
        raise RuntimeError("the pager is down")

    job_dead_lettered.connect(broken)
    try:
        with caplog.at_level(logging.ERROR):
            first = Message("t-2\x1b[2J", f"{PACKAGE}.gone", content_type="text/plain")
            refuse(first)
            second = Message("t-3", f"{PACKAGE}.gone", content_type="text/plain")
            refuse(second)
    finally:
        job_dead_lettered.disconnect(broken)
    assert [letter.id for letter in store.letters] == ["t-2\x1b[2J", "t-3"]
    assert first.acked and second.acked and first.rejected is None
    # The receiver connected before it still heard both letters.
    assert [call["letter_id"] for call in heard] == ["t-2\x1b[2J", "t-3"]
    failures = [r for r in caplog.records if "job_dead_lettered receiver" in r.getMessage()]
    assert len(failures) == 2  # once per letter
    text = failures[0].getMessage()
    assert "broken" in text and "'t-2\\x1b[2J'" in text and "\x1b" not in text
    assert "the pager is down" in str(failures[0].exc_info[1])


def test_no_hook_fires_when_the_store_failed_and_the_message_is_given_back(
    monkeypatch: pytest.MonkeyPatch, heard: list[dict]
) -> None:
    monkeypatch.setattr(deadlettering, "RECORD_BACKOFF", 0)
    monkeypatch.setattr(deadlettering, "dead_letter_store", lambda _app: MemoryStore(broken=True))
    message = Message("t-4", f"{PACKAGE}.gone", content_type="text/plain")
    refuse(message)
    assert heard == []
    assert not message.acked and message.rejected is not None


def test_the_hook_example_hands_the_letter_to_a_job_and_never_loops(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    paged: list[tuple] = []
    monkeypatch.setattr(tell_on_call, "dispatch", lambda *args: paged.append(args))
    job_dead_lettered.connect(on_dead_letter)
    try:
        refuse(Message("t-5", f"{PACKAGE}.charge", content_type="text/plain"))
        refuse(Message("t-6", tell_on_call.name, content_type="text/plain"))
    finally:
        job_dead_lettered.disconnect(on_dead_letter)
    assert paged == [(f"{PACKAGE}.charge", "refused", "t-5")]
    assert len(store.letters) == 2


def test_per_job_options_reach_the_job() -> None:
    assert charge.lane == "default" and charge.idempotent
    assert (charge.max_retries, charge.retry_backoff, charge.retry_backoff_max) == (5, 10, 300)
    assert charge.autoretry_for == (ConnectionError,)
    assert (charge.soft_time_limit, charge.time_limit) == (50, 60)
    assert fetch_rates.autoretry_for == (ConnectionError, TimeoutError)
    assert (fetch_rates.max_retries, fetch_rates.retry_backoff) == (8, 5)


def test_settings_of_your_own_come_from_the_environment_and_dotenv(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Path(".env").write_text("INVOICE_BATCH_SIZE=500\nTASK_MAX_RETRIES=7\n")
    monkeypatch.setenv("PAYMENTS_URL", "https://payments.internal")
    billing_settings.cache_clear()
    settings = billing_settings()
    assert settings.payments_url == "https://payments.internal"
    assert settings.invoice_batch_size == 500
    assert settings.task_max_retries == 7  # the project's own settings, read the same way
    assert Settings().task_max_retries == 7
    billing_settings.cache_clear()


def test_a_job_may_choose_its_own_retry_delay(caplog: pytest.LogCaptureFixture) -> None:
    pushes.clear()
    with caplog.at_level(logging.INFO, logger="workergen_runtime.jobs"):
        result = sync_invoice.apply(args=(42,))
    assert result.successful() and pushes == [42, 42]
    retries = [r.getMessage() for r in caplog.records if r.getMessage().startswith("retry ")]
    assert retries == ["retry 1 of 5 in 30s: rate limited, retry after 30 s"]
