"""No message holds a lane's capacity: far etas and unknown jobs leave room for healthy jobs.

On one lane of two worker processes (one slot each): 20 messages with an eta in
2099 and 200 messages naming a job no worker has, put there as a foreign
producer would. A healthy job dispatched behind them must start within 5 s;
the 2099 messages are dead letters (`malformed`, naming TASK_MAX_ETA), the
unknown jobs dead letters (`unknown-task`) after their grace, and the worker
keeps running.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.faults import dispatch, runs, wait_for, wait_for_dead_letters
from support.hostile import Hostile, found_in
from support.lanes import BROKERS, PACKAGE, lane_project, put
from support.projects import Project

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

# A lane outside LANE_PREFETCH: one message reserved per worker process.
LANE = "batch"
FAR_ETAS = 20
UNKNOWN = 200
GRACE = 5
STARTS_WITHIN = 5.0


@pytest.fixture(params=BROKERS)
def project(request, render, tmp_path: Path) -> Iterator[Project]:
    with lane_project(
        request.param, render, tmp_path, request, "lc", UNKNOWN_TASK_GRACE=str(GRACE)
    ) as proj:
        yield proj


def raw(token: str, task: str, **headers: object) -> Hostile:
    head = {"lang": "py", "task": task, "id": f"raw-{token}", "retries": 0, "argsrepr": token}
    body = json.dumps([["/nowhere", token, 0], {}, {}]).encode()
    return Hostile(token, "raw", {**head, **headers}, body)


def test_a_healthy_job_starts_behind_far_etas_and_unknown_jobs(
    project: Project, folder: Path
) -> None:
    far = [
        raw(f"far-{i:03d}-", f"{PACKAGE}.slow", eta="2099-01-01T00:00:00") for i in range(FAR_ETAS)
    ]
    unknown = [raw(f"gone-{i:03d}-", f"{PACKAGE}.retired_job") for i in range(UNKNOWN)]
    with project.worker("--concurrency", "2", "--queue", LANE) as worker:
        put(project, project.broker, LANE, far + unknown)
        dispatch(project, "slow", [str(folder), "healthy", 0], lane=LANE)
        queued = time.monotonic()  # the job is on the lane once dispatch returns
        wait_for(
            lambda: (folder / "healthy.started").exists(),
            30,
            f"the healthy job\n{worker.log()[-3000:]}",
            interval=0.05,
        )
        waited = time.monotonic() - queued
        seen = wait_for_dead_letters(project, FAR_ETAS + UNKNOWN, 45, worker)
        assert worker.process is not None and worker.process.poll() is None, worker.log()[-4000:]
        log = worker.log()
    assert waited < STARTS_WITHIN, f"the healthy job started after {waited:.1f} s\n{log[-3000:]}"
    assert runs(folder, "healthy", "done") == 1
    assert "Unrecoverable error" not in log
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 :][:6000]
    assert "not recorded" not in log

    assert len(seen) == FAR_ETAS + UNKNOWN
    for message in far:
        [letter] = [x for x in seen if found_in(x, message.token)]
        assert letter["reason"] == "malformed", letter
        assert "TASK_MAX_ETA" in letter["exception"], letter["exception"]
    for message in unknown:
        [letter] = [x for x in seen if found_in(x, message.token)]
        assert letter["reason"] == "unknown-task", letter
        assert f"UNKNOWN_TASK_GRACE={GRACE}" in letter["exception"]
