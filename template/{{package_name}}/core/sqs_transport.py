"""The transport the worker runs on SQS: an unreadable envelope is quarantined.

See core/transports.py: kombu parses the JSON envelope of every received
message, and one it cannot read (not UTF-8, not JSON, no properties, ...)
becomes a quarantine envelope the consumer dead-letters as `malformed`.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import SQS
from kombu.utils.encoding import bytes_to_str

from .inbound import readable_envelope


class SqsChannel(SQS.Channel):
    """kombu's SQS channel, reading every received message as a sound envelope."""

    def _message_to_python(self, message: dict[str, Any], queue_name: str, q_url: str) -> Any:
        raw = message.get("Body") or ""
        # SQS carries text only: kombu base64-decodes a body only into UTF-8.
        text = bytes_to_str(self._decode_python_message_body(raw))
        payload = readable_envelope(text, queue_name)
        if queue_name in self._noack_queues:
            self._delete_message(queue_name, message)
            return payload
        return self._envelope_payload(payload, text, message, q_url)


class SqsTransport(SQS.Transport):
    """SQS with quarantined envelopes."""

    Channel = SqsChannel
