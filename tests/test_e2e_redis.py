"""A rendered Redis project end to end: real Redis, real worker processes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from support.projects import Project, unique_namespace, wait_for_files

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"


def redis_project(render, redis_url: str, dest: Path, prefix: str = "t", **env: str) -> Project:
    """A copy of the rendered Redis project with the probe job, on its own namespace."""
    rendered = render(broker="redis", result_backend="none", queue_namespace="billing")
    proj = Project.copy_of(
        rendered,
        dest,
        PACKAGE,
        BROKER_URL=redis_url,
        QUEUE_NAMESPACE=unique_namespace(prefix),
        **env,
    )
    proj.add_probe_job()
    return proj


@pytest.fixture
def project(render, redis_url: str, tmp_path: Path) -> Project:
    return redis_project(render, redis_url, tmp_path / "billing")


def test_worker_runs_jobs_dispatched_from_another_process_on_default_and_named_lanes(
    project: Project, tmp_path: Path
) -> None:
    done = tmp_path / "done"
    done.mkdir()
    with project.worker("--queue", "default,batch", "--concurrency", "2"):
        project.dispatch_probes(done, [f"default-{i}" for i in range(5)])
        project.dispatch_probes(done, [f"batch-{i}" for i in range(5)], lane="batch")
        ran = wait_for_files(
            done, [f"default-{i}" for i in range(5)] + [f"batch-{i}" for i in range(5)]
        )
    assert len(ran) == 10


def test_a_worker_on_one_lane_leaves_other_lanes_alone(
    project: Project, tmp_path: Path, redis_url: str
) -> None:
    done = tmp_path / "done"
    done.mkdir()
    default_queue = f"{project.env['QUEUE_NAMESPACE']}.default"
    with project.worker("--queue", "batch"):
        project.dispatch_probes(done, ["on-default"])
        project.dispatch_probes(done, ["on-batch"], lane="batch")
        wait_for_files(done, ["on-batch"])
        # Dispatched first, yet still waiting on its own lane's list.
        assert redis.Redis.from_url(redis_url).llen(default_queue) == 1
        assert not (done / "on-default").exists()
    with project.worker("--queue", "default"):
        wait_for_files(done, ["on-default"])


def test_namespaces_keep_two_projects_on_one_redis_apart(
    render, redis_url: str, tmp_path: Path
) -> None:
    # Same package, same task names, same Redis: only the namespace differs.
    a = redis_project(render, redis_url, tmp_path / "a", "a", PROBE_OWNER="a")
    b = redis_project(render, redis_url, tmp_path / "b", "b", PROBE_OWNER="b")
    done = tmp_path / "done"
    done.mkdir()
    a_tokens = [f"a-{i}" for i in range(6)] + ["a-batch"]
    b_tokens = [f"b-{i}" for i in range(6)] + ["b-batch"]
    with a.worker(name="wa", PROBE_OWNER="a"), b.worker(name="wb", PROBE_OWNER="b"):
        a.dispatch_probes(done, a_tokens[:-1])
        b.dispatch_probes(done, b_tokens[:-1])
        a.dispatch_probes(done, a_tokens[-1:], lane="batch")
        b.dispatch_probes(done, b_tokens[-1:], lane="batch")
        ran = wait_for_files(done, a_tokens + b_tokens)
    assert {token: owner for token, owner in ran.items()} == {
        **{t: "a" for t in a_tokens},
        **{t: "b" for t in b_tokens},
    }


def test_a_pickle_message_is_never_executed(project: Project, tmp_path: Path) -> None:
    done = tmp_path / "done"
    done.mkdir()
    project.send_raw(f"{PACKAGE}.probe", [str(done), "pickled"], serializer="pickle")
    with project.worker("--queue", "default") as worker:
        # A JSON job queued after it runs, so the worker got past the pickle message.
        project.dispatch_probes(done, ["json-after"])
        wait_for_files(done, ["json-after"])
        log = worker.log()
    assert not (done / "pickled").exists()
    assert "pickle" in log.lower() or "disallowed" in log.lower(), log[-3000:]


DISPATCH_UNAVAILABLE = (
    f"from workergen_runtime import QueueUnavailableError\n"
    f"from {PACKAGE}.jobs.probe import ProbeJob\n"
    "try:\n"
    "    ProbeJob.dispatch('/nonexistent', 'x')\n"
    "except QueueUnavailableError as exc:\n"
    "    print('UNAVAILABLE', exc)\n"
)
# Both give up after PUBLISH_RETRY_POLICY's few retries (about 2 s), with room for a busy machine.
UNAVAILABLE_BOUND = 10


def test_dispatch_with_redis_down_raises_queue_unavailable_quickly(project: Project) -> None:
    started = time.monotonic()
    done = project.python(DISPATCH_UNAVAILABLE, BROKER_URL="redis://127.0.0.1:9/0", timeout=60)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "UNAVAILABLE" in done.stdout and "BROKER_URL" in done.stdout
    assert elapsed < UNAVAILABLE_BOUND


def test_dispatch_with_the_result_backend_down_raises_queue_unavailable_as_quickly(
    render, redis_url: str, tmp_path: Path
) -> None:
    rendered = render(broker="redis", result_backend="redis", queue_namespace="billing")
    project = Project.copy_of(
        rendered,
        tmp_path / "billing",
        PACKAGE,
        BROKER_URL=redis_url,
        RESULT_BACKEND_URL="redis://127.0.0.1:9/0",
        QUEUE_NAMESPACE=unique_namespace("rb"),
    )
    project.add_probe_job()
    started = time.monotonic()
    done = project.python(DISPATCH_UNAVAILABLE, timeout=60)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "UNAVAILABLE The result backend at redis://127.0.0.1:9/0" in done.stdout
    assert "RESULT_BACKEND_URL" in done.stdout
    assert elapsed < UNAVAILABLE_BOUND
    # Not queued, as the message says; the CLI says the same without a traceback.
    assert redis.Redis.from_url(redis_url).llen(f"{project.env['QUEUE_NAMESPACE']}.default") == 0
    cli = project.run("queue", "dispatch", "hello", timeout=60)
    assert cli.returncode == 1
    assert "RESULT_BACKEND_URL" in cli.stderr and "Traceback" not in cli.stderr


def test_dispatch_with_arguments_the_job_does_not_take_queues_nothing(
    project: Project, redis_url: str
) -> None:
    queue = f"{project.env['QUEUE_NAMESPACE']}.default"
    client = redis.Redis.from_url(redis_url)
    try:
        done = project.run("queue", "dispatch", "hello", "--kwargs", '{"nope": 1}')
        assert done.returncode == 1
        assert done.stderr.strip().splitlines() == [
            f"Error: {PACKAGE}.hello does not accept these arguments (got an unexpected keyword "
            "argument 'nope'); it takes (name: str = 'world'). The job was NOT queued."
        ]
        assert client.llen(queue) == 0
    finally:
        client.delete(queue)
        client.close()


def test_dispatch_wait_without_a_worker_is_one_line_and_no_shutdown_traceback(
    render, redis_url: str, tmp_path: Path
) -> None:
    rendered = render(broker="redis", result_backend="redis", queue_namespace="billing")
    namespace = unique_namespace("w")
    project = Project.copy_of(
        rendered,
        tmp_path / "billing",
        PACKAGE,
        BROKER_URL=redis_url,
        RESULT_BACKEND_URL=redis_url,
        QUEUE_NAMESPACE=namespace,
    )
    client = redis.Redis.from_url(redis_url)
    try:
        done = project.run("queue", "dispatch", "hello", "--wait", "1")
        assert done.returncode == 1
        assert done.stderr.strip().splitlines() == [
            "Error: No result within 1 s. Is a worker running on lane 'default'? "
            "Start one with: queue work --queue default"
        ]
    finally:
        client.delete(f"{namespace}.default")
        client.close()
