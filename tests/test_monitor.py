"""`monitor`: Flower on the project's namespace sees its workers and jobs, behind basic auth."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.faults import wait_for
from support.operations import Process, free_port, ops_project
from support.projects import Project, wait_for_files

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

AUTH = "ops:s3cret-pass"


@pytest.fixture(params=["redis", "rabbitmq"])
def project(request, render, tmp_path: Path) -> Iterator[Project]:
    with ops_project(request.param, request, render, tmp_path) as proj:
        yield proj


def api(port: int, path: str, auth: str | None = AUTH) -> tuple[int, dict]:
    """GET Flower's API; (status, JSON body)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, {}
    except (urllib.error.URLError, ConnectionError):
        return 0, {}


def test_flower_sees_the_namespaced_worker_and_a_finished_job(
    project: Project, folder: Path
) -> None:
    port = free_port()
    with (
        project.worker("--queue", "default", name="seen") as worker,
        Process(project, "monitor", "--port", str(port), MONITOR_BASIC_AUTH=AUTH) as flower,
    ):
        hostname = next(
            line.split()[-2] for line in worker.log().splitlines() if line.endswith(" ready.")
        )

        def workers() -> dict:
            status, body = api(port, "/api/workers?refresh=1")
            return body if status == 200 and hostname in body else {}

        assert wait_for(workers, 60, f"Flower to list {hostname}\n{flower.log()}")
        assert api(port, "/api/workers", auth=None)[0] == 401
        assert api(port, "/api/workers", auth="ops:wrong")[0] == 401

        # Flower turns the workers' task events on when it starts; jobs after that are seen.
        wait_for(lambda: "enabled by remote" in worker.log(), 60, "Flower to enable events")
        project.dispatch_probes(folder, ["watched"])
        wait_for_files(folder, ["watched"])

        def finished() -> list:
            _, tasks = api(port, "/api/tasks")
            return [
                t
                for t in tasks.values()
                if t.get("name") == "billing.probe" and t.get("state") == "SUCCESS"
            ]

        [task] = wait_for(finished, 60, "the finished job in Flower")
    assert task["worker"] == hostname
    assert "'watched'" in task["args"]


def test_monitor_refuses_a_public_address_without_a_password(project: Project) -> None:
    done = project.run("monitor", "--address", "0.0.0.0", "--port", str(free_port()))
    assert done.returncode == 1
    assert "MONITOR_BASIC_AUTH" in done.stderr and "Traceback" not in done.stderr
