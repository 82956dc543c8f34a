"""Brokers of a test's own, with persistence on, that a test may kill -9 and restart.

They listen on free loopback ports, keep their data in the test's temporary
folder, and are ended by their PID; the shared brokers are never touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.brokers import IN_CI, port_open, require_broker_restarts


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _require(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        reason = f"{program} is not installed, so the test cannot start a broker of its own"
        if IN_CI:
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
    return path


def _wait_until_listening(
    url: str, process: subprocess.Popen[bytes], timeout: float, log: Path
) -> None:
    deadline = time.monotonic() + timeout
    while not port_open(url):
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(
                f"private broker did not start:\n{log.read_text(errors='replace')[-3000:]}"
            )
        time.sleep(0.2)


class PrivateRedis:
    """`redis-server` with an append-only file synced on every write."""

    def __init__(self, folder: Path) -> None:
        self.program = _require("redis-server")
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.log = folder / "redis.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> PrivateRedis:
        args = [
            self.program,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.folder),
        ]
        args += [
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--daemonize",
            "no",
        ]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        _wait_until_listening(self.url, self.process, 30, self.log)
        return self

    def kill(self) -> None:
        """kill -9, as a crashed host would."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


class PrivateRabbitMQ:
    """A RabbitMQ node of its own: its name, ports and data folder, no plugins."""

    def __init__(self, folder: Path) -> None:
        # The packaged wrapper switches to the rabbitmq user, which cannot write to the
        # test's folder; the script it wraps runs the node as the current user.
        packaged = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
        self.program = str(packaged) if packaged.exists() else _require("rabbitmq-server")
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.name = f"wg{self.port}@localhost"
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}//"
        self.log = folder / "rabbitmq.out"
        plugins = folder / "enabled_plugins"
        plugins.write_text("[].\n")
        for sub in ("mnesia", "log"):
            (folder / sub).mkdir(exist_ok=True)
        self.env = {
            **os.environ,
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_DIST_PORT": str(free_port()),
            "RABBITMQ_MNESIA_BASE": str(folder / "mnesia"),
            "RABBITMQ_LOG_BASE": str(folder / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(plugins),
            "RABBITMQ_PID_FILE": str(folder / "rabbitmq.pid"),
            "RABBITMQ_FEATURE_FLAGS_FILE": str(folder / "feature_flags"),
            "RABBITMQ_QUORUM_DIR": str(folder / "mnesia" / "quorum"),
            "RABBITMQ_CONFIG_FILE": str(folder / "none"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(folder / "none-advanced.config"),
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> PrivateRabbitMQ:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [self.program],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _wait_until_listening(self.url, self.process, 120, self.log)
        return self

    def _beam_pid(self) -> int:
        """The Erlang VM's PID, which rabbitmq-server's script started."""
        return int((self.folder / "rabbitmq.pid").read_text().strip())

    def kill(self) -> None:
        """kill -9 of the node's Erlang VM, as a crashed host would."""
        assert self.process is not None
        os.kill(self._beam_pid(), signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(OSError, ValueError):
            os.kill(self._beam_pid(), signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError, ValueError):
                os.kill(self._beam_pid(), signal.SIGKILL)
            self.process.wait(10)


@contextlib.contextmanager
def private_broker(kind: str, folder: Path) -> Iterator[PrivateRedis | PrivateRabbitMQ]:
    """A started private broker of that kind; stopped at the end, whatever happened."""
    require_broker_restarts()
    broker = (PrivateRedis if kind == "redis" else PrivateRabbitMQ)(folder)
    try:
        yield broker.start()
    finally:
        broker.stop()
