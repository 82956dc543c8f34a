"""What a message must be before the worker reads it: hostile ones are named, never run."""

import base64
import json
import pickle

import pytest
from bound import PACKAGE

from workergen_runtime.worker import inbound
from workergen_runtime.worker.inbound import (
    MALFORMED_PROPERTY,
    envelope_problem,
    header_problem,
    limited,
    message_problem,
    readable_envelope,
)


def headers(**changes) -> dict:
    base = {"task": f"{PACKAGE}.hello", "id": "t-1", "retries": 0, "lang": "py"}
    base.update(changes)
    return {key: value for key, value in base.items() if value != "<missing>"}


class Message:
    """The parts of a kombu message the checks look at."""

    def __init__(self, body: bytes, content_type="application/json", head=None, properties=None):
        self.body = body
        self.content_type = content_type
        self.headers = headers() if head is None else head
        self.properties = properties or {}

    @property
    def payload(self):
        return json.loads(self.body)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("retries", "x"),
        ("retries", -1),
        ("retries", True),
        ("task", ["a"]),
        ("task", ""),
        ("id", 5),
        ("id", "i" * 300),
        ("timelimit", "x"),
        ("timelimit", [1]),
        ("timelimit", [-1, 5]),
        ("timelimit", [5, "x"]),
        ("eta", "not a date"),
        ("expires", 5),
        ("argsrepr", ["x"]),
        ("root_id", {"a": 1}),
        ("parent_id", 5),
        ("group", ["g"]),
        ("group_index", "x"),
        ("ignore_result", "yes"),
        ("stamped_headers", [1]),
        ("stamps", "x"),
    ],
)
def test_a_header_of_the_wrong_type_is_named(name: str, value) -> None:
    problem = header_problem(headers(**{name: value}))
    assert problem is not None and repr(name) in problem


@pytest.mark.parametrize("missing", ["id", "task"])
def test_a_message_without_id_or_task_is_not_a_task_message(missing: str) -> None:
    assert f"no {missing!r} header" in header_problem(headers(**{missing: "<missing>"}))


def test_sound_headers_pass() -> None:
    sound = headers(timelimit=[None, 10], eta="2026-01-01T00:00:00+00:00", argsrepr="(1,)")
    assert header_problem(sound) is None


def test_huge_headers_are_refused() -> None:
    assert "bytes" in header_problem(headers(padding="x" * 100_000))


LIMIT = 32 * 1024


