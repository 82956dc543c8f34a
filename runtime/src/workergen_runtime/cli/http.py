"""`http serve`: run the HTTP front door under uvicorn."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from workergen_runtime import project

http_app = typer.Typer(help="The HTTP front door: enqueue jobs over HTTP.", no_args_is_help=True)


@http_app.command("serve")
def http_serve(
    host: Annotated[
        str | None,
        typer.Option(help="Address to bind. Default: HTTP_HOST. Not loopback: needs HTTP_TOKEN."),
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port. Default: HTTP_PORT.", min=1)] = None,
    workers: Annotated[
        int | None, typer.Option(help="Server processes. Default: HTTP_WORKERS.", min=1)
    ] = None,
) -> None:
    """Serve POST /jobs/<name>, GET /jobs/<id>, /healthz and /readyz.

    Anything but a loopback address needs HTTP_TOKEN (or HTTP_ALLOW_ANONYMOUS=true).
    """
    import uvicorn

    from workergen_runtime.errors import ConfigurationError
    from workergen_runtime.log import configure_logging
    from workergen_runtime.ops.http_api import exposure_problem, is_anonymous, load_http_settings
    from workergen_runtime.ops.monitor import is_loopback
    from workergen_runtime.settings import get_settings

    settings = get_settings()
    http = load_http_settings()
    host = host or http.host
    problem = exposure_problem(host, http)
    if problem:
        raise ConfigurationError(problem)
    configure_logging(settings.log_level, settings.log_format, every_job=settings.log_every_job)
    if is_anonymous(http) and not is_loopback(host):
        logging.getLogger(project.PACKAGE).warning(
            "Serving the HTTP API on %s without authentication (HTTP_ALLOW_ANONYMOUS=true): "
            "whoever reaches the port can enqueue any job. Keep it behind a gateway that "
            "authenticates, or set HTTP_TOKEN.",
            host,
        )
    uvicorn.run(
        "workergen_runtime.ops.http_api:create_http_app",
        factory=True,
        host=host,
        port=port or http.port,
        workers=workers or http.workers,
        # The project's logging stays as configured; one line per request is left
        # to the proxy in front, so answering stays cheap.
        log_config=None,
        access_log=False,
    )
