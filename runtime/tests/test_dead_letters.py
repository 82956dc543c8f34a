"""Dead letters without a broker: lane policies, the worker's consumer, the records."""

import json
import logging
import os
import pickle
import re
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime

import pytest
from billiard.einfo import ExceptionInfo
from bound import PACKAGE, PROJECT_ROOT, only_on
from celery import signals
from celery.exceptions import TimeLimitExceeded
from doubles import MemoryStore, consumer
from kombu.exceptions import ContentDisallowed
from kombu.serialization import loads
from typer.testing import CliRunner

from workergen_runtime import project
from workergen_runtime.brokers.amqp import policies
from workergen_runtime.brokers.amqp.deadletters import AmqpDeadLetterStore
from workergen_runtime.brokers.amqp.policies import lane_policies
from workergen_runtime.brokers.redis.deadletters import RedisDeadLetterStore
from workergen_runtime.brokers.sqs.deadletters import SqsDeadLetterStore
from workergen_runtime.celery_app import ProjectApp
from workergen_runtime.celery_app import app as celery_app
from workergen_runtime.cli.main import app
from workergen_runtime.config import build_config, dead_letter_queues, lane_queues
from workergen_runtime.deadletter import MAX_BODY_BYTES, DeadLetter, letter_from_message, store_for
from workergen_runtime.deadletter import routing as deadlettering
from workergen_runtime.errors import ConfigurationError
from workergen_runtime.queues import dead_letter_queue, qualified_queue
from workergen_runtime.settings import Settings
from workergen_runtime.worker import consumer as consumer_module
from workergen_runtime.worker import deliveries
from workergen_runtime.worker.consumer import DeadLetterConsumer
from workergen_runtime.worker.deliveries import give_back_requeues

AMQP = "amqp://guest:guest@localhost:5672//"
REDIS = "redis://localhost:6379/0"
NAMESPACE = project.DEFAULT_NAMESPACE
runner = CliRunner()
rabbitmq_only = only_on("rabbitmq")


class FakeMessage:
    """The parts of a kombu message the consumer looks at."""

    def __init__(self, body: bytes, content_type: str, headers: dict, lane: str = "default"):
        self.body = body
        self.content_type = content_type
        self.content_encoding = "binary" if content_type.endswith("serialize") else "utf-8"
        self.headers = headers
        self.properties: dict = {}
        self.delivery_info = {"routing_key": qualified_queue(lane, NAMESPACE)}
        self.acked = False
        self.rejected: bool | None = None

    @property
    def payload(self) -> object:
        """The decoded body, as kombu's message gives it."""
        return loads(self.body, self.content_type, self.content_encoding)

    def ack(self) -> None:
        self.acked = True

    def reject_log_error(self, logger, errors, requeue: bool = False) -> None:
        self.rejected = requeue


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> MemoryStore:
    memory = MemoryStore()
    monkeypatch.setattr(deadlettering, "dead_letter_store", lambda _app: memory)
    return memory


@rabbitmq_only
def test_every_amqp_lane_dead_letters_into_its_own_queue_by_policy() -> None:
    settings = Settings(_env_file=None, broker_url=AMQP, queue_namespace="ventas")
    policies = lane_policies(settings)
    for lane, queue, policy in zip(project.LANES, lane_queues(settings), policies, strict=True):
        assert policy.definition["dead-letter-exchange"] == dead_letter_queue(lane, "ventas")
        assert policy.definition["dead-letter-routing-key"] == f"ventas.{lane}.dlq"
        assert re.fullmatch(policy.pattern, queue.name)
        # Declared bare: a plain Celery producer declaring the lane gets the same queue.
        assert not (queue.queue_arguments or {}).keys() - {"x-queue-type"}
        assert queue.durable
    assert [q.name for q in dead_letter_queues(settings)] == [
        f"ventas.{lane}.dlq" for lane in project.LANES
    ]


@rabbitmq_only
@pytest.mark.parametrize(
    "other",
    [
        "ventas.default.dlq",
        "ventasXdefault",
        "ventas.default2",
        "x.ventas.default",
        "ventas2.default",
        "ventas",
        "default",
    ],
)
def test_a_lane_policy_matches_its_lane_only(other: str) -> None:
    settings = Settings(_env_file=None, broker_url=AMQP, queue_namespace="ventas")
    for policy in lane_policies(settings):
        assert not re.search(policy.pattern, other), (policy.pattern, other)


@rabbitmq_only
def test_policies_use_the_vhost_of_the_broker_url_and_the_priority_setting() -> None:
    settings = Settings(
        _env_file=None, broker_url="amqp://u:p@rabbit:5672/billing", rabbitmq_policy_priority=7
    )
    policy = lane_policies(settings)[0]
    assert (policy.vhost, policy.priority, policy.apply_to) == ("billing", 7, "queues")
    assert lane_policies(Settings(_env_file=None, broker_url=AMQP))[0].vhost == "/"


