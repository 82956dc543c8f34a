"""The HTTP front door, without a broker: routes, validation, limits, token, health."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from bound import PACKAGE, PROJECT_ROOT, RETRIES_WITHOUT_PAUSES, UNREACHABLE_BROKER
from fastapi.testclient import TestClient

from workergen_runtime import project
from workergen_runtime.ops import doctor
from workergen_runtime.ops.http_api import HttpSettings, create_http_app, exposure_problem

pytestmark = pytest.mark.skipif(
    not project.HTTP_API, reason="the sample project has no HTTP front door in this run"
)
# The HTTP_* settings a test's process starts without, whatever the shell running the tests has.
NO_HTTP_SETTINGS = {"HTTP_HOST": "127.0.0.1", "HTTP_TOKEN": "", "HTTP_ALLOW_ANONYMOUS": "false"}


def client(**settings: object) -> TestClient:
    return TestClient(create_http_app(HttpSettings(_env_file=None, **settings)))


def test_every_job_has_a_route_with_its_arguments_in_the_schema() -> None:
    schema = client().get("/openapi.json").json()
    assert f"/jobs/{PACKAGE}.hello" in schema["paths"]
    # The body's model is named after the job: billing.hello -> BillingHelloBody.
    model = PACKAGE.replace("_", " ").title().replace(" ", "") + "HelloBody"
    body = schema["components"]["schemas"][model]
    assert body["properties"]["name"]["type"] == "string"


@pytest.mark.parametrize(
    ("body", "field", "kind"),
    [({"name": 5}, "name", "string_type"), ({"nmae": "x"}, "nmae", "extra_forbidden")],
)
def test_a_bad_body_is_refused_with_422_naming_the_field(body: dict, field: str, kind: str) -> None:
    answer = client().post("/jobs/hello", json=body)
    assert answer.status_code == 422
    [error] = answer.json()["detail"]
    assert error["loc"] == ["body", field] and error["type"] == kind


def test_an_unknown_job_is_404_listing_the_known_ones() -> None:
    answer = client().post("/jobs/no_such_job", json={})
    assert answer.status_code == 404
    assert f"{PACKAGE}.hello" in answer.json()["detail"]


def test_a_token_is_required_when_set() -> None:
    api = client(token="s3cret")
    assert api.post("/jobs/hello", json={"name": 5}).status_code == 401
    wrong = api.get("/jobs/some-id", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    # The token is checked before the body: a right token reaches validation.
    right = api.post("/jobs/hello", json={"name": 5}, headers={"Authorization": "Bearer s3cret"})
    assert right.status_code == 422
    assert api.get("/healthz").status_code == 200


def test_a_token_with_characters_beyond_ascii_is_refused_with_401_not_500() -> None:
    api = client(token="s3cret")
    bearer = {"Authorization": "Bearer s3cr\u00e9t".encode("latin-1")}
    assert api.post("/jobs/hello", json={"name": "x"}, headers=bearer).status_code == 401


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_loopback_may_be_served_without_a_token(host: str) -> None:
    assert exposure_problem(host, HttpSettings(_env_file=None)) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "api.example.com"])
def test_any_other_address_needs_a_token_or_the_opt_out(host: str) -> None:
    problem = exposure_problem(host, HttpSettings(_env_file=None))
    assert problem and "HTTP_TOKEN" in problem and "HTTP_ALLOW_ANONYMOUS=true" in problem
    assert exposure_problem(host, HttpSettings(_env_file=None, token="s3cret")) is None
    assert exposure_problem(host, HttpSettings(_env_file=None, allow_anonymous=True)) is None


def run(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """This interpreter with `argv` in another process, killed after 60 s."""
    return subprocess.run(
        [sys.executable, *argv],
        cwd=tmp_path,
        env={**os.environ, **NO_HTTP_SETTINGS, "PYTHONPATH": str(PROJECT_ROOT), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def serve(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`http serve` on a free port; a server that does not refuse is killed after 60 s."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    return run(tmp_path, "-m", PACKAGE, "http", "serve", "--port", port, *args, **env)


def test_serve_refuses_a_public_address_without_a_token_in_a_few_lines(tmp_path: Path) -> None:
    done = serve(tmp_path, "--host", "0.0.0.0")
    assert done.returncode == 1
    assert "HTTP_TOKEN" in done.stderr and "HTTP_ALLOW_ANONYMOUS=true" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 4


def test_serve_names_a_wrong_opt_out_value(tmp_path: Path) -> None:
    done = serve(tmp_path, "--host", "0.0.0.0", HTTP_ALLOW_ANONYMOUS="maybe")
    assert done.returncode == 1
    assert "HTTP_ALLOW_ANONYMOUS='maybe'" in done.stderr and "Traceback" not in done.stderr


def test_doctor_fails_a_public_host_without_a_token_and_warns_on_the_opt_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in NO_HTTP_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_HOST", "0.0.0.0")
    refused = doctor.check_http_access()
    assert not refused.ok and "HTTP_TOKEN" in refused.fix
    monkeypatch.setenv("HTTP_ALLOW_ANONYMOUS", "true")
    opted_out = doctor.check_http_access()
    assert opted_out.ok and opted_out.warning and "HTTP_ALLOW_ANONYMOUS" in opted_out.detail
    monkeypatch.setenv("HTTP_TOKEN", "s3cret")
    closed = doctor.check_http_access()
    assert closed.ok and not closed.warning


def test_with_the_token_a_job_is_queued(tmp_path: Path) -> None:
    code = (
        "from fastapi.testclient import TestClient\n"
        f"import {PACKAGE}\n"
        "from workergen_runtime.ops.http_api import create_http_app\n"
        "api = TestClient(create_http_app())\n"
        "body = {'name': 'Ada'}\n"
        "anonymous = api.post('/jobs/hello', json=body)\n"
        "wrong = api.post('/jobs/hello', json=body, headers={'Authorization': 'Bearer nope'})\n"
        "right = api.post('/jobs/hello', json=body, headers={'Authorization': 'Bearer s3cret'})\n"
        "print(anonymous.status_code, wrong.status_code, right.status_code)\n"
    )
    done = run(tmp_path, "-c", code, BROKER_URL="memory://", HTTP_TOKEN="s3cret")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["401", "401", "202"]


def test_a_body_over_the_limit_is_413_announced_or_streamed() -> None:
    api = client(max_body_bytes=100)
    big = json.dumps({"name": "x" * 200})
    assert api.post("/jobs/hello", content=big).status_code == 413

    def chunks():
        yield b'{"name": "'
        for _ in range(10):
            yield b"x" * 50
        yield b'"}'

    assert api.post("/jobs/hello", content=chunks()).status_code == 413


def test_job_state_without_a_result_backend_is_501_saying_why() -> None:
    answer = client().get("/jobs/some-id")
    assert answer.status_code == 501
    assert "RESULT_BACKEND_URL" in answer.json()["detail"]


def test_broker_down_gives_503_with_retry_after_and_health_stays_up(tmp_path: Path) -> None:
    code = (
        "from fastapi.testclient import TestClient\n"
        f"import {PACKAGE}\n"
        f"{RETRIES_WITHOUT_PAUSES}"
        "from workergen_runtime.ops.http_api import create_http_app\n"
        "api = TestClient(create_http_app())\n"
        "job = api.post('/jobs/hello', json={'name': 'x'})\n"
        "ready = api.get('/readyz')\n"
        "print(job.status_code, job.headers.get('retry-after'), ready.status_code,"
        " api.get('/healthz').status_code)\n"
        "print(job.json()['detail'])\n"
    )
    done = run(tmp_path, "-c", code, BROKER_URL=UNREACHABLE_BROKER)
    assert done.returncode == 0, done.stderr
    statuses, detail = done.stdout.splitlines()[-2:]
    assert statuses == "503 5 503 200"
    assert "NOT queued" in detail
