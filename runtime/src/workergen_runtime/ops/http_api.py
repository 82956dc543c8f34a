"""The HTTP front door: other services enqueue jobs with a POST and get 202 at once.

Every job found under `jobs/` at start-up gets `POST /jobs/<name>`, whose body is
checked against the job's signature before anything is queued. Settings come
from the environment / `.env` with the `HTTP_` prefix (HttpSettings).
"""

import hashlib
import hmac
import inspect
import json
import sys
import time
import typing
import uuid
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Any

import redis
from fastapi import Body, Depends, FastAPI, Header, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_settings import BaseSettings, SettingsConfigDict

from workergen_runtime import project
from workergen_runtime.errors import ConfigurationError, QueueUnavailableError
from workergen_runtime.ops.monitor import is_loopback
from workergen_runtime.queues import qualified_queue
from workergen_runtime.settings import describe_validation_error, get_settings

# ASGI, as the body limit sees it (starlette's own types, without importing starlette).
Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Seconds a client is told to wait before trying again when the broker is down.
RETRY_AFTER = 5
# How long a duplicate request waits for the first one with its key to be queued.
PENDING_WAIT = 3.0


class HttpSettings(BaseSettings):
    """Settings of `http serve`, from HTTP_HOST, HTTP_PORT, HTTP_WORKERS, HTTP_TOKEN, ..."""

    model_config = SettingsConfigDict(
        env_prefix="HTTP_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    workers: int = Field(default=1, ge=1)
    # Bearer token every /jobs request must carry. Empty: `http serve` binds loopback
    # only, unless ALLOW_ANONYMOUS opts out (an API behind a gateway that authenticates).
    token: str = ""
    allow_anonymous: bool = False
    max_body_bytes: int = Field(default=65_536, ge=1)


def load_http_settings() -> HttpSettings:
    """The HTTP_* settings; wrong values raise ConfigurationError naming them."""
    try:
        return HttpSettings()
    except ValidationError as exc:
        raise ConfigurationError(describe_validation_error(exc, prefix="HTTP_")) from None


def is_anonymous(settings: HttpSettings) -> bool:
    """Whether any client may enqueue: no token, and anonymous access opted into."""
    return not settings.token and settings.allow_anonymous


def exposure_problem(host: str, settings: HttpSettings) -> str | None:
    """Why `http serve` must not listen on `host` without a token; None when it may.

    Loopback answers this machine only (development); any other address is
    reachable by others, who could enqueue any job.
    """
    if settings.token or settings.allow_anonymous or is_loopback(host):
        return None
    return (
        f"Refusing to serve the HTTP API on {host} without HTTP_TOKEN: anyone who reaches "
        "the port could enqueue any job.\n"
        "Set HTTP_TOKEN to a long random secret (clients send 'Authorization: Bearer <token>'), "
        "or listen on 127.0.0.1; if a gateway in front authenticates, opt out with "
        "HTTP_ALLOW_ANONYMOUS=true."
    )


class Accepted(BaseModel):
    """The answer to a queued job."""

    id: str
    job: str
    status_url: str


def body_model(task: Any) -> type[BaseModel]:
    """A pydantic model of the job's keyword arguments, from its signature's annotations."""
    function = task.run
    module = sys.modules.get(getattr(function, "__module__", ""), None)
    try:
        hints = typing.get_type_hints(function, vars(module) if module else None)
    except (NameError, TypeError):
        hints = {}
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (hints.get(parameter.name, Any), default)
    name = "".join(part.title() for part in task.name.replace(".", "_").split("_")) + "Body"
    return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)


def discover_jobs() -> dict[str, Any]:
    """Every job (not the crons) under `jobs/`, by task name."""
    from workergen_runtime.celery_app import app
    from workergen_runtime.discovery import import_jobs
    from workergen_runtime.jobs import Job
    from workergen_runtime.scheduling.crons import CronTask

    import_jobs()
    return {
        name: task
        for name, task in sorted(app.tasks.items())
        if isinstance(task, Job) and not isinstance(task, CronTask)
    }


