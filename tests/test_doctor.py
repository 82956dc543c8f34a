"""`doctor` against real brokers: a fresh project passes, a tampered one fails naming why."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.brokers import require_rabbitmqctl
from support.operations import ops_project
from support.projects import Project

pytestmark = [pytest.mark.broker]


@pytest.fixture(params=["redis", "rabbitmq"])
def project(request, render, tmp_path: Path) -> Iterator[Project]:
    with ops_project(request.param, request, render, tmp_path) as proj:
        if request.param == "rabbitmq":
            # The worker declares the dead-letter queues when it starts.
            with proj.worker("--concurrency", "1"):
                pass
        yield proj


def checks(project: Project, **env: str) -> tuple[int, dict[str, dict]]:
    """`doctor --json`: its exit code and each check by name."""
    done = project.run("doctor", "--json", **env)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, {c["name"]: c for c in map(json.loads, done.stdout.splitlines())}


def row(output: str, check: str) -> str:
    """The table line of one check."""
    lines = [line for line in output.splitlines() if f" {check} " in line]
    assert lines, f"no {check!r} row in:\n{output}"
    return lines[0]


def test_a_fresh_project_passes_every_check(project: Project) -> None:
    done = project.run("doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    for check in ("serialization", "acknowledgement", "time limits", "namespace", "jobs import"):
        assert "pass" in row(done.stdout, check)
    assert "pass" in row(done.stdout, "dead-letter queues")
    assert "checks passed" in done.stdout


def test_a_config_that_accepts_pickle_fails_serialization(project: Project) -> None:
    # The project's own code changes what the runtime set, as a copied snippet might.
    (project.root / "billing" / "jobs" / "legacy.py").write_text(
        "from workergen_runtime.celery_app import app\n\n"
        'app.conf.accept_content = ["json", "pickle"]\n'
    )
    done = project.run("doctor")
    assert done.returncode == 1
    assert "FAIL" in row(done.stdout, "serialization")
    assert "serialization" in done.stderr and "Traceback" not in done.stderr
    _, found = checks(project)
    assert "pickle" in found["serialization"]["detail"]
    assert [name for name, c in found.items() if not c["ok"]] == ["serialization"]


def test_a_job_that_does_not_import_fails_naming_its_module(project: Project) -> None:
    (project.root / "billing" / "jobs" / "broken.py").write_text("import not_a_module_at_all\n")
    code, found = checks(project)
    assert code == 1
    assert not found["jobs import"]["ok"]
    assert found["jobs import"]["detail"].startswith("billing.jobs.broken: ModuleNotFoundError")


def test_a_lane_whose_dead_letter_queue_is_gone_fails_naming_it(
    render, request, tmp_path: Path
) -> None:
    with ops_project("rabbitmq", request, render, tmp_path) as proj:
        with proj.worker("--concurrency", "1"):
            pass
        namespace = proj.env["QUEUE_NAMESPACE"]
        gone = f"{namespace}.critical.dlq"
        deleted = proj.python(
            "from kombu import Connection\n"
            f"with Connection({proj.env['BROKER_URL']!r}) as c:\n"
            f"    c.channel().queue_delete({gone!r})\n"
        )
        assert deleted.returncode == 0, deleted.stderr
        code, found = checks(proj)
    assert code == 1
    dead_letters = found["dead-letter queues"]
    assert not dead_letters["ok"]
    assert dead_letters["detail"] == f"missing: {gone}"
    assert "worker" in dead_letters["fix"]
    assert all(c["ok"] for name, c in found.items() if name != "dead-letter queues")


def test_a_broker_that_is_down_fails_instead_of_passing(project: Project) -> None:
    down = project.env["BROKER_URL"].replace(":6379", ":9").replace(":5672", ":9")
    code, found = checks(project, BROKER_URL=down)
    assert code == 1
    assert not found["broker"]["ok"] and not found["dead-letter queues"]["ok"]
    assert found["serialization"]["ok"]


def path_without_rabbitmqctl() -> str:
    """PATH without the folders that hold rabbitmqctl: a machine the broker does not run on."""
    folders = os.environ["PATH"].split(os.pathsep)
    return os.pathsep.join(f for f in folders if not shutil.which("rabbitmqctl", path=f))


def test_rabbitmq_dead_letter_policies_fail_until_they_are_set(
    render, request, tmp_path: Path
) -> None:
    require_rabbitmqctl("to see the policies doctor reads and `queue provision` sets")
    elsewhere = path_without_rabbitmqctl()
    with ops_project("rabbitmq", request, render, tmp_path) as proj:
        namespace = proj.env["QUEUE_NAMESPACE"]
        # Without rabbitmqctl or RABBITMQ_MANAGEMENT_URL the worker declares the queues
        # but cannot set the policies, and says so.
        with proj.worker("--concurrency", "1", PATH=elsewhere) as worker:
            pass
        assert "a message it rejects is dropped" in worker.log()

        code, found = checks(proj, PATH=elsewhere)
        unread = found["dead-letter queues"]
        assert code == 1 and not unread["ok"], unread
        assert "RABBITMQ_MANAGEMENT_URL is empty" in unread["detail"]
        assert "a message the worker rejects is dropped" in unread["detail"]
        assert "queue provision" in unread["fix"]
        assert "rabbitmqctl set_policy --vhost / --priority 10" in unread["fix"]
        assert all(c["ok"] for name, c in found.items() if name != "dead-letter queues")

        # Where rabbitmqctl reaches the broker, doctor reads the policies: none is set.
        code, found = checks(proj)
        unset = found["dead-letter queues"]
        assert code == 1 and not unset["ok"], unset
        assert f"{namespace}.default.dead-letters" in unset["detail"]
        assert "Run `queue provision`" in unset["fix"]

        provisioned = proj.run("queue", "provision")
        assert provisioned.returncode == 0, provisioned.stderr
        code, found = checks(proj)
    assert code == 0, found
    assert "dead-letter policy set" in found["dead-letter queues"]["detail"]


@pytest.mark.parametrize("project", ["rabbitmq"], indirect=True)
def test_a_management_api_out_of_reach_fails_the_dead_letter_check(project: Project) -> None:
    code, found = checks(project, RABBITMQ_MANAGEMENT_URL="http://guest:secret@127.0.0.1:9")
    dead_letters = found["dead-letter queues"]
    assert code == 1 and not dead_letters["ok"]
    assert (
        "Cannot reach the management API at http://guest:***@127.0.0.1:9"
        in (dead_letters["detail"])
    )
    assert "secret" not in json.dumps(found)
