"""The transport the worker runs on SQS: one-to-one queue names, unreadable envelopes quarantined.

kombu turns `.` into `-`, so `advs1.eu-default` and `advs1-eu.default` would be
one SQS queue; `queues.sqs_queue_name` keeps every (namespace, lane) apart, and
`queue provision` creates the queues under the same names.

kombu also parses the JSON envelope of every received message; one it cannot
read (not JSON, no properties, a property of the wrong type, ...) becomes a
quarantine envelope (inbound.py) the consumer dead-letters as
`malformed`, as on Redis (transports.py).
"""

from __future__ import annotations

from typing import Any

from kombu.transport import SQS

from workergen_runtime.queues import sqs_queue_name
from workergen_runtime.worker.inbound import arrived_on, envelope_problem, quarantine


class Channel(SQS.Channel):
    """kombu's SQS channel with the project's queue names and checked envelopes."""

    def entity_name(self, name: str, table: Any = None) -> str:
        return sqs_queue_name(str(name))

    def _message_to_python(self, message: dict[str, Any], queue_name: str, q_url: str) -> Any:
        try:
            payload = super()._message_to_python(message, queue_name, q_url)
            problem = envelope_problem(payload)
        except Exception as exc:  # kombu could not read it at all
            payload, problem = None, f"envelope kombu cannot read: {type(exc).__name__}"
        if problem is None:
            return arrived_on(payload, queue_name)
        envelope = quarantine(message.get("Body") or "", queue_name, problem)
        # What kombu's SQS channel acknowledges (deletes) a message by.
        envelope["properties"]["delivery_tag"] = message["ReceiptHandle"]
        envelope["properties"]["delivery_info"].update(sqs_message=message, sqs_queue=q_url)
        return envelope


class Transport(SQS.Transport):
    Channel = Channel