@rabbitmq_only
def test_policies_that_cannot_be_applied_say_how_to_apply_them(monkeypatch) -> None:
    monkeypatch.setattr(policies.shutil, "which", lambda name: None)
    settings = Settings(_env_file=None, broker_url="amqp://u:p@rabbit.example:5672/billing")
    with pytest.raises(policies.PolicyUnavailableError) as caught:
        policies.apply_policies(settings)
    message = str(caught.value)
    assert "RABBITMQ_MANAGEMENT_URL" in message
    assert "rabbitmqctl set_policy --vhost billing --priority 10 --apply-to queues" in message
    warning = policies.apply_at_start(settings)
    assert warning.startswith("Warning:") and "dead-letters failed" in warning


def fake_rabbitmqctl(
    tmp_path, monkeypatch, listing: str | None, importing: str = ""
) -> list[list[object]]:
    """A rabbitmqctl on PATH that logs its calls, with the definitions it imports.

    list_policies prints `listing` (None: fails); import_definitions succeeds,
    or, given an `importing` error, prints it and fails.
    """
    calls = tmp_path / "calls.jsonl"
    script = tmp_path / "rabbitmqctl"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "call = sys.argv[1:]\n"
        "if 'import_definitions' in call:\n"
        "    call.append(json.load(sys.stdin))\n"
        f"open({str(calls)!r}, 'a').write(json.dumps(call) + '\\n')\n"
        "if 'list_policies' in call:\n"
        f"    listing = {listing!r}\n"
        "    sys.exit(1) if listing is None else print(listing)\n"
        "if 'import_definitions' in call:\n"
        f"    importing = {importing!r}\n"
        "    if importing:\n"
        "        sys.exit(importing)\n"
    )
    script.chmod(0o755)
    monkeypatch.setattr(policies.shutil, "which", lambda name: str(script))

    def logged() -> list[list[object]]:
        lines = calls.read_text().splitlines() if calls.exists() else []
        return [json.loads(line) for line in lines]

    return logged


def imported(calls: list[list[object]]) -> list[str]:
    """The names of the policies the fake rabbitmqctl was given to import."""
    return sorted(
        policy["name"]
        for call in calls
        if call[1] == "import_definitions"
        for policy in call[-1]["policies"]
    )


def as_listed(policy: policies.Policy, **changes: object) -> dict[str, object]:
    # RabbitMQ 3.x lists a definition as JSON text.
    return {**policy.as_dict(), "definition": json.dumps(policy.definition), **changes}


@rabbitmq_only
def test_a_worker_restart_sets_no_policy_the_broker_already_holds(tmp_path, monkeypatch) -> None:
    settings = Settings(_env_file=None, broker_url=AMQP, queue_namespace="ventas")
    wanted = lane_policies(settings)
    calls = fake_rabbitmqctl(tmp_path, monkeypatch, json.dumps([as_listed(p) for p in wanted]))
    assert policies.apply_policies(settings) == "rabbitmqctl"
    assert [call[1] for call in calls()] == ["list_policies"]


@rabbitmq_only
def test_a_policy_that_differs_or_is_missing_is_set_again(tmp_path, monkeypatch) -> None:
    settings = Settings(_env_file=None, broker_url=AMQP, queue_namespace="ventas")
    first, *rest = lane_policies(settings)
    # The first lane's policy has another priority; the others' definitions are objects (4.x).
    listing = [as_listed(first, priority=first.priority + 1)]
    listing += [{**p.as_dict()} for p in rest[:-1]]
    calls = fake_rabbitmqctl(tmp_path, monkeypatch, json.dumps(listing))
    policies.apply_policies(settings)
    expected = [first.name] + ([rest[-1].name] if rest else [])
    assert imported(calls()) == sorted(expected)
    # However many are missing, one Erlang node sets them.
    assert [call[1] for call in calls()] == ["list_policies", "import_definitions"]


@rabbitmq_only
def test_policies_are_all_set_when_the_broker_cannot_list_them(tmp_path, monkeypatch) -> None:
    settings = Settings(_env_file=None, broker_url=AMQP, queue_namespace="ventas")
    calls = fake_rabbitmqctl(tmp_path, monkeypatch, None)
    policies.apply_policies(settings)
    wanted = lane_policies(settings)
    assert imported(calls()) == sorted(p.name for p in wanted)
    [*_, definitions] = calls()[-1]
    assert definitions["policies"] == [p.as_dict() for p in wanted]


@rabbitmq_only
def test_policies_rabbitmqctl_refuses_to_set_say_why_and_how_to_set_them(
    tmp_path, monkeypatch
) -> None:
    settings = Settings(_env_file=None, broker_url=AMQP, queue_namespace="ventas")
    fake_rabbitmqctl(tmp_path, monkeypatch, "[]", importing="Error: access refused")
    with pytest.raises(policies.PolicyUnavailableError) as caught:
        policies.apply_policies(settings)
    message = str(caught.value)
    assert "access refused" in message.splitlines()[0]
    assert all(p.name in message.splitlines()[0] for p in lane_policies(settings))
    assert "rabbitmqctl set_policy --vhost / --priority" in message


