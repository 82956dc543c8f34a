"""Flows end to end on Redis and RabbitMQ: chains pass results on, chords call back once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.faults import rabbitmq_lock, wait_for_dead_letters
from support.projects import Project, unique_namespace, wait_for_files
from support.rabbitmq import remove_namespace

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"
LANES = ("critical", "default", "batch")

FLOW_JOBS = '''"""Members and a callback that leave files, so tests see what ran and when."""

import json
import uuid
from pathlib import Path

from workergen_runtime import job


@job(name="{package}.member")
def member(folder: str, token: str, fail: bool = False) -> str:
    Path(folder, f"member-{{token}}").write_text("ran")
    if fail:
        raise ValueError(f"member {{token}} failed")
    return token


@job(name="{package}.callback")
def callback(tokens: list[str], folder: str) -> list[str]:
    members = sorted(p.name for p in Path(folder).glob("member-*"))
    record = {{"tokens": tokens, "members": members}}
    Path(folder, f"callback.{{uuid.uuid4().hex[:8]}}").write_text(json.dumps(record))
    return tokens
'''


@pytest.fixture(params=["redis", "rabbitmq"])
def project(request, render, redis_url: str, tmp_path: Path) -> Iterator[Project]:
    ns = unique_namespace("flow")
    env = {
        "QUEUE_NAMESPACE": ns,
        "RESULT_BACKEND_URL": redis_url.rsplit("/", 1)[0] + "/1",
        "LOCK_URL": redis_url,
    }
    answers = {"broker": request.param, "result_backend": "redis", "queue_namespace": "billing"}
    if request.param == "rabbitmq":
        env["BROKER_URL"] = request.getfixturevalue("rabbitmq_url")
        answers["rabbitmq_queue_type"] = "classic"
    else:
        env["BROKER_URL"] = redis_url
    proj = Project.copy_of(render(**answers), tmp_path / "billing", PACKAGE, **env)
    (proj.root / PACKAGE / "jobs" / "flow_jobs.py").write_text(FLOW_JOBS.format(package=PACKAGE))
    if request.param == "rabbitmq":
        with rabbitmq_lock(exclusive=False):
            try:
                yield proj
            finally:
                proj.run("dlq", "purge", "--yes")
                remove_namespace(env["BROKER_URL"], ns, LANES)
    else:
        yield proj
        proj.run("dlq", "purge", "--yes")


def start(project: Project, flow: str, wait: float | None = 60) -> object:
    """Start a flow from another process; its last step's result when `wait` is given."""
    code = (
        "import json\n"
        f"import {PACKAGE}\n"
        "from workergen_runtime.discovery import import_jobs\n"
        "import_jobs()\n"
        f"import {PACKAGE}\n"
        "from workergen_runtime.flows import chain, chord, group, start_flow\n"
        f"from {PACKAGE}.jobs.flow_jobs import callback, member\n"
        f"from {PACKAGE}.jobs.greetings import greet_and_count, greet_everyone\n"
        f"result = start_flow({flow})\n"
        f"print(json.dumps(result.get(timeout={wait}) if {wait!r} else result.id))\n"
    )
    done = project.python(code, timeout=(wait or 0) + 60)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def callbacks(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in folder.glob("callback.*")]


def test_a_chain_hands_each_result_to_the_next_job(project: Project) -> None:
    with project.worker("--queue", "default", "--concurrency", "2"):
        assert start(project, "greet_and_count('Ada')") == len("HelloAda")
        assert start(project, "greet_everyone(['Ada', 'Grace', 'Alan'])") == 8 + 10 + 9


def test_a_chord_calls_back_once_after_every_member(project: Project, folder: Path) -> None:
    flow = f"chord([member.s({str(folder)!r}, t) for t in 'abcd'], callback.s({str(folder)!r}))"
    with project.worker("--queue", "default", "--concurrency", "2"):
        assert start(project, flow) == ["a", "b", "c", "d"]
        time.sleep(2)  # a second callback would have run by now
    [record] = callbacks(folder)
    assert record == {
        "tokens": ["a", "b", "c", "d"],
        "members": ["member-a", "member-b", "member-c", "member-d"],
    }


def test_a_failing_member_is_dead_lettered_and_the_callback_never_runs(
    project: Project, folder: Path
) -> None:
    members = ", ".join(
        f"member.s({str(folder)!r}, {t!r}, fail={t == 'b'})" for t in ("a", "b", "c")
    )
    flow = f"chord([{members}], callback.s({str(folder)!r}))"
    with project.worker("--queue", "default", "--concurrency", "2") as worker:
        start(project, flow, wait=None)
        # The other members still run: each is a message of its own.
        wait_for_files(folder, ["member-a", "member-b", "member-c"])
        letters = wait_for_dead_letters(project, 1, 60, worker)
        time.sleep(3)
    assert [(x["task_name"], x["reason"]) for x in letters] == [(f"{PACKAGE}.member", "failed")]
    assert letters[0]["args"][1] == "b"
    assert callbacks(folder) == []
