"""Structured logging: JSON lines in production, with the task id and name inside a task."""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime

from celery import current_task

# Celery logs each job twice at INFO: "received" from the worker's main process
# and "succeeded in 0.01s" from the process that ran it. At a few thousand jobs a
# second those lines cost more than a short job itself, so Celery's per-job lines
# are logged only with LOG_EVERY_JOB=true or at DEBUG. Failures stay at ERROR;
# retries are logged by the job (jobs.py), dead letters by the worker.
RECEIVED_LOGGER = "celery.worker.strategy"
OUTCOME_LOGGER = "celery.app.trace"

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(task_name)s %(task_id)s] %(message)s"

# A log line carries text from messages (headers, arguments, exceptions): it is
# cut at this many characters, and the text format shows control characters
# (terminal escape sequences) escaped.
MAX_MESSAGE_CHARS = 16 * 1024
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str, *, newlines: bool = True) -> str:
    """Text with control characters escaped (`\\x1b`); line breaks kept unless told."""
    if not newlines:
        text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ")
    return CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def bounded(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Text cut to `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} characters cut]"


class TextFormatter(logging.Formatter):
    """The text format, bounded, with control characters escaped."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(bounded(record.message))
        return super().formatMessage(record)

    def formatException(self, ei) -> str:
        return printable(bounded(super().formatException(ei), 4 * MAX_MESSAGE_CHARS))


class TaskContextFilter(logging.Filter):
    """Adds `task_id` and `task_name` to every record (None outside a task)."""

    def filter(self, record: logging.LogRecord) -> bool:
        # Celery's public proxy of the running task: false outside a task.
        task = current_task
        request_id = getattr(task.request, "id", None) if task else None
        record.task_id = request_id
        record.task_name = task.name if task and request_id else None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": bounded(record.getMessage()),
            "task_id": getattr(record, "task_id", None),
            "task_name": getattr(record, "task_name", None),
        }
        if record.exc_info:
            entry["exception"] = bounded(
                self.formatException(record.exc_info), 4 * MAX_MESSAGE_CHARS
            )
        return json.dumps(entry, default=str)


def make_handler(fmt: str) -> logging.Handler:
    """A stderr handler with the task context and the chosen format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(TaskContextFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter(TEXT_FORMAT))
    return handler


def configure_logging(level: str | int, fmt: str, *, every_job: bool = False) -> None:
    """Log through one structured handler, unless the application configured logging already."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(make_handler(fmt))
    root.setLevel(level.upper() if isinstance(level, str) else level)
    every_job = every_job or root.level <= logging.DEBUG
    for name in (RECEIVED_LOGGER, OUTCOME_LOGGER):
        logging.getLogger(name).setLevel(
            logging.NOTSET if every_job else max(root.level, logging.WARNING)
        )
