"""Jobs queued from a FastAPI service of your own, answered as the HTTP front door answers.

A route of yours checks its body as it likes, then hands the job to
`dispatch_job`, which queues it and answers `202 Accepted` with the job's id,
`Location: /jobs/<id>` and the front door's JSON body (`id`, `job`,
`status_url`). `job_status_router()` is the front door's `GET /jobs/{id}`, to
mount in your app. Both are the front door's own code (`ops.http_api`); the
`http` extra brings FastAPI. Importing this module reads nothing, so a routes
module may import it before the project's package (which binds the runtime).

    from fastapi import APIRouter
    from workergen_runtime.web import dispatch_job, job_status_router

    from billing.jobs.send_invoice import SendInvoiceJob

    router = APIRouter()
    router.include_router(job_status_router())

    @router.post("/invoices/{invoice_id}/send", status_code=202)
    def send_invoice(invoice_id: int):
        return dispatch_job(SendInvoiceJob, {"invoice_id": invoice_id})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, params

if TYPE_CHECKING:
    from fastapi.responses import JSONResponse

__all__ = ["JOB_STATUS_PREFIX", "dispatch_job", "job_status_router"]

JOB_STATUS_PREFIX = "/jobs"
"""Where `job_status_router()` answers by default, and where `dispatch_job`'s Location points."""


def dispatch_job(
    job: Any,
    kwargs: Mapping[str, Any] | None = None,
    *,
    idempotency_key: str | None = None,
    status_prefix: str = JOB_STATUS_PREFIX,
) -> JSONResponse:
    """Queue `job` (a `@job` of the project) with `kwargs`: the front door's answer.

    202 with `{"id", "job", "status_url"}` and `Location: <status_prefix>/<id>`;
    503 with `Retry-After` when the broker is down (nothing queued). With an
    `idempotency_key` (your route reads the Idempotency-Key header, say) the job
    is queued once per key: a repeat gets the first answer, another body 409.
    Pass `status_prefix` when the status router is mounted elsewhere.
    """
    from workergen_runtime.ops.http_api import enqueue

    return enqueue(job, dict(kwargs or {}), idempotency_key, status_prefix)


def job_status_router(
    *,
    prefix: str = JOB_STATUS_PREFIX,
    dependencies: Sequence[params.Depends] | None = None,
) -> APIRouter:
    """A router with `GET <prefix>/{job_id}`: a job's state, as the front door answers.

    `{"id", "state"}` (PENDING, then SUCCESS with `result` or FAILURE with
    `error`); 501 when the project keeps no results (RESULT_BACKEND_URL unset).
    `dependencies` guard it as your other routes are (your authentication).
    """
    from workergen_runtime.ops.http_api import job_state

    router = APIRouter(prefix=prefix.rstrip("/"), dependencies=list(dependencies or ()))
    router.get(
        "/{job_id}",
        name="workergen_job_status",
        summary="A queued job's state",
    )(job_state)
    return router
