"""The transport the worker runs on Redis: an unreadable envelope is quarantined.

Redis and SQS keep kombu's JSON envelope in the queue. kombu parses it before the
worker sees a message, and raises on one it cannot read (not JSON, not UTF-8,
no properties, ...): the worker's consumer restarts or the message vanishes.
Here such an envelope becomes a quarantine envelope (inbound.py) that the
consumer dead-letters as `malformed`, with the raw bytes as its body. SQS has
the same in sqs_transport.py (kombu's SQS transport needs botocore).
"""

from __future__ import annotations

from typing import Any

from kombu.transport.virtual import Empty
from kombu.utils.encoding import bytes_to_str

from workergen_runtime.brokers.redis import recovery
from workergen_runtime.worker.inbound import readable_envelope


class RedisChannel(recovery.HolderChannel):
    """The project's Redis channel, reading every popped item as a sound envelope."""

    _sync_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        # kombu makes a new client, and redis-py a new table of its reply
        # callbacks, each time a delivery is recorded or acknowledged: twice a
        # job. One client per connection pool serves the same commands (each
        # takes a connection from the pool), for a tenth of the main process's
        # CPU per job.
        if asynchronous:
            return super()._create_client(asynchronous=True)
        pool = self.pool
        client = self._sync_client
        if client is None or client.connection_pool is not pool:
            client = self._sync_client = super()._create_client()
        return client

    def _brpop_read(self, **options: Any) -> bool:
        # kombu's own read parses the item inline (`loads(item)`), where an
        # unreadable one raises after it left the list: this one parses it
        # through `readable_envelope` instead; the rest is as kombu does it.
        try:
            try:
                dest__item = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except self.connection_errors:
                self.client.connection.disconnect()
                raise
            if not dest__item:
                raise Empty()
            dest, item = dest__item
            dest = bytes_to_str(dest).rsplit(self.sep, 1)[0]
            self._queue_cycle.rotate(dest)
            self.connection._deliver(readable_envelope(item, dest), dest)
            return True
        finally:
            self._in_poll = None
            flush = getattr(self, "_flush_brpop_reauth", None)
            if flush is not None:
                flush()


class RedisTransport(recovery.Transport):
    """Redis with holder recovery (recovery.py) and quarantined envelopes."""

    Channel = RedisChannel
