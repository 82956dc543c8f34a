"""A message whose handling ends the worker's main process is dead-lettered as `poison`.

No boundary catches an OOM kill or a fault in a C extension: the worker dies with
the message unsettled, and gets it again when it restarts. The delivery bound
(TASK_MAX_DELIVERIES) is counted before anything reads the message, so after the
restarts the bound allows, the message becomes a dead letter and the jobs behind it
run. The fault is injected into a rendered project as a user could: a module
under jobs/ (imported by the worker at start) wraps the intake.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from support.faults import dead_letters
from support.projects import Project, redis_project, wait_for_files

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

MAX_DELIVERIES = 2
POISON_TOKEN = "kill-main"

MAIN_FAULT = '''"""A fault in the worker's main process on one message, as an OOM kill would be."""

import os
import signal

from workergen_runtime.worker import consumer

_take_in = consumer.take_in


def _take_in_or_die(message, *args, **kwargs):
    if "{token}" in str((message.headers or {{}}).get("argsrepr", "")):
        os.kill(os.getpid(), signal.SIGKILL)
    return _take_in(message, *args, **kwargs)


consumer.take_in = _take_in_or_die
'''


@pytest.fixture
def project(render, redis_url: str, tmp_path: Path) -> Project:
    proj = redis_project(
        render, redis_url, tmp_path, "poison", TASK_MAX_DELIVERIES=str(MAX_DELIVERIES)
    )
    proj.add_probe_job()
    fault = proj.root / proj.package / "jobs" / "main_fault.py"
    fault.write_text(MAIN_FAULT.format(package=proj.package, token=POISON_TOKEN))
    return proj


def test_a_message_that_kills_the_main_process_becomes_a_poison_dead_letter(
    project: Project, folder: Path
) -> None:
    project.dispatch_probes(folder, [POISON_TOKEN, "healthy-1", "healthy-2"])
    deaths = 0
    logs = []
    # Each start takes the message back at once (core/recovery.py) and dies on it,
    # until the delivery past the bound, which is dead-lettered before it is read.
    for _ in range(MAX_DELIVERIES + 2):
        worker = project.worker("--pool", "solo", name=f"start{deaths}", own_group=True)
        worker.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and worker.process.poll() is None:
            if (folder / "healthy-2").exists():
                break
            time.sleep(0.2)
        logs.append(worker.log())
        if worker.process.poll() is None:
            worker.stop()
            break
        deaths += 1
    log = "\n".join(logs)
    wait_for_files(folder, ["healthy-1", "healthy-2"], timeout=5)
    assert not (folder / POISON_TOKEN).exists(), "the poison message's job ran"
    assert deaths == MAX_DELIVERIES, log[-4000:]
    letters = dead_letters(project)
    assert [letter["reason"] for letter in letters] == ["poison"], letters
    [letter] = letters
    assert POISON_TOKEN in letter["body"]
    assert letter["attempts"] == MAX_DELIVERIES
    assert "Unrecoverable error" not in log
    shown = project.run("dlq", "show", letter["id"])
    assert shown.returncode == 0, shown.stderr
    assert "poison" in shown.stdout
