"""Jobs queued from a FastAPI app of the user's: the front door's answers, from their routes.

Each test runs a small FastAPI app in another process (the settings are the
process's): a route that calls `dispatch_job`, and `job_status_router()` mounted.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from bound import PACKAGE, PROJECT_ROOT, RETRIES_WITHOUT_PAUSES, UNREACHABLE_BROKER

# A user's app: its own route queues the sample project's hello job.
APP = f"""
import json
from fastapi import FastAPI, Header
from fastapi.testclient import TestClient
# Before the project's package: importing the helpers reads no answer.
from workergen_runtime.web import dispatch_job, job_status_router
import {PACKAGE}
from {PACKAGE}.jobs.hello import HelloJob

PREFIX = {{prefix!r}}
app = FastAPI()
app.include_router(job_status_router(**({{{{"prefix": PREFIX}}}} if PREFIX else {{{{}}}})))

@app.post("/greetings/{{{{name}}}}", status_code=202)
def greet(name: str, idempotency_key: str | None = Header(None, alias="Idempotency-Key")):
    kwargs = {{{{"name": name}}}}
    if PREFIX:
        return dispatch_job(HelloJob, kwargs, idempotency_key=idempotency_key, status_prefix=PREFIX)
    return dispatch_job(HelloJob, kwargs, idempotency_key=idempotency_key)

client = TestClient(app)
"""


def run(tmp_path: Path, code: str, prefix: str = "", **env: str) -> list[dict]:
    """The app above, then `code`, which prints one JSON line per answer it checks."""
    done = subprocess.run(
        [sys.executable, "-c", APP.format(prefix=prefix) + code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "BROKER_URL": "memory://", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


ANSWER = (
    "answer = client.post('/greetings/Ada')\n"
    "print(json.dumps({'status': answer.status_code, 'location': answer.headers.get('location'),"
    " 'body': answer.json()}))\n"
)


def test_a_route_of_yours_answers_202_with_location_as_the_front_door(tmp_path: Path) -> None:
    [answer] = run(tmp_path, ANSWER)
    assert answer["status"] == 202
    job_id = answer["body"]["id"]
    assert answer["location"] == f"/jobs/{job_id}"
    assert answer["body"] == {
        "id": job_id,
        "job": f"{PACKAGE}.hello",
        "status_url": answer["location"],
    }


def test_the_location_follows_where_the_status_router_is_mounted(tmp_path: Path) -> None:
    code = ANSWER + (
        "state = client.get(answer.headers['location'])\n"
        "print(json.dumps({'status': state.status_code, 'body': state.json()}))\n"
    )
    answer, state = run(tmp_path, code, prefix="/api/v1/jobs/")
    assert answer["location"] == f"/api/v1/jobs/{answer['body']['id']}"
    # Found at that path; without results its state is unknown, and the answer says why.
    assert state["status"] == 501 and "RESULT_BACKEND_URL" in state["body"]["detail"]


def test_the_status_route_reports_a_finished_job_and_its_result(tmp_path: Path) -> None:
    code = (
        "from types import SimpleNamespace\n"
        "from unittest import mock\n"
        "from workergen_runtime.celery_app import app as celery\n"
        "done = {'a1': SimpleNamespace(state='SUCCESS', result='Hello, Ada!'),\n"
        "        'b2': SimpleNamespace(state='FAILURE', result=ValueError('no Ada'))}\n"
        "def result(job_id):\n"
        "    return done.get(job_id, SimpleNamespace(state='PENDING', result=None))\n"
        "with mock.patch.object(celery, 'AsyncResult', result):\n"
        "    for job_id in ('a1', 'b2', 'c3'):\n"
        "        state = client.get(f'/jobs/{job_id}')\n"
        "        print(json.dumps({'status': state.status_code, 'body': state.json()}))\n"
    )
    # The result backend is a stand-in here (a worker's results: tests/test_add_service.py).
    done, failed, pending = run(tmp_path, code, RESULT_BACKEND_URL="redis://127.0.0.1:9/1")
    assert done == {
        "status": 200,
        "body": {"id": "a1", "state": "SUCCESS", "result": "Hello, Ada!"},
    }
    assert failed["body"] == {"id": "b2", "state": "FAILURE", "error": "ValueError: no Ada"}
    assert pending["body"] == {"id": "c3", "state": "PENDING"}


def test_a_broker_that_is_down_is_503_with_retry_after_and_nothing_queued(tmp_path: Path) -> None:
    code = RETRIES_WITHOUT_PAUSES + (
        "answer = client.post('/greetings/Ada')\n"
        "print(json.dumps({'status': answer.status_code,"
        " 'retry': answer.headers.get('retry-after'), 'body': answer.json()}))\n"
    )
    [answer] = run(tmp_path, code, BROKER_URL=UNREACHABLE_BROKER)
    assert (answer["status"], answer["retry"]) == (503, "5")
    assert "NOT queued" in answer["body"]["detail"]


def test_an_idempotency_key_queues_once_and_replays_the_first_answer(tmp_path: Path) -> None:
    code = (
        "from unittest import mock\n"
        "from workergen_runtime.ops import http_api\n"
        "class Keys(dict):\n"
        "    def set(self, key, value, nx=False, ex=None):\n"
        "        if nx and key in self:\n"
        "            return None\n"
        "        self[key] = value\n"
        "        return True\n"
        "    def delete(self, key):\n"
        "        self.pop(key, None)\n"
        "store = http_api.IdempotencyStore(Keys(), 60, 'web-test')\n"
        "with mock.patch.object(http_api, 'idempotency_store', lambda: store):\n"
        "    for _ in range(2):\n"
        "        answer = client.post('/greetings/Ada', headers={'Idempotency-Key': 'k1'})\n"
        "        print(json.dumps({'id': answer.json()['id'],"
        " 'replayed': answer.headers.get('idempotent-replayed')}))\n"
    )
    first, repeat = run(tmp_path, code)
    assert repeat == {"id": first["id"], "replayed": "true"}
    assert first["replayed"] is None
