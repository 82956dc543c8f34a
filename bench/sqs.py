"""SQS throughput: a generated project's SQS lane against stock Celery, on a local moto server.

    python bench/sqs.py [--tasks 400] [--concurrency N] [--repeat 3] [--variants [--only TEXT]]

It starts moto in server mode on 127.0.0.1 (a free port) and, in rounds, fills
a queue with N no-op tasks, starts one worker and times the drain, as
bench/throughput.py does on Redis and RabbitMQ. The stock app is a plain
Celery app with the library's SQS defaults (kombu: `polling_interval` 1 s,
`wait_time_seconds` 10 s; Celery: prefetch 4, early ack); its only transport
options are `is_secure: False` and the region, which moto needs. The
generated project (rendered from this checkout with `--broker sqs`) runs
`queue provision`, then `queue work --queue default` with its own defaults.

The drain is timed from the first message deleted to none left, visible or in
flight: with late acknowledgement (the project) a message is deleted after its
job ran, with early acknowledgement (stock) before. `--variants` also times
single changes: stock Celery with a 0.1 s polling interval, and the generated
project with other polling intervals (1 s is kombu's), with prefetch 1 (a
lane of long jobs), 8 and 10 (the default lane reserves 4 per process).

moto runs in a process of its own on this machine, so the figures are bound
by its CPU, not by the network round trips of real SQS: see
docs/brokers/sqs.md for what to expect there.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from running import stop, write_stock_app
from throughput import (
    PACKAGE,
    Contender,
    Measurement,
    QueueDepth,
    contenders,
    parse_options,
    render_project,
    report,
    run,
)

REGION = "us-east-1"
# What moto needs and nothing more: plain HTTP and a region.
STOCK_TRANSPORT = {"is_secure": False, "region": REGION}


def sqs_client(url: str) -> Any:
    """A boto3 SQS client on the local server named by an `sqs://KEY:SECRET@HOST:PORT` URL."""
    import boto3

    parts = urlsplit(url)
    return boto3.client(
        "sqs",
        region_name=REGION,
        endpoint_url=f"http://{parts.hostname}:{parts.port}",
        aws_access_key_id=parts.username,
        aws_secret_access_key=parts.password,
    )


def sqs_name(queue: str) -> str:
    """The SQS name of a bench queue (plain names: both spellings turn `.` into `-`)."""
    return queue.replace(".", "-")


class SqsDepth(QueueDepth):
    """Messages of a queue not yet deleted: visible ones and those received (in flight)."""

    def __init__(self, url: str) -> None:
        self.client = sqs_client(url)
        self.urls: dict[str, str] = {}

    def __call__(self, queue: str) -> int:
        if queue not in self.urls:
            self.urls[queue] = self.client.get_queue_url(QueueName=sqs_name(queue))["QueueUrl"]
        attributes = self.client.get_queue_attributes(
            QueueUrl=self.urls[queue],
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return sum(int(value) for value in attributes.values())

    def close(self) -> None:
        self.client.close()


def delete_queues(url: str, queue: str) -> None:
    """Delete a stock queue, or a generated project's lanes and dead-letter queues."""
    client = sqs_client(url)
    prefix = sqs_name(queue.split(".")[0])
    for queue_url in client.list_queues(QueueNamePrefix=prefix).get("QueueUrls", []):
        client.delete_queue(QueueUrl=queue_url)
    client.close()


def with_env(contender: Contender, label: str, **env: str) -> Contender:
    return dataclasses.replace(contender, label=label, env={**contender.env, **env})


def stock_conf(**transport: object) -> str:
    return json.dumps({"broker_transport_options": {**STOCK_TRANSPORT, **transport}})


def sqs_contenders(
    url: str, project: Path, stock_dir: Path, tasks: int, concurrency: int, variants: bool
) -> list[Contender]:
    stock, generated = contenders(url, project, stock_dir, tasks, concurrency, variants=False)
    stock = with_env(stock, stock.label, BENCH_CONF=stock_conf())
    parts = urlsplit(url)
    generated = dataclasses.replace(
        generated,
        prepare=[[*generated.work[:3], "queue", "provision"]],
        env={
            **generated.env,
            "AWS_ACCESS_KEY_ID": parts.username or "",
            "AWS_SECRET_ACCESS_KEY": parts.password or "",
        },
    )
    chosen = [stock, generated]
    if variants:

        def prefetch(n: int) -> Contender:
            label = f"generated, prefetch {n}"
            return dataclasses.replace(
                generated, label=label, work=[*generated.work, "--prefetch", str(n)]
            )

        chosen += [
            with_env(
                stock, "stock, polling_interval 0.1", BENCH_CONF=stock_conf(polling_interval=0.1)
            ),
            with_env(generated, "generated, SQS_POLLING_INTERVAL=1", SQS_POLLING_INTERVAL="1"),
            with_env(generated, "generated, SQS_POLLING_INTERVAL=0.1", SQS_POLLING_INTERVAL="0.1"),
            with_env(
                generated, "generated, SQS_POLLING_INTERVAL=0.01", SQS_POLLING_INTERVAL="0.01"
            ),
            prefetch(1),
            prefetch(8),
            # 10 x TASK_TIME_LIMIT (330 s) is the most the visibility rule allows at 3600 s.
            prefetch(10),
        ]
    return chosen


# In a process of its own, as SQS is a service of its own: the bench's polling
# of the queue's depth does not share moto's interpreter lock.
MOTO_SERVER = """\
import logging
import sys
import threading

from moto.server import ThreadedMotoServer

logging.getLogger("werkzeug").setLevel(logging.WARNING)
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print(server._server.server_port, flush=True)
threading.Event().wait()
"""


def start_moto() -> subprocess.Popen[str]:
    """moto in server mode on 127.0.0.1, a free port; its first line of output is the port."""
    try:
        import moto.server  # noqa: F401
    except ImportError as exc:
        raise SystemExit(f"moto[server] is needed ({exc}); pip install -e '.[dev]'") from None
    return subprocess.Popen(
        [sys.executable, "-c", MOTO_SERVER],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tempfile.gettempdir(),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options = parse_options(parser, tasks=400)
    server = start_moto()
    scratch = Path(tempfile.mkdtemp(prefix="workergen-sqs-"))
    try:
        url = f"sqs://bench:bench@127.0.0.1:{server.stdout.readline().strip()}"
        stock_dir = scratch / "stock"
        stock_dir.mkdir()
        write_stock_app(stock_dir)
        project = render_project(scratch / "project-sqs", "sqs")
        chosen = sqs_contenders(
            url, project, stock_dir, options.tasks, options.concurrency, options.variants
        )
        if options.only:
            chosen = chosen[:2] + [c for c in chosen[2:] if options.only in c.label]
        print(
            f"{options.tasks} no-op tasks, concurrency {options.concurrency}, prefork pool, "
            f"moto server on 127.0.0.1 ({PACKAGE}: the generated project)"
        )
        runs: dict[str, list[Measurement]] = {contender.label: [] for contender in chosen}
        for _ in range(options.repeat):
            for contender in chosen:
                measured = run(contender, url, options.tasks, scratch, SqsDepth, delete_queues)
                runs[contender.label].append(measured)
        report("sqs", runs)
    finally:
        stop(server)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
