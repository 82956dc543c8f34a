"""`dlq` at volume: 1,000 dead letters on SQS, Redis and RabbitMQ.

Each command finishes within the bounds docs/dead-letters.md states, shows
progress on long runs, reports the letters it could not reach (hidden by
another reader) instead of a smaller count that looks complete, and lists a
letter whose body cannot be decoded (JSON nested 5,000 deep) as such.
The letters are written straight into each broker's dead-letter store.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.brokers import sqs_client
from support.hostile import Hostile, kombu_envelope, put_on_rabbitmq
from support.operations import ops_project
from support.projects import Project, unique_namespace
from support.rabbitmq import remove_namespace

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"
LETTERS = 1000
HELD = 10  # letters another reader holds while the command runs
DEEP = "[" * 5000 + "]" * 5000
LANES = ("critical", "default", "batch")
# What docs/dead-letters.md promises for 1,000 letters on a local broker, per command.
BOUND_SECONDS = {"list": 30, "show": 30, "replay": 60, "purge": 30}


def record(n: int, lane: str = "default") -> dict[str, Any]:
    """A dead letter as the worker records it (Redis hash, SQS message)."""
    return {
        "id": f"v-{n}",
        "task_name": f"{PACKAGE}.probe",
        "task_id": f"v-{n}",
        "lane": lane,
        "args": ["/nowhere", f"v-{n}"],
        "kwargs": {},
        "reason": "failed",
        "exception": "ValueError: broken",
        "attempts": 1,
        "first_failed_at": "2026-12-01T10:00:00+00:00",
        "last_failed_at": "2026-12-01T10:00:00+00:00",
    }


def task_message(n: int) -> Hostile:
    """A task message as a lane holds it: RabbitMQ moves it to the dead-letter queue as it is."""
    headers = {"lang": "py", "task": f"{PACKAGE}.probe", "id": f"v-{n}", "retries": 0}
    return Hostile(
        f"v-{n}", "volume", headers, json.dumps([["/nowhere", f"v-{n}"], {}, {}]).encode()
    )


def deep_message() -> Hostile:
    return Hostile("deep", "nested", {"task": f"{PACKAGE}.probe", "id": "deep"}, DEEP.encode())


def timed(project: Project, *args: str, timeout: float = 240) -> tuple[Any, float]:
    started = time.monotonic()
    done = project.run("dlq", *args, timeout=timeout)
    elapsed = time.monotonic() - started
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done, elapsed


def listed_ids(project: Project, timings: dict[str, float]) -> dict[str, dict]:
    done, timings["list"] = timed(project, "list", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    letters = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return {letter["id"]: letter for letter in letters}


def check_deep_letter(project: Project, letter: dict, timings: dict[str, float]) -> None:
    """The deep letter is listed as unreadable and shown (and `replay --all` skips it)."""
    assert letter["args"] is None, letter
    assert "nests deeper than" in (letter["exception"] or ""), letter
    shown, timings["show"] = timed(project, "show", letter["id"])
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "nests deeper than" in shown.stdout


def check_plain_list(project: Project, count: int) -> None:
    plain = project.run("dlq", "list")
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert len(plain.stdout.splitlines()) == count
    assert f"{count} dead letter(s)" in plain.stderr.splitlines(), plain.stderr


def check_replay(project: Project, timings: dict[str, float]) -> None:
    done, timings["replay"] = timed(project, "replay", "--all")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"{LETTERS} dead letter(s) replayed" in done.stdout
    assert "1 dead letter(s) cannot be replayed" in done.stdout
    # Progress on stderr while it ran: a line every 100 letters.
    progress = [line for line in done.stderr.splitlines() if "replayed (" in line]
    assert len(progress) == LETTERS // 100, done.stderr


def check_bounds(broker: str, timings: dict[str, float]) -> None:
    print(
        f"\n[{broker}] {LETTERS} letters: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
    )
    for command, seconds in timings.items():
        assert seconds < BOUND_SECONDS[command], (command, seconds)


# --- SQS ---------------------------------------------------------------------


@pytest.fixture
def sqs_project(render, sqs_url: str, redis_url: str, tmp_path: Path) -> Iterator[Project]:
    rendered = render(broker="sqs", result_backend="none", queue_namespace="billing")
    project = Project.copy_of(
        rendered,
        tmp_path / "billing",
        PACKAGE,
        BROKER_URL=sqs_url,
        LOCK_URL=redis_url,
        QUEUE_NAMESPACE=unique_namespace("vol"),
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
    )
    done = project.run("queue", "provision")
    assert done.returncode == 0, done.stderr
    client = sqs_client(sqs_url)
    ns = project.env["QUEUE_NAMESPACE"]
    try:
        yield project
    finally:
        for lane in LANES:
            for name in (f"{ns}-{lane}", f"{ns}-{lane}-dlq"):
                with contextlib.suppress(Exception):
                    client.delete_queue(QueueUrl=client.get_queue_url(QueueName=name)["QueueUrl"])


def put_records_on_sqs(client: Any, url: str, count: int) -> None:
    attributes = {"dead-letter-record": {"DataType": "String", "StringValue": "1"}}
    for start in range(0, count, 10):
        entries = [
            {"Id": str(n), "MessageBody": json.dumps(record(n)), "MessageAttributes": attributes}
            for n in range(start, min(start + 10, count))
        ]
        assert not client.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")


def test_sqs_dlq_commands_at_volume(sqs_project: Project, sqs_url: str) -> None:
    client = sqs_client(sqs_url)
    ns = sqs_project.env["QUEUE_NAMESPACE"]
    dlq = client.get_queue_url(QueueName=f"{ns}-default-dlq")["QueueUrl"]
    lane = client.get_queue_url(QueueName=f"{ns}-default")["QueueUrl"]
    started = time.monotonic()
    put_records_on_sqs(client, dlq, LETTERS)
    print(f"\n[sqs] {LETTERS} letters sent in {time.monotonic() - started:.1f} s")
    # Moved by SQS's redrive policy as it was: kombu's envelope around a body 5,000 deep.
    client.send_message(
        QueueUrl=dlq, MessageBody=kombu_envelope(deep_message(), f"{ns}-default").decode()
    )
    timings: dict[str, float] = {}

    letters = listed_ids(sqs_project, timings)
    assert set(letters) == {f"v-{n}" for n in range(LETTERS)} | {"deep"}
    check_deep_letter(sqs_project, letters["deep"], timings)
    check_replay(sqs_project, timings)
    counts = client.get_queue_attributes(QueueUrl=lane, AttributeNames=["All"])["Attributes"]
    assert int(counts["ApproximateNumberOfMessages"]) == LETTERS

    # Another reader holds some letters hidden: every command says so.
    put_records_on_sqs(client, dlq, LETTERS)
    held = []
    while len(held) < HELD:
        # Hidden for the queue's visibility timeout, as any reader of the queue hides them.
        got = client.receive_message(QueueUrl=dlq, MaxNumberOfMessages=HELD - len(held))
        held += got.get("Messages", [])
    listed = sqs_project.run("dlq", "list", timeout=120)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert f"{LETTERS + 1 - HELD} dead letter(s)" in listed.stderr
    assert (
        f"{HELD} dead letter(s) in flight (hidden by another reader): not listed" in listed.stderr
    )
    # A letter that is out of reach is not reported missing as if it were gone.
    hidden = json.loads(held[0]["Body"])["id"] if "v-" in held[0]["Body"] else "deep"
    missing = sqs_project.run("dlq", "show", hidden, timeout=120)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr, missing.stderr
    assert f"No dead letter with id {hidden!r}" in missing.stderr
    assert f"{HELD} dead letter(s) in flight (hidden by another reader)" in missing.stderr
    purged, timings["purge"] = timed(sqs_project, "purge", "--yes")
    assert purged.returncode == 75, purged.stdout + purged.stderr[-2000:]
    assert f"purged {LETTERS + 1 - HELD} dead letter(s)" in purged.stdout
    assert (
        f"{HELD} dead letter(s) in flight (hidden by another reader): not purged" in purged.stdout
    )
    assert "run again in 300 s at most" in purged.stdout
    # Once the other reader lets go, a second purge gets them.
    client.change_message_visibility_batch(
        QueueUrl=dlq,
        Entries=[
            {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
            for n, m in enumerate(held)
        ],
    )
    again = sqs_project.run("dlq", "purge", "--yes")
    assert again.returncode == 0 and f"purged {HELD} dead letter(s)" in again.stdout, again.stdout
    check_bounds("sqs", timings)


# --- Redis -------------------------------------------------------------------


def put_records_on_redis(url: str, key: str, count: int) -> None:
    import redis

    client = redis.Redis.from_url(url)
    with client.pipeline(transaction=False) as pipe:
        for n in range(count):
            pipe.hset(key, f"v-{n}", json.dumps(record(n)))
        pipe.execute()
    client.close()


def test_redis_dlq_commands_at_volume(request, render, tmp_path: Path) -> None:
    import redis

    with ops_project("redis", request, render, tmp_path) as project:
        url = project.env["BROKER_URL"]
        ns = project.env["QUEUE_NAMESPACE"]
        client = redis.Redis.from_url(url)
        try:
            put_records_on_redis(url, f"{ns}.default.dlq", LETTERS)
            # A tampered record whose arguments nest 5,000 deep.
            deep = {**record(0), "id": "deep", "task_id": "deep"}
            text = json.dumps(deep).replace('["/nowhere", "v-0"]', DEEP)
            client.hset(f"{ns}.default.dlq", "deep", text)
            timings: dict[str, float] = {}

            letters = listed_ids(project, timings)
            assert set(letters) == {f"v-{n}" for n in range(LETTERS)} | {"deep"}
            assert letters["deep"]["reason"] == "corrupt"
            check_deep_letter(project, letters["deep"], timings)
            check_plain_list(project, LETTERS + 1)
            check_replay(project, timings)
            assert client.llen(f"{ns}.default") == LETTERS
            assert client.hkeys(f"{ns}.default.dlq") == [b"deep"]

            # Redis records have no visibility: a purge reaches every one.
            put_records_on_redis(url, f"{ns}.default.dlq", LETTERS)
            purged, timings["purge"] = timed(project, "purge", "--yes")
            assert purged.returncode == 0, purged.stdout + purged.stderr
            assert f"purged {LETTERS + 1} dead letter(s)" in purged.stdout
            assert "in flight" not in purged.stdout
            check_bounds("redis", timings)
        finally:
            # The lanes, their dead-letter hashes and kombu's bindings of the lanes.
            keys = list(client.scan_iter(match=f"*{ns}*", count=1000))
            if keys:
                client.delete(*keys)
            client.close()


# --- RabbitMQ ----------------------------------------------------------------


def lane_count(url: str, queue: str) -> int:
    from kombu import Connection

    with Connection(url) as connection, connection.channel() as channel:
        return channel.queue_declare(queue=queue, passive=True).message_count


@contextlib.contextmanager
def holding(url: str, queue: str, count: int) -> Iterator[None]:
    """Another client consumes `count` letters and holds them unacknowledged."""
    from kombu import Connection, Consumer, Queue

    held: list[Any] = []
    with Connection(url) as connection, connection.channel() as channel:
        consumer = Consumer(channel, [Queue(queue, no_declare=True)], on_message=held.append)
        consumer.qos(prefetch_count=count)
        with consumer:
            deadline = time.monotonic() + 30
            while len(held) < count and time.monotonic() < deadline:
                with contextlib.suppress(TimeoutError):
                    connection.drain_events(timeout=1)
            assert len(held) == count
            yield


def test_rabbitmq_dlq_commands_at_volume(request, render, tmp_path: Path) -> None:
    with ops_project("rabbitmq", request, render, tmp_path) as project:
        url = project.env["BROKER_URL"]
        ns = project.env["QUEUE_NAMESPACE"]
        dlq = f"{ns}.default.dlq"
        try:
            # Declares the lanes and their dead-letter queues.
            assert project.run("dlq", "list").returncode == 0
            put_on_rabbitmq(url, dlq, [task_message(n) for n in range(LETTERS)])
            put_on_rabbitmq(url, dlq, [deep_message()])
            timings: dict[str, float] = {}

            letters = listed_ids(project, timings)
            assert set(letters) == {f"v-{n}" for n in range(LETTERS)} | {"deep"}
            check_deep_letter(project, letters["deep"], timings)
            check_plain_list(project, LETTERS + 1)
            check_replay(project, timings)
            assert lane_count(url, f"{ns}.default") == LETTERS
            assert lane_count(url, dlq) == 1

            put_on_rabbitmq(url, dlq, [task_message(n) for n in range(LETTERS)])
            with holding(url, dlq, HELD):
                purged, timings["purge"] = timed(project, "purge", "--yes")
            assert purged.returncode == 75, purged.stdout + purged.stderr[-2000:]
            assert f"purged {LETTERS + 1 - HELD} dead letter(s)" in purged.stdout
            assert "1 other reader(s) of the dead-letter queue" in purged.stdout
            # The letters the other reader held came back when it let go.
            again = project.run("dlq", "purge", "--yes")
            assert again.returncode == 0, again.stdout + again.stderr
            assert f"purged {HELD} dead letter(s)" in again.stdout
            check_bounds("rabbitmq", timings)
        finally:
            remove_namespace(url, ns, LANES)