@pytest.fixture
def rules_restored() -> object:
    """Whatever a test leaves pending, the broker's rules count as ready afterwards."""
    yield
    deliveries.broker_rules_ready.set()


@rabbitmq_only
def test_a_worker_checks_its_policies_once_consuming_and_finishes_before_it_stops(
    tmp_path, monkeypatch, caplog, rules_restored: None
) -> None:
    settings = Settings(_env_file=None, broker_url=AMQP, queue_namespace="ventas")
    listing = json.dumps([as_listed(p) for p in lane_policies(settings)])
    go = tmp_path / "go"
    calls = fake_rabbitmqctl(tmp_path, monkeypatch, listing)
    # list_policies answers only once the test says so: a slow Erlang node.
    script = tmp_path / "rabbitmqctl"
    script.write_text(
        script.read_text().replace(
            "    listing =",
            f"    import os, time\n    while not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
            "    listing =",
        )
    )
    caplog.set_level("INFO", logger=policies.log.name)
    started = time.monotonic()
    thread = policies.apply_in_background(settings)
    assert time.monotonic() - started < 1
    time.sleep(0.3)
    # Nothing runs before the worker is consuming; rejects wait meanwhile.
    assert calls() == [] and not deliveries.broker_rules_ready.is_set()
    signals.worker_ready.send(sender=None)
    time.sleep(0.3)
    assert thread.is_alive() and not deliveries.broker_rules_ready.is_set()
    assert "policies are set" not in caplog.text
    # A worker that stops lets the check finish.
    stopping = threading.Thread(target=signals.worker_shutdown.send, kwargs={"sender": None})
    stopping.start()
    time.sleep(0.3)
    assert stopping.is_alive()
    go.touch()
    stopping.join(20)
    assert not thread.is_alive()
    assert deliveries.broker_rules_ready.is_set()
    assert [call[1] for call in calls()] == ["list_policies"]
    assert "dead-letter policies are set (rabbitmqctl)" in caplog.text


@pytest.fixture
def busy_worker(monkeypatch) -> threading.Event:
    """A worker holding jobs while the event is set."""
    busy = threading.Event()
    busy.set()
    monkeypatch.setattr(policies, "worker_is_quiet", lambda: not busy.is_set())
    # A shorter quiet moment: the tests wait in multiples of it, and a busy worker has none.
    monkeypatch.setattr(policies, "QUIET_FOR", 0.2)
    monkeypatch.setattr(policies, "QUIET_POLL", 0.05)
    return busy


def started_check(tmp_path, monkeypatch) -> tuple[threading.Thread, object]:
    """The background check of a worker that is consuming, its rabbitmqctl a fake."""
    settings = Settings(_env_file=None, broker_url=AMQP, queue_namespace="ventas")
    listing = json.dumps([as_listed(p) for p in lane_policies(settings)])
    calls = fake_rabbitmqctl(tmp_path, monkeypatch, listing)
    thread = policies.apply_in_background(settings)
    signals.worker_ready.send(sender=None)
    return thread, calls


@rabbitmq_only
def test_a_busy_worker_puts_its_policy_check_off_until_it_holds_no_job(
    tmp_path, monkeypatch, busy_worker: threading.Event, rules_restored: None
) -> None:
    thread, calls = started_check(tmp_path, monkeypatch)
    time.sleep(policies.QUIET_FOR * 3)
    assert calls() == [] and thread.is_alive()
    busy_worker.clear()
    thread.join(20)
    assert [call[1] for call in calls()] == ["list_policies"]
    assert deliveries.broker_rules_ready.is_set()


@rabbitmq_only
def test_a_message_given_back_starts_the_check_put_off_at_once(
    tmp_path, monkeypatch, busy_worker: threading.Event, rules_restored: None
) -> None:
    thread, calls = started_check(tmp_path, monkeypatch)
    time.sleep(policies.QUIET_FOR * 2)
    assert calls() == []
    started = time.monotonic()
    deliveries.await_broker_rules()  # as a reject does
    assert time.monotonic() - started < 10
    assert [call[1] for call in calls()] == ["list_policies"]
    thread.join(10)


@rabbitmq_only
def test_a_worker_busy_for_long_checks_its_policies_all_the_same(
    tmp_path, monkeypatch, busy_worker: threading.Event, rules_restored: None
) -> None:
    monkeypatch.setattr(policies, "QUIET_WAIT", 0.5)
    thread, calls = started_check(tmp_path, monkeypatch)
    thread.join(20)
    assert [call[1] for call in calls()] == ["list_policies"]
    assert deliveries.broker_rules_ready.is_set()


