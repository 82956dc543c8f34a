"""The worker's consumer: counts deliveries and dead-letters what it cannot run.

Celery's own consumer acknowledges a message it cannot decode (dropping it) and
rejects refused content or an unknown task without requeue (dropping it on
Redis). This one keeps every such message as a dead letter instead.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.worker.consumer import Consumer

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

log = logging.getLogger(__name__)


class DeadLetterConsumer(Consumer):
    """Celery's consumer, with dead letters for what it would drop or loop on."""

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
