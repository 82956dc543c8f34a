"""The HTTP front door of a project generated with http_api, on real Redis, uvicorn and workers."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import redis
import yaml

from support.faults import wait_for
from support.projects import Project, unique_namespace

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"

RECORD_JOB = '''"""A job that leaves one file per run, so duplicates show."""

import uuid
from pathlib import Path

from workergen_runtime import job


@job(name="{package}.record")
def record(folder: str, token: str, amount: int = 1) -> dict:
    Path(folder, f"{{token}}.{{uuid.uuid4().hex[:8]}}").write_text(str(amount))
    return {{"token": token, "amount": amount}}
'''


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def http_server(project: Project, *args: str, **env: str) -> Iterator[str]:
    """`http serve [args]` in a subprocess on a free port; yields its base URL; stopped by PID.

    `args` may hold `--port PORT`, whose value is replaced by the free port.
    """
    port = free_port()
    argv = ["http", "serve", *args] if "--port" in args else ["http", "serve", *args, "--port", ""]
    argv[argv.index("--port") + 1] = str(port)
    log = project.root / f"http-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", PACKAGE, *argv],
            cwd=project.root,
            env={**project.env, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"http serve did not start:\n{log.read_text()}")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def server_log(project: Project) -> str:
    return "".join(log.read_text() for log in project.root.glob("http-*.log"))


def clean_namespace(url: str, namespace: str) -> None:
    client = redis.Redis.from_url(url)
    for key in client.scan_iter(f"{namespace}*"):
        client.delete(key)


@pytest.fixture
def project(render, redis_url: str, tmp_path: Path) -> Iterator[Project]:
    rendered = render(
        broker="redis", result_backend="redis", queue_namespace="billing", http_api=True
    )
    ns = unique_namespace("http")
    proj = Project.copy_of(
        rendered,
        tmp_path / "billing",
        PACKAGE,
        BROKER_URL=redis_url,
        RESULT_BACKEND_URL=redis_url.rsplit("/", 1)[0] + "/1",
        QUEUE_NAMESPACE=ns,
    )
    (proj.root / PACKAGE / "jobs" / "record.py").write_text(RECORD_JOB.format(package=PACKAGE))
    yield proj
    clean_namespace(redis_url, ns)


def test_a_post_answers_202_and_the_job_runs_with_its_result_behind_location(
    project: Project, folder: Path
) -> None:
    with project.worker("--queue", "default"), http_server(project) as base:
        answer = httpx.post(
            f"{base}/jobs/record", json={"folder": str(folder), "token": "one", "amount": "7"}
        )
        assert answer.status_code == 202, answer.text
        job_id = answer.json()["id"]
        assert answer.headers["location"] == f"/jobs/{job_id}"
        wait_for(lambda: list(folder.glob("one.*")), 60, "the job's file")

        def finished() -> dict | None:
            state = httpx.get(base + answer.headers["location"]).json()
            return state if state["state"] == "SUCCESS" else None

        state = wait_for(finished, 30, "the job's result")
    # The body was validated and coerced by the job's signature: "7" became 7.
    assert state["result"] == {"token": "one", "amount": 7}
    assert [p.read_text() for p in folder.glob("one.*")] == ["7"]


def test_twenty_concurrent_duplicates_with_one_idempotency_key_make_one_job(
    project: Project, folder: Path
) -> None:
    body = {"folder": str(folder), "token": "dup"}
    answers: list[httpx.Response] = []
    with project.worker("--queue", "default"), http_server(project) as base:
        start = threading.Barrier(20)

        def post() -> None:
            with httpx.Client(timeout=30) as client:
                start.wait()
                answers.append(
                    client.post(
                        f"{base}/jobs/record", json=body, headers={"Idempotency-Key": "order-9"}
                    )
                )

        threads = [threading.Thread(target=post) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        after = httpx.post(f"{base}/jobs/record", json={"folder": str(folder), "token": "after"})
        assert after.status_code == 202
        wait_for(lambda: list(folder.glob("after.*")), 60, "the job sent after")
        # Same key, another body: refused, not queued.
        other = httpx.post(
            f"{base}/jobs/record",
            json={**body, "amount": 2},
            headers={"Idempotency-Key": "order-9"},
        )
    assert [a.status_code for a in answers] == [202] * 20
    assert len({a.json()["id"] for a in answers}) == 1
    assert sum(a.headers.get("idempotent-replayed") == "true" for a in answers) == 19
    assert len(list(folder.glob("dup.*"))) == 1
    assert other.status_code == 409


def test_broker_down_gives_503_with_retry_after_queues_nothing_and_frees_the_key(
    project: Project, redis_url: str, tmp_path: Path
) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    broker = f"redis://127.0.0.1:{port}/0"
    body = {"folder": str(tmp_path), "token": "late"}
    headers = {"Idempotency-Key": "order-10"}
    # The broker is a private Redis, down at first; idempotency keys stay in the shared one.
    with http_server(project, BROKER_URL=broker, LOCK_URL=redis_url) as base:
        down = httpx.post(f"{base}/jobs/record", json=body, headers=headers, timeout=30)
        assert down.status_code == 503, down.text
        assert down.headers["retry-after"] == "5"
        assert "NOT queued" in down.json()["detail"]
        assert httpx.get(f"{base}/readyz", timeout=30).status_code == 503
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
            stdout=subprocess.DEVNULL,
        )
        try:
            private = redis.Redis(port=port)
            wait_for(lambda: _pings(private), 30, "the private Redis")
            assert private.dbsize() == 0  # nothing was queued while it was down
            up = httpx.post(f"{base}/jobs/record", json=body, headers=headers, timeout=30)
            assert up.status_code == 202, up.text
            assert up.headers.get("idempotent-replayed") is None
            assert private.llen(f"{project.env['QUEUE_NAMESPACE']}.default") == 1
            assert httpx.get(f"{base}/readyz").status_code == 200
        finally:
            server.terminate()
            server.wait(10)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def test_a_job_made_with_make_job_is_on_the_api_at_the_next_start(project: Project) -> None:
    made = project.run("make:job", "SendInvoice", "--queue", "critical")
    assert made.returncode == 0, made.stderr
    with http_server(project) as base:
        paths = httpx.get(f"{base}/openapi.json").json()["paths"]
        answer = httpx.post(f"{base}/jobs/send_invoice")
    assert f"/jobs/{PACKAGE}.send_invoice" in paths
    assert answer.status_code == 202, answer.text
    assert answer.json()["job"] == f"{PACKAGE}.send_invoice"


def test_serve_refuses_a_public_address_without_a_token_in_a_few_lines(project: Project) -> None:
    port = free_port()
    done = project.run("http", "serve", "--host", "0.0.0.0", "--port", str(port), HTTP_TOKEN="")
    assert done.returncode == 1
    assert "HTTP_TOKEN" in done.stderr and "HTTP_ALLOW_ANONYMOUS=true" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 4
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)


def test_the_explicit_opt_out_serves_anonymously_with_a_warning_and_doctor_warns(
    project: Project, folder: Path
) -> None:
    opt_out = {"HTTP_HOST": "0.0.0.0", "HTTP_ALLOW_ANONYMOUS": "true", "HTTP_TOKEN": ""}
    with project.worker("--queue", "default"), http_server(project, **opt_out) as base:
        answer = httpx.post(f"{base}/jobs/record", json={"folder": str(folder), "token": "anon"})
        assert answer.status_code == 202, answer.text
        wait_for(lambda: list(folder.glob("anon.*")), 60, "the anonymous job's file")
    assert "without authentication (HTTP_ALLOW_ANONYMOUS=true)" in server_log(project)
    done = project.run("doctor", "--json", **opt_out)
    checks = {c["name"]: c for c in map(json.loads, done.stdout.splitlines())}
    access = checks["http access"]
    assert access["ok"] and access["warning"] and "HTTP_ALLOW_ANONYMOUS=true" in access["detail"]
    table = project.run("doctor", **opt_out)
    [row] = [line for line in table.stdout.splitlines() if line.startswith("│ http access ")]
    assert " warn " in row and table.returncode == 0
    assert "Warning: http access" in table.stdout
    closed = project.run("doctor", "--json", HTTP_HOST="0.0.0.0", HTTP_TOKEN="")
    refused = {c["name"]: c for c in map(json.loads, closed.stdout.splitlines())}["http access"]
    assert closed.returncode == 1 and not refused["ok"] and "HTTP_TOKEN" in refused["fix"]


def test_deployed_as_kubernetes_runs_it_only_the_token_enqueues_and_the_probes_answer(
    project: Project, folder: Path
) -> None:
    manifest = yaml.safe_load_all((project.root / "deploy" / "kubernetes" / "http.yaml").open())
    [deployment] = [doc for doc in manifest if doc and doc["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][:2] == ["http", "serve"]
    probes = [container[p]["httpGet"]["path"] for p in ("livenessProbe", "readinessProbe")]
    body = {"folder": str(folder), "token": "signed"}
    with (
        project.worker("--queue", "default"),
        http_server(project, *container["args"][2:], HTTP_TOKEN="long-secret") as base,
    ):
        assert [httpx.get(base + path).status_code for path in probes] == [200, 200]
        anonymous = httpx.post(f"{base}/jobs/record", json=body)
        wrong = httpx.post(
            f"{base}/jobs/record", json=body, headers={"Authorization": "Bearer long-secreT"}
        )
        bearer = {"Authorization": "Bearer long-secret"}
        right = httpx.post(f"{base}/jobs/record", json=body, headers=bearer)
        assert right.status_code == 202, right.text
        wait_for(lambda: list(folder.glob("signed.*")), 60, "the job's file")
        state = base + right.headers["location"]
        assert httpx.get(state).status_code == 401
        assert httpx.get(state, headers=bearer).status_code == 200
    assert (anonymous.status_code, wrong.status_code) == (401, 401)
    assert anonymous.headers["www-authenticate"] == "Bearer"
    # Refused requests queued nothing: one file, from the request with the token.
    assert len(list(folder.glob("signed.*"))) == 1
