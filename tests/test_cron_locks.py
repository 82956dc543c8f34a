"""A cron's overlap lock in the real Redis at LOCK_URL: held while the cron runs, given back
when it ends, however it ends, and never taken from another run that holds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.projects import Project, redis_project

pytestmark = [pytest.mark.broker]

# Runs in the project's environment: three crons run as `schedule run` runs them
# (Task.apply, which takes the lock), each noting whether its lock was held meanwhile.
RUN_CRONS = """
import json

import billing
from workergen_runtime import cron_task
from workergen_runtime.celery_app import app, create_app
from workergen_runtime.scheduling.crons import CronTask, overlap_lock_key
from workergen_runtime.locks import lock_client
from workergen_runtime.scheduling.schedules import every_minutes
from workergen_runtime.settings import Settings

client = lock_client(app.settings)
held = {}


def key(name):
    return overlap_lock_key(name, app.settings.queue_namespace)


@cron_task(name="locks.finishes", schedule=every_minutes(5))
def finishes():
    held["finishes"] = client.exists(key("locks.finishes"))


@cron_task(name="locks.raises", schedule=every_minutes(5))
def raises():
    held["raises"] = client.exists(key("locks.raises"))
    raise RuntimeError("boom")


@cron_task(name="locks.overlaps", schedule=every_minutes(5))
def overlaps():
    held["overlaps"] = True


# A second app in this process, under another namespace: its cron locks its own key.
other = create_app(Settings(queue_namespace=app.settings.queue_namespace + "-other"))


def elsewhere():
    own = overlap_lock_key("locks.elsewhere", other.settings.queue_namespace)
    held["elsewhere"] = [client.exists(own), client.exists(key("locks.elsewhere"))]


elsewhere = other.task(elsewhere, name="locks.elsewhere", base=CronTask, lane="default",
                       schedule=every_minutes(5), shared=False)

client.set(key("locks.overlaps"), "another run", ex=60)
results = {name: task.apply() for name, task in
           [("finishes", finishes), ("raises", raises), ("overlaps", overlaps),
            ("elsewhere", elsewhere)]}
keys = {name: key(f"locks.{name}") for name in results}
keys["elsewhere"] = overlap_lock_key("locks.elsewhere", other.settings.queue_namespace)
after = {name: client.get(name_of_key) for name, name_of_key in keys.items()}
client.delete(*keys.values())
print(json.dumps({
    "held": held,
    "failed": {name: result.failed() for name, result in results.items()},
    "after": {name: value.decode() if value else None for name, value in after.items()},
}))
"""


@pytest.fixture
def project(render, redis_url: str, tmp_path: Path) -> Project:
    return redis_project(render, redis_url, tmp_path, "l", LOCK_URL=redis_url)


def test_a_cron_holds_its_lock_while_it_runs_and_gives_it_back_however_it_ends(
    project: Project,
) -> None:
    done = project.python(RUN_CRONS)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    # Held during the run, for the cron that finishes and the one that raises; the
    # other app's cron holds the key of its own namespace, not this one's.
    assert outcome["held"] == {"finishes": 1, "raises": 1, "elsewhere": [1, 0]}
    assert outcome["failed"] == {
        "finishes": False,
        "raises": True,
        "overlaps": False,
        "elsewhere": False,
    }
    # Given back at the end of both; another run's lock is neither run over nor released.
    assert outcome["after"] == {
        "finishes": None,
        "raises": None,
        "overlaps": "another run",
        "elsewhere": None,
    }
    assert "cron locks.overlaps skipped: the previous run still holds cron-lock:" in done.stderr
