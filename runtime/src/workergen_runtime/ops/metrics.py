"""Prometheus metrics of the worker and the scheduler, on METRICS_PORT (0 = off).

Under the prefork pool every job runs in a child process, so counters are kept
in files (prometheus_client's multiprocess mode, in PROMETHEUS_MULTIPROC_DIR)
and the worker's main process serves their sum. That folder must be set before
prometheus_client is first imported, and belongs to one worker: `queue work`
makes a fresh one (or empties the one set in the environment) before the pool
starts. Queue depths are read from the broker at scrape time, by the main
process. Names follow celery-exporter's where they mean the same (docs/metrics.md).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any

from workergen_runtime import project
from workergen_runtime.queues import lane_of_queue
from workergen_runtime.settings import Settings

log = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# Jobs run up to TASK_TIME_LIMIT (minutes): the default buckets stop at 10 s.
SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
# The broker is asked at most this often, however often Prometheus scrapes.
DEPTH_CACHE_SECONDS = 5.0
# Header the producer stamps with the publish time, for the queue wait histogram.
SENT_AT_HEADER = "sent_at"

_metrics: dict[str, Any] = {}
_started: dict[str, float] = {}
# Each job metric with its labels, by (metric, job name, routing key).
_labelled: dict[tuple[str, str | None, str | None], Any] = {}
# The namespace of the worker's app, set when metrics are installed.
_worker: dict[str, str] = {"namespace": ""}
# The routing key of each job the worker's main process received, by task id. Celery
# reports some failures there without the job's request (a hard time limit), so the
# failure would not know its queue. Kept while the worker holds the job.
_received: dict[str, str] = {}
# Jobs not held any more are dropped once the table is this much larger than the held ones.
RECEIVED_SLACK = 1000


def stamp_sent_at(headers: dict[str, Any] | None = None, **_: Any) -> None:
    """before_task_publish: record when the message was sent (seconds since the epoch)."""
    if headers is not None:
        headers[SENT_AT_HEADER] = time.time()


def prepare_multiprocess_dir() -> tuple[Path, bool]:
    """The worker's metrics folder, empty, and whether the worker made it (and removes it).

    PROMETHEUS_MULTIPROC_DIR when set, emptied: files left by an earlier run
    would add its counts to this one's. Otherwise a fresh temporary folder.
    """
    configured = os.environ.get(MULTIPROC_ENV)
    if configured:
        folder = Path(configured)
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.db"):
            stale.unlink()
    else:
        folder = Path(tempfile.mkdtemp(prefix=f"{project.PACKAGE}-metrics-"))
    os.environ[MULTIPROC_ENV] = str(folder)
    return folder, not configured


def _define() -> dict[str, Any]:
    """The job metrics, created once per process (after PROMETHEUS_MULTIPROC_DIR is set)."""
    if _metrics:
        return _metrics
    from prometheus_client import Counter, Histogram

    job = ("name", "lane", "queue_name")
    _metrics.update(
        succeeded=Counter("celery_task_succeeded_total", "Jobs that succeeded.", job),
        failed=Counter(
            "celery_task_failed_total",
            "Jobs that failed (after their retries).",
            (*job, "exception"),
        ),
        retried=Counter("celery_task_retried_total", "Job attempts that ended in a retry.", job),
        dead_lettered=Counter(
            "celery_task_dead_lettered_total",
            "Jobs that became dead letters, by reason.",
            (*job, "reason"),
        ),
        duplicates=Counter(
            "celery_task_duplicate_skipped_total",
            "Idempotent jobs not run: their key's work was done or under way.",
            job,
        ),
        runtime=Histogram(
            "celery_task_runtime_seconds", "Time a job ran.", job, buckets=SECONDS_BUCKETS
        ),
        wait=Histogram(
            "celery_task_queue_wait_seconds",
            "Time from publish (or ETA) to the start of the job.",
            job,
            buckets=SECONDS_BUCKETS,
        ),
    )
    return _metrics


def _routing_key(task: Any) -> str | None:
    request = getattr(task, "request", None)
    return (getattr(request, "delivery_info", None) or {}).get("routing_key")


def _labels(task: Any, routing_key: str | None = None) -> dict[str, str]:
    """A job's labels: its name, and the lane and queue it came from (else its own lane's)."""
    from workergen_runtime.queues import qualified_queue

    namespace = _worker["namespace"]
    routing_key = _routing_key(task) or routing_key or ""
    lane = lane_of_queue(routing_key, namespace) or getattr(task, "lane", "") or ""
    queue = routing_key or (qualified_queue(lane, namespace) if lane else "")
    return {"name": getattr(task, "name", "") or "", "lane": lane, "queue_name": queue}


def _job_metric(metric: str, task: Any) -> Any:
    """Metric `metric` with the labels of the job `task` is running.

    The job's name and routing key give its labels, which prometheus_client
    would check again at every `labels()`: each labelled metric is kept, as
    prometheus_client keeps it too.
    """
    key = (metric, getattr(task, "name", None), _routing_key(task))
    labelled = _labelled.get(key)
    if labelled is None:
        labelled = _labelled[key] = _define()[metric].labels(**_labels(task))
    return labelled


def _on_prerun(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    now = time.time()
    if task_id:
        _started[task_id] = time.monotonic()
    request = getattr(task, "request", None)
    sent_at = request.get(SENT_AT_HEADER) if request is not None else None
    if not isinstance(sent_at, int | float):
        return  # sent by a producer that does not stamp it
    eta = getattr(request, "eta", None)
    ready_at = sent_at
    if eta:
        from datetime import datetime

        with suppress(ValueError):
            ready_at = max(sent_at, datetime.fromisoformat(str(eta)).timestamp())
    _job_metric("wait", task).observe(max(0.0, now - ready_at))


def _on_postrun(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    started = _started.pop(task_id, None) if task_id else None
    if started is not None:
        _job_metric("runtime", task).observe(time.monotonic() - started)


def _on_success(sender: Any = None, **_: Any) -> None:
    _job_metric("succeeded", sender).inc()


def _on_received(request: Any = None, **_: Any) -> None:
    """task_received (main process): note where the job came from, for a failure seen there."""
    task_id = getattr(request, "id", None)
    routing_key = (getattr(request, "delivery_info", None) or {}).get("routing_key")
    if not task_id or not routing_key:
        return
    if len(_received) > RECEIVED_SLACK:
        from celery.worker import state

        if len(_received) > 2 * len(state.requests) + RECEIVED_SLACK:
            for done in [t for t in _received if t not in state.requests]:
                del _received[done]
    _received[task_id] = routing_key


def _on_failure(
    sender: Any = None,
    task_id: str | None = None,
    exception: BaseException | None = None,
    **_: Any,
) -> None:
    name = type(exception).__name__ if exception is not None else ""
    received = _received.pop(task_id, None) if task_id else None
    _define()["failed"].labels(**_labels(sender, received), exception=name).inc()


def _on_retry(sender: Any = None, **_: Any) -> None:
    _define()["retried"].labels(**_labels(sender)).inc()


def _on_dead_lettered(letter: Any = None, **_: Any) -> None:
    from workergen_runtime.queues import qualified_queue

    lane = getattr(letter, "lane", None) or ""
    _define()["dead_lettered"].labels(
        name=getattr(letter, "task_name", None) or "",
        lane=lane,
        queue_name=qualified_queue(lane, _worker["namespace"]) if lane else "",
        reason=getattr(letter, "reason", ""),
    ).inc()


def _on_duplicate(task: Any = None, **_: Any) -> None:
    _define()["duplicates"].labels(**_labels(task)).inc()


def _on_child_exit(**_: Any) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(os.getpid())


class BrokerCollector:
    """Queue and dead-letter depths per lane, and this worker's lanes, read at scrape time."""

    def __init__(self, settings: Settings, lanes: Iterable[str], hostname: str) -> None:
        self.settings = settings
        self.lanes = list(lanes)
        self.hostname = hostname
        self._cached: tuple[float, list[Any]] | None = None

    def _depths(self) -> list[Any] | None:
        from workergen_runtime.ops.depth import queue_depths

        now = time.monotonic()
        if self._cached and now - self._cached[0] < DEPTH_CACHE_SECONDS:
            return self._cached[1]
        try:
            depths = queue_depths(self.settings)
        except Exception as exc:  # the scrape still answers, saying the broker is away
            log.warning("metrics: queue depths unavailable: %s", exc)
            return None
        self._cached = (now, depths)
        return depths

    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import GaugeMetricFamily

        up = GaugeMetricFamily(
            "celery_worker_up", "1 for each lane this worker consumes.", labels=["hostname", "lane"]
        )
        for lane in self.lanes:
            up.add_metric([self.hostname, lane], 1)
        yield up
        depths = self._depths()
        broker_up = GaugeMetricFamily(
            "celery_broker_up", "1 when the broker answered the last depth query, else 0."
        )
        broker_up.add_metric([], 0 if depths is None else 1)
        yield broker_up
        length = GaugeMetricFamily(
            "celery_queue_length", "Messages waiting on a lane.", labels=["queue_name", "lane"]
        )
        dead = GaugeMetricFamily(
            "celery_dead_letter_queue_length",
            "Dead letters kept for a lane.",
            labels=["queue_name", "lane"],
        )
        consumers = GaugeMetricFamily(
            "celery_active_consumer_count",
            "Consumers of a lane's queue (RabbitMQ only).",
            labels=["queue_name", "lane"],
        )
        for depth in depths or []:
            if depth.messages is None:
                continue
            family = dead if depth.dead_letter else length
            family.add_metric([depth.queue, depth.lane], depth.messages)
            if depth.consumers is not None and not depth.dead_letter:
                consumers.add_metric([depth.queue, depth.lane], depth.consumers)
        yield length
        yield dead
        if self.settings.broker_kind == "amqp":
            yield consumers


