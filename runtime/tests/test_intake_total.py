"""Nothing that arrives on a queue stops the worker: every wrong header and body, one at a time.

Each message goes through the worker's own consumer (the intake checks, Celery's
strategy, the dead-letter path) in this process, with no broker: it is either
handed to Celery to run, or dead-lettered with a reason and acknowledged. A
property-based test then feeds arbitrary headers and bodies the same way.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from typing import Any

import pytest
from bound import PACKAGE
from doubles import MemoryStore
from hostile_table import DEEP, WRONG_BODIES, WRONG_HEADERS, nested_list
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kombu import Connection
from kombu.message import Message

from workergen_runtime import project
from workergen_runtime.celery_app import app as celery_app
from workergen_runtime.deadletter import routing as deadlettering
from workergen_runtime.discovery import import_jobs
from workergen_runtime.queues import qualified_queue
from workergen_runtime.worker.consumer import DeadLetterConsumer

TASK = f"{PACKAGE}.hello"
LANE_QUEUE = qualified_queue("default", project.DEFAULT_NAMESPACE)
SOUND_BODY = json.dumps([["intake"], {}, {"callbacks": None, "errbacks": None}]).encode()


class Channel:
    """Where a message is settled: records what the worker did with it."""

    no_ack_consumers = None

    def __init__(self) -> None:
        self.settled: list[str] = []

    def basic_ack(self, delivery_tag: Any, multiple: bool = False) -> None:
        self.settled.append("ack")

    def basic_reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        self.settled.append("requeue" if requeue else "reject")


class Intake:
    """The worker's consumer, taking one message at a time: what ran, what was dead-lettered."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.ran: list[Any] = []
        self.scheduled: list[Any] = []
        timer = types.SimpleNamespace(
            call_at=lambda *a, **k: self.scheduled.append(a),
            call_after=lambda *a, **k: self.scheduled.append(a),
            call_repeatedly=lambda *a, **k: None,
        )
        consumer = DeadLetterConsumer(
            self.ran.append,
            init_callback=lambda _consumer: None,
            hostname="intake@test",
            pool=types.SimpleNamespace(apply_async=None, is_green=False),
            app=celery_app,
            timer=timer,
            controller=types.SimpleNamespace(
                use_eventloop=False, semaphore=None, state=types.SimpleNamespace(revoked=set())
            ),
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
        )
        consumer.qos = types.SimpleNamespace(
            increment_eventually=lambda *a: None, decrement_eventually=lambda *a: None
        )
        # What a RabbitMQ worker declares first, in memory: no broker here.
        consumer.connection = Connection("memory://")
        consumer.update_strategies()
        self.consumer = consumer
        self.handle: Callable[[Any], Any] = consumer.create_task_handler()

    def take(self, headers: Any, body: bytes) -> tuple[str, Any]:
        """("run", request) or ("dead-lettered", letter): what became of one message."""
        message, channel = delivered(headers, body)
        before_letters, before_ran = len(self.store.letters), len(self.ran)
        self.handle(message)  # must never raise: that would be "Unrecoverable error"
        letters = self.store.letters[before_letters:]
        ran = self.ran[before_ran:] + self.scheduled
        self.scheduled.clear()
        if letters:
            assert not ran, "a dead-lettered message also ran"
            assert len(letters) == 1 and channel.settled == ["ack"], (letters, channel.settled)
            assert letters[0].reason, letters[0]
            return "dead-lettered", letters[0]
        assert len(ran) == 1 and channel.settled == [], (ran, channel.settled)
        return "run", ran[0]


def delivered(headers: Any, body: bytes) -> tuple[Message, Channel]:
    """A message as a transport hands it to the worker, and the channel it is settled on."""
    channel = Channel()
    message = Message(
        body=body,
        delivery_tag="tag",
        content_type="application/json",
        content_encoding="utf-8",
        delivery_info={"routing_key": LANE_QUEUE, "exchange": LANE_QUEUE},
        properties={},
        headers={},
        channel=channel,
    )
    message.headers = headers  # as a transport may hand it over: anything
    return message, channel


