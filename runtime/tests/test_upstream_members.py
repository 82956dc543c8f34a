"""The private members of Celery, billiard and kombu the runtime overrides, calls or reads.

No public way does what the runtime needs there (docs/architecture.md, "Overrides
of private members", says why for each). A release that renames one, or
changes its parameters, fails here before a worker runs on it: the row that
fails names the member and what depends on it. A member's parameters are
compared in full (names, kinds, which have defaults); the runtime's override must
accept every call the library makes to its own. The members of every broker's
transport are checked whichever broker the project has: they are read from the
libraries, not from a broker.
"""

import inspect
import logging
import re
from typing import Any

import pytest
from billiard.pool import ApplyResult, Pool, TimeoutHandler
from bound import answer_independent
from celery import Celery
from celery.concurrency.asynpool import AsynPool, ResultHandler
from celery.schedules import crontab
from celery.utils.dispatch import Signal
from celery.worker.consumer.delayed_delivery import DelayedDelivery
from celery.worker.request import Request
from kombu.transport import SQS, redis, virtual
from kombu.utils.scheduling import cycle_by_name

from workergen_runtime.brokers.redis.recovery import HolderChannel, HolderQoS
from workergen_runtime.brokers.redis.transport import RedisChannel
from workergen_runtime.brokers.sqs.transport import Channel as SqsChannel
from workergen_runtime.deadletter.routing import DeadLetterRequest
from workergen_runtime.log import TaskContextFilter
from workergen_runtime.worker.consumer import LaneDelayedDelivery
from workergen_runtime.worker.pool import DeadlinePool, Deadlines, QuietResultHandler

# Read from the installed libraries, whichever broker the project has.
pytestmark = answer_independent

# (library class, private method, its parameters, the runtime's class overriding it
# or None where the runtime only calls it). Parameters: `name`, `name=` (has a
# default), `*name`, `**name`, and Python's `/` and `*` markers; a tuple holds
# each shape the allowed releases have.
METHODS = [
    pytest.param(
        AsynPool,
        "_create_write_handlers",
        "self, hub, pack=, dumps=, protocol=",
        DeadlinePool,
        id="AsynPool._create_write_handlers: on_poll_start only with work",
    ),
    pytest.param(
        AsynPool,
        "_create_timelimit_handlers",
        "self, hub",
        DeadlinePool,
        id="AsynPool._create_timelimit_handlers: time limits on one timer",
    ),
    pytest.param(
        ResultHandler,
        "_recv_message",
        "self, add_reader, fd, callback, __read__=, readcanbuf=, BytesIO=, unpack_from=, load=",
        QuietResultHandler,
        id="ResultHandler._recv_message: no failed re-registration per result",
    ),
    pytest.param(
        Request,
        "_announce_cancelled",
        ("self", "self, emit_retry="),  # Celery 5.5.0, then later releases
        DeadLetterRequest,
        id="Request._announce_cancelled: a cancel after connection loss never acks",
    ),
    pytest.param(
        Signal,
        "_live_receivers",
        "self, sender",
        None,
        id="Signal._live_receivers: job_dead_lettered receivers called one by one",
    ),
    pytest.param(
        TimeoutHandler,
        "on_soft_timeout",
        "self, job",
        None,
        id="TimeoutHandler.on_soft_timeout: Deadlines applies Celery's soft limit",
    ),
    pytest.param(
        TimeoutHandler,
        "on_hard_timeout",
        "self, job",
        None,
        id="TimeoutHandler.on_hard_timeout: Deadlines applies Celery's hard limit",
    ),
    pytest.param(
        DelayedDelivery,
        "_bind_queues",
        "self, app, connection",
        LaneDelayedDelivery,
        id="DelayedDelivery._bind_queues: delayed jobs bound to this project only",
    ),
    pytest.param(
        redis.Channel,
        "_brpop_read",
        "self, **options",
        RedisChannel,
        id="redis.Channel._brpop_read: unreadable envelopes quarantined",
    ),
    pytest.param(
        redis.Channel,
        "_create_client",
        "self, asynchronous=",
        RedisChannel,
        id="redis.Channel._create_client: one client per connection pool",
    ),
    pytest.param(
        redis.Channel,
        "_connparams",
        "self, asynchronous=",
        HolderChannel,
        id="redis.Channel._connparams: acks after a connection loss still reach Redis",
    ),
    pytest.param(
        redis.QoS,
        "_remove_from_indices",
        "self, delivery_tag, pipe=",
        HolderQoS,
        id="redis.QoS._remove_from_indices: the holder record goes with the ack",
    ),
    pytest.param(
        virtual.Transport,
        "_deliver",
        "self, message, queue",
        None,
        id="virtual.Transport._deliver: _brpop_read hands the envelope on as kombu does",
    ),
    pytest.param(
        SQS.Channel,
        "_message_to_python",
        "self, message, queue_name, q_url",
        SqsChannel,
        id="SQS.Channel._message_to_python: unreadable envelopes quarantined",
    ),
]

