"""Redis transport that gives a dead worker's jobs back within seconds, not an hour.

Redis has no acknowledgements: kombu keeps every delivered, unacknowledged
message in a hash and puts it back on its queue once it is older than the
visibility timeout, which must outlast the longest task (an hour here). A
worker killed outright would leave its jobs waiting that long.

This transport also records which worker process holds which message, in the
same Redis pipeline that marks the message unacknowledged, and keeps a heartbeat
key per worker, renewed from a thread so a busy worker keeps it alive. A worker
gives back the messages of a holder

- at start-up and then every WORKER_HEARTBEAT_TTL/4 s, when the holder ran on
  this host and is gone for sure: its pid is free or names a newer process, and
  no process it started is left in its process group (a pool process orphaned
  by a SIGKILL of the main process may still be running a job). A worker
  restarted after a crash so takes back its own jobs at once;
- every WORKER_HEARTBEAT_TTL/4 s, when its heartbeat expired: a holder silent
  for 3/4 of WORKER_HEARTBEAT_TTL is taken for dead, so its messages are back
  within WORKER_HEARTBEAT_TTL of its last heartbeat, wherever it ran.

Each message is restored in a transaction on the unacknowledged hash, so two
workers never restore one message twice. The visibility timeout stays as the
last resort.

Keys (under the namespace): `<ns>.holders` (set of worker ids),
`<ns>.holders.alive.<id>` (heartbeat), `<ns>.holders.held.<id>` (delivery tags).
A worker id is `<host>/<pid>/<start time>/<process group>/<random>`.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from kombu.transport import redis, virtual
from kombu.utils.json import dumps

from workergen_runtime.worker.processes import Holder, process_gone, process_group, this_process

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Owner:
    """The worker process behind a worker id, and the process group it ran in."""

    process: Holder
    group: int

    @classmethod
    def parse(cls, owner: str) -> Owner | None:
        """None for an id this host cannot read (written by an older version)."""
        head = owner.rpartition("/")[0]  # the last part is random
        process, _, group = head.rpartition("/")
        holder = Holder.parse(process)
        return cls(holder, int(group)) if holder and group.isdigit() else None


class HolderQoS(redis.QoS):
    """kombu's Redis QoS, also recording the holder of every delivered message."""

    def append(self, message: Any, delivery_tag: str) -> None:
        channel = self.channel
        delivery = message.delivery_info
        now = time.time()
        # The heartbeat thread keeps the registration fresh; a delivery renews
        # it only when the last renewal is a beat old (or there was none yet).
        register = now - channel.registered_at > channel.beat_interval
        with self.pipe_or_acquire() as pipe:
            pipe.zadd(self.unacked_index_key, {delivery_tag: now})
            pipe.hset(
                self.unacked_key,
                delivery_tag,
                dumps([message._raw, delivery["exchange"], delivery["routing_key"]]),
            )
            pipe.sadd(channel.held_key, delivery_tag)
            if register:
                channel.register(pipe)
            pipe.execute()
        if register:
            channel.registered_at = now
        virtual.QoS.append(self, message, delivery_tag)
        channel.start_heartbeat()

    def restore_unacked(self, client: Any = None) -> None:
        """Give back this channel's unacknowledged messages, if Redis can be reached.

        When the connection was lost, Redis may be down: the messages then stay
        in Redis, held by this worker, and the first worker whose sweep finds
        its heartbeat expired restores them. Closing never fails on it.
        """
        channel = self.channel
        try:
            super().restore_unacked(client)
        except channel.connection_errors as exc:
            log.warning(
                "%d unacknowledged message(s) not given back now (%s); they are restored "
                "once this worker's heartbeat expires.",
                len(self._delivered),
                exc,
            )
            self._delivered.clear()

    def _remove_from_indices(self, delivery_tag: str, pipe: Any = None) -> Any:
        with self.pipe_or_acquire(pipe) as pipe:
            removed = super()._remove_from_indices(delivery_tag, pipe)
            return removed.srem(self.channel.held_key, delivery_tag)


