"""The worker's consumer: checks, counts and dead-letters what it cannot run.

Celery's own consumer acknowledges a message it cannot decode (dropping it),
rejects refused content or an unknown task without requeue (dropping it on
Redis), and raises on a message of the wrong shape (restarting the consumer or
ending the worker, with the message back on its queue to do it again). This
one checks every message first (inbound.py) and keeps every message it
will not run as a dead letter instead.

On quorum lanes it also binds Celery's shared delayed-delivery exchange to this
project's queues only (see `LaneDelayedDelivery`).
"""

from __future__ import annotations

import logging
import math
from collections import deque
from datetime import UTC, datetime
from typing import Any, ClassVar

from celery.worker.consumer import Consumer
from celery.worker.consumer.delayed_delivery import DelayedDelivery
from kombu import Exchange
from kombu.common import Broadcast
from kombu.transport.native_delayed_delivery import (
    CELERY_DELAYED_DELIVERY_EXCHANGE,
    MAX_LEVEL,
    calculate_routing_key,
    level_name,
)

from workergen_runtime import project
from workergen_runtime.config import PUBLISH_RETRY_POLICY, dead_letter_queues, lane_queues
from workergen_runtime.deadletter import MALFORMED, POISON, REFUSED, UNKNOWN_TASK
from workergen_runtime.deadletter.routing import dead_letter_message
from workergen_runtime.delays import eta_problem
from workergen_runtime.queues import delayed_binding_key, lane_of_queue, qualified_queue
from workergen_runtime.worker.deliveries import (
    await_broker_rules,
    broker_deliveries,
    delivery_counter,
    delivery_identity,
    forget_deliveries,
    give_back_requeues,
    message_task,
    redelivered,
)
from workergen_runtime.worker.inbound import preview, printable, take_in

log = logging.getLogger(__name__)

# A job no worker knows yet is sent back to its lane after a growing pause, so
# a worker that has it (deployed meanwhile) can take it. These headers carry
# the pause across workers; UNKNOWN_TASK_GRACE bounds the whole wait.
UNKNOWN_SINCE_HEADER = "unknown_task_since"
UNKNOWN_TRIES_HEADER = "unknown_task_tries"
UNKNOWN_PAUSE_FIRST = 5.0
UNKNOWN_PAUSE_MAX = 30.0
# The worker that last sent the job back, and whether that was a pass-on.
# Redis hands an item to the consumer that has waited longest, and a worker's
# own wait is nearly a second old whenever its pause ends: it would take back
# its own job almost every time. A job that comes straight back to the worker
# that sent it is passed on once more, at once, while that worker's wait is the
# newest; a worker that has the job then takes it. Only a second return is held.
UNKNOWN_SENDER_HEADER = "unknown_task_sender"
UNKNOWN_PASSED_HEADER = "unknown_task_passed"
PASS_ON_PAUSE = 0.02
# Held messages sent back per turn of the worker's loop, and the gap between turns.
SEND_BACK_AT_ONCE = 2
SEND_BACK_GAP = 0.005


class LaneDelayedDelivery(DelayedDelivery):
    """Celery's delayed delivery, bound to this project's delayed messages only.

    Every project on a RabbitMQ server shares Celery's `celery_delayed_*`
    exchanges. Celery binds them to a queue with `#.<queue>`, which also takes
    another namespace's `<bits>.<namespace>.<queue>`: a project without a
    namespace would run every delayed job (and retry) of the namespaced ones.
    The binding here matches exactly the delay bits and then this queue's name,
    and the wide binding an older version made is removed.

    Every lane is declared first, also those this worker does not consume: a
    binding to an exchange or queue that does not exist yet fails, and the
    first failure would leave every lane without its delayed jobs.
    """

    def _bind_queues(self, app: Any, connection: Any) -> None:
        channel = connection.default_channel
        for queue in app.amqp.queues.values():
            if isinstance(queue, Broadcast) or queue.exchange is None:
                continue
            queue = queue.bind(channel)
            queue.declare()
            exchange = queue.exchange.bind(channel)
            key = delayed_binding_key(queue.routing_key)
            exchange.bind_to(CELERY_DELAYED_DELIVERY_EXCHANGE, routing_key=key)
            queue.bind_to(exchange.name, routing_key=key)
            wide = f"#.{queue.routing_key}"
            exchange.unbind_from(CELERY_DELAYED_DELIVERY_EXCHANGE, routing_key=wide)
            queue.unbind_from(exchange, routing_key=wide)


