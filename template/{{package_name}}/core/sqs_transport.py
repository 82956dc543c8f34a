"""SQS transport that names queues with the project's one-to-one SQS spelling.

kombu turns `.` into `-`, so `advs1.eu-default` and `advs1-eu.default` would be
one SQS queue; `queues.sqs_queue_name` keeps every (namespace, lane) apart, and
`queue provision` creates the queues under the same names.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import SQS

from .queues import sqs_queue_name


class Channel(SQS.Channel):
    def entity_name(self, name: str, table: Any = None) -> str:
        return sqs_queue_name(str(name))


class Transport(SQS.Transport):
    Channel = Channel
