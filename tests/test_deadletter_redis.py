"""Dead letters on Redis: the project records them itself, and nothing is lost or loops."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from support.faults import add_fault_jobs, dead_letters, dispatch, runs, wait_for_dead_letters
from support.projects import Project, redis_project, wait_for_files

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PACKAGE = "billing"
MAX_DELIVERIES = 3


@pytest.fixture
def project(render, redis_url: str, tmp_path: Path) -> Project:
    proj = redis_project(render, redis_url, tmp_path, "dl", TASK_MAX_DELIVERIES=str(MAX_DELIVERIES))
    proj.add_probe_job()
    add_fault_jobs(proj)
    return proj


# A receiver of the dead-letter hook (docs/runtime.md), as a user adds one to a job module.
HOOK_RECEIVER = """
import os
from pathlib import Path

from workergen_runtime import job_dead_lettered


@job_dead_lettered.connect
def note(letter, task_name, reason, **_):
    note = Path(letter.args[0]) / f"dead-lettered.{{letter.id}}"
    note.write_text(f"{{task_name}} {{reason}} {{os.getpid()}}")
"""


def test_a_failing_job_is_dead_lettered_after_its_attempts_while_healthy_jobs_run(
    project: Project, folder: Path
) -> None:
    hook = project.root / project.package / "jobs" / "on_dead_letters.py"
    hook.write_text(HOOK_RECEIVER.format(package=project.package))
    with project.worker("--concurrency", "2") as worker:
        project.dispatch_probes(folder, [f"before-{i}" for i in range(4)])
        [pill] = dispatch(project, "always_fails", [str(folder), "pill"])
        project.dispatch_probes(folder, [f"after-{i}" for i in range(4)])
        wait_for_files(folder, [f"before-{i}" for i in range(4)] + [f"after-{i}" for i in range(4)])
        letters = wait_for_dead_letters(project, 1, 60, worker)
        noted = wait_for_files(folder, [f"dead-lettered.{pill}"], timeout=10)
        assert worker.process is not None
    # The hook ran once the letter was stored, in the worker's main process.
    assert noted == {f"dead-lettered.{pill}": f"{PACKAGE}.always_fails failed {worker.process.pid}"}
    assert [letter["id"] for letter in letters] == [pill]
    letter = letters[0]
    # max_retries=2: one run and two retries, then the dead-letter store.
    assert runs(folder, "pill", "attempt") == 3
    assert letter["attempts"] == 3
    assert letter["task_name"] == f"{PACKAGE}.always_fails"
    assert letter["args"] == [str(folder), "pill"]
    assert letter["lane"] == "default"
    assert "ConnectionError" in letter["exception"] and "upstream is down" in letter["traceback"]
    assert letter["first_failed_at"] < letter["last_failed_at"]


def test_a_job_that_kills_its_worker_is_dead_lettered_after_bounded_deliveries(
    project: Project, folder: Path
) -> None:
    with project.worker("--concurrency", "2") as worker:
        [pill] = dispatch(project, "crashes", [str(folder), "pill"])
        project.dispatch_probes(folder, [f"healthy-{i}" for i in range(6)])
        wait_for_files(folder, [f"healthy-{i}" for i in range(6)])
        letters = wait_for_dead_letters(project, 1, 60, worker)
        assert worker.process is not None and worker.process.poll() is None
    assert runs(folder, "pill", "attempt") == MAX_DELIVERIES
    assert [(x["id"], x["reason"]) for x in letters] == [(pill, "delivery-limit")]


def test_a_job_past_its_hard_time_limit_is_dead_lettered_not_requeued(
    project: Project, folder: Path
) -> None:
    with project.worker("--concurrency", "1") as worker:
        [overrun] = dispatch(project, "overruns", [str(folder), "slowpoke"])
        letters = wait_for_dead_letters(project, 1, 60, worker)
        project.dispatch_probes(folder, ["after"])
        wait_for_files(folder, ["after"])
    assert [(x["id"], x["reason"]) for x in letters] == [(overrun, "time-limit")]
    assert runs(folder, "slowpoke", "attempt") == 1


def test_pickle_and_unknown_jobs_are_never_run_and_kept_as_dead_letters(
    project: Project, folder: Path
) -> None:
    pickled_id, unknown_id = str(uuid.uuid4()), str(uuid.uuid4())
    project.send_raw(
        f"{PACKAGE}.probe", [str(folder), "pickled"], task_id=pickled_id, serializer="pickle"
    )
    project.send_raw(f"{PACKAGE}.no_such_job", [], task_id=unknown_id)
    with project.worker("--queue", "default", UNKNOWN_TASK_GRACE="0") as worker:
        project.dispatch_probes(folder, ["json-after"])
        wait_for_files(folder, ["json-after"])
        letters = wait_for_dead_letters(project, 2, 30, worker)
    assert len(letters) == 2, letters
    assert not (folder / "pickled").exists()
    by_id = {letter["id"]: letter for letter in letters}
    assert by_id[pickled_id]["reason"] == "refused"
    assert by_id[pickled_id]["args"] is None  # never unpickled, not even to list it
    assert by_id[unknown_id]["reason"] == "unknown-task"
    shown = project.run("dlq", "show", pickled_id)
    assert shown.returncode == 0 and "x-python-serialize" in shown.stdout
    refused = project.run("dlq", "replay", pickled_id)
    assert refused.returncode == 1 and "cannot be replayed" in refused.stderr


def test_dlq_list_show_replay_and_purge(project: Project, folder: Path) -> None:
    with project.worker("--concurrency", "2") as worker:
        [first] = dispatch(project, "always_fails", [str(folder), "first"])
        [second] = dispatch(project, "always_fails", [str(folder), "second"], lane="batch")
        letters = wait_for_dead_letters(project, 2, 60, worker)
        assert len(letters) == 2, letters

        listed = project.run("dlq", "list")
        assert listed.returncode == 0
        assert first in listed.stdout and second in listed.stdout
        assert "always_fails" in listed.stdout and "ConnectionError" in listed.stdout
        only_batch = project.run("dlq", "list", "--lane", "batch")
        assert second in only_batch.stdout and first not in only_batch.stdout

        shown = project.run("dlq", "show", first)
        assert shown.returncode == 0
        assert "attempts:     3" in shown.stdout and "Traceback" in shown.stdout

        missing = project.run("dlq", "show", "no-such-id")
        assert missing.returncode == 1 and "No dead letter" in missing.stderr

        (folder / "fixed").write_text("the bug is fixed")
        replayed = project.run("dlq", "replay", first)
        assert replayed.returncode == 0, replayed.stderr
        wait_for_files(folder, ["first"])
        assert [x["id"] for x in dead_letters(project)] == [second]

        no_prompt = project.run("dlq", "purge")
        assert no_prompt.returncode == 1 and "--yes" in no_prompt.stderr
        purged = project.run("dlq", "purge", "--yes")
        assert purged.returncode == 0 and "purged 1" in purged.stdout
        assert dead_letters(project) == []
    assert not (folder / "second").exists()
