"""The prefork pool's time limits: one timer for all running jobs, Celery's action at each."""

import os
import pickle
import struct
from dataclasses import dataclass, field
from typing import Any

import pytest

from workergen_runtime.celery_app import app
from workergen_runtime.worker import pool as pool_module
from workergen_runtime.worker.pool import Deadlines, QuietResultHandler, TaskPool, only_with_work


@dataclass
class Timer:
    at: float
    callback: Any
    canceled: bool = False

    def cancel(self) -> None:
        self.canceled = True


@dataclass
class Hub:
    timers: list[Timer] = field(default_factory=list)

    def call_at(self, at: float, callback: Any) -> Timer:
        self.timers.append(Timer(at, callback))
        return self.timers[-1]

    def armed(self) -> list[float]:
        return [timer.at for timer in self.timers if not timer.canceled]

    def fire(self) -> None:
        """Run the armed timer, as the event loop does when its time comes."""
        [timer] = [timer for timer in self.timers if not timer.canceled]
        self.timers.remove(timer)
        timer.callback()


@dataclass
class Job:
    _job: int


@dataclass
class Pool:
    _cache: dict[int, Job] = field(default_factory=dict)
    ended: list[tuple[str, int]] = field(default_factory=list)

    def on_soft_timeout(self, job: Job) -> None:
        self.ended.append(("soft", job._job))

    def on_hard_timeout(self, job: Job) -> None:
        self.ended.append(("hard", job._job))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(pool_module, "monotonic", lambda: now[0])
    return now


def running(pool: Pool, *ids: int) -> list[Job]:
    jobs = [Job(i) for i in ids]
    pool._cache.update({job._job: job for job in jobs})
    return jobs


def test_the_worker_runs_this_pool_for_prefork() -> None:
    from celery.concurrency import get_implementation

    assert get_implementation(app.conf.worker_pool) is TaskPool


def test_running_jobs_share_one_timer_armed_for_the_earliest_deadline(clock: list[float]) -> None:
    pool, hub = Pool(), Hub()
    deadlines = Deadlines(pool)
    deadlines.register(hub)
    for job in running(pool, 1, 2, 3):
        deadlines.start(job, 300, 330)
        clock[0] += 1
    assert hub.armed() == [1300.0] and len(hub.timers) == 1
    [short] = running(pool, 4)
    deadlines.start(short, 10, 20)  # a message may lower its limits
    assert hub.armed() == [1013.0]


def test_a_job_that_ends_leaves_no_limit_behind(clock: list[float]) -> None:
    pool, hub = Pool(), Hub()
    deadlines = Deadlines(pool)
    deadlines.register(hub)
    jobs = running(pool, 1, 2)
    for job in jobs:
        deadlines.start(job, 300, 330)
        deadlines.stop(job)
        del pool._cache[job._job]
    assert len(deadlines) == 0
    clock[0] += 400
    hub.fire()
    assert pool.ended == [] and hub.armed() == []


def test_the_soft_limit_comes_then_the_hard_one_each_at_its_time(clock: list[float]) -> None:
    pool, hub = Pool(), Hub()
    deadlines = Deadlines(pool)
    deadlines.register(hub)
    first, second = running(pool, 1, 2)
    deadlines.start(first, 300, 330)
    clock[0] += 100
    deadlines.start(second, 300, 330)
    clock[0] += 200
    hub.fire()
    assert pool.ended == [("soft", 1)]
    assert hub.armed() == [1330.0]  # the first's hard limit, before the second's soft one
    clock[0] += 30
    hub.fire()
    assert pool.ended == [("soft", 1), ("hard", 1)]
    assert hub.armed() == [1400.0]
    clock[0] += 70
    hub.fire()
    clock[0] += 30
    hub.fire()
    assert pool.ended == [("soft", 1), ("hard", 1), ("soft", 2), ("hard", 2)]
    assert hub.armed() == [] and len(deadlines) == 0


def test_a_job_without_a_soft_limit_is_ended_at_its_hard_one(clock: list[float]) -> None:
    pool, hub = Pool(), Hub()
    deadlines = Deadlines(pool)
    deadlines.register(hub)
    [job] = running(pool, 1)
    deadlines.start(job, None, 30)
    clock[0] += 30
    hub.fire()
    assert pool.ended == [("hard", 1)]


def test_limits_carry_on_when_the_loop_cancels_the_timer_on_a_reconnect(
    clock: list[float],
) -> None:
    pool, hub = Pool(), Hub()
    deadlines = Deadlines(pool)
    deadlines.register(hub)
    first, second = running(pool, 1, 2)
    deadlines.start(first, 300, 330)
    hub.timers[0].cancel()  # the connection was lost
    deadlines.register(hub)  # registered again on the new connection
    assert hub.armed() == [1300.0]
    hub.timers[-1].cancel()
    deadlines.start(second, 300, 330)  # a job started with no timer armed arms one
    assert hub.armed() == [1300.0]


def test_the_loop_turn_handler_runs_only_with_a_job_to_send_or_a_pipe_to_take_out() -> None:
    calls: list[str] = []
    outbound: list[str] = []
    inqueues = {5, 9}
    writers: dict[int, Any] = {16: None}  # another connection's writer
    on_poll_start = only_with_work(lambda: calls.append("run"), outbound, inqueues, writers)

    on_poll_start()  # idle pipes, none of them among the writers: nothing to do
    assert calls == []
    outbound.append("job")
    on_poll_start()
    outbound.clear()
    writers[9] = None  # a pipe still registered: Celery's handler takes it out
    on_poll_start()
    assert calls == ["run", "run"]


class ReaderHub:
    """The event loop's readers, as kombu's hub keeps them, and what was added."""

    def __init__(self) -> None:
        self.readers: dict[int, tuple[Any, tuple[Any, ...]]] = {}
        self.added: list[int] = []

    def add_reader(self, fd: int, callback: Any, *args: Any) -> None:
        self.added.append(fd)
        self.readers[fd] = (callback, args)

    def remove_reader(self, fd: int) -> None:
        self.readers.pop(fd, None)


def result_handler(hub: ReaderHub, read_fd: int, received: list[Any]) -> QuietResultHandler:
    handler = QuietResultHandler.__new__(QuietResultHandler)
    handler.fileno_to_outq = {read_fd: object()}
    handler.on_state_change = received.append
    handler.register_with_event_loop(hub)
    return handler


def send_result(write_fd: int, message: Any) -> None:
    body = pickle.dumps(message)
    os.write(write_fd, struct.pack(">i", len(body)) + body)


def test_a_result_pipe_is_registered_again_only_when_its_callback_changed() -> None:
    read_fd, write_fd = os.pipe()
    try:
        hub, received = ReaderHub(), []
        handler = result_handler(hub, read_fd, received)
        hub.readers[read_fd] = (handler.handle_event, (read_fd,))

        send_result(write_fd, ("ready", 1))
        handler.handle_event(read_fd)
        assert received == [("ready", 1)]
        assert hub.added == []  # still read by the same callback: nothing to register

        hub.readers[read_fd] = ("a partly read message", ())
        send_result(write_fd, ("ready", 2))
        handler.handle_event(read_fd)
        assert received == [("ready", 1), ("ready", 2)]
        assert hub.readers[read_fd] == (handler.handle_event, (read_fd,))
    finally:
        os.close(read_fd)
        os.close(write_fd)