def serve(port: int, registry: Any, what: str) -> bool:
    """Serve /metrics on `port`; a port already taken is logged, never fatal."""
    from prometheus_client import start_http_server

    try:
        start_http_server(port, registry=registry)
    except OSError as exc:
        log.error(
            "metrics: port %d is taken (%s); this %s runs without metrics. Give each process "
            "on a host its own METRICS_PORT (0 turns metrics off).",
            port,
            exc.strerror or exc,
            what,
        )
        return False
    log.info("metrics: serving on :%d/metrics", port)
    return True


def install_worker_metrics(settings: Settings, lanes: list[str]) -> None:
    """Count jobs in every pool process and serve them from the main one once it is ready.

    Called by `queue work` before the worker (and its pool) starts.
    """
    from celery import signals

    from workergen_runtime.signals import dead_lettered, duplicate_skipped

    folder, owned = prepare_multiprocess_dir()
    _worker["namespace"] = settings.queue_namespace
    for signal, handler in (
        (signals.task_received, _on_received),
        (signals.task_prerun, _on_prerun),
        (signals.task_postrun, _on_postrun),
        (signals.task_success, _on_success),
        (signals.task_failure, _on_failure),
        (signals.task_retry, _on_retry),
        (signals.worker_process_shutdown, _on_child_exit),
        (dead_lettered, _on_dead_lettered),
        (duplicate_skipped, _on_duplicate),
    ):
        signal.connect(handler, weak=False)

    def start(sender: Any = None, **_: Any) -> None:
        from prometheus_client import CollectorRegistry, multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=str(folder))
        node = getattr(sender, "hostname", None) or ""
        registry.register(BrokerCollector(settings, lanes, node))
        serve(settings.metrics_port, registry, "worker")

    def clean_up(**_: Any) -> None:
        if owned:
            shutil.rmtree(folder, ignore_errors=True)

    signals.worker_ready.connect(start, weak=False)
    signals.worker_shutdown.connect(clean_up, weak=False)