class BodyLimit:
    """Refuse request bodies over `limit` bytes with 413, announced or streamed."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            response = too_large(self.limit)
            await response(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise HTTPException(413, f"The body is over {self.limit} bytes.")
            return message

        await self.app(scope, limited, send)


def too_large(limit: int) -> JSONResponse:
    return JSONResponse(
        {"detail": f"The body is over {limit} bytes (HTTP_MAX_BODY_BYTES)."}, status_code=413
    )


def unavailable(reason: str) -> JSONResponse:
    return JSONResponse(
        {"detail": reason}, status_code=503, headers={"Retry-After": str(RETRY_AFTER)}
    )


class IdempotencyStore:
    """The first answer to each Idempotency-Key, in Redis at LOCK_URL.

    The first request sets the key with SET NX and queues the job; a duplicate
    gets the same job id, once the first is queued. A first request that cannot
    queue frees the key, so the client can try again.
    """

    def __init__(self, client: redis.Redis, retention: int, namespace: str) -> None:
        self.client = client
        self.retention = retention
        self.namespace = namespace

    def key(self, job: str, idempotency_key: str) -> str:
        digest = hashlib.sha256(idempotency_key.encode()).hexdigest()
        return qualified_queue(f"http-requests.{job}.{digest}", self.namespace)

    def claim(self, key: str, job_id: str, fingerprint: str) -> dict[str, str] | None:
        """None when this request is the first; else the first one's record, once queued."""
        record = {"id": job_id, "fingerprint": fingerprint, "state": "pending"}
        deadline = time.monotonic() + PENDING_WAIT
        while True:
            if self.client.set(key, json.dumps(record), nx=True, ex=self.retention):
                return None
            found = self.client.get(key)
            if found is not None:
                first = json.loads(found)
                if first["state"] == "queued" or time.monotonic() > deadline:
                    return first
            time.sleep(0.01)

    def queued(self, key: str, job_id: str, fingerprint: str) -> None:
        record = {"id": job_id, "fingerprint": fingerprint, "state": "queued"}
        self.client.set(key, json.dumps(record), ex=self.retention)

    def release(self, key: str) -> None:
        self.client.delete(key)


@lru_cache(maxsize=1)
def idempotency_store() -> IdempotencyStore:
    from workergen_runtime.celery_app import app
    from workergen_runtime.locks import lock_client

    settings = app.settings
    return IdempotencyStore(
        lock_client(settings), settings.idempotency_retention, settings.queue_namespace
    )


def create_http_app(settings: HttpSettings | None = None) -> FastAPI:
    """The API: one POST route per job discovered now, plus job state and health checks."""
    settings = settings or load_http_settings()
    api = FastAPI(title=f"{project.PROJECT_NAME} jobs", version="1")
    api.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    jobs = discover_jobs()

    def authorized(authorization: str | None = Header(None)) -> None:
        if not settings.token:
            return
        scheme, _, given = (authorization or "").partition(" ")
        # Bytes: compare_digest refuses str with non-ASCII characters (a 500, not a 401).
        expected = settings.token.encode()
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), expected):
            raise HTTPException(
                401, "A valid bearer token is required.", {"WWW-Authenticate": "Bearer"}
            )

    for name, task in jobs.items():
        short = name.removeprefix(f"{project.PACKAGE}.")
        route = make_route(task, body_model(task), enqueue)
        api.post(
            f"/jobs/{name}",
            status_code=202,
            dependencies=[Depends(authorized)],
            response_model=Accepted,
            summary=(task.__doc__ or name).strip().splitlines()[0],
            responses={503: {"description": "The broker is unavailable; retry later."}},
        )(route)
        if short != name:
            api.post(
                f"/jobs/{short}",
                status_code=202,
                dependencies=[Depends(authorized)],
                include_in_schema=False,
            )(route)

    @api.post("/jobs/{name}", include_in_schema=False, dependencies=[Depends(authorized)])
    def unknown_job(name: str) -> None:
        known = ", ".join(sorted(jobs)) or "none"
        raise HTTPException(404, f"No job named {name!r}. Known jobs: {known}.")

    api.get("/jobs/{job_id}", dependencies=[Depends(authorized)])(job_state)

    @api.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @api.get("/readyz")
    def readyz() -> JSONResponse:
        try:
            check_broker()
        except Exception as exc:  # any transport error means "not ready"
            broker = get_settings().safe_broker_url
            return unavailable(f"The broker at {broker} is unreachable: {exc}")
        return JSONResponse({"status": "ready"})

    return api