@rabbitmq_only
def test_policies_that_cannot_be_set_at_start_are_a_logged_warning(
    monkeypatch, caplog, rules_restored: None
) -> None:
    monkeypatch.setattr(policies.shutil, "which", lambda name: None)
    settings = Settings(_env_file=None, broker_url="amqp://u:p@rabbit.example:5672/billing")
    thread = policies.apply_in_background(settings)
    signals.worker_ready.send(sender=None)
    thread.join(20)
    [record] = [r for r in caplog.records if r.name == policies.log.name]
    assert record.levelname == "WARNING" and "rabbitmqctl set_policy" in record.getMessage()
    assert deliveries.broker_rules_ready.is_set()


def handed_back_once_rules_are_ready(hand_back, handed_back) -> None:
    """`hand_back()` (in a thread) waits while the broker's rules are pending, then goes on."""
    deliveries.broker_rules_ready.clear()
    thread = threading.Thread(target=hand_back)
    thread.start()
    time.sleep(0.3)
    assert thread.is_alive() and not handed_back()
    deliveries.broker_rules_ready.set()
    thread.join(10)
    assert handed_back()


@rabbitmq_only
def test_a_message_the_consumer_rejects_waits_for_the_policies(
    monkeypatch: pytest.MonkeyPatch, no_grace: None, rules_restored: None
) -> None:
    monkeypatch.setattr(deadlettering, "RECORD_BACKOFF", 0)
    monkeypatch.setattr(deadlettering, "dead_letter_store", lambda _app: MemoryStore(broken=True))
    message = FakeMessage(b"{}", "application/json", {"id": "t-9", "task": "x"})
    handed_back_once_rules_are_ready(
        lambda: consumer().on_unknown_task(None, message, KeyError("x")),
        lambda: message.rejected is not None,
    )


@rabbitmq_only
def test_a_job_given_back_waits_for_the_policies(uncounted: None, rules_restored: None) -> None:
    given_back: list[bool] = []
    request = worker_request(Delivery(1), given_back)
    handed_back_once_rules_are_ready(lambda: request.reject(requeue=True), lambda: given_back)


@rabbitmq_only
def test_quorum_lanes_count_deliveries_and_classic_lanes_do_not() -> None:
    settings = Settings(_env_file=None, broker_url=AMQP, task_max_deliveries=4)
    definition = lane_policies(settings)[0].definition
    arguments = lane_queues(settings)[0].queue_arguments or {}
    if project.QUEUE_TYPE == "quorum":
        assert arguments == {"x-queue-type": "quorum"}
        # Dead-lettered when returns exceed the limit: 4 deliveries in all.
        assert definition["delivery-limit"] == 3
        assert definition["dead-letter-strategy"] == "at-least-once"
        assert lane_queues(settings)[0].exchange.type == "topic"
    else:
        assert arguments == {} and "delivery-limit" not in definition


