"""The worker's prefork pool: Celery's, with every job's time limits on one timer.

Celery's pool arms an event-loop timer for each job it starts and cancels it
when the job ends; a cancelled timer stays queued until its time would have
come, so a busy worker holds one for every job of the last TASK_SOFT_TIME_LIMIT
seconds and pays for each. Here a job's deadline is an entry in a table, taken
out when the job ends, and one timer is armed for the earliest deadline.

What happens at a limit is Celery's own: at the soft limit the job's process is
signalled and SoftTimeLimitExceeded is raised in the job; at the hard limit the
job fails with TimeLimitExceeded (dead-lettered, see deadlettering.py) and
its process is killed.

The pool also leaves out two event-loop calls that Celery's makes and that fail
every time: see `QuietResultHandler` and `only_with_work`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Set
from time import monotonic
from typing import Any

from celery.concurrency import prefork
from celery.concurrency.asynpool import AsynPool, ResultHandler

# The limits still ahead of a job, in seconds: (soft, hard) from its start, or
# (None, the rest of the hard limit) once the soft one has passed.
Limits = tuple[float | None, float | None]


class Deadlines:
    """The time limits of the jobs running in a pool, with one timer for the earliest."""

    def __init__(self, pool: AsynPool) -> None:
        self._pool = pool
        self._hub: Any = None
        # The running jobs by the limits ahead of them, each job with its deadline.
        # Jobs with the same limits are added in deadline order, so the first
        # entry of each table is its earliest.
        self._tables: dict[Limits, dict[int, float]] = {}
        self._table_of: dict[int, dict[int, float]] = {}
        self._timer: Any = None
        self._timer_at = 0.0

    def register(self, hub: Any) -> None:
        """Run on this event loop, where the limits of running jobs carry on."""
        self._hub = hub
        self._arm()

    def start(self, result: Any, soft: float | None, hard: float | None) -> None:
        """A job began: its soft limit counts from now, or its hard one when it has no soft."""
        if soft:
            self._add(result._job, (soft, hard), monotonic() + soft)
        elif hard:
            self._add(result._job, (None, hard), monotonic() + hard)

    def stop(self, result: Any) -> None:
        """A job ended: no limit applies to it any more."""
        table = self._table_of.pop(result._job, None)
        if table is not None:
            del table[result._job]

    def __len__(self) -> int:
        return len(self._table_of)

    def _add(self, job: int, limits: Limits, deadline: float) -> None:
        table = self._tables.get(limits)
        if table is None:
            table = self._tables[limits] = {}
        table[job] = deadline
        self._table_of[job] = table
        timer = self._timer
        if timer is None or timer.canceled or deadline < self._timer_at:
            self._arm_at(deadline)

    def _arm(self) -> None:
        """Arm the timer for the earliest deadline, unless it is armed before that."""
        heads = [next(iter(table.values())) for table in self._tables.values() if table]
        if not heads:
            return
        earliest = min(heads)
        timer = self._timer
        if timer is None or timer.canceled or earliest < self._timer_at:
            self._arm_at(earliest)

    def _arm_at(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._hub.call_at(deadline, self._expire)
        self._timer_at = deadline

    def _expire(self) -> None:
        """Apply every limit that has come, then arm the timer for the next one."""
        self._timer = None
        now = monotonic()
        cache = self._pool._cache
        try:
            for limits, table in list(self._tables.items()):
                soft, hard = limits
                while table:
                    job, deadline = next(iter(table.items()))
                    if deadline > now:
                        break
                    del table[job]
                    del self._table_of[job]
                    result = cache.get(job)
                    if result is None:
                        continue  # it has ended
                    if soft is None:
                        self._pool.on_hard_timeout(result)
                        continue
                    if hard:
                        self._add(job, (None, hard - soft), now + hard - soft)
                    self._pool.on_soft_timeout(result)
                if not table:
                    del self._tables[limits]
        finally:
            self._arm()


def only_with_work(
    on_poll_start: Callable[[], None],
    outbound: Collection[Any],
    inqueues: Set[int],
    writers: Mapping[int, Any],
) -> Callable[[], None]:
    """Celery's `on_poll_start`, run only when it has something to do.

    It runs on every turn of the event loop. With no job waiting to be sent
    (`outbound`), it takes every idle process's pipe (`inqueues`) out of the
    loop's `writers`, whether it is there or not: a failed system call and a
    caught exception per process and turn. Here it runs when a job waits or a
    pipe is still among the writers.
    """

    def on_poll_start_with_work() -> None:
        if outbound or not writers.keys().isdisjoint(inqueues):
            on_poll_start()

    return on_poll_start_with_work


class QuietResultHandler(ResultHandler):
    """Celery's reader of the pool processes' results, without a failed re-registration each.

    After every result message Celery registers the process's result pipe with the
    event loop again, so the pipe is read by its usual callback once more. Most
    messages are read in one go, the pipe never left that callback, and the
    registration fails (the pipe is registered already): a system call and a
    caught exception, twice per job. It is made here only when the pipe has
    another callback (a message read in parts) or none.
    """

    def register_with_event_loop(self, hub: Any) -> None:
        super().register_with_event_loop(hub)
        readers = hub.readers
        add_reader = hub.add_reader

        def read_again_with(fd: int, callback: Any, *args: Any) -> None:
            if readers.get(fd) != (callback, args):
                add_reader(fd, callback, *args)

        self._read_again_with = read_again_with

    def _recv_message(self, add_reader: Any, fd: int, callback: Any, *args: Any, **kwargs: Any):
        return super()._recv_message(self._read_again_with, fd, callback, *args, **kwargs)


class DeadlinePool(AsynPool):
    """Celery's event-loop pool, its time limits kept by `Deadlines`."""

    ResultHandler = QuietResultHandler
    _deadlines: Deadlines | None = None

    def _create_write_handlers(self, hub: Any, *args: Any, **kwargs: Any) -> None:
        super()._create_write_handlers(hub, *args, **kwargs)
        self.on_poll_start = only_with_work(
            self.on_poll_start, self.outbound_buffer, self._all_inqueues, hub.writers
        )

    def _create_timelimit_handlers(self, hub: Any) -> None:
        # Registered again after a broker reconnect: the same deadlines carry on,
        # so the limits of jobs still running then still apply.
        if self._deadlines is None:
            self._deadlines = Deadlines(self)
        self._deadlines.register(hub)
        self.on_timeout_set = self._deadlines.start
        self.on_timeout_cancel = self._deadlines.stop


class TaskPool(prefork.TaskPool):
    """The prefork pool (`--pool prefork`, the default) with `DeadlinePool`."""

    Pool = DeadlinePool