@pytest.mark.parametrize(
    "padding",
    [
        # Just under and just over the limit, as JSON counts it: ASCII, escaped
        # control characters and quotes, BMP and astral characters (one and two
        # \\uXXXX escapes each), and values whose JSON is longer than their repr.
        *("x" * n for n in (LIMIT - 200, LIMIT)),
        *("\x01" * n for n in (LIMIT // 6 - 40, LIMIT // 6)),
        *('"' * n for n in (LIMIT // 2 - 100, LIMIT // 2)),
        *("\u00e9" * n for n in (LIMIT // 6 - 40, LIMIT // 6)),
        *("\U0001f600" * n for n in (LIMIT // 12 - 20, LIMIT // 12)),
        [None] * (LIMIT // 6 - 40),
        [float("inf")] * (LIMIT // 10 - 20),
        [float("inf")] * (LIMIT // 10),
        {str(n): [True, {"k": -(2**63)}] for n in range(LIMIT // 40)},
    ],
)
def test_headers_over_the_size_limit_are_refused_as_their_json_counts_them(padding) -> None:
    assert_sized_as_json(headers(padding=padding))


@pytest.mark.parametrize(
    "extra",
    [
        # Many headers rather than one long one: long names, long numbers.
        *({f"{n:0300d}": None for n in range(count)} for count in (LIMIT // 320, LIMIT // 300)),
        *({f"n{n}": 10**300 for n in range(count)} for count in (LIMIT // 330, LIMIT // 300)),
        *({f"n{n}": -1.5e-300 for n in range(count)} for count in (LIMIT // 40, LIMIT // 20)),
    ],
)
def test_many_headers_over_the_size_limit_are_refused_as_their_json_counts_them(extra) -> None:
    assert_sized_as_json(headers(**extra))


def assert_sized_as_json(sized: dict) -> None:
    over = len(json.dumps(sized, default=str)) > LIMIT
    problem = header_problem(sized)
    assert (problem is not None) is over, (len(json.dumps(sized, default=str)), problem)
    if over:
        assert f"take {len(json.dumps(sized, default=str))} bytes" in problem


# What Celery 5 sends, as the worker reads it from RabbitMQ.
CELERY_HEADERS = {
    "lang": "py",
    "task": f"{PACKAGE}.hello",
    "id": "ce675c79-b94e-482e-8330-4b094d4c6614",
    "shadow": None,
    "eta": None,
    "expires": None,
    "group": None,
    "group_index": None,
    "retries": 0,
    "timelimit": [330, 300],
    "root_id": "ce675c79-b94e-482e-8330-4b094d4c6614",
    "parent_id": None,
    "argsrepr": "(1, 'a')",
    "kwargsrepr": "{}",
    "origin": "gen1@host",
    "ignore_result": True,
    "replaced_task_nesting": 0,
    "stamped_headers": None,
    "stamps": {},
    "sent_at": 1796318636.8291392,
}


SOUND_CHANGES = [
    {},
    {"eta": "2026-01-01T00:00:00+00:00", "expires": "2026-01-02T00:00:00+00:00"},
    {"timelimit": [None, 10.5], "stamped_headers": ["a"], "stamps": {"a": "b"}},
    {"group": "g", "group_index": 3, "shadow": "", "argsrepr": ""},
    {"id": "i" * 255, "custom": ["any", {"thing": 1}], "flag": False},
    {"big": 10**18, "small": -(10**18), "argsrepr": "x" * (LIMIT // 24)},
]


@pytest.mark.parametrize("changes", SOUND_CHANGES)
def test_sound_headers_pass_the_quick_check(changes) -> None:
    sent = {**CELERY_HEADERS, **changes}
    assert inbound._sound(sent)
    assert header_problem(sent) is None


@pytest.mark.parametrize(
    "changes",
    [
        *SOUND_CHANGES,
        {"id": "i" * 256},
        {"id": ""},
        {"task": None},
        {"retries": True},
        {"retries": -1},
        {"retries": 1.0},
        {"timelimit": [-1, 5]},
        {"eta": "not a date"},
        {"origin": 5},
        {"ignore_result": 1},
        {"stamps": []},
        {"argsrepr": "x" * (LIMIT // 12)},  # above the quick bound, under the limit
        {"argsrepr": "\U0001f600" * (LIMIT // 12)},  # just over the limit as JSON
        {"argsrepr": "x" * LIMIT},
        {7: "a name that is not a string"},
    ],
)
def test_the_quick_check_never_passes_headers_a_check_refuses(changes) -> None:
    # It may leave sound headers to the checks one by one (which then pass them).
    sent = {**CELERY_HEADERS, **changes}
    if inbound._sound(sent):
        assert inbound._header_fault(sent) is None
    assert header_problem(sent) == inbound._header_fault(sent)


def test_a_header_that_cannot_be_written_as_json_is_not_taken() -> None:
    # An int too long to print: the worker dead-letters such a message as malformed.
    with pytest.raises(ValueError):
        header_problem(headers(padding=[10**5000]))


@pytest.mark.parametrize(
    "body", [b'"s"', b"{}", b"[1]", b"[[],{}]", b"[{}, {}, {}]", b'[[], {}, "x"]', b"null"]
)
def test_a_body_of_the_wrong_shape_is_malformed(body: bytes) -> None:
    reason, _ = message_problem(Message(body))
    assert reason == "malformed"


def test_a_body_that_is_not_json_is_malformed() -> None:
    reason, problem = message_problem(Message(b"\xff\xfe not json"))
    assert reason == "malformed" and "not application/json" in problem


def test_pickle_is_refused_without_being_decoded() -> None:
    class Pickled(Message):
        @property
        def payload(self):
            raise AssertionError("a pickle body must never be decoded")

    message = Pickled(pickle.dumps(([], {}, {})), "application/x-python-serialize")
    reason, problem = message_problem(message)
    assert reason == "refused" and "(pickle)" in problem


def test_a_sound_message_passes() -> None:
    assert message_problem(Message(b'[[1], {"a": 2}, {"callbacks": null}]')) is None


def test_an_unreadable_envelope_is_quarantined_with_its_bytes() -> None:
    raw = b"\xff{not json"
    envelope = readable_envelope(raw, "ns.default")
    assert envelope_problem(envelope) is None
    properties = envelope["properties"]
    assert "not JSON" in properties[MALFORMED_PROPERTY]
    assert properties["delivery_info"]["routing_key"] == "ns.default"
    assert base64.b64decode(envelope["body"]) == raw


@pytest.mark.parametrize(
    "envelope",
    [
        [1, 2],
        {"body": "", "headers": {}},
        {"body": "", "properties": "x"},
        {"body": "", "properties": {"body_encoding": "base64"}},
        {"body": "!!", "properties": {"delivery_tag": "t", "body_encoding": "base64"}},
        {"body": "", "headers": [1], "properties": {"delivery_tag": "t"}},
        {"body": 5, "properties": {"delivery_tag": "t"}},
        {"body": "", "properties": {"delivery_tag": "t", "delivery_info": "x"}},
    ],
)
def test_broken_envelopes_are_named(envelope) -> None:
    assert envelope_problem(envelope) is not None
    quarantined = readable_envelope(json.dumps(envelope).encode(), "ns.default")
    assert quarantined["properties"][MALFORMED_PROPERTY]


def test_a_quarantined_message_is_malformed() -> None:
    message = Message(b"x", "application/octet-stream", {}, {MALFORMED_PROPERTY: "envelope..."})
    assert message_problem(message) == ("malformed", "envelope...")


@pytest.mark.parametrize(
    ("given", "ceiling", "expected"),
    [(1000, 330, 330), (None, 330, 330), (5, 330, 5), (0, 330, 330), ("x", 330, 330)],
)
def test_a_message_lowers_its_time_limit_never_raises_it(given, ceiling, expected) -> None:
    assert limited(given, ceiling) == expected


def test_a_sound_envelope_names_the_queue_it_came_from() -> None:
    sound = {"body": "", "headers": {}, "properties": {"delivery_tag": "t", "delivery_info": None}}
    envelope = readable_envelope(json.dumps(sound).encode(), "ns.batch")
    assert MALFORMED_PROPERTY not in envelope["properties"]
    assert envelope["properties"]["delivery_info"]["routing_key"] == "ns.batch"