class SchedulerMetrics:
    """Leadership and the last tick of one `schedule work` process."""

    def __init__(self, port: int) -> None:
        from prometheus_client import CollectorRegistry, Gauge

        registry = CollectorRegistry()
        self.leader = Gauge(
            "celery_scheduler_leader",
            "1 while this scheduler holds the leader lock and fires the crons.",
            registry=registry,
        )
        self.last_tick = Gauge(
            "celery_scheduler_last_tick_timestamp_seconds",
            "When this scheduler last ticked (leader or standby).",
            registry=registry,
        )
        serve(port, registry, "scheduler")

    def ticked(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)
        self.last_tick.set_to_current_time()


def measured_scheduler(base: type, port: int) -> type:
    """The scheduler class `base`, reporting its leadership and ticks on `port`."""

    class MeasuredScheduler(base):  # type: ignore[misc, valid-type]
        def setup_schedule(self) -> None:
            super().setup_schedule()
            if not hasattr(self, "metrics"):
                self.metrics = SchedulerMetrics(port)

        def tick(self, *args: Any, **kwargs: Any) -> float:
            delay = super().tick(*args, **kwargs)
            self.metrics.ticked(bool(self.leading))
            return delay

        def close(self) -> None:
            super().close()
            if hasattr(self, "metrics"):
                self.metrics.ticked(False)

    return MeasuredScheduler