class DeadLetterConsumer(Consumer):
    """Celery's consumer, with dead letters for what it would drop, crash or loop on."""

    class Blueprint(Consumer.Blueprint):
        default_steps: ClassVar[list[str]] = [
            "workergen_runtime.worker.consumer:LaneDelayedDelivery"
            if step.endswith(":DelayedDelivery")
            else step
            for step in Consumer.Blueprint.default_steps
        ]

    def create_task_handler(self, *args: Any, **kwargs: Any) -> Any:
        handle = super().create_task_handler(*args, **kwargs)
        settings = self.app.settings
        if settings.broker_kind == "amqp":
            # Before the first message is handled (and maybe rejected), so the
            # broker has a dead-letter queue to route it to.
            channel = self.connection.default_channel
            for queue in dead_letter_queues(settings):
                queue.bind(channel).declare()
        counter = delivery_counter(self.app)
        limit = settings.task_max_deliveries
        queues = frozenset(queue.name for queue in lane_queues(settings))

        def receive(message: Any) -> Any:
            # Counted before anything reads the message: a message whose handling
            # ends the worker's main process is stopped at the bound as well.
            deliveries = self._deliveries(message, counter)
            message.deliveries = deliveries
            if deliveries is not None and deliveries > limit:
                return self._give_up(
                    message,
                    reason=POISON,
                    exception=(
                        f"Delivered {deliveries - 1} times and never settled: its handling "
                        "ended the worker each time. Not read again."
                    ),
                    attempts=deliveries - 1,
                    decoded=False,
                )
            intake = take_in(message, queues=queues)
            message.intake = intake
            if intake.problem:
                reason, text = intake.problem
                return self._give_up(message, reason=reason, exception=text)
            eta = message.headers.get("eta")
            if eta is not None and (too_far := eta_problem(eta, datetime.now(UTC), settings)):
                return self._give_up(message, reason=MALFORMED, exception=too_far)
            if intake.task not in self.strategies:
                return self.on_unknown_task(None, message, KeyError(intake.task))
            return handle(message)

        def on_task_received(message: Any) -> Any:
            # The one boundary of the receive path: whatever raises while one
            # message is handled (checks, dead-lettering, metrics, Celery's own
            # reading of it) settles that message, and the worker goes on.
            try:
                return receive(message)
            except self.connection_errors:
                raise
            except Exception as exc:
                self._settle_after(message, exc)
                return None

        return on_task_received

    def _deliveries(self, message: Any, counter: Any) -> int | None:
        """How often this message was delivered, this time included; None when unknown."""
        if counter is None:
            return broker_deliveries(message)
        if not redelivered(message):
            return 1  # a first delivery: nothing to count
        task_id, retries = message_task(message)
        return counter.count(task_id or delivery_identity(message), retries, redelivered=True)

    def _settle_after(self, message: Any, exc: Exception) -> None:
        """Settle a message whose handling raised; logs once, never raises."""
        try:
            detail = printable(str(exc), 300)
        except Exception:  # an exception whose text cannot be made: named by its repr
            detail = preview(exc, 300)
        text = f"the worker could not take it: {type(exc).__name__}: {detail}"
        task_id = message_task(message)[0] or delivery_identity(message)
        log.critical("Message %s could not be taken: %s", printable(task_id), text, exc_info=True)
        try:
            if getattr(message, "acknowledged", False):
                return
            self._give_up(message, reason=MALFORMED, exception=text)
        except self.connection_errors:
            raise
        except Exception:
            log.critical("Message %s was not settled.", printable(task_id), exc_info=True)

    def on_decode_error(self, message: Any, exc: Exception) -> None:
        self._give_up(message, reason=MALFORMED, exception=f"{type(exc).__name__}: {preview(exc)}")

    def on_invalid_task(self, body: Any, message: Any, exc: Exception) -> None:
        from kombu.exceptions import ContentDisallowed

        reason = REFUSED if isinstance(exc, ContentDisallowed) else MALFORMED
        self._give_up(message, reason=reason, exception=f"{type(exc).__name__}: {preview(exc)}")

    def on_unknown_message(self, body: Any, message: Any) -> None:
        self._give_up(message, reason=MALFORMED, exception="not a task message")

    def on_unknown_task(self, body: Any, message: Any, exc: Exception) -> None:
        headers = message.headers or {}
        name = headers.get("task")
        grace = self.app.settings.unknown_task_grace
        now = datetime.now(UTC)
        since = _since(headers.get(UNKNOWN_SINCE_HEADER), now)
        waited = (now - since).total_seconds()
        if waited >= grace:
            self._give_up(
                message,
                reason=UNKNOWN_TASK,
                exception=f"NotRegistered({name!r}): no worker had this job for "
                f"{waited:.0f} s (UNKNOWN_TASK_GRACE={grace})",
            )
            return
        tries = headers.get(UNKNOWN_TRIES_HEADER)
        tries = tries if isinstance(tries, int) and 0 <= tries < 64 else 0
        delayed = self._delays_on_broker()
        if (
            not delayed
            and headers.get(UNKNOWN_SENDER_HEADER) == self.hostname
            and headers.get(UNKNOWN_PASSED_HEADER) is not True
        ):
            log.debug("Unknown job %s came back: passed on.", preview(name))
            self._hold(message, PASS_ON_PAUSE, (message, since, tries, True))
            return
        pause = min(UNKNOWN_PAUSE_FIRST * 2.0**tries, UNKNOWN_PAUSE_MAX, grace - waited)
        if not delayed:
            pause = min(pause, self._longest_hold())
        log.warning(
            "Unknown job %s: back on its lane in %.0f s, for a worker that has it "
            "(dead-lettered after UNKNOWN_TASK_GRACE=%d s).",
            preview(name),
            pause,
            grace,
        )
        if delayed:
            # The broker keeps the copy until the pause is over: nothing is held here.
            self._send_back(message, since, tries + 1, delay=max(1, math.ceil(pause)))
            return
        self._hold(message, pause, (message, since, tries + 1, False))

    def _hold(self, message: Any, pause: float, release: tuple) -> None:
        """Keep a message for `pause` s, then send it back (`_release(*release)`).

        Held as Celery holds a job with an eta: the prefetch is raised by one
        while it waits, so the slot it takes stays free for other jobs. The
        raise is sent at once: a message taken while the worker waited for the
        broker's answer to the last raise would otherwise wait for the next
        timer tick (up to 2 s) before the broker hands out another.
        """
        self.qos.increment_eventually()
        self.timer.call_after(0, self.qos.update)
        self.timer.call_after(pause, self._release, release)

    def _delays_on_broker(self) -> bool:
        """Whether the broker delays a copy itself, where a held message would take a slot.

        RabbitMQ quorum lanes reserve a fixed number of messages per worker (no
        global QoS), and are bound to Celery's delayed-delivery exchanges. On
        Redis, SQS and classic lanes raising the prefetch frees the slot, and
        costs no publish per message (a request each on SQS) until the pause is over.
        """
        return self.app.settings.broker_kind == "amqp" and project.QUEUE_TYPE == "quorum"

    def _longest_hold(self) -> float:
        """A held message must go back before Redis or SQS would hand it out again."""
        settings = self.app.settings
        return settings.visibility_timeout / 2 if settings.uses_visibility_timeout else 3600.0

    def _release(self, message: Any, since: datetime, tries: int, passed: bool = False) -> None:
        """The end of a hold: the message waits its turn to go back on its lane."""
        due = self.__dict__.setdefault("_due_back", deque())
        due.append((message, since, tries, passed))
        if len(due) == 1:
            self.timer.call_after(0, self._send_back_due)

    def _send_back_due(self) -> None:
        """Send back a few held messages, then let the worker take its messages again.

        Holds that began together end together: sent back all at once (a publish
        and an acknowledgement each, a request each on SQS), they would keep a
        healthy job that arrived meanwhile waiting until the last is sent.
        """
        due = self.__dict__.setdefault("_due_back", deque())
        for _ in range(min(SEND_BACK_AT_ONCE, len(due))):
            message, since, tries, passed = due.popleft()
            self.qos.decrement_eventually()
            self._send_back(message, since, tries, passed=passed)
        if due:
            self.timer.call_after(SEND_BACK_GAP, self._send_back_due)

    def _send_back(
        self, message: Any, since: datetime, tries: int, delay: int = 0, passed: bool = False
    ) -> None:
        """Publish a copy of a message on its lane, due in `delay` s; acknowledge the original.

        `passed`: the copy is a pass-on (see UNKNOWN_SENDER_HEADER).
        """
        namespace = self.app.settings.queue_namespace
        lane = lane_of_queue((message.delivery_info or {}).get("routing_key"), namespace)
        headers = {
            **(message.headers or {}),
            UNKNOWN_SINCE_HEADER: since.isoformat(),
            UNKNOWN_TRIES_HEADER: tries,
            UNKNOWN_SENDER_HEADER: self.hostname,
            UNKNOWN_PASSED_HEADER: passed,
        }
        try:
            queue = self.app.amqp.queues[qualified_queue(lane or "default", namespace)]
            route: dict[str, Any] = {"exchange": queue.exchange, "routing_key": queue.routing_key}
            if delay:
                # As Celery publishes a countdown on quorum lanes.
                route["exchange"] = Exchange(level_name(MAX_LEVEL), type="topic")
                route["routing_key"] = calculate_routing_key(delay, queue.routing_key)
            with self.app.producer_or_acquire() as producer:
                producer.publish(
                    message.body,
                    declare=[queue],
                    headers=headers,
                    content_type=message.content_type,
                    content_encoding=message.content_encoding,
                    retry=True,
                    retry_policy=PUBLISH_RETRY_POLICY,
                    **route,
                )
        except Exception as exc:
            log.warning("Could not send back unknown job (%s); given back instead.", exc)
            self._reject(message, requeue=give_back_requeues(self.app.settings))
            return
        message.ack_log_error(log, self.connection_errors)

    def _give_up(
        self,
        message: Any,
        *,
        reason: str,
        exception: str,
        attempts: int = 1,
        decoded: bool = True,
    ) -> None:
        """Dead-letter a message that is not run; left to the broker's own route if not stored.

        The store's own log line says "Dead-lettered" once the letter is kept;
        this one says what happened otherwise.
        """
        try:
            stored = dead_letter_message(
                self.app,
                message,
                reason=reason,
                exception=exception,
                attempts=attempts,
                decoded=decoded,
            )
        except self.connection_errors:
            raise
        except Exception:
            log.critical("Dead letter of %s not recorded.", preview(reason), exc_info=True)
            stored = False
        if stored:
            forget_deliveries(self.app, message)
            return
        # Not recorded: RabbitMQ dead-letters a rejected message itself; on
        # Redis the message goes back to its lane rather than being lost; on
        # SQS it stays in its queue, bounded by the redrive policy.
        log.error(
            "%s message not recorded as a dead letter: left to the broker (%s).",
            reason.capitalize(),
            preview(exception, 300),
        )
        requeue = self.app.settings.broker_kind not in ("amqp", "sqs")
        if requeue:
            # Handed back because the store failed, not because a delivery ended
            # the worker: it must not count towards `poison`.
            forget_deliveries(self.app, message)
        self._reject(message, requeue=requeue)

    def _reject(self, message: Any, *, requeue: bool) -> None:
        """Hand a message back to the broker, once its dead-letter rules are in place."""
        await_broker_rules()
        message.reject_log_error(log, self.connection_errors, requeue=requeue)


def _since(value: Any, now: datetime) -> datetime:
    """When a job was first found unknown, as its header says (never in the future)."""
    if isinstance(value, str):
        try:
            since = datetime.fromisoformat(value)
        except ValueError:
            return now
        if since.tzinfo is not None and since <= now:
            return since
    return now