def enqueue(
    task: Any,
    kwargs: dict[str, Any],
    idempotency_key: str | None = None,
    status_prefix: str = "/jobs",
) -> JSONResponse:
    """Queue `task` with `kwargs`: 202 with the job's id and Location, as the front door answers.

    An Idempotency-Key queues once per key and job (409 for another body); a broker
    that is down is 503 with Retry-After. The Location is `<status_prefix>/<id>`.
    """
    job_id = str(uuid.uuid4())
    store = key = None
    fingerprint = hashlib.sha256(json.dumps(kwargs, sort_keys=True).encode()).hexdigest()
    if idempotency_key is not None:
        store = idempotency_store()
        key = store.key(task.name, idempotency_key)
        try:
            first = store.claim(key, job_id, fingerprint)
        except redis.RedisError as exc:
            return unavailable(f"The idempotency store (LOCK_URL) is unavailable: {exc}")
        if first is not None:
            if first["fingerprint"] != fingerprint:
                raise HTTPException(
                    409, "This Idempotency-Key was used with another body for this job."
                )
            if first["state"] != "queued":
                raise HTTPException(
                    409, "A request with this Idempotency-Key is still being queued."
                )
            return accepted(task, first["id"], replayed=True, status_prefix=status_prefix)
    try:
        task.dispatch_with(kwargs=kwargs, idempotency_key=idempotency_key, task_id=job_id)
    except QueueUnavailableError as exc:
        if store is not None and key is not None:
            store.release(key)
        return unavailable(str(exc))
    if store is not None and key is not None:
        store.queued(key, job_id, fingerprint)
    return accepted(task, job_id, status_prefix=status_prefix)


def job_state(job_id: str) -> JSONResponse:
    """A job's state (and result or error), as `GET /jobs/<id>` answers; 501 without results."""
    if get_settings().effective_result_backend is None:
        return JSONResponse(
            {
                "detail": "This project keeps no results (fire-and-forget), so a job's "
                "state is unknown. Set RESULT_BACKEND_URL (e.g. redis://localhost:6379/1) "
                "to follow jobs."
            },
            status_code=501,
        )
    from workergen_runtime.celery_app import app

    result = app.AsyncResult(job_id)
    try:
        state = result.state
        answer: dict[str, Any] = {"id": job_id, "state": state}
        if state == "SUCCESS":
            answer["result"] = result.result
        elif state == "FAILURE":
            answer["error"] = f"{type(result.result).__name__}: {result.result}"
    except (redis.RedisError, OSError) as exc:
        return unavailable(f"The result backend is unavailable: {exc}")
    return JSONResponse(answer)


def check_broker() -> None:
    """Raise when the broker cannot be reached (SQS: the default lane's queue)."""
    settings = get_settings()
    if settings.broker_kind == "sqs":
        from workergen_runtime.ops.provision import sqs_client, sqs_queue_name
        from workergen_runtime.queues import DEFAULT_LANE

        queue = sqs_queue_name(qualified_queue(DEFAULT_LANE, settings.queue_namespace))
        sqs_client(settings).get_queue_url(QueueName=queue)
        return
    from workergen_runtime.celery_app import app

    with app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=1, timeout=2)


def make_route(task: Any, model: type[BaseModel], enqueue: Any) -> Any:
    """The POST route of one job: the body validated as `model`, then enqueued."""
    required = any(field.is_required() for field in model.model_fields.values())
    body_default = Body(...) if required else Body(None)

    def route(
        body: model = body_default,  # type: ignore[valid-type]
        idempotency_key: str | None = Header(None, alias="Idempotency-Key"),
    ) -> JSONResponse:
        kwargs = body.model_dump(mode="json", exclude_unset=True) if body is not None else {}
        return enqueue(task, kwargs, idempotency_key)

    route.__name__ = f"enqueue_{task.name.replace('.', '_')}"
    return route


def accepted(
    task: Any, job_id: str, replayed: bool = False, status_prefix: str = "/jobs"
) -> JSONResponse:
    location = f"{status_prefix.rstrip('/')}/{job_id}"
    headers = {"Location": location}
    if replayed:
        headers["Idempotent-Replayed"] = "true"
    return JSONResponse(
        Accepted(id=job_id, job=task.name, status_url=location).model_dump(),
        status_code=202,
        headers=headers,
    )