class HolderChannel(redis.Channel):
    """A Redis channel with a heartbeat, and the recovery of dead holders' messages."""

    QoS = HolderQoS
    holders_prefix = "holders"
    holder_ttl = 15

    from_transport_options = (*redis.Channel.from_transport_options, "holders_prefix", "holder_ttl")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._opened_with: dict[bool, dict[str, Any]] = {}
        super().__init__(*args, **kwargs)
        self.owner = f"{this_process()}/{process_group()}/{uuid.uuid4().hex[:8]}"
        self._beat_stop = threading.Event()
        self._beat: threading.Thread | None = None
        # When this worker last marked itself alive and as a holder (0: never).
        self.registered_at = 0.0
        # Whether this channel looked for the messages of gone holders when it began consuming.
        self._swept_at_start = False

    @property
    def beat_interval(self) -> float:
        """Seconds between heartbeats, and between two sweeps for lost holders."""
        return self.holder_ttl / 4

    def basic_consume(self, queue: str, *args: Any, **kwargs: Any) -> str:
        tag = super().basic_consume(queue, *args, **kwargs)
        if not self._swept_at_start and queue in self.active_queues:
            # A worker restarted after a crash takes back its own jobs before it is ready,
            # instead of waiting for its old heartbeat to expire.
            self._swept_at_start = True
            try:
                self.recover_lost_holders()
            except self.connection_errors:
                log.debug("Holder recovery at start skipped: connection error", exc_info=True)
        return tag

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        # After a connection loss kombu closes the channel and drops its
        # connection, while jobs it delivered may still be running: their
        # acknowledgements (and the restore at close) still reach Redis with the
        # settings the channel was opened with, instead of raising AttributeError.
        if self.connection is not None and self.connection.client is not None:
            self._opened_with[asynchronous] = super()._connparams(asynchronous)
        if asynchronous not in self._opened_with:
            return super()._connparams(asynchronous)
        return dict(self._opened_with[asynchronous])

    @property
    def holders_key(self) -> str:
        return self.holders_prefix

    def _alive_key(self, owner: str) -> str:
        return f"{self.holders_prefix}.alive.{owner}"

    def _held_key(self, owner: str) -> str:
        return f"{self.holders_prefix}.held.{owner}"

    @property
    def alive_key(self) -> str:
        return self._alive_key(self.owner)

    @property
    def held_key(self) -> str:
        return self._held_key(self.owner)

    def start_heartbeat(self) -> None:
        if self._beat is None:
            self._beat = threading.Thread(
                target=self._heartbeat, name="holder-heartbeat", daemon=True
            )
            self._beat.start()

    def register(self, pipe: Any) -> None:
        """Queue the commands that mark this worker alive and as a holder."""
        # The heartbeat lives 3/4 of the TTL and a sweep comes every 1/4: a lost holder's
        # messages are back within the TTL of its last beat; a live one misses two beats first.
        pipe.set(self.alive_key, self.owner, px=int(self.holder_ttl * 750))
        pipe.sadd(self.holders_key, self.owner)

    def _heartbeat(self) -> None:
        client = self._create_client()
        while not self._beat_stop.wait(self.beat_interval):
            try:
                pipe = client.pipeline()
                self.register(pipe)
                pipe.execute()
                self.registered_at = time.time()
            except Exception as exc:  # keep beating; the next beat may get through
                log.warning("Worker heartbeat not written: %s", exc)

    def recover_lost_holders(self) -> int:
        """Give back the messages of holders that stopped; returns how many."""
        restored = 0
        with self.conn_or_acquire() as client:
            for raw in client.smembers(self.holders_key):
                owner = raw.decode() if isinstance(raw, bytes) else raw
                if owner == self.owner:
                    continue
                if client.exists(self._alive_key(owner)):
                    found = Owner.parse(owner)
                    if found is None or not process_gone(found.process, found.group):
                        continue
                    why = "its process on this host is gone"
                else:
                    why = "its heartbeat expired"
                count = 0
                for tag in client.smembers(self._held_key(owner)):
                    tag = tag.decode() if isinstance(tag, bytes) else tag
                    if client.hexists(self.unacked_key, tag):
                        self.qos.restore_by_tag(tag, client)
                        count += 1
                client.delete(self._held_key(owner), self._alive_key(owner))
                client.srem(self.holders_key, owner)
                if count:
                    log.warning("Restored %d message(s) of worker %s: %s.", count, owner, why)
                restored += count
        return restored

    def close(self) -> None:
        self._beat_stop.set()
        was_open = not self.closed
        super().close()  # gives back this worker's unacknowledged messages
        if was_open and self._beat is not None:
            try:
                with self.conn_or_acquire() as client:
                    client.delete(self.alive_key, self.held_key)
                    client.srem(self.holders_key, self.owner)
            except Exception:  # the keys expire or are swept by another worker
                pass


class Transport(redis.Transport):
    """kombu's Redis transport with holder heartbeats and fast recovery."""

    Channel = HolderChannel

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        super().register_with_event_loop(connection, loop)
        cycle = self.cycle
        previous = getattr(cycle, "_holders_tref", None)
        if previous is not None:
            previous.cancel()
        ttl = connection.client.transport_options.get("holder_ttl", HolderChannel.holder_ttl)
        cycle._holders_tref = loop.call_repeatedly(ttl / 4, self._recover, cycle)

    def _recover(self, cycle: Any) -> None:
        for channel in list(cycle._channels):
            if channel.active_queues:
                try:
                    channel.recover_lost_holders()
                except channel.connection_errors:
                    log.debug("Holder recovery skipped: connection error", exc_info=True)
                return
