"""The worker's consumer: counts deliveries and dead-letters what it cannot run.

Celery's own consumer acknowledges a message it cannot decode (dropping it) and
rejects refused content or an unknown task without requeue (dropping it on
Redis). This one keeps every such message as a dead letter instead.

On quorum lanes it also binds Celery's shared delayed-delivery exchange to this
project's queues only (see `LaneDelayedDelivery`).
"""

from __future__ import annotations

import logging
from typing import Any

from celery.worker.consumer import Consumer
from celery.worker.consumer.delayed_delivery import DelayedDelivery
from kombu.common import Broadcast
from kombu.transport.native_delayed_delivery import CELERY_DELAYED_DELIVERY_EXCHANGE

from . import project
from .config import dead_letter_queues
from .deadletter import DELIVERY_LIMIT, REFUSED, UNKNOWN_TASK
from .deadlettering import dead_letter_message
from .deliveries import (
    broker_deliveries,
    delivery_counter,
    forget_deliveries,
    message_task,
    redelivered,
)
from .queues import delayed_binding_key

log = logging.getLogger(__name__)


class LaneDelayedDelivery(DelayedDelivery):
    """Celery's delayed delivery, bound to this project's delayed messages only.

    Every project on a RabbitMQ server shares Celery's `celery_delayed_*`
    exchanges. Celery binds them to a queue with `#.<queue>`, which also takes
    another namespace's `<bits>.<namespace>.<queue>`: a project without a
    namespace would run every delayed job (and retry) of the namespaced ones.
    The binding here matches exactly the delay bits and then this queue's name,
    and the wide binding an older version made is removed.
    """

    def _bind_queues(self, app: Any, connection: Any) -> None:
        channel = connection.default_channel
        for queue in app.amqp.queues.values():
            if isinstance(queue, Broadcast) or queue.exchange is None:
                continue
            queue = queue.bind(channel)
            exchange = queue.exchange.bind(channel)
            key = delayed_binding_key(queue.routing_key)
            exchange.bind_to(CELERY_DELAYED_DELIVERY_EXCHANGE, routing_key=key)
            queue.bind_to(exchange.name, routing_key=key)
            wide = f"#.{queue.routing_key}"
            exchange.unbind_from(CELERY_DELAYED_DELIVERY_EXCHANGE, routing_key=wide)
            queue.unbind_from(exchange, routing_key=wide)


class DeadLetterConsumer(Consumer):
    """Celery's consumer, with dead letters for what it would drop or loop on."""

    class Blueprint(Consumer.Blueprint):
        default_steps = [
            f"{project.PACKAGE}.core.consumer:LaneDelayedDelivery"
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

        def on_task_received(message: Any) -> Any:
            task_id, retries = message_task(message)
            if counter is not None and task_id:
                deliveries = counter.count(task_id, retries, redelivered=redelivered(message))
                message.deliveries = deliveries
                if deliveries is not None and deliveries > limit:
                    return self._give_up(
                        message,
                        reason=DELIVERY_LIMIT,
                        exception=(
                            f"Delivered {deliveries - 1} times without finishing: each run "
                            "ended its worker process. Not run again."
                        ),
                        attempts=deliveries - 1,
                    )
            elif counter is None:
                message.deliveries = broker_deliveries(message)
            return handle(message)

        return on_task_received

    def on_decode_error(self, message: Any, exc: Exception) -> None:
        log.error("Undecodable message (%s): dead-lettered, never run.", exc)
        self._give_up(message, reason=REFUSED, exception=f"{type(exc).__name__}: {exc}")

    def on_invalid_task(self, body: Any, message: Any, exc: Exception) -> None:
        log.error("Refused message (%s): dead-lettered, never run.", exc)
        self._give_up(message, reason=REFUSED, exception=f"{type(exc).__name__}: {exc}")

    def on_unknown_message(self, body: Any, message: Any) -> None:
        log.error("Message that is not a task: dead-lettered.")
        self._give_up(message, reason=REFUSED, exception="not a task message")

    def on_unknown_task(self, body: Any, message: Any, exc: Exception) -> None:
        name = (message.headers or {}).get("task")
        log.error("Unknown job %r: dead-lettered, never run.", name)
        self._give_up(message, reason=UNKNOWN_TASK, exception=f"NotRegistered({name!r})")

    def _give_up(self, message: Any, *, reason: str, exception: str, attempts: int = 1) -> None:
        if dead_letter_message(
            self.app, message, reason=reason, exception=exception, attempts=attempts
        ):
            forget_deliveries(self.app, message)
            return
        # Not recorded: RabbitMQ dead-letters a rejected message itself; on
        # Redis the message goes back to its lane rather than being lost; on
        # SQS it stays in its queue, bounded by the redrive policy.
        message.reject_log_error(
            log,
            self.connection_errors,
            requeue=self.app.settings.broker_kind not in ("amqp", "sqs"),
        )