# (library class, private attribute, what the runtime does with it).
ATTRIBUTES = [
    pytest.param(ApplyResult, "_job", id="ApplyResult._job: read, the key of a job's deadline"),
    pytest.param(Pool, "_cache", id="Pool._cache: read, the running jobs at a deadline"),
    pytest.param(AsynPool, "_all_inqueues", id="AsynPool._all_inqueues: read, idle pipes"),
    pytest.param(Request, "_message", id="Request._message: read, the message dead-lettered"),
    pytest.param(Request, "_task", id="Request._task: read, the job's own time limits"),
    pytest.param(Request, "_request_dict", id="Request._request_dict: read, retries so far"),
    pytest.param(
        Request, "_already_cancelled", id="Request._already_cancelled: written before a cancel"
    ),
    pytest.param(crontab, "_orig_minute", id="crontab._orig_minute: read, a schedule shown"),
    pytest.param(crontab, "_orig_hour", id="crontab._orig_hour: read, a schedule shown"),
    pytest.param(
        crontab, "_orig_day_of_month", id="crontab._orig_day_of_month: read, a schedule shown"
    ),
    pytest.param(
        crontab, "_orig_month_of_year", id="crontab._orig_month_of_year: read, a schedule shown"
    ),
    pytest.param(
        crontab, "_orig_day_of_week", id="crontab._orig_day_of_week: read, a schedule shown"
    ),
    pytest.param(
        virtual.Message, "_raw", id="virtual.Message._raw: read, stored with the holder record"
    ),
    pytest.param(
        virtual.QoS, "_delivered", id="virtual.QoS._delivered: read and cleared when Redis is down"
    ),
    pytest.param(
        redis.Channel, "_queue_cycle", id="redis.Channel._queue_cycle: rotated by _brpop_read"
    ),
    pytest.param(redis.Channel, "_in_poll", id="redis.Channel._in_poll: reset by _brpop_read"),
    pytest.param(
        redis.MultiChannelPoller,
        "_channels",
        id="MultiChannelPoller._channels: read, the channels swept for lost holders",
    ),
]

# (library class, the runtime's own private names on its subclass): the library must
# not start using one of them for something else.
OWN_NAMES = [
    pytest.param(AsynPool, ("_deadlines",), id="DeadlinePool"),
    pytest.param(ResultHandler, ("_read_again_with",), id="QuietResultHandler"),
    pytest.param(
        Request,
        ("_ending", "_settling", "_settle_lock", "_asked_limits", "_attempts", "_dead_letter"),
        id="DeadLetterRequest",
    ),
    pytest.param(
        redis.Channel,
        ("_opened_with", "_beat", "_beat_stop", "_swept_at_start", "_sync_client", "_heartbeat"),
        id="RedisChannel",
    ),
    pytest.param(redis.MultiChannelPoller, ("_holders_tref",), id="MultiChannelPoller"),
]


def shape(function: Any) -> str:
    """A function's parameters as METHODS lists them, with Python's `/` and `*` markers."""
    shown = []
    parameters = list(inspect.signature(function).parameters.values())
    for index, parameter in enumerate(parameters):
        before = parameters[index - 1].kind if index else None
        if parameter.kind is parameter.KEYWORD_ONLY and before not in (
            parameter.KEYWORD_ONLY,
            parameter.VAR_POSITIONAL,
        ):
            shown.append("*")
        if before is parameter.POSITIONAL_ONLY and parameter.kind is not parameter.POSITIONAL_ONLY:
            shown.append("/")
        if parameter.kind is parameter.VAR_POSITIONAL:
            shown.append(f"*{parameter.name}")
        elif parameter.kind is parameter.VAR_KEYWORD:
            shown.append(f"**{parameter.name}")
        elif parameter.default is parameter.empty:
            shown.append(parameter.name)
        else:
            shown.append(f"{parameter.name}=")
    if parameters and parameters[-1].kind is parameters[-1].POSITIONAL_ONLY:
        shown.append("/")
    return ", ".join(shown)


