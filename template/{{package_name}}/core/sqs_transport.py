"""The transport the worker runs on SQS: an unreadable envelope is quarantined.

See core/transports.py: kombu parses the JSON envelope of every received
message, and one it cannot read (not UTF-8, not JSON, no properties, ...)
becomes a quarantine envelope the consumer dead-letters as `malformed`.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import SQS

from .inbound import arrived_on, envelope_problem, quarantine


class SqsChannel(SQS.Channel):
    """kombu's SQS channel, reading every received message as a sound envelope."""

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


class SqsTransport(SQS.Transport):
    """SQS with quarantined envelopes."""

    Channel = SqsChannel