@rabbitmq_only
def test_a_rabbitmq_worker_loads_no_redis_before_it_counts_a_redelivery() -> None:
    # redis-py costs every worker process a tenth of a second and megabytes.
    code = (
        "import sys\n"
        f"import {PACKAGE}\n"
        "from workergen_runtime.cli import main\n"
        "from workergen_runtime.deadletter import routing\n"
        "from workergen_runtime.worker import consumer, deliveries\n"
        "from workergen_runtime.celery_app import app\n"
        "from workergen_runtime.discovery import import_jobs\n"
        "import_jobs()\n"
        "deliveries.delivery_counter(app)\n"
        "print(sorted(name for name in sys.modules if name.partition('.')[0] == 'redis'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={
            **os.environ,
            "BROKER_URL": AMQP,
            "PYTHONPATH": str(PROJECT_ROOT),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@rabbitmq_only
def test_rabbitmq_confirms_every_publish() -> None:
    config = build_config(Settings(_env_file=None, broker_url=AMQP))
    assert config["broker_transport_options"]["confirm_publish"] is True


@only_on("redis")
def test_redis_lanes_have_no_broker_arguments_and_recover_with_the_project_transport() -> None:
    settings = Settings(_env_file=None, broker_url=REDIS, queue_namespace="ventas")
    assert all(not q.queue_arguments for q in lane_queues(settings))
    config = build_config(settings)
    assert config["broker_transport"] == "workergen_runtime.brokers.redis.transport:RedisTransport"
    options = config["broker_transport_options"]
    assert options["unacked_key"] == "ventas.unacked"
    assert options["holders_prefix"] == "ventas.holders"
    assert options["visibility_timeout"] > settings.task_time_limit


def test_failures_are_neither_acknowledged_nor_requeued_by_celery() -> None:
    config = build_config(Settings(_env_file=None))
    assert config["task_acks_on_failure_or_timeout"] is False
    assert config["worker_consumer"] == "workergen_runtime.worker.consumer:DeadLetterConsumer"


def test_refused_pickle_content_is_kept_as_a_dead_letter_never_decoded(store: MemoryStore) -> None:
    body = pickle.dumps(([], {}, {}))
    message = FakeMessage(
        body, "application/x-python-serialize", {"id": "t-1", "task": f"{PACKAGE}.hello"}
    )
    consumer().on_invalid_task(None, message, ContentDisallowed("Refusing to deserialize"))
    assert message.acked
    [letter] = store.letters
    assert (letter.id, letter.reason, letter.lane) == ("t-1", "refused", "default")
    assert letter.args is None and letter.raw_body == body


@pytest.fixture
def no_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """UNKNOWN_TASK_GRACE=0: an unknown job is dead-lettered at once."""
    settings = celery_app.settings.model_copy(update={"unknown_task_grace": 0})
    monkeypatch.setattr(celery_app, "_settings", settings)


def test_an_unknown_job_is_kept_as_a_dead_letter(store: MemoryStore, no_grace: None) -> None:
    body = json.dumps([[1], {"a": 2}, {}]).encode()
    lane = project.LANES[-1]
    message = FakeMessage(body, "application/json", {"id": "t-2", "task": "gone"}, lane=lane)
    consumer().on_unknown_task(None, message, KeyError("gone"))
    [letter] = store.letters
    assert (letter.reason, letter.lane, letter.args, letter.kwargs) == (
        "unknown-task",
        lane,
        [1],
        {"a": 2},
    )
    assert letter.replayable


def test_undecodable_messages_are_not_dropped(store: MemoryStore) -> None:
    message = FakeMessage(b"\xff\xfegarbage", "application/json", {})
    consumer().on_decode_error(message, ValueError("bad json"))
    assert message.acked and store.letters[0].reason == "malformed"
    assert store.letters[0].body_encoding == "base64"


class Timer:
    """The worker's timer: what is due, and when."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, object, tuple]] = []

    def call_after(self, seconds, fun, args=()) -> None:
        self.calls.append((seconds, fun, args))

    def run_due(self) -> None:
        """Run what is due now (not what waits for a pause)."""
        while due := [call for call in self.calls if call[0] == 0]:
            for call in due:
                self.calls.remove(call)
                call[1](*call[2])


class QoS:
    """The worker's prefetch, as Celery raises it for a job held until its eta."""

    def __init__(self) -> None:
        self.value = self.sent = 2

    def increment_eventually(self) -> None:
        self.value += 1

    def decrement_eventually(self) -> None:
        self.value -= 1

    def update(self) -> None:
        self.sent = self.value


def sends_back(monkeypatch: pytest.MonkeyPatch, *, broker_delays: bool) -> list[tuple]:
    """Record what the consumer sends back to its lane instead of publishing it."""
    sent: list[tuple] = []
    monkeypatch.setattr(DeadLetterConsumer, "_delays_on_broker", lambda _self: broker_delays)
    monkeypatch.setattr(
        DeadLetterConsumer,
        "_send_back",
        lambda _self, message, _since, tries, delay=0, passed=False: sent.append(
            (message, tries, delay, passed)
        ),
    )
    return sent


def test_an_unknown_job_is_held_for_a_worker_that_has_it_without_taking_a_slot(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = sends_back(monkeypatch, broker_delays=False)
    instance = consumer()
    instance.timer, instance.qos = Timer(), QoS()
    message = FakeMessage(b"[[], {}, {}]", "application/json", {"id": "t-4", "task": "new"})
    instance.on_unknown_task(None, message, KeyError("new"))
    instance.timer.run_due()
    # Held, with the prefetch raised by one (and sent to the broker) while it waits.
    assert instance.qos.sent == 3
    [(pause, release, (held, since, tries, passed))] = instance.timer.calls
    assert 0 < pause <= 5 and held is message and tries == 1 and not passed
    assert store.letters == [] and not message.acked and message.rejected is None and not sent
    instance.timer.calls.clear()
    release(held, since, tries, passed)  # the pause is over
    instance.timer.run_due()
    assert sent == [(message, 1, 0, False)]
    assert instance.qos.value == 2


def came_back(sender: str, passed: bool) -> FakeMessage:
    """An unknown job this consumer sent back once, as the lane hands it out again."""
    headers = {
        "id": "t-6",
        "task": "new",
        consumer_module.UNKNOWN_SINCE_HEADER: datetime.now(UTC).isoformat(),
        consumer_module.UNKNOWN_TRIES_HEADER: 1,
        consumer_module.UNKNOWN_SENDER_HEADER: sender,
        consumer_module.UNKNOWN_PASSED_HEADER: passed,
    }
    return FakeMessage(b"[[], {}, {}]", "application/json", headers)


def test_an_unknown_job_back_at_its_own_sender_is_passed_on_at_once_then_held(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Redis hands an item to the longest wait, which is the sender's own when
    # its pause ends: passed on at once, a worker that has the job takes it.
    sent = sends_back(monkeypatch, broker_delays=False)
    instance = consumer()
    instance.timer, instance.qos = Timer(), QoS()
    first = came_back("old@host", passed=False)
    instance.on_unknown_task(None, first, KeyError("new"))
    instance.timer.run_due()
    [(pause, release, args)] = instance.timer.calls
    assert pause == consumer_module.PASS_ON_PAUSE and args[2:] == (1, True)
    instance.timer.calls.clear()
    release(*args)
    instance.timer.run_due()
    assert sent == [(first, 1, 0, True)] and instance.qos.value == 2
    # Back again after the pass-on: nobody else took it; held with a longer pause.
    again = came_back("old@host", passed=True)
    instance.on_unknown_task(None, again, KeyError("new"))
    [(pause, _, args)] = [call for call in instance.timer.calls if call[0]]
    assert pause == 10 and args[2:] == (2, False)
    # Sent back by another worker: held, as the first time.
    instance.timer.calls.clear()
    instance.on_unknown_task(None, came_back("other@host", passed=False), KeyError("new"))
    [(pause, _, args)] = [call for call in instance.timer.calls if call[0]]
    assert pause == 10 and args[2:] == (2, False)
    assert store.letters == []


def test_on_quorum_lanes_an_unknown_job_waits_in_the_brokers_delay_not_in_the_worker(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = sends_back(monkeypatch, broker_delays=True)
    instance = consumer()
    instance.timer, instance.qos = Timer(), QoS()
    message = FakeMessage(b"[[], {}, {}]", "application/json", {"id": "t-5", "task": "new"})
    instance.on_unknown_task(None, message, KeyError("new"))
    # Sent back at once, due in 5 s: nothing held, no slot taken.
    assert sent == [(message, 1, 5, False)]
    assert instance.timer.calls == [] and instance.qos.value == 2
    assert store.letters == []


def test_a_message_the_store_cannot_take_is_given_back_not_lost(
    monkeypatch: pytest.MonkeyPatch, no_grace: None
) -> None:
    monkeypatch.setattr(deadlettering, "RECORD_BACKOFF", 0)
    monkeypatch.setattr(deadlettering, "dead_letter_store", lambda _app: MemoryStore(broken=True))
    message = FakeMessage(b"{}", "application/json", {"id": "t-3", "task": "x"})
    consumer().on_unknown_task(None, message, KeyError("x"))
    assert not message.acked
    assert message.rejected is not None


class Delivery(FakeMessage):
    """A task message as a worker's request reads it, delivered `deliveries` times."""

    def __init__(self, deliveries: int) -> None:
        payload = ([], {}, {})
        headers = {"id": f"t-{deliveries}", "task": "lost"}
        super().__init__(json.dumps(payload).encode(), "application/json", headers)
        self.deliveries = deliveries


def lost() -> None:
    """A job for the requests below; it never runs."""


def worker_request(message: Delivery, given_back: list[bool]) -> deadlettering.DeadLetterRequest:
    settings = Settings(_env_file=None, queue_namespace=NAMESPACE)
    worker_app = ProjectApp("tests", settings=settings, set_as_current=False)
    worker_app.config_from_object(build_config(settings))
    request = deadlettering.DeadLetterRequest(
        message,
        app=worker_app,
        task=worker_app.task(name="lost", shared=False)(lost),
        on_reject=lambda _log, _errors, requeue: given_back.append(requeue),
    )
    request.worker_pid = os.getpid()
    return request


def test_a_message_cannot_raise_its_time_limits() -> None:
    settings = Settings(_env_file=None)
    raised = Delivery(1)
    raised.headers["timelimit"] = [settings.task_time_limit * 10, settings.task_time_limit * 5]
    request = worker_request(raised, [])
    assert request.time_limits == (settings.task_time_limit, settings.task_soft_time_limit)
    lowered = Delivery(2)
    lowered.headers["timelimit"] = [5, None]
    assert worker_request(lowered, []).time_limits == (5, settings.task_soft_time_limit)


def reach_hard_time_limit(request: deadlettering.DeadLetterRequest, seconds: int = 30) -> None:
    """What the pool does at a hard time limit: fail the job, then report the time-out."""
    try:
        raise TimeLimitExceeded(seconds)
    except TimeLimitExceeded:
        request.on_failure(ExceptionInfo())
    request.on_timeout(soft=False, timeout=seconds)


@pytest.fixture
def uncounted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deliveries, "delivery_counter", lambda _app: None)


def test_a_job_still_running_at_its_hard_time_limit_is_dead_lettered(
    store: MemoryStore, uncounted: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deadlettering, "exit_status", lambda pid: None)
    message = Delivery(1)
    given_back: list[bool] = []
    reach_hard_time_limit(worker_request(message, given_back))
    [letter] = store.letters
    assert (letter.reason, letter.attempts) == ("time-limit", 1)
    assert message.acked and given_back == []


def test_a_job_ended_from_two_threads_at_once_is_dead_lettered_once(
    store: MemoryStore, uncounted: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In a warm shutdown the pool's time-out handler and its clean-up can both end
    # the job past its hard limit; a slow store keeps the first one inside reject().
    monkeypatch.setattr(deadlettering, "exit_status", lambda pid: None)
    recorded = deadlettering.dead_letter_message

    def slow_record(*args: object, **kwargs: object) -> bool:
        time.sleep(0.3)
        return recorded(*args, **kwargs)

    monkeypatch.setattr(deadlettering, "dead_letter_message", slow_record)
    request = worker_request(Delivery(1), [])
    threads = [threading.Thread(target=reach_hard_time_limit, args=(request,)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert [letter.reason for letter in store.letters] == ["time-limit"]


def test_a_hard_time_limit_after_the_process_died_counts_as_a_lost_process(
    store: MemoryStore, uncounted: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pool can notice a dead process only after the job's hard time limit.
    monkeypatch.setattr(deadlettering, "exit_status", lambda pid: 1)
    settings = Settings(_env_file=None)
    limit = settings.task_max_deliveries
    given_back: list[bool] = []
    reach_hard_time_limit(worker_request(Delivery(limit - 1), given_back))
    assert store.letters == []
    assert given_back == [give_back_requeues(settings)]

    last = Delivery(limit)
    reach_hard_time_limit(worker_request(last, given_back))
    [letter] = store.letters
    assert (letter.reason, letter.attempts) == ("delivery-limit", limit)
    assert "exitcode 1" in letter.exception
    assert last.acked and len(given_back) == 1


def test_a_worker_process_that_exited_is_seen_before_it_is_collected() -> None:
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    exited = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    try:
        # Where os.waitid is missing (macOS before Python 3.13) nothing can be told.
        expected = 3 if hasattr(os, "waitid") else None
        deadline = time.monotonic() + 10
        while deadline > time.monotonic() and deadlettering.exit_status(exited.pid) != expected:
            time.sleep(0.05)
        assert deadlettering.exit_status(exited.pid) == expected
        assert deadlettering.exit_status(running.pid) is None
        # Only looked at: its parent still collects it.
        assert exited.wait(5) == 3
        assert deadlettering.exit_status(exited.pid) is None
    finally:
        running.kill()
        running.wait(5)
        exited.wait(5)


def test_a_dead_letter_survives_a_json_round_trip() -> None:
    letter = DeadLetter(
        id="t-4", task_name="x", task_id="t-4", lane="default", args=[1], kwargs={}, attempts=3
    )
    assert DeadLetter.from_json(letter.to_json()) == letter


def test_the_broker_has_its_dead_letter_store() -> None:
    stores = {
        "redis": RedisDeadLetterStore,
        "rabbitmq": AmqpDeadLetterStore,
        "sqs": SqsDeadLetterStore,
    }
    assert isinstance(store_for(Settings(_env_file=None)), stores[project.BROKER])
    with pytest.raises(ConfigurationError):
        store_for(Settings(_env_file=None, broker_url="memory://"))


def test_dlq_commands_are_listed_and_purge_asks_for_yes() -> None:
    result = runner.invoke(app, ["dlq", "--help"])
    assert result.exit_code == 0
    for command in ("list", "show", "replay", "purge"):
        assert command in result.output
    refused = runner.invoke(app, ["dlq", "replay"])
    assert refused.exit_code != 0


class FlakyStore(MemoryStore):
    """Fails the first `failures` records."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.calls = 0

    def record(self, letter: DeadLetter) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("store unavailable")
        super().record(letter)


@pytest.mark.parametrize("failures", [1, deadlettering.RECORD_ATTEMPTS - 1])
def test_a_store_that_fails_is_tried_again_with_backoff(
    monkeypatch: pytest.MonkeyPatch, failures: int
) -> None:
    flaky = FlakyStore(failures)
    monkeypatch.setattr(deadlettering, "dead_letter_store", lambda _app: flaky)
    pauses: list[float] = []
    monkeypatch.setattr(deadlettering.time, "sleep", pauses.append)
    message = FakeMessage(b"[[], {}, {}]", "application/json", {"id": "t-5", "task": "x"})
    assert deadlettering.dead_letter_message(celery_app, message, reason="failed", exception="boom")
    assert len(flaky.letters) == 1 and message.acked
    assert pauses == [deadlettering.RECORD_BACKOFF * 2**n for n in range(failures)]


def test_a_store_that_keeps_failing_is_given_up_on_after_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flaky = FlakyStore(failures=100)
    monkeypatch.setattr(deadlettering, "dead_letter_store", lambda _app: flaky)
    monkeypatch.setattr(deadlettering.time, "sleep", lambda seconds: None)
    message = FakeMessage(b"[[], {}, {}]", "application/json", {"id": "t-6", "task": "x"})
    assert not deadlettering.dead_letter_message(
        celery_app, message, reason="failed", exception="boom"
    )
    assert flaky.calls == deadlettering.RECORD_ATTEMPTS and not message.acked


def test_a_large_job_is_kept_bounded_with_its_sizes_noted() -> None:
    huge = "x" * (MAX_BODY_BYTES + 10)
    body = json.dumps([[huge], {}, {}]).encode()
    letter = letter_from_message(
        body=body,
        headers={"id": "t-7", "task": "x", "argsrepr": "y" * 100_000},
        content_type="application/json",
        content_encoding="utf-8",
        lane="default",
        reason="failed",
        exception="ValueError: " + huge,
        traceback="Traceback ...\n" + huge + "\nValueError: the end",
    )
    record = letter.to_json()
    assert len(record) < 200_000
    assert letter.truncated["body"] == len(body)
    assert letter.truncated["exception"] > MAX_BODY_BYTES
    assert letter.traceback.endswith("ValueError: the end")
    assert "headers" in letter.truncated
    assert not letter.replayable and letter.args is None


RECORD = {"id": "a", "task_name": "x", "task_id": "a", "lane": "default", "args": [], "kwargs": {}}


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        json.dumps({**RECORD, "lane": "../etc"}).encode(),
        json.dumps({**RECORD, "args": "rm -rf"}).encode(),
        json.dumps({**RECORD, "attempts": "many"}).encode(),
        json.dumps({**RECORD, "body_encoding": "rot13"}).encode(),
        b"[1, 2]",
    ],
)
def test_a_corrupt_or_tampered_record_is_listed_as_corrupt(raw: bytes) -> None:
    letter = DeadLetter.from_record(raw, record_id="a", lane="default")
    assert letter.reason == "corrupt" and letter.id == "a" and not letter.replayable
    assert letter.exception.startswith("corrupt dead-letter record")


def test_a_sound_record_reads_back_whole() -> None:
    letter = DeadLetter.from_record(json.dumps(RECORD), record_id="other", lane="default")
    assert (letter.id, letter.reason, letter.args) == ("a", "failed", [])
    assert letter.replayable


def test_dlq_show_and_list_escape_terminal_control_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from workergen_runtime.cli import dlq as dlq_cli

    memory = MemoryStore()
    memory.letters.append(
        letter_from_message(
            body=b"[[], {}, {}]",
            headers={"id": "t-8", "task": "x\x1b[2J"},
            content_type="application/json",
            content_encoding="utf-8",
            lane="default",
            reason="failed",
            exception="boom \x1b]0;owned\x07 \x1b[31mred",
            traceback="Traceback\n\x1b[1A\x1b[2Kline",
        )
    )
    monkeypatch.setattr(dlq_cli, "_store", lambda: memory)
    listed = runner.invoke(app, ["dlq", "list"])
    shown = runner.invoke(app, ["dlq", "show", "t-8"])
    assert listed.exit_code == 0 and shown.exit_code == 0
    assert "\x1b" not in listed.output + shown.output and "\x07" not in shown.output
    assert "\\x1b[31mred" in shown.output


@only_on("sqs")
def test_a_tampered_message_in_an_sqs_dead_letter_queue_is_listed_as_corrupt() -> None:
    store = SqsDeadLetterStore(Settings(_env_file=None, broker_url="sqs://"), client=object())
    tampered = {"MessageId": "m-1", "Body": json.dumps({"properties": "x", "body": "[]"})}
    letter = store._letter(tampered, "default")
    assert (letter.id, letter.reason, letter.lane) == ("m-1", "corrupt", "default")


class RecordingBackend:
    """A result backend that records the states stored, or fails like one that went down."""

    def __init__(self, *, down: bool = False) -> None:
        self.down = down
        self.retried: list[str] = []

    def mark_as_retry(self, task_id: str, exc: BaseException, request: object = None) -> None:
        if self.down:
            raise ConnectionError("result backend unreachable")
        self.retried.append(task_id)


class TerminatingPool:
    def __init__(self) -> None:
        self.terminated: list[int] = []

    def terminate_job(self, pid: int, signal: int) -> None:
        self.terminated.append(pid)


@pytest.mark.parametrize("down", [False, True], ids=["backend up", "backend down"])
def test_a_job_cancelled_on_a_connection_loss_is_given_back_never_acknowledged(
    down: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # Celery cancels the jobs that were running when the broker connection went
    # (worker_cancel_long_running_tasks_on_connection_loss); their messages come back.
    message = Delivery(1)
    request = worker_request(message, [])
    backend = RecordingBackend(down=down)
    request.task.backend = backend
    request.time_start = time.monotonic()
    pool = TerminatingPool()
    with caplog.at_level(logging.WARNING):
        request.cancel(pool)
    assert pool.terminated == [os.getpid()]
    assert not message.acked and message.rejected is None
    assert request._already_cancelled
    unstored = [r.getMessage() for r in caplog.records if "was not stored" in r.getMessage()]
    if down:
        assert backend.retried == [] and len(unstored) == 1
        assert "result backend unreachable" in unstored[0]
    else:
        assert backend.retried == [message.headers["id"]] and unstored == []