@pytest.fixture(scope="module")
def jobs() -> None:
    import_jobs()


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> MemoryStore:
    memory = MemoryStore()
    monkeypatch.setattr(deadlettering, "dead_letter_store", lambda _app: memory)
    monkeypatch.setattr(deadlettering, "RECORD_BACKOFF", 0)
    no_grace = celery_app.settings.model_copy(update={"unknown_task_grace": 0})
    monkeypatch.setattr(celery_app, "_settings", no_grace)
    return memory


@pytest.fixture
def intake(jobs: None, store: MemoryStore) -> Intake:
    return Intake(store)


def sound_headers(**changes: Any) -> dict[str, Any]:
    return {"lang": "py", "task": TASK, "id": "intake-1", "retries": 0, **changes}


def test_a_sound_message_runs(intake: Intake) -> None:
    outcome, request = intake.take(sound_headers(), SOUND_BODY)
    assert outcome == "run"
    assert (request.name, request.id) == (TASK, "intake-1")


HEADER_PAIRS = [
    pytest.param(name, value, id=f"{name}={json.dumps(value)[:40]}")
    for name, values in WRONG_HEADERS.items()
    for value in values
]


@pytest.mark.parametrize(("name", "value"), HEADER_PAIRS)
def test_every_wrong_header_is_dead_lettered_as_malformed_and_never_run(
    intake: Intake, name: str, value: Any
) -> None:
    outcome, letter = intake.take(sound_headers(**{name: value}), SOUND_BODY)
    assert outcome == "dead-lettered"
    assert letter.reason == "malformed"
    assert repr(name) in letter.exception, letter.exception


@pytest.mark.parametrize("body", WRONG_BODIES, ids=lambda body: repr(body[:40]))
def test_every_wrong_body_is_dead_lettered_as_malformed_and_never_run(
    intake: Intake, body: bytes
) -> None:
    outcome, letter = intake.take(sound_headers(), body)
    assert outcome == "dead-lettered"
    assert letter.reason == "malformed", letter
    assert letter.args is None, "a refused body is kept as it came, never decoded again"
    assert letter.raw_body == body[: len(letter.raw_body)]


def test_a_letter_whose_headers_were_wrong_keeps_its_call_for_a_replay(intake: Intake) -> None:
    outcome, letter = intake.take(sound_headers(retries="x"), SOUND_BODY)
    assert outcome == "dead-lettered"
    assert (letter.args, letter.kwargs, letter.replayable) == (["intake"], {}, True)


