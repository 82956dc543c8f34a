"""Namespaces never meet: two projects on one broker run only their own jobs.

RabbitMQ quorum lanes share Celery's `celery_delayed_*` exchanges between every
project on the server; a delayed job or a retry with backoff must come back to
its own project only, even beside a project with an empty namespace. The
RabbitMQ projects live in a virtual host of their own, created and deleted by
the test, so a project with an empty namespace meets no one else's queues.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.brokers import IN_CI
from support.faults import (
    add_fault_jobs,
    dead_letters,
    dispatch,
    rabbitmq_lock,
    runs,
    wait_for_dead_letters,
)
from support.projects import Project, unique_namespace, wait_for_files

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"


def rabbitmqctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["rabbitmqctl", *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def vhost_url(rabbitmq_url: str) -> Iterator[str]:
    """A RabbitMQ virtual host for this test only, deleted with everything in it."""
    name = f"wg-{uuid.uuid4().hex[:10]}"
    if not shutil.which("rabbitmqctl") or rabbitmqctl("add_vhost", name).returncode != 0:
        reason = "rabbitmqctl cannot add a virtual host on the local RabbitMQ"
        if IN_CI:
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
    try:
        granted = rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
        assert granted.returncode == 0, granted.stderr
        yield rabbitmq_url.rstrip("/") + "/" + name
    finally:
        rabbitmqctl("delete_vhost", name)


def test_on_quorum_lanes_delayed_jobs_and_retries_stay_in_their_namespace(
    render, vhost_url: str, redis_url: str, tmp_path: Path, folder: Path
) -> None:
    rendered = render(
        broker="rabbitmq", rabbitmq_queue_type="quorum", result_backend="none", queue_namespace=""
    )
    common = {"BROKER_URL": vhost_url, "LOCK_URL": redis_url}
    bare = Project.copy_of(rendered, tmp_path / "bare", PACKAGE, QUEUE_NAMESPACE="", **common)
    named = Project.copy_of(
        rendered, tmp_path / "named", PACKAGE, QUEUE_NAMESPACE=unique_namespace("q"), **common
    )
    for proj in (bare, named):
        proj.add_probe_job()
    # Only the namespaced project knows the failing job: a retry reaching the
    # other one would be dead-lettered there as an unknown job.
    add_fault_jobs(named)
    probe = f"{PACKAGE}.probe"
    with (
        rabbitmq_lock(exclusive=False),
        bare.worker("--concurrency", "1", name="bare", PROBE_OWNER="bare") as bare_worker,
        named.worker("--concurrency", "1", name="named", PROBE_OWNER="named") as named_worker,
    ):
        for proj, owner in ((bare, "bare"), (named, "named")):
            done = proj.python(
                f"from {PACKAGE}.jobs.probe import ProbeJob\n"
                f"ProbeJob.dispatch_with(args=[{str(folder)!r}, '{owner}-delayed'], countdown=2)\n"
                f"ProbeJob.dispatch_with(args=[{str(folder)!r}, '{owner}-now'])\n"
            )
            assert done.returncode == 0, done.stderr
        dispatch(named, "always_fails", [str(folder), "retried"])
        ran = wait_for_files(
            folder, ["bare-delayed", "bare-now", "named-delayed", "named-now"], timeout=60
        )
        [letter] = wait_for_dead_letters(named, 1, 90, named_worker)
        bare_log, named_log = bare_worker.log(), named_worker.log()
    assert ran == {
        "bare-delayed": "bare",
        "bare-now": "bare",
        "named-delayed": "named",
        "named-now": "named",
    }
    # Two retries with backoff, each a delayed message: all three attempts in its own project.
    assert runs(folder, "retried", "attempt") == 3
    assert (letter["task_name"], letter["lane"]) == (f"{PACKAGE}.always_fails", "default")
    assert dead_letters(bare) == []
    assert "always_fails" not in bare_log
    assert bare_log.count(f"Task {probe}[") == named_log.count(f"Task {probe}[") == 4, (
        bare_log[-3000:],
        named_log[-3000:],
    )
