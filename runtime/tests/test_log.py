"""Logging: Celery's line for every job only when asked for; failures always."""

import logging

import pytest
from bound import answer_independent

from workergen_runtime.log import OUTCOME_LOGGER, RECEIVED_LOGGER, configure_logging

PER_JOB_LOGGERS = (RECEIVED_LOGGER, OUTCOME_LOGGER)
# Log levels and format: no broker and no answer of the project.
pytestmark = answer_independent


@pytest.fixture(autouse=True)
def restore_logging():
    root = logging.getLogger()
    saved = root.level, {name: logging.getLogger(name).level for name in PER_JOB_LOGGERS}
    yield
    root.setLevel(saved[0])
    for name, level in saved[1].items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.parametrize(
    ("level", "every_job", "logged"),
    [("INFO", False, False), ("INFO", True, True), ("DEBUG", False, True)],
)
def test_received_and_succeeded_lines_only_with_log_every_job_or_debug(
    level: str, every_job: bool, logged: bool
) -> None:
    configure_logging(level, "json", every_job=every_job)
    for name in PER_JOB_LOGGERS:
        assert logging.getLogger(name).isEnabledFor(logging.INFO) is logged


def test_failures_are_logged_at_the_default_level() -> None:
    configure_logging("INFO", "json")
    assert logging.getLogger(OUTCOME_LOGGER).isEnabledFor(logging.ERROR)


def test_text_logs_escape_control_characters_and_stay_bounded() -> None:
    from workergen_runtime.log import MAX_MESSAGE_CHARS, TEXT_FORMAT, TextFormatter

    formatter = TextFormatter(TEXT_FORMAT)
    message = "\x1b[2J" + "a" * 10**6
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "%s", (message,), None)
    record.task_id = record.task_name = None
    line = formatter.format(record)
    assert "\x1b" not in line and "\\x1b[2J" in line
    assert len(line) < MAX_MESSAGE_CHARS + 200