def test_a_flow_the_project_sends_passes_the_intake(
    intake: Intake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain with a callback and an errback, as Celery sends it, runs."""
    from celery import chain

    sent: list[Any] = []

    def capture(_producer: Any, _name: str, message: Any, **_options: Any) -> None:
        sent.append(message)

    monkeypatch.setattr(celery_app.amqp, "send_task_message", capture)
    hello = celery_app.tasks[TASK]
    on = {"queue": LANE_QUEUE}
    first = hello.s().set(**on)
    first.link(hello.si().set(**on))
    first.link_error(hello.si().set(**on))
    chain(first, hello.s().set(**on), hello.si().set(**on)).apply_async()
    assert sent
    message = sent[0]
    outcome, request = intake.take(message.headers, json.dumps(message.body).encode())
    assert outcome == "run", request


def test_the_worker_lives_when_the_dead_letter_store_fails(
    intake: Intake, store: MemoryStore
) -> None:
    store.broken = True
    channel_outcomes = []
    for headers in (sound_headers(task=["a"]), sound_headers(task={"x": 1})):
        message, channel = delivered(headers, SOUND_BODY)
        intake.handle(message)
        channel_outcomes.append(channel.settled)
    # Not kept by the store: handed back to the broker (its own dead-letter
    # route, or the lane again on Redis), never left hanging or raised.
    assert all(len(settled) == 1 for settled in channel_outcomes), channel_outcomes
    assert store.letters == []
    store.broken = False
    assert intake.take(sound_headers(), SOUND_BODY)[0] == "run"


def test_whatever_raises_while_a_message_is_taken_settles_that_message(
    intake: Intake, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workergen_runtime import idempotency

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise TypeError("unhashable type: 'list'")

    monkeypatch.setattr(deadlettering, "release_dead_lettered", broken)
    outcome, letter = intake.take(sound_headers(task=["a"]), SOUND_BODY)
    assert (outcome, letter.reason) == ("dead-lettered", "malformed")
    assert idempotency.release_dead_lettered is not broken


def test_an_error_in_celerys_own_handling_settles_the_message(intake: Intake) -> None:
    """Past the checks, Celery's strategy reads the message: what it raises is caught too."""

    def strategy(*_args: Any, **_kwargs: Any) -> None:
        raise TypeError("unhashable type: 'list'")

    intake.consumer.strategies[TASK] = strategy
    outcome, letter = intake.take(sound_headers(), SOUND_BODY)
    assert (outcome, letter.reason) == ("dead-lettered", "malformed")
    assert "TypeError: unhashable type" in letter.exception


def test_an_error_whose_text_cannot_be_made_still_settles_the_message(intake: Intake) -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    def strategy(*_args: Any, **_kwargs: Any) -> None:
        raise Unprintable("from a hostile message")

    intake.consumer.strategies[TASK] = strategy
    outcome, letter = intake.take(sound_headers(), SOUND_BODY)
    assert (outcome, letter.reason) == ("dead-lettered", "malformed")
    assert "Unprintable" in letter.exception


# Arbitrary JSON values, nested at most a few levels (deeper nesting is drawn on its own).
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
header_names = st.sampled_from(sorted({*WRONG_HEADERS, "task", "id"})) | st.text(max_size=12)


def nested(depth: int) -> list[Any]:
    """A list nested `depth` deep, built without recursion."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


deep_values = st.integers(min_value=1, max_value=DEEP).map(nested)
signature_like = st.fixed_dictionaries(
    {"task": json_values | st.just(TASK)},
    optional={
        "args": json_values,
        "kwargs": json_values,
        "options": st.dictionaries(
            st.sampled_from(["queue", "link", "link_error", "chord", "countdown", "x"]), json_values
        ),
        "subtask_type": json_values | st.sampled_from(["chain", "group", "chord"]),
        "immutable": json_values,
    },
)
embed_values = st.dictionaries(
    st.sampled_from(["callbacks", "errbacks", "chain", "chord", "group_id"]),
    json_values | st.lists(signature_like, max_size=3) | signature_like,
    max_size=4,
)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["call", "json", "deep", "bytes"]))
    if kind == "call":
        args = draw(st.lists(json_values, max_size=3) | json_values)
        kwargs = draw(st.dictionaries(st.text(max_size=8), json_values, max_size=3) | json_values)
        embed = draw(st.none() | embed_values)
        return json.dumps([args, kwargs, embed]).encode()
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    if kind == "deep":
        depth = draw(st.integers(min_value=1, max_value=DEEP))
        return ('[[], {"deep": ' + nested_list(depth) + "}, null]").encode()
    return draw(st.binary(max_size=64))


@st.composite
def header_dicts(draw: st.DrawFn) -> Any:
    headers: dict[Any, Any] = sound_headers() if draw(st.booleans()) else {}
    drawn = draw(st.dictionaries(header_names, json_values | deep_values, max_size=5))
    headers.update(drawn)
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        headers[draw(st.integers() | st.none() | st.booleans())] = draw(json_values)
    if draw(st.integers(min_value=0, max_value=19)) == 0:
        return draw(json_values)
    return headers


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(headers=header_dicts(), body=bodies())
def test_any_message_either_runs_or_is_dead_lettered_with_a_reason(
    intake: Intake, headers: Any, body: bytes
) -> None:
    outcome, result = intake.take(headers, body)
    assert outcome in ("run", "dead-lettered")
    if outcome == "run":
        assert result.name in celery_app.tasks
