"""The hello job: proof that a worker runs what you dispatch."""

import logging

from workergen_runtime import job

log = logging.getLogger(__name__)


@job(name="billing.hello", queue="default")
class HelloJob:
    """Greet someone from a worker."""

    def handle(self, name: str = "world") -> str:
        log.info("Hello, %s!", name)
        return f"Hello, {name}!"
