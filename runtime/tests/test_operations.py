"""Metrics and monitor without a broker: the multiprocess folder, ports, and refusals."""

import collections
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from bound import PACKAGE, PROJECT_ROOT, UNREACHABLE_BROKER, only_on

from workergen_runtime import project
from workergen_runtime.ops import metrics, monitor


def test_a_configured_metrics_folder_is_emptied_so_an_earlier_run_does_not_count(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "counter_1234.db").write_bytes(b"stale")
    (tmp_path / "keep.txt").write_text("not ours")
    monkeypatch.setenv(metrics.MULTIPROC_ENV, str(tmp_path))
    assert metrics.prepare_multiprocess_dir() == (tmp_path, False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_without_a_configured_folder_each_worker_gets_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(metrics.MULTIPROC_ENV, raising=False)
    first, owned = metrics.prepare_multiprocess_dir()
    assert owned
    monkeypatch.delenv(metrics.MULTIPROC_ENV)
    second, _ = metrics.prepare_multiprocess_dir()
    try:
        assert first != second and first.is_dir() and second.is_dir()
        assert os.environ[metrics.MULTIPROC_ENV] == str(second)
    finally:
        first.rmdir()
        second.rmdir()


def test_a_taken_metrics_port_is_logged_and_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    from prometheus_client import CollectorRegistry

    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.ERROR):
            assert metrics.serve(port, CollectorRegistry(), "worker") is False
    assert f"port {port} is taken" in caplog.text and "METRICS_PORT" in caplog.text


def test_the_publish_time_is_stamped_on_every_message() -> None:
    headers: dict = {}
    metrics.stamp_sent_at(headers=headers)
    assert isinstance(headers[metrics.SENT_AT_HEADER], float)


class FakeRequest(dict):
    def __init__(self, routing_key: str) -> None:
        super().__init__()
        self.delivery_info = {"routing_key": routing_key}


class FakeJob:
    lane = "default"

    def __init__(self, name: str, routing_key: str) -> None:
        self.name = name
        self.request = FakeRequest(routing_key)


class FakeCounter:
    """A labelled counter: counts by label values."""

    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter()

    def labels(self, **labels: str) -> "FakeCounter.Labelled":
        return self.Labelled(self, (labels["name"], labels["lane"], labels["queue_name"]))

    class Labelled:
        def __init__(self, counter: "FakeCounter", key: tuple[str, str, str]) -> None:
            self.counter, self.key = counter, key

        def inc(self) -> None:
            self.counter.counts[self.key] += 1


def test_each_job_counts_under_its_own_name_and_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    succeeded = FakeCounter()
    monkeypatch.setattr(metrics, "_define", lambda: {"succeeded": succeeded})
    monkeypatch.setattr(metrics, "_labelled", {})
    monkeypatch.setitem(metrics._worker, "namespace", "ops")
    first, last = f"ops.{project.LANES[0]}", f"ops.{project.LANES[-1]}"
    runs = [("ops.a", first)] * 3 + [("ops.a", last), ("ops.b", first)]
    for name, routing_key in runs:
        metrics._on_success(sender=FakeJob(name, routing_key))

    expected = collections.Counter(
        (name, routing_key.removeprefix("ops."), routing_key) for name, routing_key in runs
    )
    assert succeeded.counts == expected
    assert len(expected) == (3 if first != last else 2)


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.0.0.5", False),
    ],
)
def test_only_loopback_counts_as_private(address: str, loopback: bool) -> None:
    assert monitor.is_loopback(address) is loopback


def test_basic_auth_needs_a_user_and_a_password() -> None:
    assert monitor.check_basic_auth("ops:s3cret, viewer:other") == ["ops:s3cret", "viewer:other"]
    for bad in ("ops", "ops:", ":secret"):
        with pytest.raises(monitor.ProjectError, match="user:password"):
            monitor.check_basic_auth(bad)


def test_flower_gets_the_address_port_and_auth() -> None:
    assert monitor.flower_argv("0.0.0.0", 5555, ["ops:x"]) == [
        "flower",
        "--address=0.0.0.0",
        "--port=5555",
        "--basic-auth=ops:x",
    ]


def run_monitor(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", PACKAGE, "monitor", *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "MONITOR_BASIC_AUTH": "", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@only_on("sqs")
def test_monitor_says_sqs_has_no_remote_control(tmp_path: Path) -> None:
    done = run_monitor(tmp_path, BROKER_URL=UNREACHABLE_BROKER)
    assert done.returncode == 1
    assert "SQS has no remote control" in done.stderr and "METRICS_PORT" in done.stderr


@only_on("redis", "rabbitmq")
def test_monitor_refuses_a_public_address_without_basic_auth(tmp_path: Path) -> None:
    done = run_monitor(tmp_path, "--address", "0.0.0.0", BROKER_URL=UNREACHABLE_BROKER)
    assert done.returncode == 1
    assert "MONITOR_BASIC_AUTH" in done.stderr and "Traceback" not in done.stderr