def assert_accepts_calls_of(ours: Any, theirs: Any) -> None:
    """`ours` takes every call `theirs` takes: all positional, and the optional ones by name."""
    upstream = inspect.signature(theirs).parameters.values()
    signature = inspect.signature(ours)
    positional = [
        p.name for p in upstream if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    keyword = {p.name: p.name for p in upstream if p.kind is p.KEYWORD_ONLY}
    signature.bind(*positional, **keyword)
    required = [
        p.name
        for p in upstream
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    named = {
        p.name: p.name
        for p in upstream
        if p.kind is p.POSITIONAL_OR_KEYWORD and p.default is not p.empty
    }
    signature.bind(*required, **named, **keyword)
    kinds = {p.kind for p in signature.parameters.values()}
    for p in upstream:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            assert p.kind in kinds, f"{ours.__qualname__} does not pass on {shape(theirs)}"


def assigned(cls: type, name: str) -> bool:
    """Whether `cls` or a class it inherits has the attribute: on the class, or set in its code."""
    assignment = re.compile(rf"\bself\.{re.escape(name)}\s*(:[^=\n]*)?=(?!=)")
    for klass in inspect.getmro(cls):
        if klass is object:
            continue
        if name in vars(klass):
            return True
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        if assignment.search(source):
            return True
    return False


@pytest.mark.parametrize(("upstream", "name", "parameters", "ours"), METHODS)
def test_the_private_method_is_there_with_the_parameters_the_runtime_relies_on(
    upstream: type, name: str, parameters: str | tuple[str, ...], ours: type | None
) -> None:
    member = inspect.getattr_static(upstream, name, None)
    assert member is not None, f"{upstream.__qualname__}.{name} is gone"
    theirs = getattr(upstream, name)
    known = (parameters,) if isinstance(parameters, str) else parameters
    assert shape(theirs) in known, f"{upstream.__qualname__}.{name} changed"
    if ours is not None:
        assert name in vars(ours), (
            f"{ours.__qualname__} no longer overrides {name}: update the docs"
        )
        assert issubclass(ours, upstream)
        assert_accepts_calls_of(getattr(ours, name), theirs)


@pytest.mark.parametrize(("upstream", "name"), ATTRIBUTES)
def test_the_private_attribute_is_there(upstream: type, name: str) -> None:
    assert assigned(upstream, name), f"{upstream.__qualname__} no longer has {name}"


@pytest.mark.parametrize(("upstream", "names"), OWN_NAMES)
def test_the_runtimes_own_private_names_are_not_the_librarys(
    upstream: type, names: tuple[str, ...]
) -> None:
    taken = [name for name in names if assigned(upstream, name)]
    assert not taken, f"{upstream.__qualname__} now has {taken} itself"


def test_deadlines_take_the_calls_of_the_time_limit_handlers_they_replace() -> None:
    # DeadlinePool._create_timelimit_handlers sets on_timeout_set/on_timeout_cancel
    # to Deadlines.start/stop, which billiard calls as Celery's own handlers.
    source = inspect.getsource(AsynPool._create_timelimit_handlers)
    assert re.search(r"def on_timeout_set\(\w+, soft, hard\):", source)
    assert re.search(r"def on_timeout_cancel\(\w+\):", source)
    assert "self.on_timeout_set = on_timeout_set" in source
    assert "self.on_timeout_cancel = on_timeout_cancel" in source
    assert shape(Deadlines.start) == "self, result, soft, hard"
    assert shape(Deadlines.stop) == "self, result"


def test_the_write_handlers_set_the_poll_start_the_pool_wraps() -> None:
    source = inspect.getsource(AsynPool._create_write_handlers)
    assert "self.on_poll_start = on_poll_start" in source


@pytest.mark.parametrize("strategy", ["round_robin", "priority", "sorted"])
def test_every_queue_order_rotates_as_brpop_read_calls_it(strategy: str) -> None:
    assert shape(cycle_by_name(strategy).rotate) == "self, last_used"


def test_brpop_read_reauth_flush_takes_no_arguments_when_kombu_has_it() -> None:
    # Newer kombu flushes a pending re-authentication once BRPOP has returned.
    flush = getattr(redis.Channel, "_flush_brpop_reauth", None)
    assert flush is None or shape(flush) == "self"


def test_log_lines_inside_a_job_carry_its_id_and_name() -> None:
    # Read through Celery's public `current_task`, not its private `_state` module.
    app = Celery("upstream-members", set_as_current=False)
    records: list[logging.LogRecord] = []

    @app.task(name="upstream.members.job")
    def job() -> None:
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "inside", None, None)
        TaskContextFilter().filter(record)
        records.append(record)

    job.apply(task_id="t-1")
    outside = logging.LogRecord("x", logging.INFO, __file__, 1, "outside", None, None)
    TaskContextFilter().filter(outside)
    assert [(r.task_id, r.task_name) for r in (*records, outside)] == [
        ("t-1", "upstream.members.job"),
        (None, None),
    ]
